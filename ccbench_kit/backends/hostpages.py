"""Host buffers the way the peers allocate them, and the pages they got.

Two things of a host buffer change a memory-bound time: its pages and where
it starts.  IMB, OSU and nccl-tests' host side take their buffers from plain
``malloc``: glibc serves a large block from its own ``mmap``, on 4 KiB pages
(THP in ``madvise`` mode), starting 16 B into a page (its chunk header), so
wide vector loads of the reduction straddle cache lines.  numpy's arrays
start 64 B-aligned.  So ``off`` (the default) takes the buffers from libc's
``malloc`` itself (`malloc_array`): the peers' allocator, alignment and
pages, not an imitation of them.  (glibc's mmap threshold is left to move
as it does in the peers: pinning it, to make every buffer a fresh mapping,
made Open MPI's own temporaries fresh mappings too, and its large
all_reduce 2x slower; bench/RESULTS.md.)

IMB, OSU and nccl-tests' host side allocate with plain ``malloc``; numpy
allocates with ``malloc``/``calloc`` too, but since 1.22 it also calls
``madvise(MADV_HUGEPAGE)`` on allocations of 4 MiB or more (numpy 2.4: its
``malloc`` path, ``np.empty``; not ``np.zeros``' ``calloc``), and where
``/sys/kernel/mm/transparent_hugepage/enabled`` is ``madvise`` (most
distributions) that gives the kit's large buffers 2 MiB pages that the peers'
buffers never get: fewer TLB misses and page faults, so a memory-bound size
reads faster than IMB on the same library.  Nor is it the buffers alone:
numpy's madvise of any large array in the heap marks that part of the heap,
and glibc serves later ``malloc`` s from it.  So the MPI backend switches
numpy's (process-wide) flag for the rank's whole life (`set_numpy_madvise`):
``off`` is the peers' memory, ``madvise`` numpy's (its buffers are ``np.empty``, which numpy advises, so
they do get 2 MiB pages).  `huge_kb` reads back what the kernel gave
(``AnonHugePages`` of the mapping, ``/proc/self/smaps``).
"""
import ctypes
import functools
import weakref

import numpy as np

CHOICES = ("off", "madvise")
NUMPY_MADVISE_FROM = 1 << 22   # numpy's threshold (numpy/_core/src/multiarray/alloc.c)
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def set_numpy_madvise(on):
    """Turn numpy's madvise(MADV_HUGEPAGE) of arrays from 4 MiB on or off
    for this process (numpy >= 1.20); returns the setting it replaced."""
    try:
        from numpy._core import multiarray as m  # lazy: numpy 2's private name, tried first
    except ImportError:  # numpy 1.x names it numpy.core
        from numpy.core import multiarray as m  # lazy: numpy 1.x's name of the same module
    return bool(m._set_madvise_hugepage(bool(on)))


@functools.lru_cache(maxsize=1)
def _libc():
    libc = ctypes.CDLL(None)  # the C library this process already runs on
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]
    return libc


def malloc_array(nbytes):
    """`nbytes` of libc ``malloc``'s memory as a uint8 array, given back to
    ``free`` when the array and every view of it are gone."""
    libc = _libc()
    ptr = libc.malloc(max(int(nbytes), 1))
    if not ptr:
        raise MemoryError(f"malloc of {nbytes} B failed")
    raw = (ctypes.c_uint8 * max(int(nbytes), 1)).from_address(ptr)
    weakref.finalize(raw, libc.free, ptr)
    return np.frombuffer(raw, dtype=np.uint8)[:nbytes]


def buffer(nbytes, huge_pages):
    """A host buffer of `nbytes` as the choice asks: ``off``, libc's
    ``malloc`` (the peers'); ``madvise``, numpy's ``np.empty`` (advised
    for huge pages from 4 MiB while numpy's flag is on)."""
    if huge_pages == "madvise":
        return np.empty(max(int(nbytes), 1), dtype=np.uint8)[:nbytes]
    return malloc_array(nbytes)


def thp_mode():
    """The bracketed choice of the kernel's THP setting ('' when unknown)."""
    try:
        with open(THP_ENABLED) as f:
            text = f.read()
    except OSError:
        return ""
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else ""


def huge_kb(array):
    """kB of `array`'s mapping backed by transparent huge pages (the
    mapping's ``AnonHugePages``), or None where smaps cannot be read."""
    addr = array.__array_interface__["data"][0]
    try:
        with open("/proc/self/smaps") as f:
            inside = False
            for line in f:
                head = line.split(None, 1)[0]
                if "-" in head and not head.endswith(":"):
                    lo, _, hi = head.partition("-")
                    inside = int(lo, 16) <= addr < int(hi, 16)
                elif inside and head == "AnonHugePages:":
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def page_offset(array):
    """Bytes from the start of its 4 KiB page to the array's first byte."""
    return array.__array_interface__["data"][0] % 4096


def describe(huge_pages, largest):
    """The attrs that say how the buffers were allocated and what pages they
    got; `largest` is (bytes, huge kB, offset in its page) of the largest
    buffer measured."""
    how = ("numpy np.empty, madvise(MADV_HUGEPAGE) on from 4 MiB as numpy does"
           if huge_pages == "madvise" else
           "libc malloc, as IMB, OSU and nccl-tests' host buffers (numpy's madvise off)")
    facts = {"huge_pages": huge_pages, "buffer_alloc": how, "thp_enabled": thp_mode()}
    nbytes, kb, offset = largest
    if nbytes and kb is not None:
        facts["buffer_pages"] = (f"the mapping of the largest buffer ({nbytes} B) holds {kb} kB "
                                 "of transparent huge pages"
                                 + (" (2 MiB pages)" if kb else " (4 KiB base pages only)")
                                 + f"; it starts {offset} B into a 4 KiB page")
    return facts
