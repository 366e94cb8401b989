"""nccl-tests' and IMB's flags, with their meaning: each test runs the kit
and checks the printed table or the Dataset against the same Dataset by hand.

nccl-tests 2.19.6 (src/common.cu): -a reduces each rank's mean time over the
iterations across ranks (0 rank 0, 1 avg, 2 min, 3 max); -N repeats the
whole sweep; -u offsets send and receive buffers by N elements.  IMB:
-msglen FILE (one length per line, K/M suffixes, # comments).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from ccbench_kit import load
from ccbench_kit.errors import ConfigError


def _table(stdout, after=None):
    """{(size, algorithm): [numbers of the row]} of a printed table (the one
    after the line `after`, when given)."""
    rows = {}
    lines = stdout.splitlines()
    if after is not None:
        lines = lines[lines.index(after) + 1:]
        end = next((i for i, ln in enumerate(lines) if ln.startswith("# cycle ")
                    or ln.startswith("# all ")), len(lines))
        lines = lines[:end]
    for line in lines:
        words = line.split()
        if words and words[0].isdigit() and len(words) > 6:
            rows[(int(words[0]), words[5])] = [float(w) if w != "N/A" else np.nan
                                              for w in words[6:]]
    return rows


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    """One 3-rank run of sizes from an IMB lengths file, -a 2 in the table,
    the sweep run twice (--cycles 2)."""
    from conftest import run_cli
    tmp = tmp_path_factory.mktemp("parity")
    lengths = tmp / "lengths.txt"
    lengths.write_text("# IMB -msglen file\n1024\n\n3 K\n96\n")
    out = tmp / "r.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "--msglen", lengths, "-n", 6, "-w", 1,
                   "--placement", "out_of_place", "-a", 2, "--cycles", 2, "--non-interactive",
                   "--out", out, timeout=300, check=True)
    return out, proc.stdout


def test_msglen_file_gives_those_sizes_in_that_order(three_ranks):
    out, _ = three_ranks
    ds = load(out)
    assert list(ds["size"].values) == [1024, 3072, 96]
    assert ds.sizes["rank"] == 3 and ds.sizes["iteration"] == 12


def test_cycles_keep_every_cycles_iterations_and_print_each(three_ranks):
    out, stdout = three_ranks
    ds = load(out)
    assert ds["cycle"].values.tolist() == [0] * 6 + [1] * 6
    assert ds.attrs["cycles"] == 2 and ds.attrs["complete"] == "true"
    assert not list(out.parent.glob("*.part"))
    lat = ds["latency"].sel(algorithm="mpi", placement="out_of_place")
    for c, title in ((0, "# cycle 1 of 2"), (1, "# cycle 2 of 2")):
        rows = _table(stdout, title)
        want = lat.isel(iteration=slice(6 * c, 6 * c + 6)).mean("iteration").min("rank")
        for size in (1024, 3072, 96):
            assert rows[(size, "mpi")][0] == pytest.approx(float(want.sel(size=size)), abs=0.0051)
    # the two cycles are separate measurements: their times differ
    assert (lat.isel(iteration=slice(0, 6)).values != lat.isel(iteration=slice(6, 12)).values).any()


def test_average_min_is_min_over_ranks_of_each_ranks_mean(three_ranks, cli):
    out, stdout = three_ranks
    ds = load(out)
    want = ds["latency"].mean("iteration").min("rank").sel(algorithm="mpi",
                                                           placement="out_of_place")
    rows = _table(stdout, "# all 2 cycles")
    for size in (1024, 3072, 96):
        assert rows[(size, "mpi")][0] == pytest.approx(float(want.sel(size=size)), abs=0.0051)
    assert "the min over ranks of each rank's avg over iterations (nccl-tests -a)" in stdout
    # the file keeps every rank; show -a 3 / -a 0 of the same file
    for flag, reduce in (("3", lambda x: x.max("rank")), ("0", lambda x: x.sel(rank=0))):
        shown = _table(cli("show", out, "-a", flag, check=True).stdout)
        per = reduce(ds["latency"].mean("iteration")).sel(algorithm="mpi",
                                                          placement="out_of_place")
        for size in (1024, 3072, 96):
            assert shown[(size, "mpi")][0] == pytest.approx(float(per.sel(size=size)), abs=0.0051)
    # rank 0's time is not the max's: the reduction is really applied
    assert (ds["latency"].mean("iteration").max("rank") >
            ds["latency"].mean("iteration").min("rank")).all()


def test_flag_errors_are_one_line(capsys, tmp_path):
    from ccbench_kit.cli import main
    bad = tmp_path / "bad.txt"
    bad.write_text("1024\nlots\n")
    cases = [(("-a", "5"), "-a/--average: unknown rank reduction '5'"),
             (("--msglen", str(bad)), f"--msglen: {bad}:2: expected a message length"),
             (("--sizes", "8,1K,8"), "--sizes: size 8 B is given twice"),
             (("--sizes", "8", "-e", "1M"), "--sizes: replaces -b/-e/-f/-i"),
             (("--cycles", "0"), "--cycles: must be at least 1, got 0"),
             (("-u", "-1"), "-u/--unalign: must be a whole number of elements >= 0, got -1"),
             (("--backend", "nccl", "--off-cache"),
              "--backend: the nccl backend has no option 'off_cache'"),
             (("--off-cache", "big"), "--off-cache: expected the last-level cache size in MB"),
             (("--alltoallv-pattern", "zipf:1"), "--alltoallv-pattern: is for alltoallv"),
             (("-r", "4", "--alltoallv-pattern", "hot:4"), "--alltoallv-pattern: hot rank 4 is not one of the ranks 0..3"),
             (("--alltoallv-pattern", "zipf:x"), "--alltoallv-pattern: unknown pattern 'zipf:x'")]
    for args, message in cases:
        coll = "alltoallv" if any(str(a).startswith(("hot", "zipf:x")) for a in args) \
            else "all_reduce"
        assert main(["run", coll, *args]) == 2, args
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"ccbench: error: {message}"), err
        assert len(err.splitlines()) == 1


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    """Windows editors start a UTF-8 file with U+FEFF; the first length (and
    the first key of a JSON input) is read as if it were not there."""
    from ccbench_kit.inputs.sizes import read_msglen
    from ccbench_kit.inputs.source import load
    lengths = tmp_path / "lengths.txt"
    lengths.write_bytes(b"\xef\xbb\xbf1024\r\n4K\r\n")
    assert read_msglen(str(lengths)) == [1024, 4096]
    spec = tmp_path / "groups.json"
    spec.write_bytes(b"\xef\xbb\xbf[[0, 1], [2, 3]]")
    assert load(str(spec), "--custom-replica-group")[0] == [[0, 1], [2, 3]]
    # a mark anywhere else is a character like any other
    lengths.write_bytes(b"1024\n\xef\xbb\xbf4K\n")
    with pytest.raises(ConfigError, match=r"lengths.txt:2: expected a message length"):
        read_msglen(str(lengths))


def test_skewed_alltoallv_generators():
    from ccbench_kit.inputs.skew import parse_pattern, skewed_counts
    T, p = 1000, 5
    for spec in ("uniform", "zipf:1.2", "hot:3", "hot:3:10"):
        c = skewed_counts(parse_pattern(spec, p), T, p, seed=7)
        assert c.shape == (p, p) and (c >= 0).all()
        assert (c.sum(axis=1) == T).all()                       # every rank sends T
        np.testing.assert_array_equal(c, skewed_counts(parse_pattern(spec, p), T, p, seed=7))
    # hot:3 -> rank 3 gets p = 5 times each other rank's share: 5/9 of T
    hot = skewed_counts(parse_pattern("hot:3", p), T, p, 0)
    assert (hot[:, 3] == 556).all() and (hot[:, [0, 1, 2, 4]] == 111).all()
    assert list(skewed_counts(parse_pattern("hot:3:10", p), 14, p, 0)[0]) == [1, 1, 1, 10, 1]
    # zipf:S -> the k-th most popular rank gets T / k^S / H(S), the order drawn with the seed
    z = skewed_counts(parse_pattern("zipf:1.2", p), T, p, seed=7)
    order = np.random.default_rng(7).permutation(p)
    share = 1 / (order + 1.0) ** 1.2
    np.testing.assert_allclose(z[0], T * share / share.sum(), atol=1)
    assert (z == z[0]).all()                                   # one popularity for every sender
    assert not np.array_equal(z, skewed_counts(parse_pattern("zipf:1.2", p), T, p, seed=8))
    # uniform: i.i.d. weights per pair, so rows differ
    u = skewed_counts(parse_pattern("uniform", p), T, p, seed=7)
    assert len({tuple(r) for r in u}) == p


def test_skewed_alltoallv_runs_and_checks(cli, tmp_path):
    import json
    out = tmp_path / "a2av.nc"
    cli("run", "alltoallv", "-r", 5, "--sizes", "1K,40K", "--alltoallv-pattern", "zipf:1.2",
        "--seed", 7, "--check", "-n", 2, "-w", 1, "--non-interactive", "--out", out,
        timeout=300, check=True)
    ds = load(out)
    assert int(ds["wrong"].sel(placement="out_of_place").max()) == 0
    from ccbench_kit.inputs.skew import parse_pattern, skewed_counts
    # size = the most any rank receives: the most popular rank's column
    for requested, size in zip((1024, 40960), ds["size"].values):
        T = requested // 4 // 5 * 5
        c = skewed_counts(parse_pattern("zipf:1.2", 5), T, 5, 7)
        assert int(size) == c.sum(axis=0).max() * 4 > requested
    assert json.loads(ds.attrs["config"])["alltoallv_pattern"] == "zipf:1.2"


def test_unalign_offsets_buffers_by_whole_elements():
    from ccbench_kit.backends.mpi import MPIBackend
    from ccbench_kit.dtypes import get_dtype
    for u, dtype in ((0, "fp32"), (1, "fp32"), (3, "bf16"), (5, "fp64")):
        dt = get_dtype(dtype)
        buf = MPIBackend(None, MPIBackend.make_options(unalign=u)).alloc(10, dt)
        assert len(buf) == 10
        # nccl-tests: sendbuff += unalign * wordSize(type), from the allocation's start
        assert buf.ctypes.data - buf.base.ctypes.data == u * dt.itemsize


def test_off_cache_sets_span_twice_the_cache():
    from ccbench_kit.backends.offcache import buffer_sets, last_level_cache_bytes, off_cache_bytes
    assert off_cache_bytes("16") == 16 << 20 and off_cache_bytes("2.5,128") == int(2.5 * (1 << 20))
    llc = last_level_cache_bytes()
    if llc:   # this machine's, from sysfs
        assert off_cache_bytes("auto") == llc
    # IMB: ceil(2 x cache / message) positions, at most one per repetition
    assert buffer_sets(16 << 20, 1 << 20, 1000) == 32
    assert buffer_sets(16 << 20, 3 << 20, 1000) == 11
    assert buffer_sets(16 << 20, 1 << 20, 25) == 25
    assert buffer_sets(1 << 20, 64 << 20, 25) == 2


def test_unaligned_off_cache_run_is_right(cli, tmp_path):
    out = tmp_path / "u.nc"
    cli("run", "all_reduce", "-r", 3, "--sizes", "4K,1M", "-u", 1, "--off-cache", 1, "--check",
        "-n", 3, "-w", 1, "--non-interactive", "--out", out, timeout=300, check=True)
    ds = load(out)
    assert int(ds["wrong"].max()) == 0 and int(ds["wrong"].min()) == 0
    import json
    opts = json.loads(ds.attrs["config"])["backend_options"]
    assert (opts["off_cache"], opts["unalign"]) == (1 << 20, 1)


def test_until_stable_repeats_wide_sizes_up_to_the_cap(cli, tmp_path):
    import json

    from ccbench_kit.launch.stable import half_width
    out = tmp_path / "st.nc"
    # a target no 2-core machine meets: every size runs until the cap (2 rounds of 3)
    cli("run", "all_reduce", "-r", 2, "--sizes", "1K,4K", "-n", 3, "-w", 1, "--until-stable",
        "0.0001", "--stable-cap", 6, "--placement", "out_of_place", "--non-interactive",
        "--out", out, timeout=400, check=True)
    ds = load(out)
    info = json.loads(ds.attrs["until_stable"])
    assert info["rounds"] == 2 and info["cap"] == 6 and info["target"] == 0.0001
    assert info["iterations"] == {"1024": 6, "4096": 6} and ds.sizes["iteration"] == 6
    assert bool(ds["latency"].notnull().all())
    it = ds.ccb.iteration_time("max").sel(algorithm="mpi", placement="out_of_place")
    for s in (1024, 4096):
        w = half_width(it.sel(size=s).values)
        assert info["half_width"][str(s)] == pytest.approx(w, abs=1e-6)
        assert info["stable"][str(s)] is False and w > 0.0001
    assert not list(tmp_path.glob("*.part"))


def test_half_width_is_the_bootstrap_ci_of_the_mean():
    from ccbench_kit.launch.stable import half_width
    t = np.array([10.0, 10.5, 9.5, 10.2, 9.8] * 8)
    w = half_width(t)
    # the CI of a mean of 40 values: about 1.96 sd / sqrt(40) / mean
    assert w == pytest.approx(1.96 * t.std() / np.sqrt(len(t)) / t.mean(), rel=0.15)
    assert half_width([5.0]) == float("inf") and half_width([7.0, 7.0, 7.0]) == 0.0


def test_cycles_and_until_stable_from_the_python_api(tmp_path):
    # what --cycles and --until-stable do, asked of ccb.run (the CLI's
    # launchers: launch.cycles, launch.stable)
    import json

    import ccbench_kit as ccb
    ds = ccb.run("all_reduce", 3, [96, 1024], iters=3, warmup=1, placement="out_of_place",
                 cycles=2)  # no out: a temporary file, gone afterwards
    assert ds["cycle"].values.tolist() == [0] * 3 + [1] * 3 and ds.attrs["cycles"] == 2
    out = tmp_path / "st.nc"
    ds = ccb.run("all_reduce", 2, [1024], iters=3, warmup=1, placement="out_of_place",
                 until_stable=0.0001, stable_cap=6, out=str(out))
    info = json.loads(ds.attrs["until_stable"])
    assert info["rounds"] == 2 and info["iterations"] == {"1024": 6}
    assert load(out).sizes["iteration"] == 6 and not list(tmp_path.glob("*.part"))
    with pytest.raises(ConfigError, match="until_stable: repeats sizes itself; not with cycles"):
        ccb.run("all_reduce", 2, [1024], cycles=2, until_stable=0.1)

def test_huge_pages_default_off_is_recorded_and_measured(tmp_path):
    """The buffers' allocator and pages are in the attrs; by default the
    buffers are libc malloc's, as IMB's: with the kernel's THP in madvise
    mode the 8 MiB buffers get base pages and start on glibc's 16 B
    alignment; with --huge-pages madvise numpy's np.empty gets
    2 MiB pages where the kernel gives any."""
    from conftest import run_cli
    from ccbench_kit.backends.hostpages import thp_mode
    out = tmp_path / "hp.nc"
    proc = run_cli("run", "all_reduce", "-r", 2, "-b", "8M", "-e", "8M", "-n", 2, "-w", 0,
                   "--algorithms", "mpi", "--non-interactive", "--out", out)
    assert proc.returncode == 0, proc.stderr
    a = load(out).attrs
    assert a["huge_pages"] == "off" and a["buffer_alloc"].startswith("libc malloc, as IMB")
    assert a["thp_enabled"] == thp_mode()
    # MPI_Init's level, as IMB's: above it Open MPI locks in every call
    assert a["mpi_thread_level"] == "MPI_THREAD_SINGLE"
    assert a["buffer_pages"].startswith("the mapping of the largest buffer (8388608 B) holds ")
    # glibc's chunks are 16 B-aligned; where the block came from (its own
    # mmap, 16 B into a page, or the heap once glibc's mmap threshold has
    # risen past 8 MiB, as it does in IMB) is glibc's choice, recorded as is
    offset = int(a["buffer_pages"].rsplit("; it starts ", 1)[1].split()[0])
    assert offset % 16 == 0 and 0 <= offset < 4096
    assert a["library_algorithm"].startswith("Open MPI's coll framework picks per call")
    if thp_mode() == "madvise":  # nothing advised, so nothing huge
        assert " holds 0 kB " in a["buffer_pages"]
    huge = run_cli("run", "all_reduce", "-r", 2, "-b", "8M", "-e", "8M", "-n", 2, "-w", 0,
                   "--algorithms", "mpi", "--huge-pages", "madvise", "--non-interactive",
                   "--out", tmp_path / "huge.nc",
                   env={**os.environ, "MPI4PY_RC_THREAD_LEVEL": "multiple"})
    assert huge.returncode == 0, huge.stderr
    h = load(tmp_path / "huge.nc").attrs
    assert h["mpi_thread_level"] == "MPI_THREAD_MULTIPLE"   # the environment decides
    assert h["buffer_alloc"].startswith("numpy np.empty, madvise(MADV_HUGEPAGE) on")
    assert int(h["buffer_pages"].split(" holds ")[1].split()[0]) % 2048 == 0
    if _kernel_gives_advised_huge_pages():  # advised: at least one whole 2 MiB page
        assert " holds 0 kB " not in h["buffer_pages"]
    bad = run_cli("run", "all_reduce", "-r", 2, "--huge-pages", "always", "--out", out)
    assert bad.returncode == 2 and "--huge-pages: invalid choice: 'always'" in bad.stderr


def test_malloc_array_is_glibcs_own_block():
    """In a fresh process (glibc's mmap threshold at its 128 KiB start) an
    8 MiB `malloc_array` is glibc's own mapping: 16 B into a page, past its
    chunk header, and it reads back what was written."""
    code = ("from ccbench_kit.backends.hostpages import malloc_array, page_offset\n"
            "a = malloc_array(8 << 20); a[:] = 7\n"
            "print(page_offset(a), int(a.sum()) == 7 * (8 << 20))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["16", "True"]


def _kernel_gives_advised_huge_pages():
    """Whether this kernel backs an madvise(MADV_HUGEPAGE)d, written 8 MiB
    mapping with any huge page (a VM may not, whatever the THP setting)."""
    import ctypes
    import mmap
    from ccbench_kit.backends.hostpages import huge_kb
    m = mmap.mmap(-1, 16 << 20)
    arr = np.frombuffer(m, dtype=np.uint8)
    start = (arr.__array_interface__["data"][0] + (2 << 20) - 1) & ~((2 << 20) - 1)
    ctypes.CDLL(None).madvise(ctypes.c_void_p(start), ctypes.c_size_t(8 << 20), 14)  # HUGEPAGE
    arr[...] = 1
    kb = huge_kb(arr)
    del arr
    m.close()
    return bool(kb)


def test_nccom_hosts_default(tmp_path, monkeypatch):
    """nccom-test reads ~/hosts when several nodes are asked for and no host
    is given (its `--slurm-setup-script default`: test_parity_io)."""
    from ccbench_kit.cli import build_parser
    from ccbench_kit.cli.cluster import launch_options
    monkeypatch.setenv("HOME", str(tmp_path))
    parse = build_parser().parse_args
    assert launch_options(parse(["run", "all_reduce", "-N", "2"]))["hosts_file"] is None
    (tmp_path / "hosts").write_text("nodeA\nnodeB\n")
    assert launch_options(parse(["run", "all_reduce", "-N", "2"]))["hosts_file"] == \
        str(tmp_path / "hosts")
    for argv in (["-N", "1"], ["-N", "2", "--hosts", "x", "y"], []):
        assert launch_options(parse(["run", "all_reduce", *argv]))["hosts_file"] is None


def test_show_algorithm_says_what_open_mpi_ran(tmp_path):
    """--show-algorithm with the library's own call: forced through Open
    MPI's coll/tuned variables it names the choice; otherwise it says the
    library does not report one (test_huge_pages... covers that attr)."""
    import os
    from conftest import run_cli
    env = {**os.environ, "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
    out = tmp_path / "a.nc"
    proc = run_cli("run", "all_reduce", "-r", 2, "-b", 64, "-e", 64, "-n", 2, "-w", 0,
                   "--algorithms", "mpi", "--show-algorithm", "--non-interactive",
                   "--out", out, env=env)
    assert proc.returncode == 0, proc.stderr
    want = "Open MPI coll/tuned forced by the environment: allreduce_algorithm=4"
    assert f"# algorithm mpi: {want}" in proc.stdout.splitlines()
    assert load(out).attrs["library_algorithm"] == want
