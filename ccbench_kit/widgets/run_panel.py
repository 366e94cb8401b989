"""The Run panel: start a sweep from the notebook, watch its progress, see
the result in the Explorer when it is done.

The sweep runs in a background thread (``ccbench_kit.run`` starts mpirun),
so the kernel stays responsive; the progress bar moves with every size the
ranks finish.
"""
import threading

from .._optional import require
from ..errors import CCBenchError
from ..units import format_size
from .. import api, collectives
from ..backends import backend_algorithms


# What the panel starts with: a demo-sized sweep that ends in seconds on a
# laptop (the CLI's defaults, 32M x 20 iterations, are one large size), so
# these are the panel's own choices, not `run_fields`' defaults.  Every key
# is a keyword of `ccbench_kit.run` (a test holds them to `run_fields`).
PANEL_CHOICES = {"nranks": 3, "minbytes": "8", "maxbytes": "1M", "stepfactor": 4, "iters": 10,
                 "warmup": 3, "check": "random"}


class RunPanel:
    """Controls for one sweep and a progress bar.

    Parameters
    ----------
    explorer : Explorer, optional
        Receives the Dataset when the run is done.
    out : str, optional
        Results file to write (netCDF); a temporary one otherwise.
    """

    def __init__(self, explorer=None, out=None, collective="all_reduce",
                 nranks=PANEL_CHOICES["nranks"], minbytes=PANEL_CHOICES["minbytes"],
                 maxbytes=PANEL_CHOICES["maxbytes"], stepfactor=PANEL_CHOICES["stepfactor"],
                 iters=PANEL_CHOICES["iters"], warmup=PANEL_CHOICES["warmup"]):
        w = require("ipywidgets", "notebook")
        self.explorer, self.out = explorer, out
        self.result, self.error, self._thread = None, None, None
        names = [c.name for c in collectives.all_collectives()]
        wide = {"description_width": "90px"}
        self.collective = w.Dropdown(options=names, value=collective if collective in names else names[0],
                                     description="collective", style=wide)
        self.nranks = w.BoundedIntText(value=nranks, min=1, max=256, description="ranks", style=wide)
        self.minbytes = w.Text(value=str(minbytes), description="min size", style=wide)
        self.maxbytes = w.Text(value=str(maxbytes), description="max size", style=wide)
        self.stepfactor = w.Dropdown(options=[2, 4, 8, 16], value=stepfactor, description="factor",
                                     style=wide)
        self.iters = w.BoundedIntText(value=iters, min=1, max=100000, description="iterations",
                                      style=wide)
        self.warmup = w.BoundedIntText(value=warmup, min=0, max=100000, description="warm-up",
                                       style=wide)
        self.algorithms = w.SelectMultiple(description="algorithms", rows=4, style=wide)
        self.check = w.Checkbox(value=bool(PANEL_CHOICES["check"]), description="check results",
                                indent=False)
        self.button = w.Button(description="Run sweep", button_style="primary", icon="play")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="progress",
                                      style={"description_width": "90px"},
                                      layout=w.Layout(width="60%"))
        self.status = w.HTML("Ready.")
        self.collective.observe(lambda change: self._fill_algorithms(), "value")
        self.button.on_click(lambda _: self.start())
        self._fill_algorithms()
        self.widget = w.VBox([
            w.HTML("<b>Run a sweep</b> (mpirun on this machine)"),
            w.HBox([w.VBox([self.collective, self.nranks, self.iters, self.warmup]),
                    w.VBox([self.minbytes, self.maxbytes, self.stepfactor, self.check]),
                    self.algorithms]),
            w.HBox([self.button, self.progress]),
            self.status,
        ], layout=w.Layout(border="1px solid #d0d7de", padding="8px"))
        self.widget.add_class("ccb-run-panel")

    def _ipython_display_(self):
        from IPython.display import display  # lazy: optional dependency (report extra)
        display(self.widget)

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def _fill_algorithms(self):
        try:
            algs = list(backend_algorithms("mpi", self.collective.value))
        except CCBenchError as e:
            self.status.value = f"<span style='color:#b00020'>{e}</span>"
            algs = []
        self.algorithms.options = algs
        self.algorithms.value = tuple(algs[:2])

    # -- running ----------------------------------------------------------------------
    def options(self):
        """The keyword arguments the panel passes to ``ccbench_kit.run``."""
        return dict(nranks=int(self.nranks.value), minbytes=self.minbytes.value.strip(),
                    maxbytes=self.maxbytes.value.strip(), stepfactor=self.stepfactor.value,
                    algorithms=list(self.algorithms.value) or ["mpi"],
                    iters=int(self.iters.value), warmup=int(self.warmup.value),
                    check=PANEL_CHOICES["check"] if self.check.value else None, out=self.out)

    def on_progress(self, event):
        """`ccbench_kit.run`'s per-size callback: moves the bar."""
        if event.get("event") != "size":
            return
        self.progress.max = int(event.get("total", 1))
        self.progress.value = int(event.get("index", 0)) + 1
        bw = event.get("busbw")
        self.status.value = (f"{format_size(int(event.get('size', 0)))} done "
                             f"({self.progress.value}/{self.progress.max})"
                             + (f", best busbw {bw:.3g} GB/s" if isinstance(bw, (int, float)) else ""))

    def start(self):
        """Start the sweep in the background (the button does this)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self.result, self.error = None, None
        self.progress.value, self.progress.bar_style = 0, ""
        self.button.disabled = True
        coll, opts = self.collective.value, self.options()
        self.status.value = (f"Starting mpirun -np {opts['nranks']} for {coll} "
                             f"({opts['minbytes']} – {opts['maxbytes']})…")
        self._thread = threading.Thread(target=self._run, args=(coll, opts), daemon=True)
        self._thread.start()

    def _run(self, coll, opts):
        try:
            ds = api.run(coll, progress=self.on_progress, **opts)
        except CCBenchError as e:
            self.error = e
            self.progress.bar_style = "danger"
            self.status.value = f"<span style='color:#b00020'>Failed: {e}</span>"
            return
        finally:
            self.button.disabled = False
        self.result = ds
        self.progress.value = self.progress.max
        self.progress.bar_style = "success"
        best = float(ds.ccb.busbw().max())
        self.status.value = (f"Done: {coll}, {ds.sizes['size']} sizes × "
                             f"{ds.sizes['algorithm']} algorithms; best busbw {best:.3g} GB/s"
                             + (f"; saved to {self.out}" if self.out else "") + ".")
        if self.explorer is not None:
            try:
                self.explorer.add(ds, label=f"{coll} (run)")
            except Exception as e:  # a drawing bug must not hide the finished run
                self.status.value += f" <span style='color:#b00020'>Explorer: {e}</span>"
                raise

    def wait(self, timeout=None):
        """Block until the sweep ends; the Dataset (or raise its error)."""
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise self.error
        return self.result
