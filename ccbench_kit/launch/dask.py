"""Run a sweep on the workers of a Dask-MPI cluster (``ccbench cluster``).

Each worker is an MPI rank; the scheduler is rank 0 of the same job and
takes no part.  The benchmark's communicator holds the chosen workers only,
made with MPI_Comm_create_group (collective over its members alone) and
cached per worker in a `MPICommunicators` plugin, so later sweeps reuse it.

Each rank's part is an ordinary task pinned to its worker, so it runs in the
worker's thread pool while the worker's event loop keeps answering the
scheduler (heartbeats, `client.run`).  `client.run` itself would run the
sweep in the event loop thread and silence the worker for the whole sweep.
MPI calls from a pool thread need MPI_THREAD_MULTIPLE, which mpi4py asks for
and Open MPI 4.1 provides; `worker_ranks` checks it.

Rank 0's task returns the Dataset; progress goes back as Dask events on a
topic the client subscribes to for the run.
"""
import time

from .._optional import require
from ..errors import ConfigError, RunError
from ..config import RunConfig
from ..dataset.checkpoint import Checkpoint, merge_pending, new_run_id, output_lock
from ..harness import Sweep
from .progress import notebook_progress

require("distributed", "cluster")
from distributed import Lock, wait  # noqa: E402
from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402

PLUGIN_NAME = "ccbench-mpi-communicators"
_TAG = 0xCCB


class MPICommunicators(WorkerPlugin):
    """A worker plugin caching one communicator per set of world ranks."""

    idempotent = True  # registering again keeps the cached communicators
    name = PLUGIN_NAME

    def setup(self, worker):
        self.comms = {}

    def teardown(self, worker):
        # MPI_Comm_free is collective and workers close one by one; MPI_Finalize
        # releases them.
        self.comms.clear()

    def communicator(self, members):
        """The communicator of world ranks `members` (this rank among them)."""
        members = tuple(members)
        if members not in self.comms:
            from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
            world = MPI.COMM_WORLD
            group = world.Get_group().Incl(list(members))
            self.comms[members] = world.Create_group(group, _TAG)
            group.Free()
        return self.comms[members]


def _rank_and_threads():
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI.COMM_WORLD.Get_rank(), MPI.Query_thread() == MPI.THREAD_MULTIPLE


def worker_ranks(client, nranks=None):
    """[(worker address, world rank)] of the first `nranks` workers by rank."""
    found = client.run(_rank_and_threads)
    if not found:
        raise RunError("the cluster has no workers")
    single = [a for a, (_, multiple) in found.items() if not multiple]
    if single:
        raise RunError(f"MPI on worker {single[0]} lacks MPI_THREAD_MULTIPLE, which running "
                       "the benchmark in a worker thread needs; use an MPI built with "
                       "thread support (Open MPI 4.1 is)")
    workers = sorted(((addr, rank) for addr, (rank, _) in found.items()), key=lambda w: w[1])
    if nranks is not None:
        if not isinstance(nranks, int) or nranks < 1:
            raise ConfigError(f"need at least 1 rank, got {nranks}", "-r/--nworkers")
        if nranks > len(workers):
            raise ConfigError(f"{nranks} ranks asked for but the cluster has {len(workers)} "
                              "workers", "-r/--nworkers")
        workers = workers[:nranks]
    return workers


def _sweep_task(cfg_json, members, topic, run_id):
    """One rank's part of a sweep, run in a worker thread; `run_id` names
    the sidecars rank 0 keeps beside the results file (a worker has no
    CCB_RUN_ID of the run, as an mpirun rank has)."""
    from distributed import get_worker  # lazy: optional dependency (cluster extra)


    worker = get_worker()
    base = worker.plugins[PLUGIN_NAME].communicator(members)
    cfg = RunConfig.from_json(cfg_json)
    comm = base.Dup()  # a fresh context per sweep: nothing from an earlier one can match
    try:
        lead = comm.Get_rank() == 0
        emit = (lambda ev: worker.log_event(topic, ev)) if lead else None
        ds = Sweep(comm, cfg, emit=emit,
                   checkpoint=Checkpoint(cfg.output.out, run_id) if lead and cfg.output.out
                   else None).run()
    finally:
        comm.Free()
    if ds is not None:
        ds.attrs["launcher"] = "dask-mpi"
    return ds


class ClusterRun:
    """A sweep submitted to the cluster: `futures` (one per rank), `result()`."""

    def __init__(self, client, workers, cfg, progress=None):
        self.client, self.workers, self.cfg = client, workers, cfg
        self.run_id = new_run_id()
        token = self.run_id[:12]
        self.topic = f"ccbench-progress-{token}"
        client.register_plugin(MPICommunicators(), name=PLUGIN_NAME)
        if progress is not None:
            client.subscribe_topic(self.topic, lambda event: progress(event[1]))
        self._subscribed = progress is not None
        members = [rank for _, rank in workers]
        self.futures = [
            client.submit(_sweep_task, cfg.to_json(), members, self.topic, self.run_id,
                          workers=[addr],
                          allow_other_workers=False, pure=False, retries=0,
                          key=f"ccbench-{cfg.collective}-{token}-rank{i}")
            for i, (addr, _) in enumerate(workers)]

    def done(self):
        return all(f.done() for f in self.futures)

    def result(self, timeout=None, grace=10.0):
        """The Dataset (rank 0's); RunError naming the rank that failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending = list(self.futures)
        while pending and not any(f.status == "error" for f in self.futures):
            left = None if deadline is None else deadline - time.monotonic()
            try:
                if left is not None and left <= 0:
                    raise TimeoutError
                pending = list(wait(pending, timeout=left, return_when="FIRST_COMPLETED").not_done)
            except TimeoutError:
                self._unsubscribe()
                self._keep_partial()
                raise RunError(f"the sweep did not finish within {timeout:.0f} s; its ranks "
                               "may still be inside a collective: restart the cluster "
                               "(ccbench cluster stop, then start)") from None
        failed = [(i, f) for i, f in enumerate(self.futures) if f.status == "error"]
        if failed:
            # the others have either failed the same way or are stuck waiting
            try:
                wait(self.futures, timeout=grace)
            except TimeoutError:
                pass
            self._unsubscribe()
            self._keep_partial()
            i, f = failed[0]
            err = f.exception()
            stuck = [k for k, g in enumerate(self.futures) if not g.done()]
            msg = f"rank {i} (worker {self.workers[i][0]}) failed: {type(err).__name__}: {err}"
            if stuck:
                msg += (f"; ranks {stuck} are still inside a collective: restart the cluster "
                        "(ccbench cluster stop, then start)")
            if isinstance(err, ConfigError) and not stuck:
                raise err
            raise RunError(msg) from err
        self._unsubscribe()
        return self.futures[0].result()

    def _keep_partial(self):
        """Fold the sizes rank 0 kept beside the results file into it: this
        run's only (another run's sidecars there are never folded in)."""
        if self.cfg.output.out:
            try:
                merge_pending(self.cfg.output.out, run_id=self.run_id)
            except Exception:
                pass  # the file as rank 0 last wrote it stays

    def _unsubscribe(self):
        if self._subscribed:
            self.client.unsubscribe_topic(self.topic)
            self._subscribed = False


def run_on_workers(client, workers, cfg, progress=None, timeout=None):
    """Run `cfg` on `workers` (from `worker_ranks`); the Dataset.

    `progress` is called with each progress event; by default a progress
    bar shows in a notebook (`progress.notebook_progress`), and False shows
    none.  One sweep at a time per cluster (a distributed Lock): two sweeps
    sharing workers could enter their collectives in different orders and
    deadlock.
    """
    if progress is None:
        progress = notebook_progress(f"{cfg.collective} on {len(workers)} workers")
    # one run writes a file at a time, as on the mpirun path
    with output_lock(cfg.output.out), \
            Lock("ccbench-sweep", scheduler_rpc=client.scheduler, loop=client.loop):
        return ClusterRun(client, workers, cfg, progress or None).result(timeout)
