"""What a report cell displays: the kit's Markdown, HTML, tables and figures.

Every value shown goes through `markup` or `html.escape`: whatever a results
file or a flag holds is shown as text, never as markup.
"""
import html
import io

from .. import markup


def _md(text):
    """Display the kit's Markdown; every value in it is shown as text
    (`markup.markdown`), whatever a results file or a flag holds."""
    from IPython.display import Markdown, display  # lazy: optional dependency (report extra)
    display(Markdown(markup.markdown(text)))


def _html(text):
    from IPython.display import HTML, display  # lazy: optional dependency (report extra)
    display(HTML(text))


def _table(head, rows, cls="ccb-table"):
    out = [f'<div class="ccb-scroll"><table class="{cls}"><thead><tr>']
    out += [f"<th>{html.escape(str(h))}</th>" for h in head]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _png(fig, plt, dpi=110):
    buf = io.BytesIO()
    # a figure laid out by matplotlib (layout="constrained": the kit's
    # plots) already holds its legends and labels; "tight" would draw it
    # once more to measure them (0.2 of the 1.3 s of a small report's PNGs)
    tight = {} if fig.get_layout_engine() is not None else {"bbox_inches": "tight"}
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None}, **tight)
    plt.close(fig)
    return buf.getvalue()


def show_figure(fig, plt):
    """Display `fig` as a PNG whatever matplotlib's backend (MPLBACKEND=Agg
    in a cron job would otherwise print "<Figure ...>")."""
    from IPython.display import Image, display  # lazy: optional dependency (report extra)
    display(Image(data=_png(fig, plt), format="png"))
