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
from . import events


_INLINE = "json64:"


def inline_config(cfg):
    """`cfg` as one command-line word, for ranks that can't read our files."""
    return _INLINE + base64.urlsafe_b64encode(zlib.compress(cfg.to_json().encode())).decode()


def read_config(arg):
    """The RunConfig in `arg`: a file path or an `inline_config` word."""
    if arg.startswith(_INLINE):
        return RunConfig.from_json(zlib.decompress(base64.urlsafe_b64decode(arg[len(_INLINE):])))
    with open(arg) as f:
        return RunConfig.from_json(f.read())


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    from .lifeline import guard_rank
    guard_rank()  # no rank outlives the launcher
    cfg = read_config(argv[0])
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    comm = world.Dup()
    rank = comm.Get_rank()
    try:
        from ..dataset.checkpoint import Checkpoint
        from ..harness import Sweep

        from ..progress_board import Board, RankReporter
        from .faults import FaultPlan

        board_path = next((a.split("=", 1)[1] for a in argv[1:] if a.startswith("--board=")), "")
        board = Board(board_path) if board_path and os.path.exists(board_path) else None
        emit = events.emit if rank == 0 else None
        faults = FaultPlan.from_environment(rank)  # empty outside the tests
        sweep = Sweep(comm, faults.config(cfg), emit=emit, checkpoint=Checkpoint(cfg.output.out),
                      reporter=faults.reporter(RankReporter(board, rank)))
        sweep.run()
        comm.Barrier()
        if rank == 0:
            events.emit({"event": "done", "out": cfg.output.out})
    except CCBenchError as e:
        events.emit({"event": "error", "rank": rank, "message": str(e), "kind": type(e).__name__})
        world.Abort(e.exit_code)
    except Exception as e:  # a bug: keep the traceback for the report
        events.emit({"event": "error", "rank": rank, "kind": type(e).__name__,
                     "message": f"rank {rank}: {type(e).__name__}: {e}",
                     "traceback": traceback.format_exc()})
        world.Abort(1)
    comm.Free()


if __name__ == "__main__":
    main()
