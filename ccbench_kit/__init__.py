"""ccbench_kit: benchmark and analyse collective communication.

Every rank's latency of every iteration, across sizes and algorithms, as an
xarray Dataset (docs/data-contract.md); see ``ds.ccb`` for analysis.

>>> import ccbench_kit as ccb
>>> ds = ccb.run("all_reduce", nranks=4, sizes="8:64M:2", algorithms=["ring", "mpi"])
>>> ds.ccb.busbw()
"""
__version__ = "0.1.0"

from . import dataset  # noqa: E402,F401  (registers the ds.ccb accessor)
from .api import load, run, save  # noqa: E402
from .errors import CCBenchError, ConfigError, RunError  # noqa: E402
from .health import doctor  # noqa: E402
from . import history  # noqa: E402,F401  (ccb.history.add / open)


__all__ = ["CCBenchError", "ConfigError", "RunError", "doctor", "history", "load", "run", "save",
           "__version__"]
