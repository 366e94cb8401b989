"""Which reader reads a file: each format module says, from the content.

The readers live with their tool's writers in ``ccbench_kit.formats``.  A
reader module has ``NAME``, ``sniff(src, head) -> bool`` (cheap, on the
first part of the text) and ``parse(src, hints) -> [Dataset]``.  The first
module whose sniff says yes reads the file; JSON formats come first so a JSON
file never reaches a text reader.
"""
import importlib

from ..formats.common.source import Source

MODULES = ("nccl_inspector.read_json", "nccl_tests.read_json", "nccom.read_json", "nccl_tests.read_text", "nccom.read_text",
           "allgatherp.read_text")
_HEAD = 1 << 20   # sniff the first MiB: a log may start with pages of NCCL INFO


def formats():
    """The format modules, in the order they are tried."""
    return [importlib.import_module(f"ccbench_kit.formats.{m}") for m in MODULES]


def detect(src):
    """The format module for `src`, or None."""
    head = src.text[:_HEAD]
    for mod in formats():
        if mod.sniff(src, head):
            return mod
    return None


def detect_file(path):
    """The format module of the file at `path`, or None, told from its first
    MiB only: a single NCCL Inspector file may be GBs, and is then streamed
    by its reader, never read whole."""
    return detect(Source.from_file(path, limit=_HEAD))


def names():
    return [m.NAME for m in formats()]
