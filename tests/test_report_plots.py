"""Plots and the numbers behind them, on synthetic sweeps with known answers."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from ccbench_kit.report import analysis, plots  # noqa: E402
from ccbench_kit.theory import fit  # noqa: E402
from ccbench_kit.theory.synthetic import synthetic_dataset  # noqa: E402

A, B = 4e-6, 1 / 8e9


@pytest.fixture(scope="module")
def ar():
    return synthetic_dataset("all_reduce", ["ring", "recursive_doubling", "mpi"], nranks=5,
                             iters=12, alpha=A, beta=B, noise=0.02, seed=7, straggler=3,
                             generic_latency=40e-6)


def test_busbw_plot_draws_measurement_band_fit_peak_and_efficiency(ar):
    import matplotlib.pyplot as plt
    f = fit(ar)
    fig = plots.busbw_vs_size(ar, fits=f, preset="ib-hdr")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("ring — α ") and " µs, 1/β " in labels[0] and labels[0].endswith("GB/s")
    assert "peak 25 GB/s (ib-hdr)" in labels and "α-β fit (dashed)" in labels
    assert any(lab.startswith("bound: α 2 µs, B 25 GB/s") for lab in labels)
    # the measured line is exactly ds.ccb.busbw(): size / time × 2(p-1)/p
    ring = ax.get_lines()[0]
    want = ar.ccb.busbw().sel(algorithm="ring", placement="out_of_place").values
    np.testing.assert_allclose(ring.get_ydata(), want)
    # the right axis is the same range in % of the peak
    eff = fig.axes[1]
    np.testing.assert_allclose(eff.get_ylim(), np.array(ax.get_ylim()) * 100 / 25.0)
    assert eff.get_ylabel() == "efficiency (% of peak)"
    # p10-p90 bands: one filled area per algorithm
    assert len(ax.collections) == 3
    plt.close(fig)


def test_winners_and_crossovers_name_the_switch(ar):
    # p = 5: recursive doubling 4α + 4nβ, ring 8α + 1.6nβ, mpi 40 µs + 1.6nβ:
    # doubling wins small sizes, the ring from n = 4α / 2.4β on; at the
    # largest sizes the ring and mpi are the same model: a tie, whichever
    # median is higher by noise
    w = analysis.winners(ar)
    assert w["winner"].iloc[0] == "recursive_doubling" and not w["tie"].iloc[0]
    assert w["winner"].iloc[-1] in ("ring", "mpi") and w["tie"].iloc[-1]
    assert w["runner_up"].iloc[-1] in ("ring", "mpi")
    (c,) = analysis.crossovers(ar)
    assert (c["from"], c["to"]) == ("recursive_doubling", "ring")
    assert c["size_lo"] < c["at"] < c["size_hi"]
    assert c["at"] == pytest.approx(4 * A / (2.4 * B), rel=0.2)
    fig = plots.winner_per_size(ar)
    title = fig.axes[0].get_title(loc="left")
    assert "recursive_doubling → ring at ≈ " in title and "KiB" in title


def test_crossover_is_where_the_models_cross():
    # ring: 2(p-1)α + 2(p-1)/p nβ ; recursive doubling on 4 ranks: 2α + 2nβ
    # equal at n = 4α / (2β - 1.5β) = 8 α/β
    ds = synthetic_dataset("all_reduce", ["ring", "recursive_doubling"], nranks=4, iters=3,
                           alpha=A, beta=B, noise=0.0, seed=1)
    (c,) = analysis.crossovers(ds, tolerance=0.0)
    assert (c["from"], c["to"]) == ("recursive_doubling", "ring")
    assert c["at"] == pytest.approx(8 * A / B, rel=0.15)


def test_winner_hysteresis_ignores_ties():
    ds = synthetic_dataset("all_gather", ["ring", "direct"], nranks=4, iters=5, noise=0.03, seed=2)
    # identical models: noise only, no crossover with a 5 % tolerance
    assert analysis.crossovers(ds, tolerance=0.05) == []
    assert analysis.winners(ds)["tie"].all()


def test_robust_z_and_stragglers(ar):
    z = analysis.robust_z(np.array([[1.0], [1.0], [1.0], [1.0], [2.0]]))
    assert z[:4].ravel().tolist() == [0, 0, 0, 0] and z[4, 0] == pytest.approx(100.0)
    s = analysis.stragglers(ar, "ring")
    assert s["rank"].tolist() == [3] and s["flagged"].iloc[0] == ar.sizes["size"]
    # without start times the latency view finds the others waiting for rank 3
    lat = analysis.rank_matrix(ar.drop_vars("start"), "ring")
    assert lat.attrs["what"] == "median latency"
    assert float(lat.sel(rank=3).median()) < float(lat.sel(rank=0).median())


def test_heatmap_marks_the_straggler(ar):
    fig = plots.rank_heatmap(ar, algorithm="ring")
    ax = fig.axes[0]
    assert "rank 3 (26/26 sizes)" in ax.get_title(loc="left")
    outlined = {int(round(p.get_y() + 0.5)) for p in ax.patches}
    assert outlined == {3}
    skew = analysis.rank_matrix(ar, "ring")
    # start skew in % of the iteration time: rank 3 starts 20 % late (of 1.2 × model time)
    assert float(skew.sel(rank=3).median()) == pytest.approx(100 * 0.2 / 1.2, rel=0.1)


def test_latency_trace_and_distribution(ar):
    fig = plots.latency_percentiles(ar)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["ring", "recursive_doubling", "mpi", "p50", "p90", "p99"]
    p99 = fig.axes[0].get_lines()[2]
    it = ar.ccb.iteration_time().sel(algorithm="ring", placement="out_of_place")
    np.testing.assert_allclose(p99.get_ydata(), np.percentile(it.values, 99, axis=-1))
    fig = plots.iteration_trace(ar)
    assert [a.get_title() for a in fig.axes] == ["8 B", "64 KiB", "256 MiB"]
    fig = plots.size_distribution(ar, 1024)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["ring", "recursive_doubling", "mpi"]


def test_compare_against_a_baseline_with_confidence_band():
    fast = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=4, iters=8, beta=1 / 10e9,
                             noise=0.01, seed=1)
    slow = synthetic_dataset("all_gather", ["ring"], nranks=4, iters=8, beta=1 / 5e9,
                             noise=0.01, seed=2)
    cmp = analysis.compare(fast, slow)
    assert cmp["ring"]["against"] == "ring"
    assert cmp["ring"]["ratio"][-1] == pytest.approx(2.0, rel=0.03)
    assert cmp["ring"]["ratio"][0] == pytest.approx(1.0, rel=0.03)
    lo, hi = cmp["ring"]["lo"], cmp["ring"]["hi"]
    assert np.all(lo <= cmp["ring"]["ratio"]) and np.all(cmp["ring"]["ratio"] <= hi)
    assert cmp["ring"]["verdict"][-1] == "faster"
    fig = plots.compare_baseline(fast, slow)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[0] == "ring vs ring" and "95 % bootstrap CI" in labels[1]
    fig = plots.busbw_runs({"fast": fast, "slow": slow})
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["fast", "slow", "ring", "bruck"]


def test_zero_byte_rows_are_left_out_of_plots():
    # nccl-tests prints 0 B rows (all_gather with fewer elements than ranks)
    ds = synthetic_dataset("all_gather", ["ring", "bruck"], nranks=4, iters=4,
                           sizes=[0] + [64 << i for i in range(10)], seed=3)
    assert int(ds["size"][0]) == 0
    assert analysis.winners(ds)["size"].tolist() == [64 << i for i in range(10)]
    fig = plots.busbw_vs_size(ds, fits=True)
    assert fig.axes[0].get_lines()[0].get_xdata()[0] == 64
    plots.winner_per_size(ds)
    plots.latency_percentiles(ds)
    plots.iteration_trace(ds)
