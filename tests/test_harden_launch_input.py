"""Launch input refused before any launch (issue 37): two names of one host
(Open MPI places them as one node: its internal-error banner, a rank's
IndexError) and a doctor's sizes that this host's memory cannot hold (it
swapped and hung past --timeout).  In-process: nothing is launched, so a
check that let them through would start mpirun and fail these tests."""
import socket

import pytest

from ccbench_kit.cli import main
from ccbench_kit.errors import ConfigError
from ccbench_kit.health import api, probe
from ccbench_kit.launch import hosts as H
from ccbench_kit.launch.watchdog import where
from ccbench_kit.progress_board import ENTERED, LEFT, PHASE, PHASES, SIZE, WIDTH

HERE = socket.gethostname()
ELSEWHERE = "192.0.2.7"   # TEST-NET-1 (RFC 5737): an address, never this host


@pytest.mark.parametrize("names, pair, where_", [
    (["localhost", "127.0.0.1"], ("localhost", "127.0.0.1"), "this host"),
    ([HERE, ELSEWHERE, "localhost"], (HERE, "localhost"), "this host"),
    (["::1", ELSEWHERE, "127.0.0.2"], ("::1", "127.0.0.2"), "this host"),
    ([ELSEWHERE, "192.0.2.8", ELSEWHERE + ""], None, None),   # listed twice: parse_hosts' case
])
def test_two_names_of_one_host_are_refused(names, pair, where_):
    uniq = list(dict.fromkeys(names))
    if pair is None:
        H.check_one_name_each(uniq)
        return
    with pytest.raises(ConfigError) as e:
        H.check_one_name_each(uniq)
    assert str(e.value) == (f"--hosts: {pair[0]!r} and {pair[1]!r} are two names of one host "
                            f"({where_}): Open MPI places them as one node; name each host once")


def test_names_sharing_an_address_are_one_host(monkeypatch):
    found = {"n1": {"10.0.0.1"}, "n1-ib": {"10.0.0.1", "10.1.0.1"}, "n2": {"10.0.0.2"}}
    monkeypatch.setattr(H, "addresses", lambda names, timeout=0: {n: found.get(n, set())
                                                                     for n in names})
    with pytest.raises(ConfigError, match=r"^--hosts-file: 'n1' and 'n1-ib' are two names of "
                                          r"one host \(address 10\.0\.0\.1\)"):
        H.check_one_name_each(["n1", "n2", "n1-ib"], "--hosts-file")
    H.check_one_name_each(["n1", "n2", "nosuch"])   # unresolved: the resolver's refusal


@pytest.mark.parametrize("argv", [
    ["doctor", "--hosts", "localhost,127.0.0.1", "--backend", "mpi"],
    ["doctor", "--hosts", f"{HERE},localhost", "--backend", "tcp"],
    ["run", "all_reduce", "-r", "4", "--hosts", f"localhost,{HERE}"],
])
def test_cli_refuses_two_names_of_one_host_before_launch(argv, tmp_path, capsys):
    rc = main([*argv, "--out", str(tmp_path / "x.nc")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert err.startswith("ccbench: error: --hosts: ") and "two names of one host" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("flag, size, backend", [("--bw-size", "64G", "mpi"),
                                                 ("--local-size", "16G", "tcp")])
def test_doctor_sizes_past_this_hosts_memory_are_refused(flag, size, backend, tmp_path,
                                                         capsys, monkeypatch):
    monkeypatch.setattr(api, "memory_available", lambda: 8 << 30)
    rc = main(["doctor", "--hosts", f"{HERE},{ELSEWHERE}", flag, size, "--backend", backend,
               "--timeout", "5", "--out", str(tmp_path / "d.nc")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    need = {"--bw-size": "192.2 GiB", "--local-size": "256.2 GiB"}[flag]   # + 2 x 128 MiB ranks
    assert err == (f"ccbench: error: {flag}: {size[:-1]}.0 GiB needs about {need} of memory "
                   "on this host (1 node of the check, 2 ranks each), but only 8.0 GiB is "
                   "available here; give a smaller size\n")
    assert list(tmp_path.iterdir()) == []


def test_fits_counts_every_node_of_this_host_and_skips_device_buffers():
    plan = api.make_plan(2, ranks_per_node=2, bw_bytes="1G", local_bytes="1M", backend="mpi")
    need, flag = api.host_bytes(plan)
    assert (need, flag) == (2 * (128 << 20) + 3 * (1 << 30), "--bw-size")
    api.check_fits_here(plan, 1, available=need)
    api.check_fits_here(plan, 0, available=1)          # no node here: other hosts' memory
    with pytest.raises(ConfigError, match=r"^--bw-size: 1\.0 GiB needs about 6\.5 GiB .* "
                                          r"\(2 nodes of the check, 2 ranks each\)"):
        api.check_fits_here(plan, 2, available=2 * need - 1)
    gpu = dict(plan, backend="nccl")
    assert api.host_bytes(gpu) == (None, None)
    api.check_fits_here(gpu, 2, available=1)


def test_a_pairs_host_without_room_refuses_before_making_its_buffers():
    probe.check_pair_room(1 << 30, available=3 << 30)
    with pytest.raises(ConfigError, match=r"^--bw-size: 4\.0 GiB needs about 12\.0 GiB for a "
                                          r"pair's buffers on host .*, but only 2\.0 GiB"):
        probe.check_pair_room(4 << 30, available=2 << 30)


def test_a_stall_while_a_steps_buffers_are_made_names_that_step():
    row = [0] * WIDTH
    row[SIZE], row[ENTERED], row[LEFT], row[PHASE] = 1 << 30, 0, 0, PHASES.index("timing")
    assert where(row, "doctor pair bandwidth (wave 0)") == \
        "doctor pair bandwidth (wave 0) at size 1073741824 B, before its first call"
    row[ENTERED] = row[LEFT] = 3
    assert where(row, "x").endswith("after call 3 (between calls)")


def test_a_suite_env_value_no_process_can_take_is_refused_when_read(tmp_path, capsys):
    """A 3 MB value: the exec of the launcher failed ("Argument list too
    long") in a traceback, after the combinations before it had run."""
    suite = tmp_path / "big.yaml"
    suite.write_text("name: big\nrun: {minbytes: 8, maxbytes: 8, iters: 2}\nmatrix:\n"
                     "  collectives: [all_reduce]\n  nranks: [2]\n  env:\n    small: {}\n"
                     f"    big: {{FOO: \"{'x' * 3_000_000}\"}}\n")
    rc = main(["suite", str(suite)])
    err = capsys.readouterr().err
    assert rc == 2 and err == (
        f"ccbench: error: {suite}: matrix.env.big: FOO: a value of 3,000,000 bytes cannot be "
        "passed to a process (Linux takes at most 131,072 bytes for one variable, its name "
        "included)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.yaml"]   # nothing ran


def test_the_apis_env_is_checked_for_size_too(tmp_path):
    import ccbench_kit as ccb
    from ccbench_kit import run_fields
    edge = "x" * (run_fields.ENV_ENTRY_MAX - len("A=") - 1)   # the largest one entry can be
    assert run_fields.environment({"A": edge}, "env") == {"A": edge}
    with pytest.raises(ConfigError, match=r"^env: A: a value of 131,070 bytes cannot be passed"):
        ccb.run("all_reduce", 2, [8], env={"A": edge + "x"}, out=str(tmp_path / "r.nc"))
    many = {f"V{i}": edge[:-10] for i in range(run_fields.env_total_max() // len(edge) + 2)}
    with pytest.raises(ConfigError, match=r"^env: the variables take [\d,]+ bytes, more than"):
        run_fields.environment(many, "env")
    assert list(tmp_path.iterdir()) == []


def test_mpi_doctor_refuses_a_pair_message_its_tcp_transport_cannot_send_whole(monkeypatch):
    """--bw-size 4G through --backend mpi: the eager limit set past what
    Open MPI's TCP transport sends whole, and the job's first message never
    arrived (every rank spun in Comm_dup, past --timeout)."""
    from ccbench_kit.backends.mpi import EAGER_MAX, MPIBackend
    keys = ("OMPI_MCA_btl_tcp_eager_limit", "OMPI_MCA_btl_tcp_max_send_size")
    for k in keys:
        monkeypatch.delenv(k, raising=False)
    assert MPIBackend.doctor_env(EAGER_MAX) == dict.fromkeys(keys, str(EAGER_MAX + 65536))
    with pytest.raises(ConfigError) as e:
        MPIBackend.doctor_env(4 << 30)
    assert str(e.value) == (
        "--bw-size: 4.0 GiB through --backend mpi: the doctor sends a pair's message whole "
        "(eagerly), and Open MPI's TCP transport takes at most 2 GiB so (past it the job hangs "
        "at its first message); give at most 2G")
    for k in keys:   # the user's own settings win, and are theirs to answer for
        monkeypatch.setenv(k, "65536")
    assert MPIBackend.doctor_env(4 << 30) == dict.fromkeys(keys, "65536")


def _board(tmp_path, rows):
    import numpy as np
    from ccbench_kit.progress_board import Board
    board = Board(str(tmp_path / "board"), len(rows), create=True)
    board.rows[:] = np.array(rows, dtype=np.int64)
    return board


def test_a_start_up_that_hangs_is_a_stall_once_the_timeout_is_bounded(tmp_path):
    """Every rank alive and "starting" (no operation entered): local work
    to a sweep, but for the doctor (its --timeout given) ranks waiting on
    each other; named as the doctor's start-up."""
    from ccbench_kit.launch.watchdog import Monitor, describe_stall
    starting = [[100 + r, 0, 0, 0, 0, 0, 0, PHASES.index("starting")] for r in range(3)]
    unbounded = Monitor(_board(tmp_path, starting), timeout=5)
    bounded = Monitor(_board(tmp_path, starting), timeout=5, bounded_start=True)
    for m in (unbounded, bounded):
        assert m.poll(now=1000.0) is None and m.poll(now=1004.0) is None
    assert unbounded.poll(now=1006.0) is None            # a sweep's local work: no limit
    stall = bounded.poll(now=1006.0)
    assert stall.kind == "stuck" and stall.culprits == [0, 1, 2] and stall.seconds == 6.0
    text = describe_stall(stall, api.step_name(stall.row))
    assert text == ("timeout: every rank (0, 1, 2) is alive but stuck in doctor start-up "
                    "(MPI's first messages, the pair connections, the backend), starting: no "
                    "progress for 6 s (a deadlock, a stuck device or a lost message); the job "
                    "was stopped")
    # a rank past its start-up, in a step's local work, is still left alone
    busy = [[100, 4, 8, 0, 1, 0, 0, PHASES.index("preparing")], *starting[1:]]
    m = Monitor(_board(tmp_path, busy), timeout=5, bounded_start=True)
    assert m.poll(now=0.0) is None and m.poll(now=60.0) is None
