"""Host buffers the way the peers allocate them, and the pages they got.

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
``off`` is the peers' memory, ``madvise`` numpy's.  `huge_kb` reads back what
the kernel gave (``AnonHugePages`` of the mapping, ``/proc/self/smaps``).
"""
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


def describe(huge_pages, largest):
    """The attrs that say how the buffers were allocated and what pages they
    got; `largest` is (bytes, huge kB) of the largest buffer measured."""
    how = ("numpy (malloc/calloc), madvise(MADV_HUGEPAGE) on from 4 MiB as numpy does"
           if huge_pages == "madvise" else
           "numpy (malloc/calloc) with numpy's madvise(MADV_HUGEPAGE) off, as IMB/OSU malloc")
    facts = {"huge_pages": huge_pages, "buffer_alloc": how, "thp_enabled": thp_mode()}
    nbytes, kb = largest
    if nbytes and kb is not None:
        facts["buffer_pages"] = (f"the mapping of the largest buffer ({nbytes} B) holds {kb} kB "
                                 "of transparent huge pages"
                                 + (" (2 MiB pages)" if kb else " (4 KiB base pages only)"))
    return facts
