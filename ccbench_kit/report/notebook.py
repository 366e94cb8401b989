"""What the report notebooks' cells call: parameter checks, text, tables, plots.

Kept here, not in the notebooks, so it is tested like the rest of the code
and the notebooks stay thin, readable pages (``from ccbench_kit.report
import notebook as rn``; ``rn.prepare(...)``, ``rn.show_header(ctx)``...).
This module is the notebooks' one name for it; the code lives by section:

- `parameters`: `check_parameters` (first, one clear line for a wrong
  parameter, never deep in a plot) and `prepare` (the `ReportContext`);
- `header`: the title, verdict, contents, the run and the summary table;
- `fits`: the α-β fits, their table and notes;
- `collective`: one collective's sections, and nccl-tests' tables;
- `compare_page`: compare.ipynb's cells;
- `cells`: how a cell displays Markdown, HTML, tables and figures.
"""
from .cells import show_figure
from .collective import show_collective, show_collectives, show_plots, show_tables
from .compare_page import CompareContext, prepare_compare, prepare_compare_parameters, show_compare
from .fits import fit_notes, fit_table_html, fits_of, models_of
from .header import show_header, show_summary, show_verdict, summary_rows, verdicts
from .parameters import (NO_THEORY, Parameters, ReportContext, check_parameters, one_line_errors,
                         prepare)

__all__ = ["NO_THEORY", "CompareContext", "Parameters", "ReportContext", "check_parameters",
           "fit_notes", "fit_table_html", "fits_of", "models_of", "one_line_errors", "prepare",
           "prepare_compare", "prepare_compare_parameters", "show_collective", "show_collectives",
           "show_compare", "show_figure", "show_header", "show_plots", "show_summary",
           "show_tables", "show_verdict", "summary_rows", "verdicts"]
