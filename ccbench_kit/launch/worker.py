"""The one rank entry of every launch: ``python -m ccbench_kit.launch.worker JOB``.

`JOB` is a `job.Job` (a word, or a file's path): a sweep of one or more
parts, or a doctor's check.  Each rank is guarded (it dies with the
launcher: `lifeline`), watched (board row and heartbeat, started before
MPI_Init: `RankWatch`), starts MPI once, and runs the job's task.  An error
on any rank is reported as an event and aborts the job, so the other ranks
are not left waiting inside a collective: one error path for every task.
"""
import os
import sys
import traceback

from ..blas_threads import one_blas_thread
one_blas_thread()  # before the imports below load numpy (blas_threads says why)
from .._optional import DASK, without  # noqa: E402  (after the line above)
from ..errors import CCBenchError
from ..mpi_env import quiet_barrier, start_mpi
from . import events
from .heartbeat import Heartbeat, launcher_rank, shared_row
from .job import Job
from .lifeline import guard_rank
from ..progress_board import Board, RankReporter, WIDTH


class RankWatch:
    """This rank's board row and heartbeat, started before MPI_Init.

    The heartbeat starts first, under the rank the launcher put in the
    environment, so that a rank the others wait for inside MPI_Init is told
    apart from them too (heartbeat.py says why); `confirm` checks that rank
    once MPI knows it."""

    def __init__(self, argv):
        path = next((a.split("=", 1)[1] for a in argv if a.startswith("--board=")), "")
        self.board = Board(path) if path and os.path.exists(path) else None
        self.shared = shared_row(WIDTH)
        self.rank, self.reporter, self.beat = None, None, None
        early = launcher_rank()
        if early is not None:
            self._use(early)
            # forked before MPI_Init: the child holds no MPI state
            self.beat = Heartbeat(self.shared, self.board.path if self.board else "").start()
        self._beat_cls = Heartbeat

    def _use(self, rank):
        self.shared[0] = rank
        self.rank = rank
        self.reporter = RankReporter(self.board, rank, row=self.shared[1:])

    def confirm(self, rank):
        """The rank MPI gave; the row and beat follow it if it differs."""
        if self.rank != rank:
            self._use(rank)
        if self.beat is None:  # no launcher rank: beat from now on
            self.beat = self._beat_cls(self.shared, self.board.path if self.board else "").start()
        return self.reporter

    def stop(self):
        if self.beat is not None:
            self.beat.stop()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    guard_rank()  # no rank outlives the launcher
    without(DASK)  # no task of this entry uses dask: a Dask-MPI sweep runs in the
    # cluster's workers (`launch.dask`), not here
    job = Job.read(argv[0])
    task = job.runner()
    watch = RankWatch(argv[1:])
    MPI = start_mpi()
    world = MPI.COMM_WORLD
    comm = world.Dup()
    rank = comm.Get_rank()
    reporter = watch.confirm(rank)
    try:
        task(comm, job, reporter, argv[1:])
        quiet_barrier(comm)
        if rank == 0:
            events.emit({"event": "done"})
    except CCBenchError as e:
        lost = list(getattr(e, "lost", ()))   # a RunError's: the peers whose death caused it
        events.emit({"event": "error", "rank": rank, "message": str(e), "kind": type(e).__name__,
                     **({"lost": lost} if lost else {})})
        world.Abort(e.exit_code)
    except Exception as e:  # a bug: keep the traceback for the report
        events.emit({"event": "error", "rank": rank, "kind": type(e).__name__,
                     "message": f"rank {rank}: {type(e).__name__}: {e}",
                     "traceback": traceback.format_exc()})
        world.Abort(1)
    watch.stop()
    comm.Free()


if __name__ == "__main__":
    main()
