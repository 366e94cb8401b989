"""The report page's structure: section anchors, the table of contents, the
verdict block, and the small bits of HTML the notebook cells display.

Every heading the report writes gets an id built from its part and its
section (`anchor`), so ids are unique however many collectives a report
holds, and the table of contents links to them.  Text here is built only
from the Dataset and the parameters: two renders of one file give the same
bytes.
"""
import html
import os
import re
import base64

SECTIONS = (  # (key, title) of each collective's sections, in page order
    ("busbw", "Bus bandwidth and theory"),
    ("fit", "Fitted α-β parameters"),
    ("winner", "Winner per size"),
    ("phases", "Where the own kernels' time goes"),
    ("latency", "Latency percentiles"),
    ("ranks", "Ranks"),
    ("trace", "Per-iteration trace"),
    ("baseline", "Against the baseline"),
    ("overhead", "Time ratios per size"),
)


def slug(text):
    """A URL-fragment-safe id: lower case, runs of other characters → '-'."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "part"


def anchor(part, key=""):
    return "sec-" + slug(part) + (f"--{key}" if key else "")


def inline(text):
    """Markdown's **bold** and `code` in one line of text, as safe HTML."""
    out = html.escape(str(text), quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def heading(level, text, ident):
    return (f'<h{level} id="{ident}">{html.escape(str(text))}'
            f'<a class="anchor-link" href="#{ident}">¶</a></h{level}>')


def sections_of(has_baseline, per_iteration, n_algorithms, has_phases=False):
    """The section keys one collective shows (the TOC and the page agree)."""
    keys = ["busbw", "fit"]
    if n_algorithms > 1:
        keys.append("winner")
    if has_phases:
        keys.append("phases")
    if per_iteration:
        keys.append("latency")
    keys.append("ranks")
    if per_iteration:
        keys.append("trace")
    if has_baseline:
        keys.append("baseline")
    if has_baseline or n_algorithms > 1:
        keys.append("overhead")
    return keys


def toc(parts):
    """The table of contents: `parts` is [(part name, [section keys])]."""
    titles = dict(SECTIONS)
    items = ['<li><a href="#verdict">Verdict</a></li>', '<li><a href="#run">The run</a></li>',
             '<li><a href="#summary">Summary</a></li>']
    for name, keys in parts:
        sub = "".join(f'<li><a href="#{anchor(name, k)}">{html.escape(titles[k])}</a></li>'
                      for k in keys)
        items.append(f'<li><a href="#{anchor(name)}">{html.escape(name)}</a><ul>{sub}</ul></li>')
    items.append('<li><a href="#tables">Tables</a></li>')
    return ('<nav class="ccb-toc" id="contents"><p class="ccb-toc-title">Contents</p><ul>'
            + "".join(items) + "</ul></nav>")


def verdict_block(verdicts, alerts=()):
    """The verdict: per part, findings, then what to distrust.

    `verdicts`: [(part name, findings, cautions)], each a list of Markdown
    lines; `alerts`: lines shown above everything (an oversubscribed run).
    """
    out = ['<section class="ccb-verdict" id="verdict-block">', heading(2, "Verdict", "verdict")]
    for a in alerts:
        out.append(f'<p class="ccb-alert">⚠ {inline(a)}</p>')
    for name, findings, cautions in verdicts:
        if len(verdicts) > 1:
            out.append(f'<h3 class="ccb-verdict-part">{html.escape(name)}</h3>')
        out.append("<ul class=\"ccb-findings\">" + "".join(f"<li>{inline(x)}</li>" for x in findings)
                   + "</ul>")
        if cautions:
            out.append('<p class="ccb-distrust-title">What to distrust</p><ul class="ccb-distrust">'
                       + "".join(f"<li>{inline(x)}</li>" for x in cautions) + "</ul>")
    out.append("</section>")
    return "".join(out)


def shown_path(path, start=None):
    """A path as a report may show it: relative to `start` (the report's
    folder) when below it, else the file name alone, so that no report
    holds a path of the machine that rendered it."""
    path = os.fspath(path)
    if not path:
        return ""
    if start is not None:
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(start))
        if not rel.startswith(".."):
            return rel
    return os.path.basename(path)


def details_png(png, summary):
    """An image folded under `summary` (the other placement's plot)."""
    data = base64.b64encode(png).decode("ascii")
    return (f'<details class="ccb-details"><summary>{html.escape(summary)}</summary>'
            f'<img src="data:image/png;base64,{data}" alt="{html.escape(summary)}"/></details>')
