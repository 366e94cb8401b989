"""Where this process stands with MPI, asked without starting MPI.

Low in the layers (docs/architecture.md): the API asks it to decide between
launching ranks and running in-process, and the `mpi` backend asks it before
loading the engine, which would otherwise make a launcher a singleton MPI
process for nothing.
"""
import os
import sys
import time

# Variables a launcher (Open MPI's mpirun, Hydra, PMIx, Slurm's PMI) sets in
# every rank's environment.
_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def inside_mpi_job():
    """True when this process is already a rank of an MPI job."""
    if any(k in os.environ for k in _MPI_ENV):
        return True
    mpi = sys.modules.get("mpi4py.MPI")
    # a singleton MPI (size 1, no launcher) is not a job to run inside
    return bool(mpi and mpi.Is_initialized() and not mpi.Is_finalized()
                and mpi.COMM_WORLD.Get_size() > 1)


#: The thread support a rank asks MPI for: MPI_THREAD_SINGLE, what
#: ``MPI_Init`` gives IMB, OSU and nccl-tests.  Any level above it makes
#: Open MPI take its locks in every call (``ompi_mpi_init`` turns OPAL's
#: thread support on for every level but SINGLE): FUNNELED cost 17-33 % a
#: call to 4 KiB in a plain C loop (bench/thread_level.py), MULTIPLE
#: (mpi4py's default) as much.  The kit's ranks call MPI from their main
#: thread only; their other threads (the lifeline, the doctor's socket
#: senders) never call MPI, as nccl-tests' worker threads run under its
#: ``MPI_Init``.  The environment's MPI4PY_RC_THREAD_LEVEL still decides
#: where it is set.  Dask-MPI workers start MPI themselves, with MULTIPLE,
#: which their pool threads need (`launch.dask`).
RANK_THREAD_LEVEL = "single"


def start_mpi():
    """mpi4py's MPI module, started (once per process) the way a rank of
    the kit starts it: with `RANK_THREAD_LEVEL`.  Call it where a rank
    first needs MPI; later imports of ``mpi4py.MPI`` get the same module."""
    if "mpi4py.MPI" not in sys.modules:
        import mpi4py  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
        mpi4py.rc.thread_level = RANK_THREAD_LEVEL
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI


def wait_quietly(request, nap=2e-4):
    """Wait for an MPI `request`, sleeping `nap` seconds between tests.

    A blocking MPI wait spins on its core.  Where one rank works alone
    (rank 0 writing results or measuring memcpy, a pair measuring while
    the others wait their turn) and ranks share cores, the spinning ones
    take the cores it needs: a crowded job then runs at a fraction of its
    speed and its timed figures measure the scheduler.  Used at the
    untimed meeting points only; a nap adds at most `nap` to them."""
    while not request.Test():
        time.sleep(nap)


def quiet_barrier(comm, nap=2e-4):
    """`comm`'s barrier, waited for with `wait_quietly`."""
    wait_quietly(comm.Ibarrier(), nap)
