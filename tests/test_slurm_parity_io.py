"""nccom-test's and the AWS recipe's ways of following a Slurm run, on the
repository's real Slurm testbed (test_cluster_slurm's): a suite job's log
holds the table as it grows (`tail -f logs/JOB.out`), srun ranks keep their
output under --mpi-log-dir, and --slurm-setup-script default checks every
node before the ranks start."""
import json
import re

from test_cluster_slurm import (_ccbench, _suite, _wait_jobs_done, pytestmark, tb)  # noqa: F401

MARKER = "@@ccbench "


def test_suite_job_log_shows_the_table_as_sizes_complete(tb, tmp_path):  # noqa: F811
    from ccbench_kit.dataset import open_parts
    from ccbench_kit.formats.nccl_tests.write_table import table_parts

    suite = _suite(tmp_path, "live", "64K", collectives=("all_reduce",))
    r = _ccbench(tb, "suite", suite, "--no-report")
    assert r.returncode == 0, r.stderr
    job = re.search(r"submitted as job (\d+)", r.stderr).group(1)
    _wait_jobs_done(tb, [job])
    work = tmp_path / "results" / "live.suite"
    log = (work / "logs").glob(f"*.{job}.out")
    lines = next(log).read_text().splitlines()
    sizes = [8 * 4 ** k for k in range(7)]            # 8 .. 32K: x4 up to 64K
    rows = [i for i, ln in enumerate(lines) if MARKER not in ln and ln.split()
            and ln.split()[0].isdigit()]
    done = [i for i, ln in enumerate(lines) if MARKER in ln
            and json.loads(ln.split(MARKER, 1)[1])["event"] == "size"]
    assert [int(lines[i].split()[0]) for i in rows] == sizes
    # each row is in the log before the next size is timed: `tail -f` shows it then
    assert len(done) == len(sizes)
    assert all(rows[k] < done[k] < rows[k + 1] for k in range(len(sizes) - 1))
    # the header before the first row, the average after the last
    head = lines[rows[0] - 2].split()
    assert head[:2] == ["#", "size"] and "busbw" in head
    avg = [i for i, ln in enumerate(lines) if ln.startswith("# Avg bus bandwidth    : ")]
    assert len(avg) == 1 and avg[0] > done[-1]
    # the same rows as the results file's table
    r = _ccbench(tb, "suite", "collect", suite, "--no-report")
    assert r.returncode == 0, r.stderr
    ds = next(iter(open_parts(work / "parts" / "all_reduce.nc").values()))
    assert [lines[i] for i in rows] == table_parts(ds)[1]


def test_srun_rank_logs_and_the_default_setup_step(tb, tmp_path):  # noqa: F811
    logs = tmp_path / "ranklogs"
    r = _ccbench(tb, "run", "all_reduce", "-r", "4", "-N", "2", "-S", "--hosts", "node2",
                 "node1", "--slurm-setup-script", "default", "--mpi-log-dir", logs,
                 "-b", "8", "-e", "1K", "-f", "8", "-n", "3", "-w", "1", "--non-interactive",
                 "--out", tmp_path / "r.nc")
    assert r.returncode == 0, r.stderr
    # the setup step ran once on each node and found it ready
    ready = sorted(ln.split(":")[1].strip() for ln in r.stdout.splitlines()
                   if ln.startswith("ccbench setup: ") and ln.endswith(": ready"))
    assert ready == ["node1", "node2"]
    # the table still came back to the launcher
    assert [ln.split()[0] for ln in r.stdout.splitlines()
            if ln.split() and ln.split()[0].isdigit()] == ["8", "64", "512"]
    # ranks 0, 1 on node2 and 2, 3 on node1 (the hosts' order), each its own files
    placed = {0: "node2", 1: "node2", 2: "node1", 3: "node1"}
    assert sorted(p.name for p in logs.iterdir()) == sorted(
        f"{h}.rank.{k}.{s}" for k, h in placed.items() for s in ("stderr", "stdout"))
    for rank, host in placed.items():
        evs = [json.loads(ln.split(MARKER, 1)[1]) for ln in
               (logs / f"{host}.rank.{rank}.stdout").read_text().splitlines() if MARKER in ln]
        beats = [e for e in evs if e["event"] == "beat"]
        assert beats and {(e["rank"], e["host"]) for e in beats} == {(rank, host)}
        assert [e["size"] for e in evs if e["event"] == "size"] == \
            ([8, 64, 512] if rank == 0 else [])
