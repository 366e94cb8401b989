"""The pair matrix's SM figures, as nvbandwidth measures them beside its
copy-engine ones (`peer`):

- SM copy (a -> b): a kernel on a, every SM, writes a's buffer into b's
  (nvbandwidth's ``device_to_device_memcpy_write_sm``).  The copy engines
  and the SMs reach NVLink by different paths: a pair whose copy-engine
  rate holds while its SM rate falls (or the other way) is a finding the
  other figure alone would miss, and collectives (NCCL's kernels, the kit's
  own) move their data with SMs;
- SM latency (a -> b): one thread on a follows a ring of pointers in b's
  memory, each load's address the value of the one before, so each waits a
  whole round trip over the link (nvbandwidth's
  ``device_to_device_latency_sm``).  No copy engine start and no host launch
  in it, unlike the 8 B copy's latency.

The kernels (sm_copy.cu) are compiled at run time with NVRTC and cached per
architecture as the kit's own collectives are
(`backends.gpu_kernels.image`), loaded with the CUDA runtime's library
calls (``cudaLibraryLoadData``, CUDA 12+: one handle serves every GPU) and
launched on `peer.PeerCopies`' buffers, streams and events.  Where NVRTC or
those calls are missing, `SmCopies` raises `SmUnavailable` with the reason,
and the matrix keeps its copy-engine figures.
"""
import ctypes
import os
from types import SimpleNamespace

from ...backends.gpu_kernels import NvrtcError, image, load_nvrtc
from ...errors import CCBenchError
from .cuda import CudaError

# the kernels' source, as `gpu_kernels.image` takes it (the own collectives pass
# their module, which names its source the same way)
SOURCE = SimpleNamespace(SOURCE=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "sm_copy.cu"))
THREADS = 512              # sm_copy.cu's __launch_bounds__
BLOCKS_PER_SM = 4
WORD = 16                  # bytes a thread copies at a time (int4)
RING_SLOTS = 1 << 20       # 8 MiB of pointers: no page holds two consecutive ones
RING_STEP = 4099           # slots between consecutive pointers (prime: the ring is whole)
# cudaDeviceAttr
MULTIPROCESSOR_COUNT, CC_MAJOR, CC_MINOR = 16, 75, 76


class SmUnavailable(CCBenchError):
    """The SM figures cannot be measured here (no NVRTC, an old CUDA runtime,
    a kernel that does not compile or load): the reason, for the report."""


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class SmCopies:
    """The SM copy and latency kernels, loaded for `copies`' GPUs.

    Parameters
    ----------
    copies : peer.PeerCopies
        Its buffers (a's ``src``, b's ``dst``; b's ``src`` holds the latency
        ring), streams and events are used; it must outlive this object.
    """

    def __init__(self, copies):
        self.copies, self.cu = copies, copies.cu
        rt = self.cu.rt
        if not hasattr(rt, "cudaLibraryLoadData"):
            raise SmUnavailable("the CUDA runtime found has no cudaLibraryLoadData "
                                "(CUDA 12 or later loads run-time compiled kernels)")
        self._library, self.kernel = None, {}
        target = self._target(copies.indices[0])
        try:
            compiled, _ = image(load_nvrtc(), SOURCE, target)
        except NvrtcError as e:
            raise SmUnavailable(str(e)) from None
        try:
            lib = self.cu.new_handle("cudaLibraryLoadData", ctypes.c_char_p(compiled), None,
                                     None, 0, None, None, 0)
            self._library = lib
            for name in ("ccb_sm_copy", "ccb_chase_init", "ccb_chase"):
                self.kernel[name] = self.cu.new_handle("cudaLibraryGetKernel", lib,
                                                       name.encode(),
                                                       what=f"cudaLibraryGetKernel({name})")
        except CudaError as e:  # an image this driver does not load: no SM figures
            rt.cudaGetLastError()  # not sticky: clear it for the calls that follow
            self.close()
            raise SmUnavailable(str(e)) from None
        self.blocks = {g: self._attr(MULTIPROCESSOR_COUNT, g) * BLOCKS_PER_SM
                       for g in copies.indices}
        self._rings = set()

    def _attr(self, attr, device):
        v = ctypes.c_int(0)
        self.cu.check(self.cu.rt.cudaDeviceGetAttribute(ctypes.byref(v), attr, device),
                      f"cudaDeviceGetAttribute({attr}, {device})")
        return v.value

    def _target(self, device):
        major, minor = self._attr(CC_MAJOR, device), self._attr(CC_MINOR, device)
        return f"sm_{major}{minor}"

    def _launch(self, device, name, grid, block, *args):
        """`name` on `device`'s stream (the current GPU: the caller's
        `PeerCopies.use`); `args` ctypes values, in the kernel's order."""
        ptrs = (ctypes.c_void_p * len(args))(*(ctypes.cast(ctypes.pointer(a), ctypes.c_void_p)
                                               for a in args))
        self.cu.check(self.cu.rt.cudaLaunchKernel(
            self.kernel[name], Dim3(grid, 1, 1), Dim3(block, 1, 1), ptrs, ctypes.c_size_t(0),
            self.copies.stream[device]), f"cudaLaunchKernel({name} on gpu{device})")

    def one_way_gbps(self, a, b, reps=5):
        """a -> b by a's SMs, GB/s (1e9 B/s): `reps` kernels of `nbytes` back to back."""
        c, rt = self.copies, self.cu.rt
        start, stop, _ = c.ev[a]
        words = ctypes.c_ulonglong(c.nbytes // WORD)
        src, dst = ctypes.c_void_p(c.src[a].value), ctypes.c_void_p(c.dst[b].value)
        c.use(a)
        self.cu.check(rt.cudaEventRecord(start, c.stream[a]), "cudaEventRecord")
        for _ in range(reps):
            self._launch(a, "ccb_sm_copy", self.blocks[a], THREADS, src, dst, words)
        self.cu.check(rt.cudaEventRecord(stop, c.stream[a]), "cudaEventRecord")
        return c.nbytes // WORD * WORD * reps / c.elapsed_s(start, stop) / 1e9

    def _ring(self, b):
        """b's latency ring (in its `src` buffer, which no copy writes), made once."""
        c = self.copies
        ring = ctypes.c_void_p(c.src[b].value)
        if b not in self._rings:
            c.use(b)
            self._launch(b, "ccb_chase_init", -(-RING_SLOTS // THREADS), THREADS, ring,
                         ctypes.c_ulonglong(RING_SLOTS), ctypes.c_ulonglong(RING_STEP))
            self.cu.check(self.cu.rt.cudaStreamSynchronize(c.stream[b]), "cudaStreamSynchronize")
            self._rings.add(b)
        return ring

    def latency_us(self, a, b, loads=10_000):
        """µs of one dependent 8 B load by a thread of a from b's memory: one
        kernel of `loads` loads, event-timed, over `loads` (its launch is
        a few µs of a run of ~10 ms)."""
        c, rt = self.copies, self.cu.rt
        ring = self._ring(b)
        start, stop, _ = c.ev[a]
        sink = ctypes.c_void_p(c.dst[a].value)
        c.use(a)
        self.cu.check(rt.cudaEventRecord(start, c.stream[a]), "cudaEventRecord")
        self._launch(a, "ccb_chase", 1, 1, ring, ctypes.c_uint(loads), sink)
        self.cu.check(rt.cudaEventRecord(stop, c.stream[a]), "cudaEventRecord")
        return c.elapsed_s(start, stop) / loads * 1e6

    def close(self):
        if self._library is not None:
            self.cu.rt.cudaLibraryUnload(self._library)
            self._library = None
