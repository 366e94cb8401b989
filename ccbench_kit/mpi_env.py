"""Where this process stands with MPI, asked without starting MPI.

Low in the layers (docs/architecture.md): the API asks it to decide between
launching ranks and running in-process, and the `mpi` backend asks it before
loading the engine, which would otherwise make a launcher a singleton MPI
process for nothing.
"""
import os
import sys

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
