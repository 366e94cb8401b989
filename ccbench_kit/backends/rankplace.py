"""Where a rank sits, for the backends that bind one device per rank: its
place among the ranks of its host, and MPI's clock."""


def local_rank(comm):
    """(rank, size) among the ranks on this host: an MPI shared-memory split,
    so it holds under mpirun, srun and Dask-MPI alike."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    shm = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    try:
        return shm.Get_rank(), shm.Get_size()
    finally:
        shm.Free()


def wtime_us():
    """MPI_Wtime in µs: the clock the harness puts every start on."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    return MPI.Wtime() * 1e6
