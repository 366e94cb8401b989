"""The ranks' side of a sweep job: every part of the `job.Job`, in order, on
one `session.Session`.

Rank 0 says which part starts (event ``part``, so the launcher's watchdog
names the right collective) and which is done (``part-done``, its results
file complete; before it ``table``, the part's table, when the job asks:
`job.Job.table`), and keeps every size of the part in its file as it goes
(`dataset.checkpoint`): a job that fails keeps the parts before and the
sizes done of the part it was in.
"""
import itertools

from . import events
from .faults import FaultPlan
from ..formats.nccl_tests.live_table import LiveTable
from ..formats.nccl_tests.write_table import run_lines
from ..harness import Sweep
from ..mpi_env import quiet_barrier
from ..session import Session
from .job import round_path

#: the argument that makes rank 0 print the table as sizes complete
TABLE_FLAG = "--table"


def rank0_checkpoint(cfg):
    """Rank 0's keeper of every size done.  Only rank 0 writes the results,
    so only it imports xarray (0.4 s of CPU a process: on a crowded node
    the other ranks would spend it while rank 0 waits for them)."""
    from ..dataset.checkpoint import Checkpoint  # lazy: xarray on rank 0 only (above)
    return Checkpoint(cfg.output.out)


def run(comm, job, reporter, flags=()):
    """Run every part of `job` on `comm`; `flags`: the rank's arguments
    after the job (`TABLE_FLAG`).

    With ``job.rounds`` (``--until-stable``) the parts run in rounds: rank
    0 decides after each which sizes run again (`stable.Rounds`) and every
    round of a part goes to its own file (`stable.round_path`)."""
    rank = comm.Get_rank()
    session = Session(comm)
    rounds = None
    if job.rounds and rank == 0:
        from .stable import Rounds  # lazy: it reads Datasets (xarray), rank 0's only
        rounds = Rounds(**job.rounds)
    sizes = None  # every size of the configuration
    for k in itertools.count():
        for index, part in enumerate(job.parts):
            cfg = part.config
            if job.rounds:
                cfg = cfg.replace(out=round_path(cfg.output.out, k),
                                  **({"sizes": tuple(sizes)} if sizes else {}))
            ds = _run_part(comm, job, index, part.name, cfg, reporter, session, flags)
            if rounds is not None:
                rounds.record(part.name, ds)
        if not job.rounds:
            break
        quiet_barrier(comm)  # rank 0 reads the round's Datasets
        sizes = comm.bcast(rounds.again() if rank == 0 else None, root=0)
        if not sizes:
            break
    # closed after a job that ran to its end only: after an error the rank
    # entry aborts the job, and freeing a communicator whose peer is gone
    # (ncclCommDestroy) could wait for it before the error is reported
    session.close()


def _run_part(comm, job, index, name, cfg, reporter, session, flags):
    """One part's sweep in the session; its Dataset on rank 0."""
    rank = comm.Get_rank()
    faults = FaultPlan.from_environment(rank)  # empty outside the tests
    if rank == 0:
        events.emit({"event": "part", "index": index, "name": name})
    # a batch job's log shows the table as it grows (`live_table`)
    table = LiveTable() if rank == 0 and TABLE_FLAG in flags else None
    sweep = Sweep(comm, faults.config(cfg), emit=_part_events(rank, name, job),
                  checkpoint=rank0_checkpoint(cfg) if rank == 0 else None,
                  reporter=faults.reporter(reporter), table=table, session=session)
    sweep.backend = faults.backend(sweep.backend)  # the same backend outside the tests
    ds = sweep.run()
    quiet_barrier(comm)  # rank 0 may still be writing the part's file
    if rank == 0:
        if table is not None and ds is not None:
            table.close(ds)
        if job.table and ds is not None:
            events.emit({"event": "table", "index": index, "name": name,
                         "lines": run_lines(name, ds, **job.table),
                         "failed": ds.ccb.failed_checks()})
        events.emit({"event": "part-done", "index": index, "name": name,
                     "out": cfg.output.out})
    return ds


def _part_events(rank, name, job):
    """Rank 0's progress events; in a job of several parts they name the
    part (``all_reduce.bf16``), not the collective."""
    if rank != 0:
        return None
    if len(job.parts) == 1:
        return events.emit
    return lambda ev: events.emit({**ev, "collective": name})
