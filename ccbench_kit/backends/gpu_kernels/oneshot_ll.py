"""One-shot all_reduce on LL lines (``--algorithms oneshot-ll``): as
``oneshot``, every rank pushes its whole input to every peer and sums what
it got, but each 8 bytes travel with the call's flag (NCCL's LL protocol),
so there is no barrier: a rank sums a line as soon as every peer's copy of
it has come.  Twice the bytes over the links: the choice for small
messages, where the barrier is most of a one-shot's time."""
COLLECTIVE = "all_reduce"
NAME = "oneshot-ll"
SOURCE = "oneshot_ll.cu"
STAGE = "ll"  # its own staging buffer: only LL lines may be where they are read


def staging_elems(count, nranks):
    """Elements of each half of a rank's staging buffer: a slot of LL lines
    per rank (16 bytes carry 8 of data: twice the count, rounded up to a
    line, which is at most 8 elements more for 2-byte elements)."""
    return nranks * (2 * count + 8)


def parallel_elems(count, nranks):
    """Elements the blocks stride over: twice the count, so that with
    16-byte words (4 or 8 elements a thread) each thread has one line."""
    return 2 * count
