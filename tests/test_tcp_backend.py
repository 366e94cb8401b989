"""The tcp backend (`backends/tcp.py`): sendrecv and all_reduce over plain
sockets, checked by the harness against the collectives' own golden
results on 3 ranks (a ring of uneven chunks), sizes that do not divide
evenly, both placements, the small path (sent before receiving) and the
large one (sent from a thread); what it refuses; and that a connection
without the ring's secret never takes a neighbour's place."""
import json
import socket
import textwrap

import pytest

from conftest import OVER_TCP, mpirun_python, run_cli
from ccbench_kit.backends import backend_class, tcp
from ccbench_kit.errors import RunError

CODE = textwrap.dedent("""
    import json
    from mpi4py import MPI
    import ccbench_kit
    rank = MPI.COMM_WORLD.Get_rank()
    out = []
    for coll, dtype, op in (("all_reduce", "fp32", "sum"), ("all_reduce", "int32", "max"),
                            ("all_reduce", "fp16", "min"), ("all_reduce", "uint8", "prod"),
                            ("all_reduce", "fp64", "sum"), ("sendrecv", "int8", "sum")):
        ds = ccbench_kit.run(coll, sizes=[8, 1000, 4 * 3333 + 4, 300_008], backend="tcp",
                             check="random", seed=5, dtype=dtype, op=op, placement="both",
                             warmup=1, iters=3)
        if rank == 0:
            out.append({"part": [coll, dtype, op], "wrong": ds["wrong"].values.tolist(),
                        "algorithms": ds["algorithm"].values.tolist(),
                        "sizes": ds["size"].values.tolist(),
                        "latency_ok": bool((ds["latency"] > 0).all()),
                        "devices": sorted(set(ds["device"].values.tolist())),
                        "library": ds.attrs["library"]})
    if rank == 0:
        print("@@" + json.dumps(out))
""")


def test_every_part_is_right_on_three_ranks_both_placements():
    proc = mpirun_python(3, CODE, timeout=300, env=OVER_TCP)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    parts = json.loads(line[2:])
    assert [p["part"] for p in parts] == [
        ["all_reduce", "fp32", "sum"], ["all_reduce", "int32", "max"],
        ["all_reduce", "fp16", "min"], ["all_reduce", "uint8", "prod"],
        ["all_reduce", "fp64", "sum"], ["sendrecv", "int8", "sum"]]
    for p in parts:
        # every size of both placements checked (not -1) and right (0)
        assert p["wrong"] == [[[0, 0, 0, 0], [0, 0, 0, 0]]], p
        assert p["algorithms"] == ["ring"] and p["devices"] == ["cpu"] and p["latency_ok"]
        assert p["library"].startswith("TCP sockets (Linux kernel ")
    # whole elements: 1000 B of fp16 is 500, of fp64 125 (-> 1000)
    assert parts[0]["sizes"] == [8, 1000, 13336, 300008]


TWO = textwrap.dedent("""
    import json
    from mpi4py import MPI
    import ccbench_kit
    from ccbench_kit.backends import get_backend
    comm = MPI.COMM_WORLD
    be = get_backend("tcp", comm)
    one = be.right is be.left
    be.close()
    runs = [ccbench_kit.run(c, sizes=[8, 4096, 4100, 65_540], backend="tcp", check="random",
                            seed=3, placement="both", warmup=1, iters=2)
            for c in ("sendrecv", "all_reduce")]
    if comm.Get_rank() == 0:   # (rank 0's run returns the results)
        wrong = [ds["wrong"].values.tolist() for ds in runs]
        print("@@" + json.dumps({"one": one, "wrong": wrong}))
""")


def test_two_ranks_share_one_connection_and_are_right():
    proc = mpirun_python(2, TWO, timeout=300, env=OVER_TCP)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("@@")), None)
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(line[2:])
    assert res["one"] is True
    # both sides of INLINE_BYTES (4096: in turn; 4100: both ways at once)
    assert res["wrong"] == [[[[0, 0, 0, 0], [0, 0, 0, 0]]]] * 2


class Recorder:
    """A socket that notes the order of its sends and receives."""

    def __init__(self, sock, log):
        self.sock, self.log = sock, log

    def sendall(self, data):
        self.log.append("send")
        self.sock.sendall(data)

    def recv_into(self, view):
        self.log.append("recv")
        return self.sock.recv_into(view)


@pytest.mark.parametrize("rank,order", [(0, ["send", "recv"]), (1, ["recv", "send"]),
                                        (2, ["send", "recv"]), (5, ["recv", "send"])])
def test_small_transfers_go_in_turn_even_ranks_first(rank, order):
    """(a ping-pong between two ranks: what a lost segment stalls until a
    retransmission, as the doctor counts; `backends.tcp`)"""
    import numpy as np
    mine, theirs = socket.socketpair()
    theirs.sendall(b"p" * 8)   # the peer's bytes wait in the buffer: neither order blocks
    log, got = [], np.zeros(8, np.uint8)
    tcp.shift(Recorder(mine, log), Recorder(mine, log), np.frombuffer(b"m" * 8, np.uint8),
              got, rank)
    assert log == order and got.tobytes() == b"p" * 8 and theirs.recv(8) == b"m" * 8
    mine.close(), theirs.close()


def test_the_class_side_says_what_it_runs():
    cls = backend_class("tcp")
    assert cls.algorithms_for("all_reduce") == cls.algorithms_for("sendrecv") == ["ring"]
    assert cls.algorithms_for("all_gather") == []
    assert cls.host_buffers and cls.ring_algorithm == "ring" and cls.node_backend == "mpi"
    assert "bf16" not in cls.data_types() and {"fp32", "fp16", "int8", "fp64"} <= \
        set(cls.data_types())
    assert cls.reduction_ops() == ("sum", "prod", "min", "max")


@pytest.mark.parametrize("args,code,message", [
    (["run", "all_gather"], 2,
     "ccbench: error: --backend: all_gather does not run on backend tcp; choose another backend"),
    (["run", "all_reduce", "-d", "bf16"], 2,   # before launch (`Backend.dtype_refusal`)
     "ccbench: error: -d/--datatype: the tcp backend has no bf16; it runs uint8, int8, uint16, "
     "int16, fp16, uint32, int32, fp32, int64, uint64, fp64"),
    (["run", "all_reduce", "-o", "avg"], 3,
     "ccbench: error: -o/--op: the tcp backend reduces with sum, prod, min, max. No size had "
     "completed, so no results were saved"),
])
def test_what_it_refuses_is_one_line(tmp_path, args, code, message):
    proc = run_cli(*args, "--backend", "tcp", "-r", "2", "--out", tmp_path / "r.nc",
                   timeout=120, cwd=tmp_path)
    assert (proc.returncode, proc.stderr.strip().splitlines()[-1:]) == (code, [message])
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r.nc").exists()


def test_a_connection_without_the_secret_is_closed_and_the_ring_waits_for_its_own():
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    secret = b"s" * tcp.SECRET_BYTES
    # another process that found the port connects first, with wrong bytes;
    # then the neighbour with the secret (both wait in the backlog, in order)
    stranger = socket.create_connection(("127.0.0.1", port))
    stranger.sendall(b"x" * tcp.SECRET_BYTES)
    neighbour = socket.create_connection(("127.0.0.1", port))
    neighbour.sendall(secret + b"data")
    conn = tcp._accept_with(srv, secret, timeout=10)
    got = bytearray(4)
    tcp._recv_exact(conn, memoryview(got))
    assert bytes(got) == b"data"
    stranger.settimeout(10)
    assert stranger.recv(1) == b""  # the ring closed it
    for s in (conn, stranger, neighbour):
        s.close()
    # nobody with the secret: one line after the timeout, not a hang
    with pytest.raises(RunError, match=r"^no ring neighbour connected within 0.2 s$"):
        tcp._accept_with(srv, secret, timeout=0.2)
    srv.close()
