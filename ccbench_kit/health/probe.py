"""The ranks' side of a health check: the ``doctor`` task of a job (`rank_task`).

One MPI job measures everything, so the cost is one job start:

1. local check, node by node (the other nodes sleep): the node's ranks run
   an 8 B and a large all_reduce on their own communicator; each rank's
   memory copy rate is the node's own peak.
2. the pair matrix, wave by wave (`plan.schedule`): the first rank of each
   node of a pair measures 8 B (latency) and large messages both ways at
   once (bandwidth, each direction at its own link's rate); the pairs of a
   wave run at the same time.
3. or, instead of the matrix (``plan["bisect"]``), the bisection: rank 0's
   `bisect.Descent` names the groups, whose ring all_reduce run all at the
   same time, step by step.

``plan["per_gpu"]`` (``--per-gpu``): every rank is a node (a GPU of this
host), and each repeat ends with the host's all_reduce over all of them.

``plan["backend"]`` says what carries them: a kit backend ("tcp", the
management network's sockets, `backends.tcp` says why they suit a shared
host; "mpi"; "nccl"; any registered one), driven as ``ccbench run`` drives
it (`collective.Timer`: sendrecv for the pairs, all_reduce for the local
check and the rings; a node's own check through the backend's
`node_backend` where it names one: tcp's is mpi).

Repeats interleave (every node, every wave, then again), so a burst of
load on the machine hits one repeat, not one node.  Ranks not measuring
wait on a non-blocking barrier with short sleeps, not in a spinning MPI
call: on a shared machine a spinning idle rank steals the cores the
measured ones need.

Rank 0 writes what it has after every step (`results.write_raw`), so a
run that hangs or dies keeps the partial matrix.
"""
import contextlib
import functools
import itertools
import socket
import time

import numpy as np

from ..collectives import get as get_collective
from . import results
from .collective import TCP, Timer, job_placement, node_backend, ring_algorithm
from ..progress_board import ALG, ENTERED, LEFT, OP, PHASE, PHASES, PLACEMENT, SIZE
from ..errors import CCBenchError, ConfigError, RunError
from ..mpi_env import quiet_barrier
from ..resources import memory_available
from ..units import approx_size
from .bisect import Descent

# what the board's PLACEMENT column holds during a step (doctor.report names them)
STEPS = ("local latency", "local bandwidth", "pair latency", "pair bandwidth", "local compute",
         "bisect all_reduce", "host all_reduce")

# a pair's buffers on one host: the message sent, the one received, the
# transport's copy (Open MPI's TCP sends it eagerly: the receiver buffers it)
PAIR_COPIES = 3

# the ring probe is an all_reduce: its busbw factor is the registry's, 2 (n - 1) / n
ALL_REDUCE = get_collective("all_reduce")


def quiet_wait(comm, nap=0.002):
    """A barrier that sleeps while it waits (see the module docstring)."""
    quiet_barrier(comm, nap)


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

    @property
    def counters(self):
        """The two counters a backend's timed loop updates (entered, left)."""
        return self.row[ENTERED:LEFT + 1]


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


def node_layout(comm, names, per_rank=False):
    """(node index of every rank, node names): ranks grouped by host name,
    nodes in the order of `names` (the order asked for), then the others.
    `per_rank` (``--per-gpu``): every rank is its own node, `names` in rank
    order (rank k drives GPU k of the host)."""
    if per_rank:
        return list(range(comm.Get_size())), list(names)
    hosts = comm.allgather(socket.gethostname())
    order = [n for n in names if n in hosts] + [h for h in dict.fromkeys(hosts) if h not in names]
    return [order.index(h) for h in hosts], order


def run(comm, plan, progress, out):
    """Measure `plan` (a dict, see `health.api`) on `comm`.

    `out`: where rank 0 keeps the records after every step, a path or a
    callable taking the `results.Raw` (a Dask worker also reports progress).
    Returns the records on rank 0."""
    me = comm.Get_rank()
    if not callable(out):
        out = functools.partial(results.Raw.write, path=out)
    node_of, nodes = node_layout(comm, plan["hosts"], plan.get("per_gpu", False))
    leaders = [node_of.index(k) for k in range(len(nodes))]
    local = comm.Split(color=node_of[me], key=me)
    raw = results.Raw(nodes, list(range(comm.Get_size())), node_of, plan)
    waves = [[tuple(p) for p in w] for w in plan["waves"]]
    backend = plan.get("backend", TCP)
    # the GPU each rank drives, decided once on the job's ranks: every
    # backend this rank makes (its node's, each pair's, the host's, a
    # bisection group's) uses it
    placement = job_placement(comm)
    links = pair_links(comm, waves, leaders, backend, placement)
    local_timer = Timer(node_backend(backend), local, comm, placement)
    # --per-gpu: every GPU is a node, so the host's own all_reduce over all
    # its GPUs (NVLink) is a step of its own
    host_timer = Timer(backend, comm, comm, placement) if plan.get("per_gpu") else None
    peaks = comm.gather(memcpy_bandwidth(plan["local_bytes"] * 4), root=0)
    if me == 0:
        raw.peaks = peaks
        raw.started = time.time()  # MPI up, connections made: the measuring starts
    for rep in range(plan["repeats"]):
        # node by node, the others asleep in quiet_wait: nodes measured at
        # once compete for whatever cores they share (the testbed's emulated
        # nodes share the machine's; a real node may run other jobs), which
        # slowed the healthy nodes too and diluted a starved node's ratio
        # to them.  It costs N short checks; the order turns each repeat so
        # that no node always comes first, after the pair tests' traffic
        rec = None
        for j in range(len(nodes)):
            k = (rep + j) % len(nodes)
            quiet_wait(comm)
            if node_of[me] == k:
                rec = _local_check(local, plan, progress, k, local_timer)
        _collect(comm, raw, "local", rec, rep, out)
        for w, link in enumerate(links):
            rec = _pair_check(link, plan, progress, w) if link else None
            _collect(comm, raw, "pair", rec, rep, out)
        if host_timer:
            _collect(comm, raw, "host", _host_check(comm, host_timer, plan, progress), rep, out)
    close_links(links)
    for timer in (local_timer, host_timer):
        if timer:
            timer.close()
    local.Free()
    if plan.get("bisect"):
        _bisection(comm, raw, plan, progress, leaders, out, placement)
    progress.phase("done")
    return raw


def pair_links(comm, waves, leaders, backend=TCP, placement=None):
    """One connection per pair of each wave (pairs of a wave are disjoint),
    made once: [None or (pair communicator, `collective.Timer`, pair, the
    other end's rank in `comm`)] a wave: the kit backend named `backend` on
    the pair's communicator, on the device of the rank's `placement`
    (`collective.job_placement`)."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    me, links = comm.Get_rank(), []
    for pairs in waves:
        mine = next((k for k, (a, b) in enumerate(pairs) if me in (leaders[a], leaders[b])), None)
        pc = comm.Split(color=MPI.UNDEFINED if mine is None else mine, key=me)
        if pc == MPI.COMM_NULL:
            links.append(None)
            continue
        # the pair's own communicator is its backend's world (only its two
        # ranks make it); the device is the job's placement, not the rank's
        # index in the pair
        end = Timer(backend, pc, pc, placement)
        a, b = (leaders[n] for n in pairs[mine])
        links.append((pc, end, tuple(pairs[mine]), b if me == a else a))
    return links


def close_links(links):
    for link in links:
        if link:
            link[1].close()
            link[0].Free()


def _bisection(comm, raw, plan, progress, leaders, out, placement=None):
    """Rank 0's `bisect.Descent` says what to measure; every rank takes part
    in each step (`_ring_step`, `_pairs_step`) until it is done."""
    me, spec, descent = comm.Get_rank(), plan["bisect"], None
    if me == 0:
        leaf = spec.get("leaf")
        descent = Descent(spec["order"], spec["threshold"],
                          (lambda k: leaf[k]) if leaf else None, raw.nodes)
    for index in itertools.count():
        step = comm.bcast(descent.next() if me == 0 else None, root=0)
        if step is None:
            break
        measure = _pairs_step if step["kind"] == "pairs" else _ring_step
        rates = measure(comm, step, plan, progress, leaders, index, placement)
        if me == 0:
            descent.record(rates)["at"] = time.time()
            raw.bisect, raw.bisect_note = descent.path, descent.note
            out(raw)


def _pairs_step(comm, step, plan, progress, leaders, index, placement=None):
    """Rates (B/s each way, one list a repeat, one value a pair) of the
    suspects' pairs with good nodes, wave by wave."""
    links = pair_links(comm, step["waves"], leaders, plan.get("backend", TCP), placement)
    where = {tuple(p): k for k, p in enumerate(step["groups"])}
    per_rep = []
    for _ in range(plan["repeats"]):
        row = [float("nan")] * len(where)
        for w, link in enumerate(links):
            quiet_wait(comm)
            recs = comm.gather(_pair_check(link, plan, progress, index) if link else None, root=0)
            for r in recs or ():
                if r is not None:
                    row[where[(r["a"], r["b"])]] = r["bw_bytes"] / float(np.median(r["bw_s"]))
        per_rep.append(row)
    close_links(links)
    return per_rep


def _ring_step(comm, step, plan, progress, leaders, index, placement=None):
    """Busbw (B/s, one list a repeat, one value a group) of every group's
    ring all_reduce, all groups at the same time."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    me, groups, nb = comm.Get_rank(), step["groups"], plan["bw_bytes"]
    node = leaders.index(me) if me in leaders else None
    mine = next((k for k, g in enumerate(groups) if node in g), None)
    # ring order = the group's order (topology order: fewest uplinks crossed)
    gc = comm.Split(color=MPI.UNDEFINED if mine is None else mine,
                    key=0 if mine is None else groups[mine].index(node))
    backend = plan.get("backend", TCP)
    timer = left = None
    if gc != MPI.COMM_NULL:
        timer = Timer(backend, gc, gc, placement)
        at = groups[mine].index(node)   # the rank the ring receives from
        left = leaders[groups[mine][(at - 1) % len(groups[mine])]]
    per_rep = []
    for _ in range(plan["repeats"]):
        quiet_wait(comm)
        rec = None
        if timer:
            n = gc.Get_size()
            progress.enter("bisect all_reduce", nb, index)
            with _connection_to(left):
                t = timer.times("all_reduce", nb, plan["bw_iters"], 1, progress.counters,
                                algorithm=ring_algorithm(backend), check=True)
            if gc.Get_rank() == 0:
                rec = (mine, ALL_REDUCE.bus_factor(n) * nb / float(np.median(t)))
        recs = comm.gather(rec, root=0)
        row = [float("nan")] * len(groups)
        for r in recs or ():
            if r is not None:
                row[r[0]] = r[1]
        per_rep.append(row)
    if timer:
        timer.close()
        gc.Free()
    return per_rep


@contextlib.contextmanager
def _connection_to(peer):
    """An OSError on the connection to `peer` (a rank of the job) names it
    (``lost``): the rank at the other end died or lost its host, and the
    launcher names that death as the cause (`RunError.lost`), not the first
    death it heard of (the ranks Slurm then killed may be reported first)."""
    try:
        yield
    except OSError as e:
        e.lost = (peer,)
        raise


def _collect(comm, raw, kind, rec, rep, out):
    """Everyone arrives (sleeping), rank 0 keeps the records and saves."""
    quiet_wait(comm)
    recs = comm.gather(rec, root=0)
    if comm.Get_rank() == 0:
        for r in recs:
            if r is not None:
                raw.add(kind, rep, {**r, "at": time.time()})
        out(raw)


def _local_check(local, plan, progress, node, timer):
    """The node's all_reduce among its own ranks, through the backend's
    `timer`: 8 B and `local_bytes`."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    nb = plan["local_bytes"]
    x, y = np.ones(nb // 8), np.empty(nb // 8)
    progress.enter("local latency", 8, node)
    lat = timer.times("all_reduce", 8, plan["lat_iters"], 5, progress.counters)
    progress.enter("local bandwidth", nb, node)
    bw_t = timer.times("all_reduce", nb, plan["bw_iters"], 1, progress.counters, check=True)
    progress.enter("local compute", nb, node)
    cpu = _timed(lambda: _compute(x, y), plan["lat_iters"] // 2, 1, progress)
    # the slowest rank of the node sets the time (the timer's are already)
    local.Allreduce(MPI.IN_PLACE, cpu, op=MPI.MAX)
    if local.Get_rank() != 0:
        return None
    return {"node": node, "ranks": local.Get_size(), "lat_s": lat.tolist(),
            "bw_s": bw_t.tolist(), "cpu_s": cpu.tolist(), "bw_bytes": nb,
            "dtype": timer.dtype.name}


def _host_check(comm, timer, plan, progress):
    """The all_reduce of `bw_bytes` over every rank of the job (``--per-gpu``:
    all the host's GPUs), through the backend as ``ccbench run``."""
    quiet_wait(comm)
    nb = plan["bw_bytes"]
    progress.enter("host all_reduce", nb, 0)
    t = timer.times("all_reduce", nb, plan["bw_iters"], 1, progress.counters, check=True)
    if comm.Get_rank() != 0:
        return None
    return {"gpus": comm.Get_size(), "bw_bytes": nb, "bw_s": t.tolist()}


def _compute(x, y, rounds=4):
    """A fixed piece of work on the node's cores (copies and sums of the
    local buffer): its time is the CPU the node's ranks get."""
    for _ in range(rounds):
        np.add(x, 1.0, out=y)
        np.copyto(x, y)


def _pair_check(link, plan, progress, wave):
    """The pair's sendrecv through its backend: 8 B (latency: a call is
    one one-way trip where both ends send at once, a round trip through
    tcp, whose 8 B go in turn) and `bw_bytes` both ways at once (each
    direction's rate, the busbw of ``ccbench run sendrecv``)."""
    pc, timer, pair, peer = link
    if timer.backend.host_buffers:
        check_pair_room(plan["bw_bytes"])
    quiet_wait(pc)
    progress.enter("pair latency", 8, wave)
    with _connection_to(peer):
        lat = timer.times("sendrecv", 8, plan["lat_iters"], 5, progress.counters)
    nb = plan["bw_bytes"]
    quiet_wait(pc)
    progress.enter("pair bandwidth", nb, wave)
    with _connection_to(peer):
        t = timer.times("sendrecv", nb, plan["bw_iters"], 1, progress.counters)
    if pc.Get_rank() != 0:
        return None
    return {"a": pair[0], "b": pair[1], "lat_s": lat.tolist(), "bw_s": t.tolist(),
            "bw_bytes": nb}


def check_pair_room(nbytes, available=None):
    """ConfigError naming --bw-size when this host has no room for a pair's
    buffers of `nbytes` (the message sent, the one received, the
    transport's copy): checked on the pair's own host before they are made,
    as other hosts' memory is not known before the launch (a node that ran
    out swapped or was killed, and the check hung past --timeout)."""
    need = PAIR_COPIES * nbytes
    have = memory_available() if available is None else available
    if need > have:
        raise ConfigError(f"{approx_size(nbytes)} needs about {approx_size(need)} for a "
                          f"pair's buffers on host {socket.gethostname()}, but only "
                          f"{approx_size(have)} of memory is available there; give a smaller "
                          "size", "--bw-size")


def rank_task(comm, job, reporter, flags=()):
    """The doctor's task of a `launch.job.Job` (the rank entry,
    `launch.worker`, runs it): measure the job's plan; rank 0 writes the
    records as it goes.  A failure is one line naming the rank, as the
    doctor's notes quote it."""
    plan = job.plan
    try:
        run(comm, plan, Progress(reporter.row), plan["out"])
    except CCBenchError:
        raise
    except Exception as e:  # a node lost, a socket reset: the doctor's finding, not a bug
        err = RunError(f"rank {comm.Get_rank()}: {type(e).__name__}: {e}")
        err.lost = getattr(e, "lost", ())   # `_connection_to`
        raise err from None
