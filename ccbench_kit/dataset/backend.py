"""``xarray.open_dataset(path, engine="ccbench")``: our results files, and
(through the importers) any baseline the kit can read: nccl-tests logs and
``-J`` JSON, nccom-test tables and JSON, the AllgatherP bench table.

>>> xr.open_dataset("all_reduce_perf.log", engine="ccbench")
>>> xr.open_dataset("nccom.json", engine="ccbench", collective="all_gather", nranks=32)
"""
import os

from xarray.backends import BackendEntrypoint

# xarray loads this module whenever it lists its engines, i.e. for any file
# opened: registering ``ds.ccb`` here puts it on a results file opened with
# plain ``xr.open_dataset`` also where ccbench_kit was imported before xarray
# (the package registers it at import only when xarray is already there)
from . import accessor  # noqa: F401


class CCBenchBackendEntrypoint(BackendEntrypoint):
    description = "ccbench_kit results (any schema version) and imported baselines"
    url = "https://github.com/ccbench-kit/ccbench_kit"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "collective",
                               "nranks", "partial")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None,
                     collective=None, nranks=None, partial=False):
        # xarray loads this module with every engine it lists, for any file a
        # user opens; the importers (a layer above this one) load only here
        from .. import importers  # lazy: upward, only when the engine opens a file

        hints = dict(collective=collective, nranks=nranks, partial=partial)
        if hasattr(filename_or_obj, "read"):
            raw = filename_or_obj.read()
            text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
            name = getattr(filename_or_obj, "name", "<stream>")
            parts = importers.unique_names(importers.read_text(text, str(name), **hints))
        else:
            parts = importers.open_any(os.fspath(filename_or_obj), **hints)
        if group is not None:
            if group not in parts:
                raise importers.ImporterError(str(filename_or_obj), None,
                                              "group " + " or ".join(repr(g) for g in parts),
                                              group)
            ds = parts[group]
        else:
            ds = next(iter(parts.values()))
        return ds.drop_vars(drop_variables or [], errors="ignore")

    def guess_can_open(self, filename_or_obj):
        # Only when asked for by name: plain .nc files belong to netCDF engines,
        # and text logs to whoever the user names.
        return False
