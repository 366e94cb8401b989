"""Progress of a running sweep in a Jupyter notebook."""
from ..units import format_size


def in_notebook():
    """True inside a Jupyter kernel (not a terminal IPython)."""
    try:
        from IPython import get_ipython  # lazy: optional dependency (report extra)
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def describe(event):
    """One line for a progress event, as ``ccbench run`` prints it."""
    return (f"[{event['index'] + 1}/{event['total']}] {format_size(event['size'])} done, "
            f"best busbw {event['busbw']:.3g} GB/s")


def notebook_progress(title):
    """A callable that shows size events as a progress bar in a notebook
    (ipywidgets; plain text lines without it), or None outside one."""
    if not in_notebook():
        return None
    from IPython.display import display  # lazy: optional dependency (report extra)
    try:
        import ipywidgets as w  # lazy: optional dependency (notebook extra)
    except ImportError:
        def show_text(event):
            if event.get("event") == "size":
                print(f"{title}: {describe(event)}", flush=True)
        return show_text
    bar = w.IntProgress(value=0, min=0, max=1, description="", bar_style="info")
    label = w.HTML(f"<b>{title}</b>: starting")
    display(w.HBox([bar, label]))

    def show(event):
        # called on the client's event loop thread; widget updates are thread-safe messages
        if event.get("event") != "size":
            return
        bar.max, bar.value = event["total"], event["index"] + 1
        if bar.value == bar.max:
            bar.bar_style = "success"
        label.value = f"<b>{title}</b>: {describe(event)}"
    return show
