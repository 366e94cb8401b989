"""ccbench_kit: benchmark and analyse collective communication.

Every rank's latency of every iteration, across sizes and algorithms, as an
xarray Dataset (docs/data-contract.md); see ``ds.ccb`` for analysis.

>>> import ccbench_kit as ccb
>>> ds = ccb.run("all_reduce", nranks=4, sizes="8:64M:2", algorithms=["ring", "mpi"])
>>> ds.ccb.busbw()
"""
from . import dataset  # noqa: F401  (registers the ds.ccb accessor)
from . import history  # noqa: F401  (ccb.history.add / open)
from ._version import __version__
from .api import load, run, run_many, save
from .errors import CCBenchError, ConfigError, RunError
from .health import doctor


__all__ = ["CCBenchError", "ConfigError", "RunError", "doctor", "history", "load", "run", "run_many", "save",
           "__version__"]
