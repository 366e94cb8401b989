"""Device buffers of the nccl backend, and the pool that reuses them.

nccl-tests allocates its largest send and receive buffers once and runs every
size at their start.  The pool does the same: a buffer no longer referenced
goes back to the pool, and the next request takes the smallest free
allocation that holds it.  Since the harness warms the largest sizes up
before timing anything (`Sweep._warm_every_size`), every size of a sweep runs
in the same two or three allocations, as in nccl-tests, and nothing is
allocated between timed loops.  Against allocating each size anew
(`--fresh-buffers`) it made no difference beyond run-to-run noise at
256 MiB-4 GiB on 2x H200 (bench/RESULTS.md).
"""
import weakref

from .. import _nccl

# Whole 2 MiB pages, as the one large buffer nccl-tests allocates is: on
# small cudaMalloc'ed buffers, which the CUDA allocator packs into shared
# pages, NCCL 2.28's small-message collectives took 2-6 µs longer (2x H200).
ALLOC_ALIGN = 2 << 20


class Allocation:
    """One device allocation; freed (and deregistered) when unreferenced."""

    def __init__(self, lib, nbytes, kind):
        self.lib, self.nbytes, self.kind = lib, nbytes, kind
        self.ptr = lib.malloc(nbytes, kind)
        self.registered = {}  # communicator -> (handle, symmetric window?)

    def deregister(self):
        for comm, (handle, window) in self.registered.items():
            try:
                if window:
                    self.lib.window_deregister(comm, handle)
                else:
                    self.lib.deregister(comm, handle)
            except (_nccl.NcclError, _nccl.CudaError):  # the communicator is gone already
                pass
        self.registered.clear()

    def __del__(self):
        try:
            self.deregister()
            self.lib.free(self.ptr, self.kind)
        except (_nccl.NcclError, _nccl.CudaError):  # at exit, the context may be torn down
            pass


class _Lease:
    """An allocation in use; back to the pool when the last view is gone."""

    def __init__(self, pool, allocation):
        self.allocation = allocation
        self._pool = weakref.ref(pool) if pool is not None else None

    def __del__(self):
        pool = self._pool() if self._pool is not None else None
        if pool is not None:
            pool.release(self.allocation)


class Pool:
    """Allocations of one device, reused across sizes unless `reuse` is off."""

    def __init__(self, lib, kind, reuse=True):
        self.lib, self.kind, self.reuse = lib, kind, reuse
        self._free = []
        self._all = weakref.WeakSet()

    def take(self, nbytes):
        nbytes = -(-max(nbytes, 1) // ALLOC_ALIGN) * ALLOC_ALIGN
        fit = [a for a in self._free if a.nbytes >= nbytes]
        if fit:
            a = min(fit, key=lambda a: a.nbytes)
            self._free.remove(a)
        else:
            # a sweep grows: free buffers too small now are never used again
            self._free.clear()
            a = Allocation(self.lib, nbytes, self.kind)
            self._all.add(a)
        return _Lease(self if self.reuse else None, a)

    def release(self, allocation):
        self._free.append(allocation)

    @property
    def free_bytes(self):
        return sum(a.nbytes for a in self._free)

    @property
    def allocated_bytes(self):
        """Bytes of every allocation alive, in use or free."""
        return sum(a.nbytes for a in self._all)

    def close(self):
        for a in list(self._all):
            a.deregister()
        self._free.clear()


class DeviceBuffer:
    """A 1-d array of `dtype` in device memory; slices are views."""

    def __init__(self, lease, dtype, offset, nelems):
        self._lease, self.allocation = lease, lease.allocation
        self.dtype, self.offset, self.size = dtype, offset, nelems

    @property
    def ptr(self):
        return self.allocation.ptr + self.offset * self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def shape(self):
        return (self.size,)

    def __len__(self):
        return self.size

    def __getitem__(self, key):
        if not isinstance(key, slice):
            raise TypeError("device buffers take slices only")
        start, stop, step = key.indices(self.size)
        if step != 1:
            raise ValueError("device buffer slices must be contiguous")
        return DeviceBuffer(self._lease, self.dtype, self.offset + start, max(stop - start, 0))

    def __repr__(self):
        return f"DeviceBuffer({self.dtype.name}[{self.size}] at {self.ptr:#x})"


def overlap(a, b):
    """Whether two device buffers share memory (an in-place call)."""
    return (a.allocation is b.allocation and a.offset < b.offset + b.size
            and b.offset < a.offset + a.size)

