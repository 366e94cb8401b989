"""ccbench_kit: benchmark and analyse collective communication.

Every rank's latency of every iteration, across sizes and algorithms, as an
xarray Dataset (docs/data-contract.md); see ``ds.ccb`` for analysis.

>>> import ccbench_kit as ccb
>>> ds = ccb.run("all_reduce", nranks=4, sizes="8:64M:2", algorithms=["ring", "mpi"])
>>> ds.ccb.busbw()

The API's names load on first use (PEP 562): the ranks of a run import this
package too, and all but rank 0 need none of xarray, pandas or matplotlib
(0.4-0.6 s of CPU a process, on nodes where ranks share cores).  ``ds.ccb``
is there on every Dataset the kit makes or reads (`run`, `load`,
``xr.open_dataset`` of a results file, through the kit's xarray backend),
and on any Dataset once xarray and this package are both imported.
"""
import sys

from ._version import __version__
from .errors import CCBenchError, ConfigError, RunError

__all__ = ["CCBenchError", "ConfigError", "RunError", "doctor", "history", "load", "run", "run_many", "save",
           "__version__"]

if "xarray" in sys.modules:
    # xarray is here already, so registering ds.ccb costs nothing more
    from .dataset import accessor as _accessor  # noqa: F401


def __getattr__(name):
    if name in ("run", "run_many"):
        from . import api  # lazy: the API's imports on first use (docstring)
        return getattr(api, name)
    if name in ("load", "save"):
        from . import dataset  # lazy: as api (xarray on first use of these two)
        return getattr(dataset, name)
    if name == "doctor":
        from .health import doctor  # lazy: as api
        return doctor
    if name in ("history", "dataset", "health"):
        import importlib  # lazy: as api
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
