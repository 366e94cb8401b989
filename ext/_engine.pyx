# cython: language_level=3, boundscheck=False, wraparound=False
"""The MPI engine: the kit's timed loop and collectives, over mpi4py's MPI.

Thin by design, as mpi4py is: buffers come in as numpy arrays, the loop runs
in C with the GIL released, and error codes become exceptions in `_check`.
"""
import re

import numpy as np
cimport numpy as cnp
from libc.stddef cimport size_t
from libc.stdint cimport int64_t
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from mpi4py cimport MPI
from mpi4py import MPI as pyMPI
from mpi4py.libmpi cimport MPI_Comm

from ccbench_kit.errors import RunError

cnp.import_array()

cdef extern from "ccb.h" nogil:
    ctypedef int ccb_dtype
    ctypedef int ccb_op
    ctypedef struct ccb_args:
        const void *sendbuf
        void *recvbuf
        size_t count
        ccb_dtype dtype
        ccb_op op
        int root
        MPI_Comm comm
        void *scratch
        size_t scratch_bytes
        size_t segment_bytes
        const int *sendcounts
        const int *sdispls
        const int *recvcounts
        const int *rdispls
        const int *peers
    ctypedef int (*ccb_coll_fn)(const ccb_args *a)
    ctypedef struct ccb_algorithm:
        const char *name
        ccb_coll_fn fn
        size_t (*scratch)(size_t count, size_t elsize, int nranks)
    ctypedef struct ccb_collective:
        const char *name
        const ccb_algorithm *algorithms
    int CCB_ERR_BASE, CCB_ERR_NOMEM, CCB_ERR_ARG, CCB_ERR_UNSUPPORTED
    const ccb_collective *ccb_find_collective(const char *name)
    const ccb_algorithm *ccb_find_algorithm(const char *coll, const char *alg)
    int ccb_collective_count()
    const ccb_collective *ccb_collective_at(int i)
    size_t ccb_dtype_size(ccb_dtype t)
    int ccb_types_init()
    void ccb_types_finalize()
    const char *ccb_mpi_build_id()
    int ccb_reduce3(const void *b, const void *c, void *out, size_t n, ccb_dtype t, ccb_op op)
    int ccb_finish_avg(void *buf, size_t n, ccb_dtype t, ccb_op op, int nranks)
    ctypedef struct ccb_watch:
        int64_t *calls
    int ccb_time_loop(ccb_coll_fn fn, const ccb_args *args, int nargs,
                      int warmup, int iters, int agg, int blocking,
                      double *lat_us, double *start_us, const ccb_watch *watch)


class EngineError(RunError):
    """A collective failed inside the engine; `code` is the MPI or kit code.

    A `RunError`: the CLI prints it as one line and exits 3, as for any
    failed run."""

    def __init__(self, code, where):
        self.code = code
        if code == CCB_ERR_NOMEM:
            what = "out of memory"
        elif code == CCB_ERR_ARG:
            what = "an argument the algorithm cannot take (count too large for MPI's int?)"
        elif code == CCB_ERR_UNSUPPORTED:
            what = "this dtype/op combination is not supported"
        else:
            what = pyMPI.Get_error_string(code)
        super().__init__(f"{where}: {what} (code {code})")


cdef int _check(int rc, where) except -1:
    if rc != 0:
        raise EngineError(rc, where)
    return 0


cdef extern from "coll.h" nogil:
    size_t CCB_SEGMENT_DEFAULT

BUILD_MPI = ccb_mpi_build_id().decode()
#: the pipelining segment of a run that gives none (segment_bytes 0)
SEGMENT_DEFAULT = CCB_SEGMENT_DEFAULT


def _check_mpi_pairing():
    """mpi4py's wheels choose an MPI at run time; ours is fixed at build."""
    runtime = pyMPI.Get_library_version()
    m = re.match(r"(Open MPI v\d+\.\d+\.\d+|MPICH Version:\s*\S+)", runtime)
    got = m.group(1) if m else runtime.splitlines()[0]
    norm = lambda s: re.sub(r"\s+", " ", s).strip()
    if norm(got) != norm(BUILD_MPI):
        raise ImportError(
            f"ccbench_kit was built against {BUILD_MPI!r} but mpi4py loaded "
            f"{got!r}. Make mpi4py use the same MPI: set MPI4PY_LIBMPI to that "
            "library (e.g. libmpi.so.40 for Open MPI), or rebuild mpi4py with "
            "MPICC=mpicc pip install --no-binary=mpi4py --no-cache-dir mpi4py, "
            "then rebuild ccbench_kit (make build).")


_check_mpi_pairing()


def collectives():
    """Names of the collectives the engine implements."""
    return [ccb_collective_at(i).name.decode() for i in range(ccb_collective_count())]


def algorithms(str collective):
    """Names of the engine's algorithms for `collective` (`mpi` first)."""
    cdef const ccb_collective *c = ccb_find_collective(collective.encode())
    if c == NULL:
        raise KeyError(collective)
    cdef const ccb_algorithm *a = c.algorithms
    names = []
    while a.name != NULL:
        names.append(a.name.decode())
        a += 1
    return names


def reduce_local(b, c, int dtype, int op, int nranks=1, out=None):
    """b (op) c elementwise, as the kit's own algorithms combine data (then
    divided by `nranks` for avg), into `out` if given.  No MPI: for tests
    and measurements of the reductions."""
    b, c = np.ascontiguousarray(b), np.ascontiguousarray(c)
    if b.shape != c.shape or b.dtype != c.dtype:
        raise ValueError("operands must have the same shape and dtype")
    if out is None:
        out = np.empty_like(b)
    elif out.shape != b.shape or out.dtype != b.dtype or not out.flags.c_contiguous:
        raise ValueError("out must be a C-contiguous array like the operands")
    cdef cnp.ndarray x = b, y = c, o = out
    _check(ccb_reduce3(cnp.PyArray_DATA(x), cnp.PyArray_DATA(y), cnp.PyArray_DATA(o),
                       x.size, dtype, op), "reduce_local")
    _check(ccb_finish_avg(cnp.PyArray_DATA(o), x.size, dtype, op, nranks), "reduce_local")
    return out


cdef const ccb_algorithm *_find(str collective, str algorithm) except NULL:
    cdef const ccb_algorithm *a = ccb_find_algorithm(collective.encode(), algorithm.encode())
    if a == NULL:
        raise KeyError(f"{collective}/{algorithm}")
    return a


def scratch_bytes(str collective, str algorithm, size_t count, size_t elsize, int nranks):
    """Scratch space the algorithm needs for `count` elements."""
    cdef const ccb_algorithm *a = _find(collective, algorithm)
    return a.scratch(count, elsize, nranks) if a.scratch != NULL else 0


cdef void *_ptr(object arr) except? NULL:
    if arr is None:
        return NULL
    cdef cnp.ndarray a = arr
    if not cnp.PyArray_IS_C_CONTIGUOUS(a):
        raise ValueError("buffers must be C-contiguous")
    return cnp.PyArray_DATA(a)


def time_loop(MPI.Comm comm, str collective, str algorithm, list buffers, *,
              int dtype, int op, size_t count, int root=0,
              int warmup=5, int iters=20, int agg=1, int blocking=0,
              size_t segment_bytes=0, sendcounts=None, sdispls=None,
              recvcounts=None, rdispls=None, peers=None, progress=None):
    """Run `warmup` + `iters` iterations of one algorithm; time the latter.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
    collective, algorithm : str
    buffers : list of (send, recv, scratch) numpy arrays, or (send, recv, scratch, count)
        Call k uses ``buffers[k % len(buffers)]`` (``--unique-buff``); a
        fourth item overrides `count` for that call (``--coalesced-cc-size-ratio``).
        In-place runs pass the same array (or the right view) as send and recv.
    dtype, op : int
        The engine's enum values (see ``ccbench_kit.dtypes``).
    count : int
        Elements, as the MPI call for this collective counts them.
    blocking : int
        nccl-tests' -z: 0 none; 1 a barrier after every operation, timed;
        2 wait for every operation (an MPI call has, on return: as 0);
        3 a barrier after every iteration, not timed.
    progress : numpy.ndarray of int64, shape (2,), optional
        Shared memory the launcher's watchdog reads: calls entered, calls left.

    Returns
    -------
    latency, start : numpy.ndarray, shape (iters,)
        Each measured iteration's duration and local start (MPI_Wtime), in µs.
    """
    cdef const ccb_algorithm *alg = _find(collective, algorithm)
    _check(ccb_types_init(), "creating MPI ops")  # needs MPI_Init, so not at import
    cdef int nargs = len(buffers)
    if nargs < 1:
        raise ValueError("at least one buffer set is needed")
    cdef ccb_args *args = <ccb_args *>PyMem_Malloc(nargs * sizeof(ccb_args))
    if args == NULL:
        raise MemoryError()
    vecs = [None if v is None else np.ascontiguousarray(v, dtype=np.int32)
            for v in (sendcounts, sdispls, recvcounts, rdispls, peers)]
    cdef cnp.ndarray lat = np.empty(iters, dtype=np.float64)
    cdef cnp.ndarray start = np.empty(iters, dtype=np.float64)
    cdef int rc, i
    cdef ccb_watch watch
    watch.calls = <int64_t *>_ptr(progress)
    try:
        for i in range(nargs):
            entry = buffers[i]
            send, recv, scratch = entry[0], entry[1], entry[2]
            args[i].sendbuf = _ptr(send)
            args[i].recvbuf = _ptr(recv)
            args[i].count = entry[3] if len(entry) > 3 else count
            args[i].dtype = dtype
            args[i].op = op
            args[i].root = root
            args[i].comm = comm.ob_mpi
            args[i].scratch = _ptr(scratch)
            args[i].scratch_bytes = 0 if scratch is None else scratch.nbytes
            args[i].segment_bytes = segment_bytes
            args[i].sendcounts = <const int *>_ptr(vecs[0])
            args[i].sdispls = <const int *>_ptr(vecs[1])
            args[i].recvcounts = <const int *>_ptr(vecs[2])
            args[i].rdispls = <const int *>_ptr(vecs[3])
            args[i].peers = <const int *>_ptr(vecs[4])
        with nogil:
            rc = ccb_time_loop(alg.fn, args, nargs, warmup, iters, agg, blocking,
                               <double *>cnp.PyArray_DATA(lat), <double *>cnp.PyArray_DATA(start),
                               &watch)
        _check(rc, f"{collective}/{algorithm}")
    finally:
        PyMem_Free(args)
    return lat, start


cdef int _noop(const ccb_args *a) noexcept nogil:
    return 0


def loop_overhead(MPI.Comm comm, int iters=10000):
    """Per-iteration durations (µs) of the timed loop around a no-op: the
    harness's own cost in every measured iteration."""
    cdef ccb_args args
    args.comm = comm.ob_mpi
    cdef cnp.ndarray lat = np.empty(iters, dtype=np.float64)
    cdef cnp.ndarray start = np.empty(iters, dtype=np.float64)
    cdef int rc
    with nogil:
        rc = ccb_time_loop(_noop, &args, 1, 0, iters, 1, 0,
                           <double *>cnp.PyArray_DATA(lat), <double *>cnp.PyArray_DATA(start), NULL)
    _check(rc, "loop_overhead")
    return lat
