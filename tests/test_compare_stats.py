"""compare(): alignment, the busbw ratio, its bootstrap CI and the verdict."""
import json

import numpy as np
import pytest

from ccbench_kit.compare import CompareError, below, compare, format_comparison, plot_comparison
from ccbench_kit.dataset.schema import make_dataset
from ccbench_kit.errors import ConfigError

SIZES = [1024, 65536, 4194304]


def run_ds(lat, collective="all_reduce", dtype="fp32", sizes=SIZES, algorithms=("ring",),
           nranks=None, placements=("out_of_place",), source="", aggregated=None):
    """A results Dataset from latency (algorithm, placement, size, rank, iteration)."""
    lat = np.asarray(lat, dtype=float)
    R = lat.shape[3]
    attrs = {"collective": collective, "dtype": dtype, "op": "sum", "root": -1,
             "nranks": nranks or max(R, 2), "backend": "mpi", "source": source}
    ranks = list(range(R))
    if aggregated:
        attrs["aggregated"] = aggregated
        ranks = [-1]
    return make_dataset(algorithms=list(algorithms), placements=list(placements), sizes=sizes,
                        counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes,
                        latency=lat, wrong=np.full(lat.shape[:3], -1), ranks=ranks,
                        hosts=["h"] * R, devices=["d"] * R, attrs=attrs)


def samples(rng, means, n=40, ranks=3, cv=0.05):
    """(1, 1, S, R, n) times around `means` (µs) per size."""
    m = np.asarray(means, dtype=float)[:, None, None]
    return (m * rng.lognormal(0.0, cv, size=(len(means), ranks, n)))[None, None]


def test_ci_matches_scipy_bootstrap():
    from scipy import stats as sstats  # 2.4 s to import: here, not in every collecting worker
    rng = np.random.default_rng(7)
    a = samples(rng, [100.0, 200.0, 400.0], n=30, ranks=1, cv=0.2)
    b = samples(rng, [110.0, 200.0, 380.0], n=25, ranks=1, cv=0.2)
    res = compare(run_ds(a), run_ds(b), n_boot=4000, seed=3)
    for si in range(3):
        x, y = a[0, 0, si, 0], b[0, 0, si, 0]
        # ratio of busbw = mean(baseline time) / mean(run time)
        assert float(res["ratio"][0, 0, si]) == pytest.approx(y.mean() / x.mean(), rel=1e-12)
        ref = sstats.bootstrap((y, x), lambda u, v, axis=-1: u.mean(axis) / v.mean(axis),
                               method="percentile", n_resamples=4000, vectorized=True,
                               random_state=np.random.default_rng(11)).confidence_interval
        lo, hi = float(res["ratio_lo"][0, 0, si]), float(res["ratio_hi"][0, 0, si])
        assert lo == pytest.approx(ref.low, rel=0.02) and hi == pytest.approx(ref.high, rel=0.02)
    assert set(res["method"].values.ravel()) == {"bootstrap"}
    assert int(res["n_run"][0, 0, 0]) == 30 and int(res["n_baseline"][0, 0, 0]) == 25


def test_verdicts():
    rng = np.random.default_rng(1)
    base = run_ds(samples(rng, [100.0, 100.0, 100.0]))
    faster = run_ds(samples(rng, [80.0, 80.0, 80.0]))
    same = run_ds(samples(rng, [100.0, 100.0, 100.0]))
    slower = run_ds(samples(rng, [125.0, 125.0, 125.0]))
    r = compare(faster, base)
    assert list(r["verdict"].values.ravel()) == ["faster"] * 3
    assert (r["ratio_lo"] > 1.15).all() and (r["ratio_hi"] < 1.35).all()
    assert list(compare(slower, base)["verdict"].values.ravel()) == ["slower"] * 3
    r = compare(same, base)
    assert list(r["verdict"].values.ravel()) == ["indistinguishable"] * 3
    assert ((r["ratio_lo"] < 1) & (r["ratio_hi"] > 1)).all()
    assert compare(faster, base, seed=5)["ratio_lo"].equals(compare(faster, base, seed=5)["ratio_lo"])


def test_plain_ratio_against_aggregated_baseline():
    rng = np.random.default_rng(2)
    run = run_ds(samples(rng, [50.0, 100.0, 200.0]))
    agg = np.array([52.0, 96.0, 250.0])[None, None, :, None, None]
    base = run_ds(agg, nranks=3, aggregated="nccl-tests time: mean over iterations")
    r = compare(run, base, tolerance=0.03)
    t_run = run.ccb.time().values[0, 0]
    assert np.allclose(r["ratio"].values[0, 0], agg.ravel() / t_run)
    assert set(r["method"].values.ravel()) == {"plain ratio"}
    assert np.isnan(r["ratio_lo"]).all()
    expected = ["faster" if x > 1.03 else "slower" if x < 0.97 else "indistinguishable"
                for x in agg.ravel() / t_run]
    assert list(r["verdict"].values.ravel()) == expected
    assert "plain ratio elsewhere" in r.attrs["method"] and "the baseline has fewer" in r.attrs["method"]
    text = "\n".join(format_comparison(r))
    assert "(plain ratio)" in text and "run / baseline" in text


def test_bus_factors_and_rank_counts():
    # same times: 4-rank all_reduce (F = 1.5) vs 2-rank (F = 1) -> busbw ratio 1.5
    lat = np.full((1, 1, 3, 1, 10), 100.0)
    r = compare(run_ds(lat, nranks=4), run_ds(lat, nranks=2))
    assert np.allclose(r["ratio"].values, 1.5)
    assert any("rank counts differ" in n for n in json.loads(r.attrs["notes"]))


def test_refusals():
    lat = np.full((1, 1, 3, 1, 10), 100.0)
    with pytest.raises(CompareError, match=r"cannot compare all_reduce .* with all_gather"):
        compare(run_ds(lat), run_ds(lat, collective="all_gather"))
    with pytest.raises(CompareError, match=r"cannot compare all_reduce in fp32 .* with bf16"):
        compare(run_ds(lat), run_ds(lat, dtype="bf16"))
    with pytest.raises(CompareError, match="no size in common"):
        compare(run_ds(lat), run_ds(lat, sizes=[8, 16, 32]))
    with pytest.raises(ConfigError, match="--stat"):
        compare(run_ds(lat), run_ds(lat), stat="std")
    r = compare(run_ds(lat), run_ds(lat, dtype=""))
    assert any("data type unknown" in n for n in json.loads(r.attrs["notes"]))


def test_alignment_algorithms_sizes_placements():
    rng = np.random.default_rng(3)
    run = run_ds(np.concatenate([samples(rng, [10.0, 20.0, 40.0]), samples(rng, [12.0, 18.0, 30.0])]),
                 algorithms=("ring", "mpi"))
    base = run_ds(samples(rng, [11.0, 19.0, 35.0, 70.0])[..., :5], sizes=SIZES + [16777216],
                  algorithms=("nccl",), placements=("out_of_place",))
    r = compare(run, base)
    assert list(r["algorithm"].values) == ["ring", "mpi"]
    assert list(r["baseline_algorithm"].values) == ["nccl", "nccl"]
    assert list(r["size"].values) == SIZES
    assert any("1 sizes are on one side only" in n for n in json.loads(r.attrs["notes"]))
    r = compare(run, base, minbytes=2048, maxbytes=1 << 20)
    assert list(r["size"].values) == [65536]
    r = compare(run, run_ds(samples(rng, [10.0, 20.0, 40.0]), algorithms=("a", "b")[:1]),
                algorithms=[("mpi", "a")])
    assert list(r["algorithm"].values) == ["mpi vs a"]


def test_rank_stat_and_percentiles():
    lat = np.zeros((1, 1, 1, 2, 10))
    lat[..., 0, :] = 10.0
    lat[..., 1, :] = 30.0                       # rank 1 is always late
    base = np.full((1, 1, 1, 2, 10), 20.0)
    r = compare(run_ds(lat, sizes=[1024]), run_ds(base, sizes=[1024]), rank_stat="max")
    assert float(r["ratio"].squeeze()) == pytest.approx(20.0 / 30.0)
    r = compare(run_ds(lat, sizes=[1024]), run_ds(base, sizes=[1024]), rank_stat="mean")
    assert float(r["ratio"].squeeze()) == pytest.approx(1.0)
    assert r["verdict"].item() == "indistinguishable"         # no spread: CI is [1, 1]
    r = compare(run_ds(lat, sizes=[1024]), run_ds(base, sizes=[1024]), stat="p50", rank_stat="min")
    assert float(r["ratio"].squeeze()) == pytest.approx(2.0)


def test_below_plot_and_accessor(tmp_path):
    rng = np.random.default_rng(4)
    run = run_ds(samples(rng, [100.0, 130.0, 90.0]))
    base = run_ds(samples(rng, [100.0, 100.0, 100.0]))
    r = run.ccb.compare(base, seed=1)
    assert r.equals(compare(run, base, seed=1))
    hits = below(r, 0.9)
    assert [(h[0], h[1], h[2]) for h in hits] == [("ring", "out_of_place", 65536)]
    assert hits[0][3] == pytest.approx(float(r["ratio"].sel(size=65536).squeeze()))
    fig = plot_comparison(r, min_ratio=0.9)
    assert len(fig.axes) == 2
    fig.savefig(tmp_path / "cmp.png")
    assert (tmp_path / "cmp.png").stat().st_size > 10000


def test_trees_pick_the_matching_collective():
    import xarray as xr
    rng = np.random.default_rng(6)
    ar = run_ds(samples(rng, [100.0, 100.0, 100.0]))
    ag = run_ds(samples(rng, [50.0, 50.0, 50.0]), collective="all_gather")
    tree = xr.DataTree.from_dict({"all_reduce": ar, "all_gather": ag})
    assert compare(ag, tree).attrs["collective"] == "all_gather"
    with pytest.raises(CompareError, match="which collective"):
        compare(tree, run_ds(samples(rng, [1.0, 1.0, 1.0]), collective="alltoall"))
