"""What a backend on host buffers timed by the host's clock shares: numpy
buffers (`HostBuffers`) and the timed loop (`time_on_host`), with the
harness's warm-up, aggregation (``-a``), ``-z`` barriers and progress
counters.  The tcp backend uses both, and so can a new backend that moves
host memory (the loopback example of docs/architecture.md does)."""
import numpy as np


class HostBuffers:
    """`Backend.alloc`, `upload` and `download` on numpy arrays."""

    def alloc(self, nelems, dtype):
        return np.zeros(max(nelems, 1), dtype=dtype.storage)[:nelems]

    def upload(self, buf, host):
        buf[...] = host

    def download(self, buf):
        return np.array(buf, copy=True)


def time_on_host(call, buffers, comm, *, count, warmup, iters, agg=1, blocking=0, progress=None,
                 once=False):
    """(latency, start) in µs of `iters` iterations, after `warmup` untimed
    ones (`once`: a single untimed call), each of `agg` calls of
    ``call(send, recv, count)`` on the rotating `buffers` (`Backend.time`'s
    arguments); `progress`: the rank's (entered, left) board counters."""
    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    lat, start = np.empty(iters), np.empty(iters)
    calls = 1 if once else warmup + iters
    for i in range(calls):
        t0 = MPI.Wtime()
        for k in range(agg):
            send, recv, _scratch, *n = buffers[(i * agg + k) % len(buffers)]
            if progress is not None:
                progress[0] += 1
            call(send, recv, n[0] if n else count)
            if progress is not None:
                progress[1] = progress[0]
            if blocking == 1:  # nccl-tests -z 1: a barrier after every operation, timed
                comm.Barrier()
        t1 = MPI.Wtime()
        if blocking == 3:  # -z 3: a barrier after every iteration, not timed
            comm.Barrier()
        if i >= calls - iters:
            lat[i - (calls - iters)] = (t1 - t0) * 1e6 / agg
            start[i - (calls - iters)] = t0 * 1e6
    return lat, start
