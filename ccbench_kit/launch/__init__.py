"""Starting ranks: mpirun on this machine (or hosts), in-process, Dask-MPI."""
