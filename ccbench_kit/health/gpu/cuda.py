"""The GPU's own rates, timed with CUDA events: device copy (HBM), a bf16
matrix product (tensor cores), pinned host<->device copies (PCIe).

The CUDA runtime and cuBLAS are opened with ctypes at run time, found the
way the NCCL backend finds libcudart (`backends.nccl_lib.find`): no Python
CUDA package is needed, nothing is compiled, and a CPU-only install imports
this module without a GPU or a CUDA library (the libraries are opened when a
`Device` is made).  CuPy would do the copies but has no bf16 type and comes
built for one CUDA major version (``cupy-cuda12x`` / ``cupy-cuda13x``);
cuda-bindings gives the same runtime calls as ctypes does here, one
dependency more.

Every rate is one sample: the caller repeats and
interleaves them (`check`), so a burst of other work hits one sample of
every figure, not every sample of one.
"""
import ctypes
import time

import numpy as np

from ...backends.nccl_lib import find
from ...errors import CCBenchError

# cudaMemcpyKind
H2D, D2H, D2D = 1, 2, 3
# cudaDataType / cublasComputeType_t / cublasGemmAlgo_t (cuda_runtime_api.h, cublas_api.h)
CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT, CUBLAS_OP_N = 14, 68, -1, 0
NO_DEVICE, INSUFFICIENT_DRIVER = 100, 35  # cudaErrorNoDevice, cudaErrorInsufficientDriver


class CudaError(CCBenchError):
    """A CUDA runtime or cuBLAS call failed (or no GPU / no CUDA library)."""

    exit_code = 3  # while measuring; `health.gpu.local` turns one before it into bad input


def _libraries():
    """(cudart, cublas) opened; `CudaError` naming where each was looked for."""
    out = []
    for which, hint in (("cudart", "pip install nvidia-cuda-runtime (or a CUDA toolkit)"),
                        ("cublas", "pip install nvidia-cublas (or a CUDA toolkit)")):
        found = find(which)
        if not found.path:
            raise CudaError(f"lib{which} not found; looked in: {'; '.join(found.looked)}. "
                            f"To get it: {hint}")
        try:
            out.append(ctypes.CDLL(found.path, mode=ctypes.RTLD_GLOBAL))
        except OSError as e:
            raise CudaError(f"cannot open {found.path}: {e}") from e
    return tuple(out)


class Runtime:
    """The CUDA runtime and cuBLAS of this process."""

    def __init__(self):
        self.rt, self.blas = _libraries()
        self.rt.cudaGetErrorString.restype = ctypes.c_char_p

    def check(self, code, what):
        if code:
            msg = self.rt.cudaGetErrorString(code).decode(errors="replace")
            raise CudaError(f"{what} failed: CUDA error {code} ({msg})")

    def blas_check(self, code, what):
        if code:
            raise CudaError(f"{what} failed: cuBLAS status {code}")

    def new_handle(self, fn, *args, what=None):
        """The pointer or handle runtime call `fn` writes through its first
        argument (``cudaMalloc``, ``cudaEventCreate``...), checked."""
        h = ctypes.c_void_p()
        self.check(getattr(self.rt, fn)(ctypes.byref(h), *args), what or fn)
        return h

    def device_count(self):
        """Number of CUDA devices (0 when the driver sees none)."""
        n = ctypes.c_int(0)
        code = self.rt.cudaGetDeviceCount(ctypes.byref(n))
        if code in (NO_DEVICE, INSUFFICIENT_DRIVER):
            return 0
        self.check(code, "cudaGetDeviceCount")
        return n.value

    def pci_bus_id(self, index):
        buf = ctypes.create_string_buffer(64)
        self.check(self.rt.cudaDeviceGetPCIBusId(buf, 64, index), "cudaDeviceGetPCIBusId")
        return buf.value.decode()

    def versions(self):
        """(runtime, driver) CUDA versions as 'major.minor'."""
        out = []
        for fn in ("cudaRuntimeGetVersion", "cudaDriverGetVersion"):
            v = ctypes.c_int(0)
            getattr(self.rt, fn)(ctypes.byref(v))
            out.append(f"{v.value // 1000}.{v.value % 1000 // 10}")
        return tuple(out)


class Device:
    """Buffers and a cuBLAS handle on one GPU, kept for the whole check.

    Parameters
    ----------
    runtime : Runtime
    index : int
        CUDA device index.
    copy_bytes, pcie_bytes : int
        Device copy size (each of source and destination) and pinned
        host<->device copy size.
    n : int
        Matrix side of the bf16 product (n x n x n).
    """

    def __init__(self, runtime, index, copy_bytes=1 << 30, pcie_bytes=256 << 20, n=8192):
        self.cu, self.index, self.n = runtime, index, n
        self.copy_bytes, self.pcie_bytes = copy_bytes, pcie_bytes
        self._ptrs, self._host, self._events, self.handle = [], [], [], None
        rt = runtime.rt
        try:
            runtime.check(rt.cudaSetDevice(index), f"cudaSetDevice({index})")
            self.src, self.dst = self._malloc(copy_bytes), self._malloc(copy_bytes)
            mat = n * n * 2
            self.a, self.b, self.c = (self._malloc(mat) for _ in range(3))
            self._fill_random(self.a, mat, seed=1)
            self._fill_random(self.b, mat, seed=2)
            self.pinned = self._malloc_host(pcie_bytes)
            self.dev_pcie = self._malloc(pcie_bytes)
            self.start, self.stop = self._event(), self._event()
            h = ctypes.c_void_p()
            runtime.blas_check(runtime.blas.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
            self.handle = h
        except Exception:
            self.close()
            raise

    def _malloc(self, nbytes):
        self._ptrs.append(self.cu.new_handle("cudaMalloc", ctypes.c_size_t(nbytes),
                                             what=f"cudaMalloc({nbytes} B) on GPU {self.index}"))
        return self._ptrs[-1]

    def _malloc_host(self, nbytes):
        p = ctypes.c_void_p()
        self.cu.check(self.cu.rt.cudaMallocHost(ctypes.byref(p), ctypes.c_size_t(nbytes)),
                      f"cudaMallocHost({nbytes} B)")
        self._host.append(p)
        return p

    def _event(self):
        self._events.append(self.cu.new_handle("cudaEventCreate"))
        return self._events[-1]

    def _fill_random(self, ptr, nbytes, seed, block=16 << 20):
        """Random bf16 values (normal, truncated from float32): a matrix
        product's power, so its clock, depends on the data; zeros run
        faster than real work.  A 16 MiB random block is tiled over the
        matrix."""
        bits = np.random.default_rng(seed).standard_normal(block // 2, dtype=np.float32)
        host = (bits.view(np.uint32) >> 16).astype(np.uint16)
        for off in range(0, nbytes, block):
            k = min(block, nbytes - off)
            self.cu.check(self.cu.rt.cudaMemcpy(ctypes.c_void_p(ptr.value + off),
                                                host.ctypes.data_as(ctypes.c_void_p),
                                                ctypes.c_size_t(k), H2D), "cudaMemcpy (fill)")

    def _time(self, fn, reps):
        """Seconds for `reps` calls of `fn` on the default stream (CUDA events)."""
        rt = self.cu.rt
        rt.cudaSetDevice(self.index)
        self.cu.check(rt.cudaEventRecord(self.start, None), "cudaEventRecord")
        for _ in range(reps):
            fn()
        self.cu.check(rt.cudaEventRecord(self.stop, None), "cudaEventRecord")
        self.cu.check(rt.cudaEventSynchronize(self.stop), "cudaEventSynchronize")
        ms = ctypes.c_float()
        self.cu.check(rt.cudaEventElapsedTime(ctypes.byref(ms), self.start, self.stop),
                      "cudaEventElapsedTime")
        return ms.value / 1e3

    def _copy(self, dst, src, nbytes, kind):
        return lambda: self.cu.check(self.cu.rt.cudaMemcpyAsync(
            dst, src, ctypes.c_size_t(nbytes), kind, None), "cudaMemcpyAsync")

    def hbm_gbps(self, reps=50):
        """Device-to-device copy, GB/s counting bytes read and written."""
        t = self._time(self._copy(self.dst, self.src, self.copy_bytes, D2D), reps)
        return 2 * self.copy_bytes * reps / t / 1e9

    def h2d_gbps(self, reps=10):
        """Pinned host -> device copy, GB/s."""
        t = self._time(self._copy(self.dev_pcie, self.pinned, self.pcie_bytes, H2D), reps)
        return self.pcie_bytes * reps / t / 1e9

    def d2h_gbps(self, reps=10):
        """Device -> pinned host copy, GB/s."""
        t = self._time(self._copy(self.pinned, self.dev_pcie, self.pcie_bytes, D2H), reps)
        return self.pcie_bytes * reps / t / 1e9

    def matmul_tflops(self, reps=50):
        """bf16 n x n x n product (fp32 accumulation, cublasGemmEx), TFLOP/s."""
        n, blas = self.n, self.cu.blas
        one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

        def gemm():
            self.cu.blas_check(blas.cublasGemmEx(
                self.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, ctypes.byref(one),
                self.a, CUDA_R_16BF, n, self.b, CUDA_R_16BF, n, ctypes.byref(zero),
                self.c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT), "cublasGemmEx")
        t = self._time(gemm, reps)
        return 2.0 * n ** 3 * reps / t / 1e12

    def warm_up(self, seconds=0.5):
        """Matrix products for `seconds`: the clocks leave idle before timing."""
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            self.matmul_tflops(reps=10)

    def close(self):
        rt = self.cu.rt
        rt.cudaSetDevice(self.index)
        if self.handle is not None:
            self.cu.blas.cublasDestroy_v2(self.handle)
            self.handle = None
        for e in self._events:
            rt.cudaEventDestroy(e)
        for p in self._ptrs:
            rt.cudaFree(p)
        for p in self._host:
            rt.cudaFreeHost(p)
        self._events, self._ptrs, self._host = [], [], []
