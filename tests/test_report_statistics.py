"""The statistics behind the verdict, on fixtures whose answers are worked
out by hand: medians and bootstrap intervals, ties, crossovers only where
the intervals separate, fit quality, typed attrs, oversubscription, NVLS."""
import json
import warnings

import numpy as np
import pytest

from ccbench_kit.dataset import make_dataset, save, load
from ccbench_kit.report import analysis
from ccbench_kit.theory import fit, fit_piecewise, presets
from ccbench_kit.theory.synthetic import synthetic_dataset


def hand_dataset(times, sizes, timing="host-clock", nranks=3, collective="all_gather"):
    """`times`: {algorithm: [[iteration times at size 0], [at size 1], ...]} (µs).
    Every rank gets the same time except rank 0, 1 µs faster: the max over
    ranks is the given time."""
    algs = list(times)
    iters = len(times[algs[0]][0])
    lat = np.zeros((len(algs), 1, len(sizes), nranks, iters))
    for a, alg in enumerate(algs):
        for j, row in enumerate(times[alg]):
            lat[a, 0, j, :, :] = np.asarray(row, float)
            lat[a, 0, j, 0, :] -= 1.0
    return make_dataset(algorithms=algs, placements=["out_of_place"], sizes=sizes,
                        counts=[s // 4 for s in sizes], in_bytes=sizes, out_bytes=sizes,
                        latency=lat, wrong=np.full((len(algs), 1, len(sizes)), -1),
                        ranks=range(nranks), hosts=["h"] * nranks, devices=["cpu"] * nranks,
                        attrs={"collective": collective, "dtype": "fp32", "nranks": nranks,
                               "timing": timing, "iters": iters, "backend": "mpi"})


def test_median_busbw_and_its_interval_by_hand():
    # all_gather on 3 ranks: F = 2/3; 3000 B in a median 10 µs -> 0.3 GB/s algbw, 0.2 busbw
    ds = hand_dataset({"ring": [[10, 10, 10, 10, 10, 1000]]}, [3000])
    r = analysis.robust_busbw(ds)
    assert r["busbw"][0, 0] == pytest.approx(3000 * (2 / 3) / 10 / 1e3)
    # five of six iterations are 10 µs: every resample's median is 10 µs or (rarely) above
    assert r["hi"][0, 0] == pytest.approx(0.2)
    assert r["lo"][0, 0] <= 0.2 and r["n"][0, 0] == 6 and r["interval"]
    # the mean would put it at 3000·⅔ / 175 µs: one outlier, five times lower
    assert float(ds.ccb.busbw("avg").values.ravel()[0]) == pytest.approx(2000 / 175 / 1e3)


def test_latency_floor_is_the_least_median_of_any_algorithm_and_size():
    # b's median at 64 B (6 µs) is the least anywhere: lower than either at 8 B
    ds = hand_dataset({"a": [[9, 9, 9, 9, 9, 9, 50], [8] * 7, [30] * 7],
                       "b": [[7] * 7, [6, 6, 6.5, 6, 6, 6, 90], [20] * 7]},
                      [8, 64, 1 << 20])
    f = analysis.latency_floor(analysis.robust_time(ds))
    assert (f["us"], f["algorithm"], f["size"]) == (6.0, "b", 64)
    # a resample's median is one of 6, 6.5, 90: 6.5 in about 7 % of them
    # (4 draws of 7 from the two larger), 90 in under 1 %
    assert (f["lo"], f["hi"]) == (6.0, 6.5)
    assert analysis.floor_text(f) == "6 µs (6–6.5; b, 64 B)"
    # batch timing has no interval: the figure alone
    f = analysis.latency_floor(analysis.robust_time(
        hand_dataset({"a": [[5] * 7, [7] * 7]}, [8, 64], timing="batch")))
    assert analysis.floor_text(f) == "5 µs (a, 8 B)"
    # robust_busbw is robust_time's bus bytes over time, its interval's ends swapped
    t, r = analysis.robust_time(ds), analysis.robust_busbw(ds)
    gb = np.array([8, 64, 1 << 20]) * (2 / 3) / 1e3
    assert np.allclose(r["busbw"], gb / t["time"]) and np.allclose(r["lo"], gb / t["hi"])


def test_clear_winner_tie_and_crossover_only_where_intervals_separate():
    fast, slow = [10, 10.1, 9.9, 10, 10.2, 9.8], [20, 20.1, 19.9, 20, 20.2, 19.8]
    near_a, near_b = [10, 11, 12, 10, 11, 12], [10, 10.5, 11, 10, 10.5, 11.5]  # medians 11, 10.5
    sizes = [1024, 2048, 4096, 8192, 16384, 32768]
    # a ahead, a ahead, b ahead by its median but inside the noise, a ahead, b, b
    ds = hand_dataset({"a": [fast, fast, near_a, fast, slow, slow],
                       "b": [slow, slow, near_b, slow, fast, fast]}, sizes)
    ch = analysis.winner_changes(ds)
    w = ch["winners"]
    assert w["winner"].tolist() == ["a", "a", "b", "a", "b", "b"]
    assert w["tie"].tolist() == [False, False, True, False, False, False]
    assert w["margin"].iloc[0] == pytest.approx(1.0)        # 20 µs / 10 µs − 1
    assert (w["margin_lo"].iloc[:2] > 0.9).all()
    (c,) = ch["crossovers"]
    assert (c["from"], c["to"], c["size_lo"], c["size_hi"]) == ("a", "b", 8192, 16384)
    # the medians cross halfway in log size: √(8192 · 16384)
    assert c["at"] == pytest.approx(np.sqrt(8192 * 16384))
    assert (ch["changes"], ch["noisy"], ch["ties"]) == (3, 2, 1)


def test_batch_timing_has_no_interval_and_uses_the_tolerance():
    # every slot holds the batch average: identical values must not claim a tight interval
    sizes = [1024, 2048]
    ds = hand_dataset({"a": [[10] * 6, [10] * 6], "b": [[10.4] * 6, [12] * 6]}, sizes,
                      timing="batch")
    assert not analysis.per_iteration_data(ds)
    assert "Per-iteration data doesn't exist" in analysis.timing_note(ds)
    w = analysis.winners(ds)
    assert np.isnan(w["lo"]).all()
    assert w["tie"].tolist() == [True, False]      # 4 % lead: a tie; 20 %: decided
    assert w["decided_by"].iloc[0] == "±5 % (no per-iteration data)"


def test_fit_quality_and_piecewise_split():
    A, B = 5e-6, 1 / 5e9
    exact = synthetic_dataset("all_reduce", ["mpi"], nranks=4, iters=5, noise=0.0,
                              sizes=[64 << i for i in range(16)], generic_latency=A,
                              beta=B)
    f = fit(exact)["mpi"]
    assert f.rms == pytest.approx(0, abs=1e-9) and f.r2_log == pytest.approx(1.0)
    assert f.holds and f.why_not == ""
    # a protocol change at 64 KiB: above it the latency is 20× and the bandwidth 4× lower
    ds = exact.copy(deep=True)
    big = ds["size"] > 64 << 10
    ds["latency"] = ds["latency"].where(~big, ds["latency"] * 0 + 1e6 * (
        100e-6 + 4 * 1.5 * ds["size"] * B))
    one = fit(ds)["mpi"]
    # the robust fit keeps the small sizes and down-weights the large ones:
    # too many down-weighted, and log time poorly explained
    assert not one.holds and "5 of 16 sizes down-weighted" in one.why_not
    assert "R² (log) 0.8" in one.why_not
    lo, hi = fit_piecewise(ds, "mpi")
    assert lo.size_range == (64, 64 << 10) and hi.size_range == (128 << 10, 2 << 20)
    assert lo.holds and hi.holds
    assert hi.latency == pytest.approx(100e-6, rel=1e-6)
    assert hi.peak_busbw == pytest.approx(1.5 / (4 * 1.5 * B) / 1e9, rel=1e-6)
    models = analysis.fit_models(ds, fit(ds))
    assert models["mpi"]["kind"] == "piecewise"


def test_typed_attrs_and_summary_columns(tmp_path):
    ds = synthetic_dataset("all_reduce", ["ring", "mpi"], nranks=3, iters=4,
                           sizes=[8, 64], extra_attrs={"complete": True,
                                                       "cpus_available": {"h": 2}})
    path = save(ds, tmp_path / "t.nc")
    back = load(path)
    assert back.attrs["complete"] == "true"            # raw netCDF text stays on disk
    assert back.ccb.attrs["nranks"] == 3 and isinstance(back.ccb.attrs["nranks"], int)
    assert back.ccb.attrs["complete"] is True
    assert back.ccb.attrs["cpus_available"] == {"h": 2}
    assert back.ccb.meta["dtype"] == "fp32"
    df = back.ccb.summary(stats=("avg", "p50"))
    assert df.columns.names == ["placement", "quantity"]
    assert df["size"].tolist() == [8, 8, 64, 64]
    assert ("out_of_place", "time:p50") in df.columns
    assert df["out_of_place", "busbw"].dtype == float


def test_oversubscription_from_ranks_and_their_cpus():
    facts = presets_free_facts([("a", [0, 1]), ("a", [0, 1]), ("a", [0, 1]), ("b", [3])])
    assert facts == {"ranks_per_host": {"a": 3, "b": 1}, "cpus_available": {"a": 2, "b": 1},
                     "oversubscribed": True}
    from ccbench_kit.hostinfo import oversubscription_warning
    assert oversubscription_warning(facts).startswith("oversubscribed (a: 3 ranks on 2 CPUs)")
    # ranks bound to one core each: as many cores as ranks
    bound = presets_free_facts([("a", [0]), ("a", [1])])
    assert not bound["oversubscribed"] and oversubscription_warning(bound) == ""


def presets_free_facts(ranks):
    from ccbench_kit.hostinfo import placement_facts
    return placement_facts(ranks)


def test_progress_counts_over_the_whole_run():
    from ccbench_kit.cli.run import Progress
    p = Progress({"all_reduce": 3, "all_gather": 4})
    ev = {"event": "size", "index": 0, "total": 3, "size": 8, "busbw": 0.1,
          "collective": "all_reduce"}
    assert p.line(ev).startswith("  [all_reduce 1/7] 8 B done")
    # all_gather merged two sizes (equal after rounding): 3, not 4
    ev = dict(ev, collective="all_gather", index=1, total=3, size=64)
    assert p.line(ev).startswith("  [all_gather 5/6] 64 B done")


def test_memcpy_peak_comes_from_the_run_never_from_the_renderer(monkeypatch):
    import ccbench_kit.hostinfo as hostinfo

    def refuse(*a, **k):
        raise AssertionError("measured memcpy while rendering")
    monkeypatch.setattr(hostinfo, "measure_memcpy_gbps", refuse)
    old = synthetic_dataset("all_reduce", ["ring"], nranks=3, iters=4, sizes=[8, 64])
    p = presets.get("cpu", ds=old)
    assert not p.has_peak and p.measured == presets.NOT_RECORDED
    new = old.assign_attrs(memcpy_gbps=12.5, memcpy_method="numpy.copyto of 64 MiB, best of 5")
    p = presets.get("cpu", ds=new)
    assert p.peak_gbps == 12.5 and p.measured == "numpy.copyto of 64 MiB, best of 5"
    findings, _ = analysis.verdict(old, presets.get("cpu", ds=old))
    assert "`cpu` peak not recorded by this run, so no efficiency." in findings[0]


def test_nvls_bound_and_the_verdict_that_explains_it():
    h200 = presets.get("h200-nvlink4")
    assert h200.switch_reduction == "NVLS"
    bound, why = presets.busbw_bound(h200, "all_reduce", 4)
    assert bound == pytest.approx(450 * 1.5) and "2(p−1)/p" in why
    assert presets.busbw_bound(h200, "all_gather", 4)[0] == 450
    assert presets.busbw_bound(presets.get("ib-ndr"), "all_reduce", 4)[0] == 50
    # 4 ranks, busbw 600 GB/s at 1 GiB: above B = 450, below 1.5 B
    ds = hand_dataset({"nccl": [[1.5 * 2 ** 30 / 600e3] * 6]}, [2 ** 30], nranks=4,
                      collective="all_reduce")
    findings, cautions = analysis.verdict(ds, h200)
    assert any("is expected here: with NVLS the switch reduces" in f for f in findings)
    off = ds.assign_attrs(env=json.dumps({"NCCL_NVLS_ENABLE": "0"}))
    findings, cautions = analysis.verdict(off, h200)
    assert any("NCCL_NVLS_ENABLE=0 in this run" in c for c in cautions)


def test_compare_warns_when_backends_hardware_or_ranks_differ():
    from ccbench_kit.compare import CompareWarning, compare
    a = hand_dataset({"ring": [[10] * 6]}, [3000], nranks=3)
    b = hand_dataset({"ring": [[10] * 6]}, [3000], nranks=4).assign_attrs(backend="nccl")
    b = b.assign_coords(device=("rank", ["cuda:0 NVIDIA H200 (0000:01:00.0)"] * 4))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compare(a, b)
    said = sorted(str(w.message) for w in caught if w.category is CompareWarning)
    assert said == ["all_gather: backends differ: mpi () vs nccl ()",
                    "all_gather: hardware differs: cpu vs NVIDIA H200",
                    "all_gather: rank counts differ: 3 vs 4 (busbw normalises by the bus factor)"]


def test_distrust_names_oversubscription_and_a_busy_machine():
    ds = hand_dataset({"ring": [[10] * 6]}, [3000]).assign_attrs(
        oversubscribed="true", ranks_per_host='{"vm": 3}', cpus_available='{"vm": 2}',
        load_average=19.9, memcpy_gbps=0.97)
    said = analysis.distrust(ds)
    assert said[0].startswith("**Oversubscribed**: 3 ranks on 2 CPUs. ")
    assert said[1] == ("**Busy machine**: load average 19.9 on 2 CPUs when the run started; "
                       "other work shared the cores, so the times and the memcpy peak include it.")
    assert analysis.distrust(ds.assign_attrs(oversubscribed="false", load_average=1.5)) == []
