"""The ranks' side of a health check: ``python -m ccbench_kit.health.probe PLAN``.

One MPI job measures everything, so the cost is one job start:

1. local check, node by node: the node's ranks run an 8 B and a large
   all_reduce on their own communicator, and each rank copies memory (the
   node's own peak); the other nodes wait.  One node at a time, because the
   emulated nodes of a testbed share the machine's cores, and a check run
   everywhere at once would measure the machine, not the node.
2. the pair matrix, wave by wave (`plan.schedule`): the first rank of each
   node of a pair ping-pongs 8 B (latency) and exchanges large messages both
   ways at once (bandwidth, each direction at its own link's rate); the
   pairs of a wave run at the same time, on communicators split per pair.

Repeats interleave (every node, every wave, then again), so a burst of
load on the machine hits one repeat, not one node.  Ranks not measuring
wait on a non-blocking barrier with short sleeps, not in a spinning MPI
call: on a shared machine a spinning idle rank steals the cores the
measured ones need.

Rank 0 writes what it has after every step (`results.write_raw`), so a
run that hangs or dies keeps the partial matrix.
"""
import json
import socket
import sys
import time

import numpy as np

from . import results
from ..launch.watchdog import ALG, ENTERED, LEFT, OP, PHASE, PHASES, PLACEMENT, SIZE

# what the board's PLACEMENT column holds during a step (doctor.report names them)
STEPS = ("local latency", "local bandwidth", "pair latency", "pair bandwidth")


def quiet_wait(comm, nap=0.002):
    """A barrier that sleeps while it waits (see the module docstring)."""
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(nap)


class Progress:
    """Where this rank is, in its board row (read by the heartbeat)."""

    def __init__(self, row):
        self.row, self.op = row, 0

    def enter(self, step, size, wave):
        self.op += 1
        r = self.row
        r[SIZE], r[ALG], r[PLACEMENT] = size, wave, STEPS.index(step)
        r[ENTERED] = r[LEFT] = 0
        r[PHASE] = PHASES.index("timing")
        r[OP] = self.op  # last: the launcher reads OP to see a new operation

    def call(self):
        self.row[ENTERED] += 1

    def done(self):
        self.row[LEFT] = self.row[ENTERED]

    def phase(self, name):
        self.row[PHASE] = PHASES.index(name)


def _timed(fn, iters, warmup, progress):
    out = np.empty(iters)
    for i in range(warmup + iters):
        progress.call()
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
        progress.done()
        if i >= warmup:
            out[i - warmup] = t
    return out


def memcpy_bandwidth(nbytes, iters=5):
    """This rank's memory copy rate (GB/s, best of `iters`)."""
    a = np.ones(nbytes // 8)
    b = np.empty_like(a)
    best = min(_one_copy(a, b) for _ in range(iters))
    return nbytes / best / 1e9


def _one_copy(a, b):
    t0 = time.perf_counter()
    np.copyto(b, a)
    return time.perf_counter() - t0


def node_layout(comm, names):
    """(node index of every rank, node names): ranks grouped by host name,
    nodes in the order of `names` (the order asked for), then the others."""
    hosts = comm.allgather(socket.gethostname())
    order = [n for n in names if n in hosts] + [h for h in dict.fromkeys(hosts) if h not in names]
    return [order.index(h) for h in hosts], order


def run(comm, plan, progress, out):
    """Measure `plan` (a dict, see `doctor.api`) on `comm`; rank 0 writes `out`."""
    from mpi4py import MPI

    me = comm.Get_rank()
    node_of, nodes = node_layout(comm, plan["hosts"])
    leaders = [node_of.index(k) for k in range(len(nodes))]
    my_node = node_of[me]
    local = comm.Split(color=my_node, key=me)
    raw = results.Raw(nodes, [r for r in range(comm.Get_size())], node_of, plan)
    waves = [[tuple(p) for p in w] for w in plan["waves"]]
    # one communicator per pair, made once: pairs of a wave are disjoint
    pair_comms = []
    for w, pairs in enumerate(waves):
        mine = next((k for k, (a, b) in enumerate(pairs) if me in (leaders[a], leaders[b])), None)
        pair_comms.append(comm.Split(color=MPI.UNDEFINED if mine is None else mine, key=me))
    peak = memcpy_bandwidth(plan["local_bytes"] * 4)
    peaks = comm.gather(peak, root=0)
    if me == 0:
        raw.peaks = peaks
    for rep in range(plan["repeats"]):
        for k in range(len(nodes)):
            rec = _local_check(comm, local, my_node == k, plan, progress, k)
            _collect(comm, raw, "local", rec, rep, out)
        for w, pairs in enumerate(waves):
            rec = None
            if pair_comms[w] != MPI.COMM_NULL:
                a, b = next((a, b) for a, b in pairs if me in (leaders[a], leaders[b]))
                rec = _pair_check(pair_comms[w], plan, progress, w, (a, b))
            _collect(comm, raw, "pair", rec, rep, out)
    for c in pair_comms:
        if c != MPI.COMM_NULL:
            c.Free()
    local.Free()
    progress.phase("done")
    return raw


def _collect(comm, raw, kind, rec, rep, out):
    """Everyone arrives (sleeping), rank 0 keeps the records and saves."""
    quiet_wait(comm)
    recs = comm.gather(rec, root=0)
    if comm.Get_rank() == 0:
        for r in recs:
            if r is not None:
                raw.add(kind, rep, r)
        raw.write(out)


def _local_check(comm, local, mine, plan, progress, node):
    if not mine:
        return None
    from mpi4py import MPI
    n = local.Get_size()
    small = np.zeros(1)
    s_out = np.empty(1)
    progress.enter("local latency", 8, node)
    lat = _timed(lambda: local.Allreduce(small, s_out, op=MPI.SUM), plan["lat_iters"], 5, progress)
    nb = plan["local_bytes"]
    x, y = np.ones(nb // 8), np.empty(nb // 8)
    progress.enter("local bandwidth", nb, node)
    bw_t = _timed(lambda: local.Allreduce(x, y, op=MPI.SUM), plan["bw_iters"], 1, progress)
    # the slowest rank of the node sets the collective's time
    for t in (lat, bw_t):
        local.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)
    if local.Get_rank() != 0:
        return None
    return {"node": node, "ranks": n, "lat_s": lat.tolist(), "bw_s": bw_t.tolist(),
            "bw_bytes": nb}


def _pair_check(pc, plan, progress, wave, pair):
    me = pc.Get_rank()
    peer = 1 - me
    msg, buf = np.zeros(1), np.empty(1)

    def pingpong():
        if me == 0:
            pc.Send(msg, dest=peer, tag=7)
            pc.Recv(buf, source=peer, tag=7)
        else:
            pc.Recv(buf, source=peer, tag=7)
            pc.Send(msg, dest=peer, tag=7)
    progress.enter("pair latency", 8, wave)
    rtt = _timed(pingpong, plan["lat_iters"], 5, progress)
    nb = plan["bw_bytes"]
    send, recv = np.ones(nb, dtype=np.uint8), np.empty(nb, dtype=np.uint8)

    def exchange():
        pc.Sendrecv(send, dest=peer, sendtag=8, recvbuf=recv, source=peer, recvtag=8)
    progress.enter("pair bandwidth", nb, wave)
    pc.Barrier()
    t = _timed(exchange, plan["bw_iters"], 1, progress)
    from mpi4py import MPI
    pc.Allreduce(MPI.IN_PLACE, t, op=MPI.MAX)  # an exchange ends when both ends are done
    if me != 0:
        return None
    return {"a": pair[0], "b": pair[1], "lat_s": (rtt / 2).tolist(), "bw_s": t.tolist(),
            "bw_bytes": nb}


def main(argv=None):
    """Entry point of each rank."""
    argv = sys.argv[1:] if argv is None else argv
    plan = json.loads(results.decode(argv[0]))
    from ..launch import events
    from ..launch.worker import RankWatch
    watch = RankWatch(argv[1:])
    from mpi4py import MPI
    comm = MPI.COMM_WORLD.Dup()
    reporter = watch.confirm(comm.Get_rank())
    try:
        run(comm, plan, Progress(reporter.row), plan["out"])
        comm.Barrier()
        if comm.Get_rank() == 0:
            events.emit({"event": "done", "out": plan["out"]})
    except Exception as e:  # every rank's error reaches the launcher, then the job ends
        events.emit({"event": "error", "rank": comm.Get_rank(), "kind": type(e).__name__,
                     "message": f"rank {comm.Get_rank()}: {type(e).__name__}: {e}"})
        MPI.COMM_WORLD.Abort(3)
    watch.stop()
    comm.Free()


if __name__ == "__main__":
    main()
