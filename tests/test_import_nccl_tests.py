"""nccl-tests logs in every shape recent versions print.

Logs here are written the way nccl-tests writes them (src/util.cu:
``%12li  %12li  %8s  %6s  %6s`` then per placement ``getFloatStr`` time,
algbw, busbw and ``%6g`` #wrong or ``N/A``), from times we choose, so every
expected bandwidth is size / time x the bus factor by construction.
"""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from ccbench_kit import importers
from ccbench_kit.importers import ImporterError, ReportedMismatchWarning

DATA = Path(__file__).parent / "data" / "baselines"


def fstr(v, width):
    """nccl-tests' getFloatStr: %.2f, %.1f, %.0f, then exponent, within width."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        s = fmt % v
        if len(s) <= width:
            return s
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % v


def body(size, t, factor, wrong=0, extra=""):
    alg = size / t / 1e3
    w = "    N/A" if wrong is None else "  %6g" % wrong
    return "  %7s  %6s  %6s%s%s" % (fstr(t, 7), fstr(alg, 6), fstr(alg * factor, 6), w, extra)


def row(size, count, typ, op, root, times, factor, wrong=0, extra=("", "")):
    return ("%12li  %12li  %8s  %6s  %6s" % (size, count, typ, op, "%6i" % root)
            + "".join(body(size, t, factor, wrong, e) for t, e in zip(times, extra)))


HEADER = """#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         """


def preamble(name="all_reduce_perf", ranks=4, minb=1024, maxb=4096, step=2, iters=20,
             hosts=("nodeA",), groups=None):
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809",
             f"# Collective test starting: {name}",
             f"# nThread 1 nGpus 1 minBytes {minb} maxBytes {maxb} step: {step}(factor) "
             f"warmup iters: 5 iters: {iters} agg iters: 1 validation: 1 graph: 0 unalign: 0",
             "#", "# Using devices"]
    for r in range(ranks):
        g = groups[r] if groups else 0
        lines.append(f"#  Rank {r:2d} Group {g:2d} Pid {1000 + r:6d} on {hosts[r % len(hosts)]:>10s} "
                     f"device {r:2d} [0000:{r:02x}:00] NVIDIA H200")
    return lines


def footer(avg="1.234", mark=""):
    return ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg} {mark}".rstrip(),
            "#", "# Collective test concluded: x_perf", "#"]


def read(text, name="log.txt", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReportedMismatchWarning)
        return importers.read_text(text, name, **kw)


def sweep_rows(sizes, times, factor, typ="float", op="sum", root=-1, itemsize=4, **kw):
    return [row(s, s // itemsize, typ, op, root, t, factor, **kw) for s, t in zip(sizes, times)]


def test_mpirun_prefixes_info_lines_and_env_algorithm():
    # 4 ranks: all_reduce factor 2*3/4 = 1.5
    sizes, times = [1024, 2048, 4096], [(20.5, 19.75), (21.25, 20.5), (30.0, 29.5)]
    lines = (["vm:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
              "vm:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Ring"]
             + preamble() + HEADER.split("\n"))
    rows = sweep_rows(sizes, times, 1.5)
    lines += [rows[0], "vm:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/IPC",
              rows[1], "vm:1:3 [3] NCCL INFO Connected all rings", rows[2]] + footer()
    text = "\n".join(f"[1,{i % 4}]<stdout>:{ln}" for i, ln in enumerate(lines))
    (ds,) = read(text)
    assert ds.attrs["collective"] == "all_reduce" and ds.attrs["nranks"] == 4
    assert list(ds["algorithm"].values) == ["nccl:ring"]
    assert json.loads(ds.attrs["env"]) == {"NCCL_ALGO": "Ring"}
    assert list(ds["size"].values) == sizes
    # 4096 B / 30.0 us = 0.136533 GB/s, x 1.5 = 0.2048
    assert float(ds.ccb.busbw().sel(size=4096, placement="out_of_place").item()) == pytest.approx(0.2048)
    assert float(ds["reported_busbw"].sel(size=4096, placement="out_of_place").item()) == 0.20
    assert list(ds["host"].values) == [""] and json.loads(ds.attrs["hosts"]) == ["nodeA"]


def test_types_ops_and_cycles_split_and_fold():
    # -d float,half -o sum,max -N 3: each (type, op) sweeps 1K..4K three times
    sizes = [1024, 2048, 4096]
    lines = preamble(ranks=2) + HEADER.split("\n")
    rng = np.random.default_rng(1)
    expect = {}
    for typ, isz in (("float", 4), ("half", 2)):
        for op in ("sum", "max"):
            for cycle in range(3):
                ts = [(round(float(10 + s / 100 + rng.uniform(0, 2)), 2),) * 2 for s in sizes]
                expect[(typ, op, cycle)] = [t[0] for t in ts]
                lines += sweep_rows(sizes, ts, 1.0, typ=typ, op=op, itemsize=isz)
    lines += footer()
    parts = importers.unique_names(read("\n".join(lines)))
    assert list(parts) == ["all_reduce", "all_reduce-fp32-max", "all_reduce-fp16-sum",
                           "all_reduce-fp16-max"]
    ds = parts["all_reduce-fp16-max"]
    assert (ds.attrs["dtype"], ds.attrs["op"], ds.attrs["cycles"]) == ("fp16", "max", 3)
    assert ds.sizes["iteration"] == 3 and ds.sizes["cycle"] == 3
    assert ds["reported_time"].dims == ("algorithm", "placement", "size", "cycle")
    got = ds["latency"].sel(placement="out_of_place", size=2048).squeeze().values
    assert list(got) == [expect[("half", "max", c)][1] for c in range(3)]
    assert int(ds["count"].sel(size=2048)) == 1024


def test_per_iteration_columns():
    hdr = """#                                                              out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%) """
    extra = ("  %7s  %7s  %7s  %7s" % (fstr(18.0, 7), fstr(25.5, 7), fstr(25.1, 7), fstr(8.25, 7)),
             "  %7s  %7s  %7s  %7s" % (fstr(17.5, 7), fstr(22.0, 7), fstr(21.9, 7), fstr(6.5, 7)))
    lines = preamble(ranks=2, minb=1048576, maxb=1048576) \
        + ["# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; "
           "summary skips first 2 iterations "] + hdr.split("\n") \
        + [row(1048576, 262144, "float", "sum", -1, (20.25, 19.5), 1.0, extra=extra)] + footer()
    (ds,) = read("\n".join(lines))
    st = ds["reported_time_stats"].sel(size=1048576).squeeze()
    assert list(ds["stat"].values) == ["min", "max", "p99"]
    assert float(st.sel(placement="out_of_place", stat="max")) == 25.5
    assert float(st.sel(placement="in_place", stat="p99")) == 21.9
    assert float(ds["reported_time_cv"].sel(placement="in_place").squeeze()) == 6.5
    assert ds.attrs["per_iter_skip"] == 2
    # 1048576 / 20.25 = 51.781531 GB/s
    assert float(ds.ccb.busbw().sel(placement="out_of_place").squeeze()) == pytest.approx(51.7815309)


def test_na_exponent_and_failed_marks():
    # -c 0: #wrong is N/A; a 12.3 s iteration prints as 1.2e+07 (7 wide)
    size = 17179869184
    lines = preamble(ranks=2, minb=size, maxb=size) + HEADER.split("\n") \
        + [row(size, size // 4, "float", "sum", -1, (12345678.9, 12345678.9), 1.0, wrong=None)] \
        + ["# Out of bounds values : 3 FAILED", "# Avg bus bandwidth    : 1.39 FAILED", "#"]
    (ds,) = read("\n".join(lines))
    assert int(ds["wrong"].sel(placement="in_place").squeeze()) == -1
    assert float(ds["reported_time"].sel(placement="out_of_place").squeeze()) == 1.2e7
    assert ds.attrs["out_of_bounds"] == "3 FAILED"
    assert ds.attrs["reported_avg_busbw_check"] == "FAILED"
    # 17179869184 / 1.2e7 us = 1.431656 GB/s (the printed 1.39 came from 12.35 s)
    assert float(ds.ccb.busbw().sel(placement="out_of_place").squeeze()) == pytest.approx(1.4316558)
    assert ds.attrs["reported_check"].startswith("ok")


def test_old_layout_error_column_and_no_root():
    # nccl-tests 2.0: no root column, "error" (max error) instead of #wrong
    text = """# nThread 1 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  12345 on     node01 device  0 [0x1a] Tesla V100-SXM2-16GB
#   Rank  1 Pid  12345 on     node01 device  1 [0x1b] Tesla V100-SXM2-16GB
#   Rank  2 Pid  12345 on     node01 device  2 [0x1c] Tesla V100-SXM2-16GB
#   Rank  3 Pid  12345 on     node01 device  3 [0x1d] Tesla V100-SXM2-16GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float     sum    40.00    0.00    0.00  0e+00    40.00    0.00    0.00  0e+00
          16             4   float     sum    40.00    0.00    0.00  1e-07    40.00    0.00    0.00  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.000150
"""
    (ds,) = read(text, "1_1_LOG_all_reduce_env1_args1_job42_iter1.txt")
    assert ds.attrs["collective"] == "all_reduce" and ds.attrs["nranks"] == 4
    assert float(ds["reported_error"].sel(size=16, placement="out_of_place").squeeze()) == 1e-7
    assert int(ds["wrong"].sel(size=16, placement="out_of_place").squeeze()) == -1
    # without the file name, busbw 0.00 says nothing: refuse to guess
    with pytest.raises(ImporterError, match="pass --collective"):
        importers.read_text(text, "log.txt")


def test_several_tests_in_one_log():
    ar = preamble("all_reduce_perf", ranks=2) + HEADER.split("\n") \
        + sweep_rows([1024, 2048, 4096], [(20.0, 20.0)] * 3, 1.0) + footer()
    # all_gather on 2 ranks: factor 1/2
    ag = preamble("all_gather_perf", ranks=2) + HEADER.split("\n") \
        + sweep_rows([1024, 2048, 4096], [(10.0, 11.0)] * 3, 0.5, op="none") + footer()
    parts = importers.unique_names(read("\n".join(ar + ["some shell noise"] + ag)))
    assert list(parts) == ["all_reduce", "all_gather"]
    g = parts["all_gather"]
    assert g.attrs["op"] == "none"
    # 4096 / 11.0 = 0.372364 GB/s algbw; /2 = 0.186182 busbw
    assert float(g.ccb.busbw().sel(size=4096, placement="in_place").squeeze()) == pytest.approx(0.1861818)


def test_split_groups_use_the_group_size():
    # NCCL_TESTS_SPLIT="MOD 2" on 4 ranks: two groups of 2; busbw factor 2(2-1)/2 = 1
    lines = preamble(ranks=4, groups=[0, 1, 0, 1], hosts=("a", "b")) + HEADER.split("\n") \
        + sweep_rows([1024, 2048, 4096], [(20.0, 20.0)] * 3, 1.0) + footer()
    (ds,) = read("\n".join(lines))
    assert (ds.attrs["nranks"], ds.attrs["group_size"]) == (4, 2)
    assert ds.ccb.bus_factor == 1.0


def test_cputime_and_timestamps():
    hdr = HEADER.replace("   time", "cputime").split("\n")
    hdr[2] += "  timestamp"
    lines = preamble(ranks=2, minb=1024, maxb=1024) + hdr \
        + [row(1024, 256, "float", "sum", -1, (5.0, 5.0), 1.0) + "  2026-11-22 05:59:10"] + footer()
    (ds,) = read("\n".join(lines))
    assert "CPU time" in ds.attrs["aggregated"]
    assert float(ds["reported_time"].sel(placement="in_place").squeeze()) == 5.0


def test_mismatch_is_flagged_with_the_line():
    text = (DATA / "all_reduce_h200x2.txt").read_text()
    bad = text.replace("337.56  337.56       0  6359.44", "337.56  300.00       0  6359.44")
    with pytest.warns(ReportedMismatchWarning, match=r"line 41: size 2147483648 out_of_place"):
        (ds,) = importers.read_text(bad, "bad.txt")
    assert ds.attrs["reported_check"].startswith("MISMATCH: 1 of 120")
    (item,) = json.loads(ds.attrs["reported_mismatch"])
    assert (item["line"], item["column"], item["printed"]) == (41, "busbw", 300.0)
    # 2147483648 B / 6361.71 us = 337.5639 GB/s, the printed time +- 0.005 us
    assert item["expected"] == pytest.approx([337.5637, 337.5641], abs=1e-4)


def test_truncated_log():
    lines = (DATA / "all_reduce_h200x2.txt").read_text().split("\n")
    cut = "\n".join(lines[:30]) + "\n" + lines[30][:40]          # dies inside row 18
    with pytest.raises(ImporterError) as e:
        importers.read_text(cut, "cut.txt")
    assert e.value.line == 31 and "truncated" in str(e.value)
    (ds,) = importers.read_text(cut, "cut.txt", partial=True)
    assert ds.attrs["complete"] == "false" and ds.sizes["size"] == 18
    assert "footer" in ds.attrs["incomplete_reason"]
    whole_rows = "\n".join(lines[:30])
    with pytest.raises(ImporterError, match=r"cut.txt:31: expected more rows or nccl-tests' "
                                            r"'# Avg bus bandwidth' footer"):
        importers.read_text(whole_rows, "cut.txt")


def test_header_missing_columns():
    text = (DATA / "all_reduce_h200x2.txt").read_text().replace("busbw", "bw   ")
    with pytest.raises(ImporterError) as e:
        importers.read_text(text, "h.txt")
    assert e.value.line == 11 and "lacks algbw or busbw" in e.value.expected


def test_row_with_too_few_columns():
    text = (DATA / "all_reduce_h200x2.txt").read_text().replace(
        "     float     sum      -1    19.91    0.00    0.00       0",
        "     float     sum      -1    19.91    0.00", 1)
    with pytest.raises(ImporterError, match=r"r.txt:15: expected 13 columns as the header at line 11"):
        importers.read_text(text, "r.txt")


def test_garbage_and_unknown_formats():
    for text, where in (("hello world\nthis is not a benchmark\n", 1), ("{\"a\": 1}", 1)):
        with pytest.raises(ImporterError) as e:
            importers.read_text(text, "g.txt")
        assert e.value.line == where and "a format ccbench can import" in str(e.value)
    with pytest.raises(ImporterError, match="the file is empty"):
        importers.read_text("", "empty.txt")


def hypercube_rows(nranks, sizes, times, itemsize=4):
    """Rows as hypercube_perf prints them (src/hypercube.cu): count = the
    16-byte aligned count / nranks, size = max(send, recv bytes) = p x count
    x item size, algbw = count x item size x (p-1) / time, busbw = algbw,
    and an empty redop (opName "")."""
    out = []
    for size, pair in zip(sizes, times):
        base = (size // itemsize // nranks) & ~(16 // itemsize - 1)
        line = "%12li  %12li  %8s  %6s  %6s" % (base * nranks * itemsize, base, "float", "",
                                                "%6i" % -1)
        for t in pair:
            alg = base * itemsize * (nranks - 1) / 1.0e9 / (t * 1e-6)
            line += "  %7s  %6s  %6s  %6g" % (fstr(t, 7), fstr(alg, 6), fstr(alg, 6), 0)
        out.append(line)
    return out


def test_hypercube_log_imports_without_a_mismatch(tmp_path):
    """nccl-tests prints hypercube's size as p x count; the kit's size is
    count x (p-1) (the bytes each rank receives, nccl-tests' own algbw
    numerator): the importer converts, keeps the printed size, and the
    kit's nccl-tests JSON writes nccl-tests' size back."""
    from ccbench_kit.output import write_json
    sizes, times = [1024, 65536, 1 << 20], [(10.05, 9.55), (13.28, 12.78), (62.43, 61.93)]
    text = "\n".join(preamble("hypercube_perf", ranks=4, maxb=1 << 20) + HEADER.splitlines()
                     + hypercube_rows(4, sizes, times) + footer())
    (ds,) = read(text)  # a mismatch warning would be an error here
    assert ds.attrs["collective"] == "hypercube" and ds.attrs["nranks"] == 4
    assert ds.attrs["reported_check"].startswith("ok: 12 printed bandwidths agree")
    assert list(ds["reported_size"].values) == sizes
    assert list(ds["size"].values) == [768, 49152, 786432]     # count x 3 x 4 B
    assert list(ds["count"].values) == [64, 4096, 65536]
    # busbw = what nccl-tests printed: 64 x 4 x 3 B / 10.05 us = 0.0764 GB/s
    assert float(ds.ccb.busbw().sel(size=768, placement="out_of_place").squeeze()) == \
        pytest.approx(768 / 10.05e3)
    [path] = write_json(ds, tmp_path / "h.json", "nccl-tests")
    doc = json.loads(Path(path).read_text())
    assert [(r["size"], r["count"]) for r in doc["results"]] == \
        [(1024, 64), (65536, 4096), (1 << 20, 65536)]
