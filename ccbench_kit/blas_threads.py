"""One BLAS thread in each of the kit's own processes.

numpy's wheels link OpenBLAS, which starts a pool of threads (one per core)
as numpy is imported: about 0.1 s of CPU in every process on the 2-core
machine the suite runs on (`python -c "import numpy"`: 0.23 s against
0.13 s with one thread).  A rank never gives those threads work (the kit
multiplies no matrices; its checks and statistics are element-wise), and a
run starts a launcher and a rank per core, so a pool per process is start-up
cost and, oversubscribed, threads beside the ranks being timed.

The library reads its variable once, when it loads: `one_blas_thread` runs
first in the two entries that own their process (the ``ccbench`` command,
`cli.console`, and the rank entry, `launch.worker`), before anything
imports numpy.  What they start (mpirun's ranks, a report's kernel) inherits
it.  A value the user set is kept.
"""
import os

#: what OpenBLAS (numpy's wheels) and MKL (some conda builds) read at load
VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread(environ=None):
    """Set each of `VARIABLES` to 1 in `environ` (this process's
    environment) unless it is set already."""
    environ = os.environ if environ is None else environ
    for name in VARIABLES:
        environ.setdefault(name, "1")
