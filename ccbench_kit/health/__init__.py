"""A cluster health check: which node, which link, which rank.

``ccbench_kit.doctor(hosts=[...])`` (CLI: ``ccbench doctor``) measures every
node's own collective and every pair of nodes in O(N) rounds, and names the
node or node link that stands out, with how much and how sure
(`verdict`); a job that hangs names the rank and host the others wait for.

Modules: `plan` (rounds of disjoint pairs), `bisect` (the descent of a
slow all_reduce, for many nodes), `probe` (the ranks' side), `cluster` (on
a Dask-MPI cluster's workers), `results` (records and Datasets), `verdict`
(statistics), `api`, `baseline` (a saved healthy run, and a run scored
against it), `gpu` (``ccbench doctor --local``: this node's GPUs).
"""
__all__ = ["doctor", "Diagnosis", "HEALTHY", "OUTLIER", "BAD_INPUT", "RUN_FAILED"]


def __getattr__(name):
    # PEP 562: the ranks import `probe` from this package and need neither
    # the API nor the report (xarray, matplotlib: ccbench_kit/__init__.py)
    if name in __all__:
        from . import api  # lazy: on first use (above)
        return getattr(api, name)
    if name == "report":
        # not `from . import report`: that asks this very __getattr__ first
        import importlib  # lazy: as api
        return importlib.import_module(f"{__name__}.report")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
