# cython: language_level=3, boundscheck=False, wraparound=False
"""The NCCL backend's extension: CUDA and NCCL opened at run time.

Built with no CUDA or NCCL header (ext/nccl_api.h declares what is used), so
the package builds and imports on machines without a GPU.  Device pointers,
communicators and streams cross into Python as integers; the timed loops
run in C (ext/nccl_loop.c) with the GIL released.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport uintptr_t
from libc.stddef cimport size_t
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free

cnp.import_array()

cdef extern from "nccl_api.h" nogil:
    ctypedef int cudaError_t
    ctypedef void *cudaStream_t
    ctypedef void *cudaGraph_t
    ctypedef void *cudaGraphExec_t
    ctypedef int ncclResult_t
    ctypedef void *ncclComm_t
    ctypedef struct ncclUniqueId:
        char internal[128]
    ctypedef struct cudaIpcMemHandle_t:
        char reserved[64]
    ctypedef int CUresult
    ctypedef void *CUmodule
    ctypedef void *CUfunction
    ctypedef struct ccbn_lib:
        cudaError_t (*cudaGetDeviceCount)(int *) noexcept nogil
        cudaError_t (*cudaSetDevice)(int) noexcept nogil
        cudaError_t (*cudaMalloc)(void **, size_t) noexcept nogil
        cudaError_t (*cudaFree)(void *) noexcept nogil
        cudaError_t (*cudaMemcpy)(void *, const void *, size_t, int) noexcept nogil
        cudaError_t (*cudaMemset)(void *, int, size_t) noexcept nogil
        cudaError_t (*cudaDeviceSynchronize)() noexcept nogil
        cudaError_t (*cudaStreamCreateWithFlags)(cudaStream_t *, unsigned) noexcept nogil
        cudaError_t (*cudaStreamDestroy)(cudaStream_t) noexcept nogil
        const char *(*cudaGetErrorString)(cudaError_t) noexcept nogil
        cudaError_t (*cudaGetLastError)() noexcept nogil
        cudaError_t (*cudaDeviceGetPCIBusId)(char *, int, int) noexcept nogil
        cudaError_t (*cudaMemGetInfo)(size_t *, size_t *) noexcept nogil
        cudaError_t (*cudaRuntimeGetVersion)(int *) noexcept nogil
        cudaError_t (*cudaDriverGetVersion)(int *) noexcept nogil
        cudaError_t (*cudaGetDeviceProperties)(void *, int) noexcept nogil
        cudaError_t (*cudaGraphExecDestroy)(cudaGraphExec_t) noexcept nogil
        cudaError_t (*cudaGraphDestroy)(cudaGraph_t) noexcept nogil
        ncclResult_t (*ncclGetVersion)(int *) noexcept nogil
        ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *) noexcept nogil
        ncclResult_t (*ncclCommInitRank)(ncclComm_t *, int, ncclUniqueId, int) noexcept nogil
        ncclResult_t (*ncclCommDestroy)(ncclComm_t) noexcept nogil
        ncclResult_t (*ncclCommAbort)(ncclComm_t) noexcept nogil
        ncclResult_t (*ncclCommFinalize)(ncclComm_t) noexcept nogil
        const char *(*ncclGetErrorString)(ncclResult_t) noexcept nogil
        const char *(*ncclGetLastError)(ncclComm_t) noexcept nogil
        void *ncclAlltoAll
        void *ncclGather
        void *ncclScatter
        ncclResult_t (*ncclMemAlloc)(void **, size_t) noexcept nogil
        ncclResult_t (*ncclMemFree)(void *) noexcept nogil
        ncclResult_t (*ncclCommRegister)(ncclComm_t, void *, size_t, void **) noexcept nogil
        ncclResult_t (*ncclCommDeregister)(ncclComm_t, void *) noexcept nogil
        void (*ncclResetDebugInit)() noexcept nogil
        ncclResult_t (*ncclCommWindowRegister)(ncclComm_t, void *, size_t, void **, int) noexcept nogil
        ncclResult_t (*ncclCommWindowDeregister)(ncclComm_t, void *) noexcept nogil
        cudaError_t (*cudaIpcGetMemHandle)(cudaIpcMemHandle_t *, void *) noexcept nogil
        cudaError_t (*cudaIpcOpenMemHandle)(void **, cudaIpcMemHandle_t, unsigned) noexcept nogil
        cudaError_t (*cudaIpcCloseMemHandle)(void *) noexcept nogil
        cudaError_t (*cudaDeviceCanAccessPeer)(int *, int, int) noexcept nogil
        cudaError_t (*cudaDeviceGetByPCIBusId)(int *, const char *) noexcept nogil
        cudaError_t (*cudaDeviceGetAttribute)(int *, int, int) noexcept nogil
        CUresult (*cuModuleLoadData)(CUmodule *, const void *) noexcept nogil
        CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) noexcept nogil
        CUresult (*cuModuleUnload)(CUmodule) noexcept nogil
        void *cuLaunchKernel
        CUresult (*cuGetErrorString)(CUresult, const char **) noexcept nogil
    ctypedef struct ccbn_kargs:
        unsigned long long send, recv, count
        unsigned long long stage[8]
        unsigned long long signal[8]
        unsigned long long seq, half
        int rank, nranks
    ctypedef struct ccbn_call:
        int kind
        int p2p
        const void *send
        void *recv
        size_t count, elsize
        int dtype
        int op
        int root, rank, nranks
        ncclComm_t comm
        cudaStream_t stream
        const size_t *scounts
        const size_t *sdispls
        const size_t *rcounts
        const size_t *rdispls
        int send_to, recv_from
        CUfunction func
        unsigned grid, block
        ccbn_kargs kargs
        const void *param
    int CCBN_E_ARG, CCBN_E_NOSYM, CCBN_E_NCCL, CCBN_E_CUDA, CCBN_E_CU, CCBN_NKINDS
    int CCBN_MAX_PEERS, NCCL_WIN_COLL_SYMMETRIC, cudaIpcMemLazyEnablePeerAccess
    int cudaDevAttrComputeCapabilityMajor, cudaDevAttrComputeCapabilityMinor
    const char *ccbn_kind_name(int kind)
    int ccbn_open(ccbn_lib *L, const char *cudart_path, const char *nccl_path, char *err, size_t errlen)
    int ccbn_launch(const ccbn_lib *L, const ccbn_call *c, char *err, size_t errlen)
    int ccbn_warm(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int warmup, int agg,
                  char *err, size_t errlen)
    int ccbn_time(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int mode, int iters,
                  int agg, double *lat_us, double *start_us, char *err, size_t errlen)
    int ccbn_graph_build(const ccbn_lib *L, const ccbn_call *calls, int ncalls, int iters, int agg,
                         cudaGraph_t *graph, cudaGraphExec_t *exec, char *err, size_t errlen)
    int ccbn_graph_time(const ccbn_lib *L, cudaGraphExec_t exec, cudaStream_t stream, int launches,
                        double *sec, char *err, size_t errlen)
    double ccbn_monotonic_us()

# The collectives by their id in the loop (the lines of collectives.def, as
# ext/nccl_loop.c names them): written nowhere else on this side.
KINDS = tuple(ccbn_kind_name(i).decode() for i in range(CCBN_NKINDS))
MODES = {"cuda-events": 0, "batch": 1, "host-enqueue": 2}
# ncclResult_t values that mean "NCCL will not do this", not "something broke".
REFUSED = (4, 5)  # ncclInvalidArgument, ncclInvalidUsage
cdef size_t ERRLEN = 2048


class LoadError(RuntimeError):
    """A library could be found but not opened, or lacks a symbol."""


class CudaError(RuntimeError):
    def __init__(self, code, message):
        self.code = code
        super().__init__(message)


class NcclError(RuntimeError):
    """`result` is the ncclResult_t; `refused` when NCCL declined the call."""

    def __init__(self, result, message):
        self.result = result
        self.refused = result in REFUSED
        super().__init__(message)


cdef raise_for(int rc, char *err):
    msg = err.decode(errors="replace")
    if rc >= CCBN_E_CU:
        raise CudaError(rc - CCBN_E_CU, msg)
    if rc >= CCBN_E_CUDA:
        raise CudaError(rc - CCBN_E_CUDA, msg)
    if rc >= CCBN_E_NCCL:
        raise NcclError(rc - CCBN_E_NCCL, msg)
    if rc == CCBN_E_NOSYM:
        raise LoadError(msg)
    raise ValueError(msg)


def monotonic_us():
    """CLOCK_MONOTONIC in µs, the clock `start` times are read on."""
    return ccbn_monotonic_us()


cdef class Library:
    """libcudart and libnccl, opened from the given paths."""

    cdef ccbn_lib L
    cdef readonly str cudart_path, nccl_path

    def __cinit__(self, str cudart_path, str nccl_path):
        cdef char err[2048]
        err[0] = 0
        self.cudart_path, self.nccl_path = cudart_path, nccl_path
        rc = ccbn_open(&self.L, cudart_path.encode(), nccl_path.encode(), err, ERRLEN)
        if rc:
            raise LoadError(err.decode(errors="replace"))

    cdef int _cuda(self, cudaError_t e, str what) except -1:
        if e != 0:
            raise CudaError(e, f"{what}: {self.L.cudaGetErrorString(e).decode()} (CUDA error {e})")
        return 0

    cdef int _nccl(self, ncclResult_t r, str what, uintptr_t comm=0) except -1:
        if r != 0:
            msg = f"{what}: {self.L.ncclGetErrorString(r).decode()}"
            if comm and self.L.ncclGetLastError != NULL:
                last = self.L.ncclGetLastError(<ncclComm_t>comm).decode(errors="replace").strip()
                if last:
                    msg += f": {last}"
            raise NcclError(r, msg)
        return 0

    # -- versions and devices --------------------------------------------
    def nccl_version(self):
        cdef int v = 0
        self._nccl(self.L.ncclGetVersion(&v), "ncclGetVersion")
        return v

    def cuda_versions(self):
        """(runtime, driver) as CUDA encodes them (13000 = 13.0)."""
        cdef int rt = 0, drv = 0
        self._cuda(self.L.cudaRuntimeGetVersion(&rt), "cudaRuntimeGetVersion")
        self._cuda(self.L.cudaDriverGetVersion(&drv), "cudaDriverGetVersion")
        return rt, drv

    def has(self, str symbol):
        """Whether an optional NCCL entry point exists in this library."""
        return {
            "ncclAlltoAll": self.L.ncclAlltoAll != NULL,
            "ncclGather": self.L.ncclGather != NULL,
            "ncclScatter": self.L.ncclScatter != NULL,
            "ncclMemAlloc": self.L.ncclMemAlloc != NULL,
            "ncclCommRegister": self.L.ncclCommRegister != NULL,
            "ncclResetDebugInit": self.L.ncclResetDebugInit != NULL,
            "ncclCommWindowRegister": self.L.ncclCommWindowRegister != NULL,
            "cudaIpcOpenMemHandle": self.L.cudaIpcOpenMemHandle != NULL,
            "cuLaunchKernel": self.L.cuLaunchKernel != NULL,
        }[symbol]

    def device_count(self):
        cdef int n = 0
        cdef cudaError_t e = self.L.cudaGetDeviceCount(&n)
        return n if e == 0 else 0

    def set_device(self, int dev):
        self._cuda(self.L.cudaSetDevice(dev), f"cudaSetDevice({dev})")

    def device_info(self, int dev):
        """Name, PCI bus id and total memory (bytes) of device `dev` (current)."""
        cdef char bus[64]
        cdef size_t free_b = 0, total_b = 0
        cdef char *props = <char *>malloc(16384)  # cudaDeviceProp, name first
        if props == NULL:
            raise MemoryError()
        try:
            memset(props, 0, 16384)
            self._cuda(self.L.cudaGetDeviceProperties(props, dev), "cudaGetDeviceProperties")
            props[255] = 0
            name = props[:256].split(b"\0", 1)[0].decode(errors="replace")
        finally:
            free(props)
        self._cuda(self.L.cudaDeviceGetPCIBusId(bus, 64, dev), "cudaDeviceGetPCIBusId")
        self._cuda(self.L.cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo")
        return {"name": name, "pci_bus_id": bus.decode(), "memory_bytes": int(total_b),
                "free_bytes": int(free_b)}

    # -- communicators and streams -----------------------------------------
    def unique_id(self):
        cdef ncclUniqueId uid
        self._nccl(self.L.ncclGetUniqueId(&uid), "ncclGetUniqueId")
        return bytes((<char *>uid.internal)[:128])

    def comm_init(self, int nranks, bytes uid, int rank):
        cdef ncclUniqueId cuid
        cdef ncclComm_t comm = NULL
        cdef ncclResult_t r
        if len(uid) != 128:
            raise ValueError("an NCCL unique id is 128 bytes")
        memcpy(cuid.internal, <char *>uid, 128)
        with nogil:
            r = self.L.ncclCommInitRank(&comm, nranks, cuid, rank)
        self._nccl(r, "ncclCommInitRank")
        return <uintptr_t>comm

    def comm_destroy(self, uintptr_t comm, bint abort=False):
        cdef ncclResult_t r
        with nogil:
            if abort:
                r = self.L.ncclCommAbort(<ncclComm_t>comm)
            else:
                if self.L.ncclCommFinalize != NULL:
                    self.L.ncclCommFinalize(<ncclComm_t>comm)
                r = self.L.ncclCommDestroy(<ncclComm_t>comm)
        self._nccl(r, "ncclCommAbort" if abort else "ncclCommDestroy")

    def stream_create(self):
        cdef cudaStream_t s = NULL
        self._cuda(self.L.cudaStreamCreateWithFlags(&s, 1), "cudaStreamCreateWithFlags")
        return <uintptr_t>s

    def stream_destroy(self, uintptr_t s):
        self._cuda(self.L.cudaStreamDestroy(<cudaStream_t>s), "cudaStreamDestroy")

    def reset_debug(self):
        """Make NCCL re-read NCCL_DEBUG*; False when this NCCL cannot."""
        if self.L.ncclResetDebugInit == NULL:
            return False
        self.L.ncclResetDebugInit()
        return True

    # -- memory --------------------------------------------------------------
    def malloc(self, size_t nbytes, str kind="cudaMalloc"):
        cdef void *p = NULL
        if nbytes == 0:
            nbytes = 1
        if kind == "ncclMemAlloc":
            if self.L.ncclMemAlloc == NULL:
                raise NcclError(5, "ncclMemAlloc: not in this NCCL (needs 2.19 or later)")
            self._nccl(self.L.ncclMemAlloc(&p, nbytes), f"ncclMemAlloc({nbytes})")
        else:
            self._cuda(self.L.cudaMalloc(&p, nbytes), f"cudaMalloc({nbytes})")
        return <uintptr_t>p

    def free(self, uintptr_t ptr, str kind="cudaMalloc"):
        if kind == "ncclMemAlloc":
            self._nccl(self.L.ncclMemFree(<void *>ptr), "ncclMemFree")
        else:
            self._cuda(self.L.cudaFree(<void *>ptr), "cudaFree")

    def register(self, uintptr_t comm, uintptr_t ptr, size_t nbytes):
        cdef void *h = NULL
        if self.L.ncclCommRegister == NULL:
            raise NcclError(5, "ncclCommRegister: not in this NCCL (needs 2.19 or later)")
        self._nccl(self.L.ncclCommRegister(<ncclComm_t>comm, <void *>ptr, nbytes, &h),
                   "ncclCommRegister", comm)
        return <uintptr_t>h

    def deregister(self, uintptr_t comm, uintptr_t handle):
        self._nccl(self.L.ncclCommDeregister(<ncclComm_t>comm, <void *>handle),
                   "ncclCommDeregister", comm)

    def window_register(self, uintptr_t comm, uintptr_t ptr, size_t nbytes):
        """ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC (-R 2), a
        collective call: every rank registers the same sizes in the same order."""
        cdef void *win = NULL
        cdef ncclResult_t r
        if self.L.ncclCommWindowRegister == NULL:
            raise NcclError(5, "ncclCommWindowRegister: not in this NCCL (needs 2.27 or later)")
        with nogil:
            r = self.L.ncclCommWindowRegister(<ncclComm_t>comm, <void *>ptr, nbytes, &win,
                                              NCCL_WIN_COLL_SYMMETRIC)
        self._nccl(r, "ncclCommWindowRegister", comm)
        return <uintptr_t>win

    def window_deregister(self, uintptr_t comm, uintptr_t win):
        cdef ncclResult_t r
        with nogil:
            r = self.L.ncclCommWindowDeregister(<ncclComm_t>comm, <void *>win)
        self._nccl(r, "ncclCommWindowDeregister", comm)

    # -- peer memory and the kit's own kernels (backends/gpu_kernels) --------
    def compute_capability(self, int dev):
        """(major, minor) of device `dev`."""
        cdef int major = 0, minor = 0
        if self.L.cudaDeviceGetAttribute == NULL:
            raise CudaError(0, f"cudaDeviceGetAttribute: not in {self.cudart_path}")
        self._cuda(self.L.cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev),
                   "cudaDeviceGetAttribute")
        self._cuda(self.L.cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev),
                   "cudaDeviceGetAttribute")
        return major, minor

    def device_by_bus_id(self, str bus_id):
        """This process's ordinal of the GPU at PCI `bus_id`, or -1 where it isn't visible."""
        cdef int dev = -1
        if self.L.cudaDeviceGetByPCIBusId == NULL:
            return -1
        if self.L.cudaDeviceGetByPCIBusId(&dev, bus_id.encode()) != 0:
            self.L.cudaGetLastError()
            return -1
        return dev

    def can_access_peer(self, int dev, int peer):
        cdef int ok = 0
        self._cuda(self.L.cudaDeviceCanAccessPeer(&ok, dev, peer), "cudaDeviceCanAccessPeer")
        return bool(ok)

    def ipc_handle(self, uintptr_t ptr):
        """cudaIpcGetMemHandle of a cudaMalloc'ed pointer, as 64 bytes."""
        cdef cudaIpcMemHandle_t h
        if self.L.cudaIpcGetMemHandle == NULL:
            raise CudaError(0, f"cudaIpcGetMemHandle: not in {self.cudart_path}")
        self._cuda(self.L.cudaIpcGetMemHandle(&h, <void *>ptr), "cudaIpcGetMemHandle")
        return bytes((<char *>h.reserved)[:64])

    def ipc_open(self, bytes handle):
        """Map another process's allocation here (peer access enabled as needed)."""
        cdef cudaIpcMemHandle_t h
        cdef void *p = NULL
        if len(handle) != 64:
            raise ValueError("a CUDA IPC handle is 64 bytes")
        memcpy(h.reserved, <char *>handle, 64)
        self._cuda(self.L.cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                   "cudaIpcOpenMemHandle")
        return <uintptr_t>p

    def ipc_close(self, uintptr_t ptr):
        self._cuda(self.L.cudaIpcCloseMemHandle(<void *>ptr), "cudaIpcCloseMemHandle")

    cdef int _cu(self, CUresult r, str what) except -1:
        cdef const char *s = NULL
        if r != 0:
            if self.L.cuGetErrorString != NULL:
                self.L.cuGetErrorString(r, &s)
            raise CudaError(r, f"{what}: {s.decode() if s != NULL else 'unknown error'} "
                               f"(CUresult {r})")
        return 0

    def module_load(self, bytes image):
        """cuModuleLoadData of a cubin or PTX image (current device)."""
        cdef CUmodule m = NULL
        if self.L.cuModuleLoadData == NULL or self.L.cuLaunchKernel == NULL:
            raise CudaError(0, "the CUDA driver library libcuda.so.1 could not be loaded")
        self._cu(self.L.cuModuleLoadData(&m, <const char *>image), "cuModuleLoadData")
        return <uintptr_t>m

    def module_function(self, uintptr_t module, str name):
        cdef CUfunction f = NULL
        self._cu(self.L.cuModuleGetFunction(&f, <CUmodule>module, name.encode()),
                 f"cuModuleGetFunction({name})")
        return <uintptr_t>f

    def module_unload(self, uintptr_t module):
        self._cu(self.L.cuModuleUnload(<CUmodule>module), "cuModuleUnload")

    def upload(self, uintptr_t ptr, cnp.ndarray host):
        """Copy a C-contiguous host array to the device, and wait for it."""
        if not cnp.PyArray_IS_C_CONTIGUOUS(host):
            host = np.ascontiguousarray(host)
        cdef size_t n = host.nbytes
        cdef void *src = cnp.PyArray_DATA(host)
        cdef cudaError_t e
        with nogil:
            e = self.L.cudaMemcpy(<void *>ptr, src, n, 1)
            if e == 0:
                # pageable copies may still be in flight: the timed stream
                # does not order itself after the legacy stream
                e = self.L.cudaDeviceSynchronize()
        self._cuda(e, "cudaMemcpy (host to device)")

    def download(self, uintptr_t ptr, cnp.ndarray out):
        cdef size_t n = out.nbytes
        cdef void *dst = cnp.PyArray_DATA(out)
        cdef cudaError_t e
        with nogil:
            e = self.L.cudaDeviceSynchronize()
            if e == 0:
                e = self.L.cudaMemcpy(dst, <void *>ptr, n, 2)
        self._cuda(e, "cudaMemcpy (device to host)")
        return out

    def fill(self, uintptr_t ptr, int byte, size_t nbytes):
        self._cuda(self.L.cudaMemset(<void *>ptr, byte, nbytes), "cudaMemset")
        self._cuda(self.L.cudaDeviceSynchronize(), "cudaDeviceSynchronize")

    # -- the timed loop -------------------------------------------------------
    def time_loop(self, list calls, str mode="cuda-events", int warmup=5, int iters=20,
                  int agg=1, barrier=None, int graph_launches=1):
        """Warm up, call `barrier()`, then time `iters` iterations.

        Parameters
        ----------
        calls : list of dict
            One NCCL call each (keys as `ccbn_call` in ext/nccl_api.h; vectors
            ``scounts sdispls rcounts rdispls`` as int64 arrays); iteration
            launches cycle through them (``--unique-buff``).
        mode : {"cuda-events", "batch", "host-enqueue", "graph"}
            host-enqueue: the host clock around each iteration's enqueue
            (nccl-tests' cputime), one stream sync after the last.

        Returns
        -------
        latency, start : numpy.ndarray, shape (iters,)
            µs per iteration; start on CLOCK_MONOTONIC (µs).
        """
        cdef int n = len(calls)
        if n < 1:
            raise ValueError("at least one call is needed")
        if mode not in ("cuda-events", "batch", "host-enqueue", "graph"):
            raise ValueError(f"unknown timing mode {mode!r}")
        cdef ccbn_call *cs = <ccbn_call *>malloc(n * sizeof(ccbn_call))
        if cs == NULL:
            raise MemoryError()
        cdef char err[2048]
        err[0] = 0
        cdef cnp.ndarray lat = np.full(iters, np.nan)
        cdef cnp.ndarray start = np.full(iters, np.nan)
        cdef int rc = 0, m = MODES.get(mode, 1), i
        cdef cudaGraph_t graph = NULL
        cdef cudaGraphExec_t gexec = NULL
        cdef double sec = 0, t0
        keep = []
        try:
            for i in range(n):
                _fill_call(&cs[i], calls[i], keep)
            with nogil:
                rc = ccbn_warm(&self.L, cs, n, warmup, agg, err, ERRLEN)
            if rc:
                raise_for(rc, err)
            if mode == "graph":
                with nogil:
                    rc = ccbn_graph_build(&self.L, cs, n, iters, agg, &graph, &gexec, err, ERRLEN)
                if rc:
                    raise_for(rc, err)
            if barrier is not None:
                barrier()
            if mode == "graph":
                t0 = ccbn_monotonic_us()
                with nogil:
                    rc = ccbn_graph_time(&self.L, gexec, cs[0].stream, graph_launches, &sec, err, ERRLEN)
                if rc:
                    raise_for(rc, err)
                per = sec * 1e6 / (iters * agg * graph_launches)
                lat[:] = per
                start[:] = t0 + np.arange(iters) * per * agg
            else:
                with nogil:
                    rc = ccbn_time(&self.L, cs, n, m, iters, agg, <double *>cnp.PyArray_DATA(lat),
                                   <double *>cnp.PyArray_DATA(start), err, ERRLEN)
                if rc:
                    raise_for(rc, err)
        finally:
            if gexec != NULL:
                self.L.cudaGraphExecDestroy(gexec)
            if graph != NULL:
                self.L.cudaGraphDestroy(graph)
            free(cs)
        return lat, start


cdef int _fill_kernel(ccbn_call *c, tuple own, list keep) except -1:
    func, grid, block, a = own
    c.func = <CUfunction><uintptr_t>func
    c.grid, c.block = grid, block
    cdef const unsigned char[::1] param
    if isinstance(a, bytes):  # the argument as the kernel lays it out (device-API kernels)
        param = a
        keep.append(a)
        c.param = <const void *>&param[0]
        return 0
    stage, signal = a["stage"], a["signal"]
    if len(stage) > CCBN_MAX_PEERS or len(signal) > CCBN_MAX_PEERS:
        raise ValueError(f"the kit's own kernels take at most {CCBN_MAX_PEERS} ranks")
    c.kargs.send, c.kargs.recv, c.kargs.count = a["send"], a["recv"], a["count"]
    for i in range(len(stage)):
        c.kargs.stage[i] = stage[i]
        c.kargs.signal[i] = signal[i]
    c.kargs.seq, c.kargs.half = a["seq"], a["half"]
    c.kargs.rank, c.kargs.nranks = a["rank"], a["nranks"]
    return 0


cdef int _fill_call(ccbn_call *c, dict d, list keep) except -1:
    memset(c, 0, sizeof(ccbn_call))
    c.kind = KINDS.index(d["kind"])
    c.p2p = int(d.get("p2p", 0))
    c.send = <const void *><uintptr_t>d["send"]
    c.recv = <void *><uintptr_t>d["recv"]
    c.count = d["count"]
    c.elsize = d["elsize"]
    c.dtype = d["dtype"]
    c.op = d.get("op", 0)
    c.root = d.get("root", 0)
    c.rank = d["rank"]
    c.nranks = d["nranks"]
    c.comm = <ncclComm_t><uintptr_t>d["comm"]
    c.stream = <cudaStream_t><uintptr_t>d["stream"]
    c.send_to = d.get("send_to", -1)
    c.recv_from = d.get("recv_from", -1)
    own = d.get("kernel")
    if own is not None:  # the kit's own kernel: (function, grid, block, kargs dict or bytes)
        _fill_kernel(c, own, keep)
    cdef cnp.ndarray v
    for name in ("scounts", "sdispls", "rcounts", "rdispls"):
        if d.get(name) is None:
            continue
        v = np.ascontiguousarray(d[name], dtype=np.uint64)
        if v.shape[0] < c.nranks:
            raise ValueError(f"{name} needs {c.nranks} entries")
        keep.append(v)
        if name == "scounts":
            c.scounts = <const size_t *>cnp.PyArray_DATA(v)
        elif name == "sdispls":
            c.sdispls = <const size_t *>cnp.PyArray_DATA(v)
        elif name == "rcounts":
            c.rcounts = <const size_t *>cnp.PyArray_DATA(v)
        else:
            c.rdispls = <const size_t *>cnp.PyArray_DATA(v)
    if c.kind == KINDS.index("alltoallv") and (c.scounts == NULL or c.sdispls == NULL
                                               or c.rcounts == NULL or c.rdispls == NULL):
        raise ValueError("alltoallv needs scounts, sdispls, rcounts and rdispls")
    return 0
