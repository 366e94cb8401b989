"""What NCCL actually ran: its TUNING debug lines, captured per call.

NCCL (rank 0 only) logs one line per collective it schedules when
``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING``::

    host:1234:1234 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}

and, for a call on symmetric windows (-R 2, NCCL 2.27+), the kernel it ran::

    ... NCCL INFO AllReduce [Symmetric]: 8 Bytes -> Kernel AllReduce_AGxLL_R nchannels 2 nthreads 512 nWorks 1

Logging every call costs host time inside the timed loop, so the backend
switches it on only around one untimed probe call per algorithm and size:
NCCL re-reads NCCL_DEBUG* after ``ncclResetDebugInit()``.
"""
import os
import re
from contextlib import contextmanager

_LINE = re.compile(
    r"NCCL INFO (?P<func>[A-Za-z]+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\S+) "
    r"proto (?P<proto>\S+)(?: channel\{Lo\.\.Hi\}=\{(?P<lo>\d+)\.\.(?P<hi>\d+)\})?"
    r"|NCCL INFO (?P<sfunc>[A-Za-z]+) \[Symmetric\]: (?P<sbytes>\d+) Bytes -> Kernel "
    r"(?P<kernel>\S+) nchannels (?P<sch>\d+)")

@contextmanager
def environ(values):
    """`os.environ` updated with `values` inside the block, restored after."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def parse(text):
    """The TUNING decisions in a log, in order: dicts with func, bytes,
    algo, proto and channels (or None where the line has no channel range);
    a symmetric kernel's line gives algo ``SYM``, its kernel's name as proto."""
    out = []
    for m in _LINE.finditer(text):
        if m.group("kernel"):
            out.append({"func": m.group("sfunc"), "bytes": int(m.group("sbytes")),
                        "algo": "SYM", "proto": m.group("kernel"),
                        "channels": int(m.group("sch"))})
            continue
        ch = None
        if m.group("lo") is not None:
            ch = int(m.group("hi")) - int(m.group("lo")) + 1
        out.append({"func": m.group("func"), "bytes": int(m.group("bytes")),
                    "algo": m.group("algo"), "proto": m.group("proto"), "channels": ch})
    return out


def summarize(decisions):
    """One string for a call's decisions: ``"RING/LL"``, ``"TREE/SIMPLE x4ch"``,
    ``"SYM/AllReduce_AGxLL_R x2ch"`` (a symmetric kernel);
    several distinct ones (a grouped call) are joined with ``+``."""
    seen = []
    for d in decisions:
        s = f"{d['algo']}/{d['proto']}"
        if d["channels"]:
            s += f" x{d['channels']}ch"
        if s not in seen:
            seen.append(s)
    return "+".join(seen)


class TuningCapture:
    """Switch NCCL's TUNING log on around a call and read what it printed.

    Parameters
    ----------
    reset : callable
        ``Library.reset_debug``; returns False when NCCL can't re-read its
        debug settings (then nothing is captured).
    path : str
        File NCCL writes to (NCCL opens it anew, truncating, at each reset).
    """

    def __init__(self, reset, path):
        self.reset, self.path = reset, path
        self.reason = ""
        if os.environ.get("NCCL_DEBUG_FILE"):
            # re-opening it would truncate the user's own log
            self.reason = "not recorded: NCCL_DEBUG_FILE is set by the user"

    @property
    def enabled(self):
        return not self.reason

    @contextmanager
    def capture(self, out):
        """Run the body with TUNING logging on; append the decisions to `out`."""
        if not self.enabled:
            yield
            return
        try:
            with environ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING",
                          "NCCL_DEBUG_FILE": self.path}):
                if not self.reset():
                    self.reason = "not recorded: this NCCL has no ncclResetDebugInit"
                    yield
                    return
                yield
                try:
                    with open(self.path) as f:
                        out.extend(parse(f.read()))
                except OSError:
                    pass
        finally:
            self.reset()  # with the user's settings back
