"""Comparing runs: is a difference real?

>>> res = run.ccb.compare(baseline)          # or compare(run, baseline)
>>> print("\\n".join(format_comparison(res)))
>>> plot_comparison(res, min_ratio=0.9)       # a matplotlib Figure
>>> below(res, 0.9)                           # sizes failing an acceptance ratio
"""
from .core import CompareError, CompareWarning, below, compare, compare_parts
from .plot import plot_comparison
from .text import format_comparison, to_frame

__all__ = ["CompareError", "CompareWarning", "below", "compare", "compare_parts", "format_comparison",
           "plot_comparison", "to_frame"]
