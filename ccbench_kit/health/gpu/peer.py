"""GPU-to-GPU copies over NVLink (or PCIe), as nvbandwidth's copy-engine
tests measure them: ``cudaMemcpyPeerAsync`` between two GPUs' buffers,
timed with CUDA events (the CUDA runtime of `cuda.Runtime`, ctypes).

- one way (a -> b): the copy is issued on the source GPU's stream (the
  source's copy engine writes into the peer: nvbandwidth's
  ``device_to_device_memcpy_write_ce``);
- both ways at once: a -> b on a's stream and b -> a on b's, started
  together (b's stream waits on a's start event) and ended together (a's
  stream waits on b's end event), bytes of both directions over the span
  (nvbandwidth's ``device_to_device_bidirectional_memcpy_write_ce`` reports
  the sum too);
- latency: a `small`-byte peer copy, event-timed one at a time, median of
  the copies (the copy engine's one-way latency; nvbandwidth's
  ``device_to_device_latency_sm`` chases pointers with a kernel instead,
  which this module does not compile).

Peer access (``cudaDeviceCanAccessPeer``, then
``cudaDeviceEnablePeerAccess`` both ways) is asked for every pair first: a
pair without it is not copied (CUDA would stage through host memory and
measure PCIe and the host); `PeerCopies.access` says which.
"""
import ctypes

import numpy as np

PEER_ALREADY_ENABLED = 704  # cudaErrorPeerAccessAlreadyEnabled
STREAM_NON_BLOCKING = 1     # cudaStreamNonBlocking


class PeerCopies:
    """Buffers, a stream and events on each of `indices`' GPUs, peer access
    enabled where the GPUs allow it; kept for the whole pair matrix.

    Parameters
    ----------
    runtime : cuda.Runtime
    indices : list of int
        CUDA device indices.
    nbytes : int
        Bytes of each bandwidth copy (nvbandwidth's default buffer is 512 MiB).
    small : int
        Bytes of each latency copy.
    """

    def __init__(self, runtime, indices, nbytes=256 << 20, small=8):
        self.cu, self.indices, self.nbytes, self.small = runtime, list(indices), nbytes, small
        self._ptrs, self._streams, self._events = [], [], []
        self.src, self.dst, self.stream, self.ev = {}, {}, {}, {}
        try:
            for k in self.indices:
                self.use(k)
                self.src[k], self.dst[k] = self._malloc(nbytes), self._malloc(nbytes)
                self.stream[k] = self._stream()
                self.ev[k] = tuple(self._event() for _ in range(3))  # start, stop, mark
            self.access = {(a, b): self._enable(a, b) for a in self.indices
                           for b in self.indices if a != b}
        except Exception:
            self.close()
            raise

    # -- set-up ---------------------------------------------------------------
    def use(self, k):
        """Make GPU `k` the current one (cudaSetDevice)."""
        self.cu.check(self.cu.rt.cudaSetDevice(k), f"cudaSetDevice({k})")

    def _malloc(self, nbytes):
        self._ptrs.append(self.cu.new_handle("cudaMalloc", ctypes.c_size_t(nbytes),
                                             what=f"cudaMalloc({nbytes} B)"))
        return self._ptrs[-1]

    def _stream(self):
        self._streams.append(self.cu.new_handle("cudaStreamCreateWithFlags", STREAM_NON_BLOCKING))
        return self._streams[-1]

    def _event(self):
        self._events.append(self.cu.new_handle("cudaEventCreate"))
        return self._events[-1]

    def _enable(self, a, b):
        """Whether `a` can reach `b`'s memory directly; enables it if so."""
        ok = ctypes.c_int(0)
        self.cu.check(self.cu.rt.cudaDeviceCanAccessPeer(ctypes.byref(ok), a, b),
                      f"cudaDeviceCanAccessPeer({a}, {b})")
        if not ok.value:
            return False
        self.use(a)
        code = self.cu.rt.cudaDeviceEnablePeerAccess(b, 0)
        if code:
            self.cu.rt.cudaGetLastError()  # not sticky: clear it for the calls that follow
        # already enabled is fine; any other refusal (too many peers) is no access
        return code in (0, PEER_ALREADY_ENABLED)

    # -- the copies -----------------------------------------------------------
    def _copy(self, a, b, nbytes):
        """Enqueue a -> b (a's buffer into b's) on a's stream."""
        self.cu.check(self.cu.rt.cudaMemcpyPeerAsync(
            self.dst[b], b, self.src[a], a, ctypes.c_size_t(nbytes), self.stream[a]),
            f"cudaMemcpyPeerAsync(gpu{a} -> gpu{b})")

    def elapsed_s(self, start, stop):
        """Seconds between two recorded events, once `stop` has happened."""
        rt = self.cu.rt
        self.cu.check(rt.cudaEventSynchronize(stop), "cudaEventSynchronize")
        ms = ctypes.c_float()
        self.cu.check(rt.cudaEventElapsedTime(ctypes.byref(ms), start, stop),
                      "cudaEventElapsedTime")
        return ms.value / 1e3

    def one_way_gbps(self, a, b, reps=5):
        """a -> b, GB/s (1e9 B/s): `reps` copies of `nbytes` back to back."""
        rt, (start, stop, _) = self.cu.rt, self.ev[a]
        self.use(a)
        self.cu.check(rt.cudaEventRecord(start, self.stream[a]), "cudaEventRecord")
        for _ in range(reps):
            self._copy(a, b, self.nbytes)
        self.cu.check(rt.cudaEventRecord(stop, self.stream[a]), "cudaEventRecord")
        return self.nbytes * reps / self.elapsed_s(start, stop) / 1e9

    def both_ways_gbps(self, a, b, reps=5):
        """a -> b and b -> a at once, GB/s of both directions together."""
        rt, (start, stop, _), (_, _, b_done) = self.cu.rt, self.ev[a], self.ev[b]
        self.use(a)
        self.cu.check(rt.cudaEventRecord(start, self.stream[a]), "cudaEventRecord")
        self.cu.check(rt.cudaStreamWaitEvent(self.stream[b], start, 0), "cudaStreamWaitEvent")
        for _ in range(reps):
            self._copy(a, b, self.nbytes)
        self.use(b)
        for _ in range(reps):
            self._copy(b, a, self.nbytes)
        self.cu.check(rt.cudaEventRecord(b_done, self.stream[b]), "cudaEventRecord")
        self.use(a)
        self.cu.check(rt.cudaStreamWaitEvent(self.stream[a], b_done, 0), "cudaStreamWaitEvent")
        self.cu.check(rt.cudaEventRecord(stop, self.stream[a]), "cudaEventRecord")
        return 2 * self.nbytes * reps / self.elapsed_s(start, stop) / 1e9

    def latency_us(self, a, b, copies=50, warmup=5):
        """Median µs of one `small`-byte copy a -> b, each copy event-timed alone."""
        rt, (start, stop, _) = self.cu.rt, self.ev[a]
        self.use(a)
        out = []
        for i in range(warmup + copies):
            self.cu.check(rt.cudaEventRecord(start, self.stream[a]), "cudaEventRecord")
            self._copy(a, b, self.small)
            self.cu.check(rt.cudaEventRecord(stop, self.stream[a]), "cudaEventRecord")
            t = self.elapsed_s(start, stop)
            if i >= warmup:
                out.append(t)
        return float(np.median(out)) * 1e6

    def close(self):
        rt = self.cu.rt
        for s in self._streams:
            rt.cudaStreamDestroy(s)
        for e in self._events:
            rt.cudaEventDestroy(e)
        for p in self._ptrs:
            rt.cudaFree(p)
        self._streams, self._events, self._ptrs = [], [], []
