"""Text from a results file, a spec or a flag, as a report may show it:
never markup.

A results file made by someone else (a baseline, an import) is opened by
everyone who opens the report, so every value that reaches HTML or Markdown
passes through here: HTML special characters become entities, and Markdown's
link and image syntax is made inert (a ``javascript:`` link, or an image
fetched from the network when the page opens).
"""
import html
import re

# `[` starts every Markdown link, image and reference definition; `<` every
# raw HTML tag and autolink; `&` an entity that could spell either.
_MARKDOWN_ACTIVE = re.compile(r"[&<>\[\]]")
_MARKDOWN_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;"}


def html_text(value):
    """`value` as text inside an HTML element or attribute."""
    return html.escape(str(value), quote=True)


def markdown(text):
    """Markdown written by the kit, with the values interpolated in it made
    inert: no raw HTML, no link, no image.

    The kit's own Markdown uses only emphasis, code spans, lists, headings
    and block quotes (a `>` at the start of a line is kept for those), so
    this can apply to a whole cell at its one boundary (`display`).
    """
    def entity(m):
        return _MARKDOWN_ENTITIES[m.group(0)]

    out = []
    for line in str(text).split("\n"):
        quote = re.match(r"^(\s{0,3}>\s?)+", line)
        head = quote.group(0) if quote else ""
        out.append(head + _MARKDOWN_ACTIVE.sub(entity, line[len(head):]))
    return "\n".join(out)


def terminal(value, lines=False):
    """`value` as text safe to print to a terminal: every character that is
    not printable (escape sequences that set the title or clear the screen,
    carriage returns that overwrite a line, bells, newlines inside a
    value) is shown escaped, as Python writes it (``\\x1b``), so that what
    a file says is read, never obeyed.  Every CLI print of text that comes
    from a file goes through here.  `lines`: a text of several lines, whose
    newlines are kept (and each line made safe)."""
    text = str(value)
    if lines:
        return "\n".join(terminal(line) for line in text.split("\n"))
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# A spreadsheet evaluates a cell that starts with one of these as a formula
# (OWASP, "CSV Injection"); a tab or carriage return can hide the sign.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A string cell for CSV that no spreadsheet runs as a formula: one that
    starts with = + - @ (or a tab or carriage return) gets a leading single
    quote, as OWASP advises.  Only strings: a number (-3.5) stays a number."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value
