"""A history of every run: filed results, an index, change points
(docs/history.md).

>>> import ccbench_kit as ccb
>>> ccb.history.add("nightly.nc", "/shared/history")
>>> ccb.history.open("/shared/history").regressions()
"""
from .api import History, Regression, add, open, parse_since, rebuild  # noqa: A004

__all__ = ["History", "Regression", "add", "open", "parse_since", "rebuild"]
