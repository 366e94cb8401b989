"""One rank of a launched run: ``python -m ccbench_kit.launch.worker CONFIG``.

Rank 0 keeps every size done (`dataset.checkpoint`), so a crash loses none.
An error on any rank is reported as an event and aborts the job, so the
other ranks are not left waiting inside a collective.
"""
import base64
import os
import sys
import traceback
import zlib

from ..config import RunConfig
from ..errors import CCBenchError
from ..mpi_env import start_mpi
from . import events
from ..formats.nccl_tests.live_table import LiveTable
from ..harness import Sweep
from ..progress_board import Board, RankReporter, WIDTH
from .faults import FaultPlan
from .heartbeat import Heartbeat, launcher_rank, shared_row
from .lifeline import guard_rank


_INLINE = "json64:"
#: the argument that makes rank 0 print the table as sizes complete
TABLE_FLAG = "--table"


def inline_config(cfg):
    """`cfg` as one command-line word, for ranks that can't read our files."""
    return _INLINE + base64.urlsafe_b64encode(zlib.compress(cfg.to_json().encode())).decode()


def rank0_checkpoint(cfg):
    """Rank 0's keeper of every size done.  Only rank 0 writes the results,
    so only it imports xarray (0.4 s of CPU a process: on a crowded node
    the other ranks would spend it while rank 0 waits for them)."""
    from ..dataset.checkpoint import Checkpoint  # lazy: xarray on rank 0 only (above)
    return Checkpoint(cfg.output.out)


def read_config(arg):
    """The RunConfig in `arg`: a file path or an `inline_config` word."""
    if arg.startswith(_INLINE):
        return RunConfig.from_json(zlib.decompress(base64.urlsafe_b64decode(arg[len(_INLINE):])))
    with open(arg) as f:
        return RunConfig.from_json(f.read())


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
    cfg = read_config(argv[0])
    watch = RankWatch(argv[1:])
    MPI = start_mpi()

    world = MPI.COMM_WORLD
    comm = world.Dup()
    rank = comm.Get_rank()
    reporter = watch.confirm(rank)
    try:


        emit = events.emit if rank == 0 else None
        # a batch job's log shows the table as it grows (`live_table`)
        table = LiveTable() if rank == 0 and TABLE_FLAG in argv[1:] else None
        faults = FaultPlan.from_environment(rank)  # empty outside the tests
        sweep = Sweep(comm, faults.config(cfg), emit=emit,
                      checkpoint=rank0_checkpoint(cfg) if rank == 0 else None,
                      reporter=faults.reporter(reporter), table=table)
        sweep.backend = faults.backend(sweep.backend)  # the same backend outside the tests
        ds = sweep.run()
        comm.Barrier()
        if rank == 0:
            if table is not None and ds is not None:
                table.close(ds)
            events.emit({"event": "done", "out": cfg.output.out})
    except CCBenchError as e:
        events.emit({"event": "error", "rank": rank, "message": str(e), "kind": type(e).__name__})
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
