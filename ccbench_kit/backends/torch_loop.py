"""The torch backend's timed loops: the eager one, and the CUDA graph one
(``torch:graph``), in the nccl backend's timing and -z modes
(`backends.torch_dist` says what each mode measures)."""
import time

import numpy as np


class CaptureFailed(Exception):
    """torch refused to capture a call in a CUDA graph (the reason); every
    rank captures the same calls, so every rank refuses together."""


class GraphLoop:
    """torch:graph: an iteration's `agg` calls captured once in a CUDA graph
    (one graph per buffer set an iteration starts at), replayed once per
    iteration; the warm-up iterations run eagerly on a side stream first,
    as torch asks before a capture."""

    def __init__(self, backend, calls, agg):
        self.be, self.calls, self.agg = backend, calls, agg
        self.graphs = {}

    def _capture(self, start, ops):
        torch, n = self.be.torch, len(self.calls)
        g = torch.cuda.CUDAGraph()
        try:
            # thread_local: the process group's watchdog thread polls its events
            # during a capture, which "global" would count as the capture's error
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                for j in range(ops):
                    self.calls[(start + j) % n]()
        except RuntimeError as e:  # torch will not capture this call: nothing ran yet
            raise CaptureFailed(str(e).strip().splitlines()[0] if str(e).strip()
                                else type(e).__name__) from None
        return g

    def _graph(self, start):
        if start not in self.graphs:
            self.graphs[start] = self._capture(start, self.agg)
        return self.graphs[start]

    def run(self, warmup, iters, blocking, once):
        """(latency, start) in µs on perf_counter's clock; `once`: one
        operation through a graph of one, unwarmed (the checked call)."""
        torch, be, n = self.be.torch, self.be, len(self.calls)
        if once:
            g = self._capture(0, 1)
            t0 = time.perf_counter()
            g.replay()
            be._sync()
            g.reset()
            return np.array([(time.perf_counter() - t0) * 1e6]), np.array([t0 * 1e6])
        side = torch.cuda.Stream(device=be.device)
        side.wait_stream(torch.cuda.current_stream(be.device))
        with torch.cuda.stream(side):
            for k in range(warmup * self.agg):
                self.calls[k % n]()
        torch.cuda.current_stream(be.device).wait_stream(side)
        try:
            for i in range(min(iters, n)):  # every graph captured before the timing starts
                self._graph((i * self.agg) % n)
            return run_loop(be, lambda k: self._graph(k % n).replay(), 0, iters, 1, blocking,
                            ops=self.agg)
        finally:
            for g in self.graphs.values():
                g.reset()
            self.graphs.clear()


def run_loop(be, call, warmup, iters, calls, blocking, ops=1):
    """Warm-up, a barrier, then `iters` timed iterations of `calls` calls
    of `call(k)` each, in `be`'s timing mode and -z `blocking` mode.

    k is the index of the call's first operation; one call makes `ops`
    operations (a graph's replay: the iteration's), so a latency is the
    span over calls × ops.  (latency, start) in µs, start on perf_counter's
    clock."""
    # why long: the timing modes and the -z modes share the index arithmetic,
    # the warm-up and the division; split, each would repeat them.
    per_iteration = calls * ops
    k = 0
    for _ in range(warmup * calls):
        call(k)
        k += ops
    be._sync()
    be.comm.Barrier()
    lat, start = np.empty(iters), np.empty(iters)
    clock = time.perf_counter
    if blocking in (1, 2):  # every call waited for (1: and a barrier), host clock
        for i in range(iters):
            t0 = clock()
            for _ in range(calls):
                call(k)
                k += ops
                be._sync()
                if blocking == 1:
                    be.comm.Barrier()
            lat[i], start[i] = (clock() - t0) * 1e6 / per_iteration, t0 * 1e6
        return lat, start
    timing = be.timing
    if timing == "batch" and blocking != 3:
        t0 = clock()
        for _ in range(iters * calls):
            call(k)
            k += ops
        be._sync()
        per = (clock() - t0) * 1e6 / (iters * per_iteration)
        return np.full(iters, per), t0 * 1e6 + per * per_iteration * np.arange(iters)
    events = timing == "cuda-events"
    if events:
        ev = be.torch.cuda.Event
        pairs = [(ev(enable_timing=True), ev(enable_timing=True)) for _ in range(iters)]
    for i in range(iters):
        t0 = clock()
        if events:
            pairs[i][0].record()
        for _ in range(calls):
            call(k)
            k += ops
        if events:
            pairs[i][1].record()
        elif timing == "batch":  # -z 3 in batch mode: this iteration's own sync, timed
            be._sync()
        lat[i], start[i] = (clock() - t0) * 1e6 / per_iteration, t0 * 1e6
        if blocking == 3:  # outside the span
            be._sync()
            be.comm.Barrier()
    be._sync()
    if events:
        lat = np.array([a.elapsed_time(b) * 1e3 / per_iteration for a, b in pairs])
    return lat, start
