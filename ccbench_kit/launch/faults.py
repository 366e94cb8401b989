"""Test support: faults injected into a launched run, so that the watchdog,
partial saves and the configuration check are tested for real.

Nothing in the harness, the backends or the engine knows about faults.  The
rank's entry point (`launch.worker`) asks `FaultPlan.from_environment` for a
plan; without ``CCB_FAULT_INJECT`` (always, outside the tests) the plan is
empty and hands back the configuration and the progress reporter untouched.
The variable takes ``"hang:RANK:SIZE"``, ``"kill:RANK:SIZE"``,
``"config:RANK"`` or ``"corrupt:RANK"``: that rank stalls inside, or dies
at the start of, the timed call of that size, parses a different
configuration, or reads back every checked output with its first element
changed (a fabric that corrupts data, for ``--check``).
"""
import dataclasses
import os
import signal
import time

import numpy as np

from ..progress_board import RankReporter

VARIABLE = "CCB_FAULT_INJECT"


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    kind: str = ""    # "", "hang", "kill", "config" or "corrupt"
    size: int = -1    # bytes, for hang and kill

    @classmethod
    def from_environment(cls, rank):
        """This rank's faults from ``CCB_FAULT_INJECT`` (none when unset)."""
        kind, _, rest = os.environ.get(VARIABLE, "").partition(":")
        r, _, size = rest.partition(":")
        if kind not in ("hang", "kill", "config", "corrupt") or r != str(rank):
            return cls()
        return cls(kind, int(size) if size.isdigit() else -1)

    def config(self, cfg):
        """`cfg`, or for ``config:RANK`` a copy that differs from the others'."""
        if self.kind != "config":
            return cfg
        return cfg.replace(iters=cfg.sweep.iters + 1)

    def backend(self, backend):
        """`backend`, or for ``corrupt:RANK`` one whose read-back (`download`,
        used by the check alone) returns the output with element 0 changed."""
        if self.kind != "corrupt":
            return backend
        return _CorruptingBackend(backend)

    def reporter(self, reporter):
        """`reporter`, or one that hangs or dies when it enters the size."""
        if self.kind not in ("hang", "kill"):
            return reporter
        return _FaultyReporter(reporter, self)


class _FaultyReporter(RankReporter):
    """A rank's reporter that stalls or dies as it enters the faulty size:
    after its row says "timing", so the watchdog sees a rank that did not
    arrive (not one busy with local work)."""

    def __init__(self, inner, plan):  # noqa: super().__init__ would reopen the board
        self.__dict__.update(inner.__dict__)
        self._plan = plan

    def enter(self, size, alg_index, placement_index, phase="timing"):
        super().enter(size, alg_index, placement_index, phase)
        if size != self._plan.size or phase != "timing":
            return
        if self._plan.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        while True:  # hang: the others wait for this rank inside the collective
            time.sleep(1)


class _CorruptingBackend:
    """A backend whose read-back of an output has its first element changed
    (to a value no check accepts); everything else is the real backend's."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def download(self, buf):
        out = self._inner.download(buf)
        flat = out.reshape(-1)
        if flat.size:  # bit-flip the whole first element: wrong for every dtype
            flat.view(np.uint8)[:flat.itemsize] ^= 0x5A
        return out
