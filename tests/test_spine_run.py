"""The spine end to end: CLI -> mpirun -> Dataset -> table, and the API."""
import re

import numpy as np
import pytest
import xarray as xr

import ccbench_kit as ccb
from ccbench_kit.dataset.schema import DIMS, REQUIRED_ATTRS, SCHEMA


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    from conftest import run_cli
    out = tmp_path_factory.mktemp("run") / "x.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 8, "-e", "1M", "-f", 4,
                   "--algorithms", "ring,mpi", "--check", "--out", out, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return proc, out


def test_cli_table_has_zero_wrong_on_every_row(cli_run):
    proc, _ = cli_run
    rows = [l for l in proc.stdout.splitlines() if l and not l.startswith("#") and l.split()[0].isdigit()]
    # 8 B .. 1 MiB by 4: 8, 32, ..., 524288 -> 9 sizes x 2 algorithms
    assert len(rows) == 18
    for row in rows:
        f = row.split()
        assert f[5] in ("ring", "mpi")
        assert f[9] == "0" and f[13] == "0", row  # #wrong, out-of-place and in-place
    assert re.search(r"^# Avg bus bandwidth\s+: [0-9.]+", proc.stdout, re.M)
    assert "out-of-place" in proc.stdout and "in-place" in proc.stdout


def test_results_file_schema(cli_run):
    _, out = cli_run
    ds = xr.open_dataset(out)
    assert tuple(ds["latency"].dims) == DIMS
    assert set(ds.sizes) == set(DIMS)
    for attr in REQUIRED_ATTRS:
        assert attr in ds.attrs, attr
    assert ds.attrs["schema"] == SCHEMA == "ccbench/3"
    assert ds.attrs["kind"] == "sweep"
    assert ds.attrs["nranks"] == 3 and ds.attrs["collective"] == "all_reduce"
    assert ds.attrs["complete"] == "true"
    assert list(ds["algorithm"].values) == ["ring", "mpi"]
    assert list(ds["size"].values) == [8 * 4 ** k for k in range(9)]
    assert list(ds["count"].values) == [2 * 4 ** k for k in range(9)]
    assert (ds["wrong"].values == 0).all()
    assert ds.sizes["iteration"] == 20 and ds.sizes["rank"] == 3
    assert np.isfinite(ds["latency"].values).all() and (ds["latency"].values > 0).all()


def test_busbw_is_size_over_max_rank_mean_iter_times_bus_factor(cli_run):
    _, out = cli_run
    ds = ccb.load(out)
    lat = ds["latency"].values  # (alg, placement, size, rank, iter) in us
    t = lat.max(axis=3).mean(axis=-1)
    size = ds["size"].values[None, None, :]
    expected = size / (t * 1e-6) / 1e9 * 2 * (3 - 1) / 3
    np.testing.assert_allclose(ds.ccb.busbw().values, expected, rtol=1e-12)
    np.testing.assert_allclose(ds.ccb.algbw().values, size / (t * 1e3), rtol=1e-12)
    p99 = np.percentile(lat.max(axis=3), 99, axis=-1)
    np.testing.assert_allclose(ds.ccb.time("p99").values, p99, rtol=1e-12)


def test_show_prints_the_same_table(cli_run, cli):
    proc, out = cli_run
    shown = cli("show", out, check=True).stdout
    table = [l for l in proc.stdout.splitlines() if l.strip() and l.split()[0].isdigit()]
    assert table == [l for l in shown.splitlines() if l.strip() and l.split()[0].isdigit()]


@pytest.mark.parametrize("nranks", [2, 4])
def test_api_run_all_gather(nranks):
    ds = ccb.run("allg", nranks=nranks, sizes=[96, "1K"], algorithms=["ring", "mpi"],
                 check="random", warmup=1, iters=4)
    assert ds.attrs["collective"] == "all_gather" and ds.attrs["nranks"] == nranks
    # all_gather's size is the whole output, rounded down to p whole fp32 elements
    per_rank = [96 // 4 // nranks, 1024 // 4 // nranks]
    assert list(ds["count"].values) == per_rank
    assert list(ds["size"].values) == [c * 4 * nranks for c in per_rank]
    assert (ds["wrong"].values == 0).all()
    assert ds.ccb.bus_factor == pytest.approx((nranks - 1) / nranks)


def test_in_process_under_users_mpirun(mpirun, tmp_path):
    code = (
        "import ccbench_kit as ccb\n"
        f"ds = ccb.run('all_reduce', sizes=['4K'], algorithms=['ring'], iters=3, warmup=1, check='all_ones', out=r'{tmp_path}/ip.nc')\n"
        "from mpi4py import MPI\n"
        "got = MPI.COMM_WORLD.gather(ds is None or dict(ds.sizes))\n"
        "if got: print('\\n'.join(f'RANK {r} {g}' for r, g in enumerate(got)), flush=True)\n")
    proc = mpirun(3, code, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = sorted(l for l in proc.stdout.splitlines() if l.startswith("RANK"))
    assert lines[1:] == ["RANK 1 True", "RANK 2 True"]
    assert "'rank': 3" in lines[0]
    ds = ccb.load(tmp_path / "ip.nc")
    assert int(ds["wrong"].sum()) == 0 and ds.attrs["nranks"] == 3


def test_cli_under_users_mpirun_with_a_random_check(tmp_path):
    """`mpirun -np 3 ccbench run ...`: every rank runs in-process, they agree
    on rank 0's random seed, and rank 0 alone prints the tables."""
    import subprocess
    import sys
    from pathlib import Path

    from ccbench_kit.launch.mpirun import mpirun_command, mpirun_env
    out = tmp_path / "u.nc"
    exe = str(Path(sys.executable).parent / "ccbench")
    cmd = mpirun_command(3, [exe, "run", "all_reduce,alltoall", "-b", "8", "-e", "1K", "-f", "8",
                             "--check", "--non-interactive", "--out", str(out)])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=mpirun_env())
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert p.stdout.count("# ccbench all_reduce: 3 ranks") == 1
    assert p.stdout.count("# ccbench alltoall: 3 ranks") == 1
    assert p.stderr.count("# check: random, seed") == 1
    parts = ccb.dataset.open_parts(out)
    assert set(parts) == {"all_reduce", "alltoall"}
    for ds in parts.values():
        assert ds.attrs["complete"] == "true" and int(ds["wrong"].max()) == 0


def test_two_collectives_in_one_file(cli, tmp_path):
    out = tmp_path / "two.nc"
    proc = cli("run", "all_reduce,all_gather", "-r", 2, "-b", 64, "-e", 256, "-f", 4,
               "-n", 3, "-w", 1, "--algorithms", "ring", "--out", out, "--non-interactive")
    assert proc.returncode == 0, proc.stderr
    assert xr.open_dataset(out).attrs["collective"] == "all_reduce"
    tree = ccb.load(out)
    assert set(tree.children) == {"all_reduce", "all_gather"}
    assert tree["all_gather"].to_dataset().attrs["collective"] == "all_gather"


BAD = [
    (["run", "all_reduce", "-b", "1G", "-e", "1K"], "-b/--minbytes: minimum size 1 GiB is larger than -e/--maxbytes 1 KiB"),
    (["run", "all_reduce", "-r", "0"], "argument -r/--nworkers: must be an integer from 1 to 1048576, got 0"),
    (["run", "all_frobnicate"], "COLLECTIVE: unknown collective 'all_frobnicate'"),
    (["run", "all_reduce", "--algorithms", "ring,bogus"], "--algorithms: unknown algorithm 'bogus' for all_reduce"),
    (["run", "all_reduce", "-b", "12XB"], "-b/--minbytes: cannot read size '12XB'"),
    (["run", "all_reduce", "-d", "fp128"], "-d/--datatype: unknown data type 'fp128'"),
    (["run", "all_reduce", "-o", "xor"], "-o/--op: unknown reduction op 'xor'"),
    (["run", "all_reduce", "-t", "p101"], "-t/--stats: unknown statistic 'p101'"),
    (["run", "all_reduce", "-n", "0"], "argument -n/--iters: must be an integer from 1 to 1000000000, got 0"),
    (["report", "/nonexistent/x.nc", "-o", "/tmp/r.html"], "results: /nonexistent/x.nc: no such results file"),
    (["show", "/nonexistent/x.nc"], "/nonexistent/x.nc: no such results file"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_one_line_no_traceback(cli, argv, message):
    proc = cli(*argv, timeout=60)
    assert proc.returncode != 0
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1, proc.stderr
    assert message in err[0]
    assert "Traceback" not in proc.stderr


def test_output_into_a_closed_pipe_is_quiet(cli_run):
    import subprocess
    from conftest import BIN
    _, out = cli_run
    proc = subprocess.run(f"{BIN / 'ccbench'} show {out} | head -1", shell=True,
                          capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("# all_reduce")
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr
