"""ipywidgets for JupyterLab: the Explorer and the Run panel.

>>> from ccbench_kit.widgets import Explorer, RunPanel
>>> ex = Explorer("results/demo.nc"); ex
>>> RunPanel(explorer=ex)
"""
from .explorer import Explorer
from .history_explorer import HistoryExplorer
from .run_panel import RunPanel

__all__ = ["Explorer", "HistoryExplorer", "RunPanel"]
