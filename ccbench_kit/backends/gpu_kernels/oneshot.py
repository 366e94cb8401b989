"""One-shot all_reduce (``--algorithms oneshot``): every rank pushes its
whole input to every peer and sums what it got; 1 barrier, (p-1)·n
elements over the links per rank.  The latency choice: one step."""
COLLECTIVE = "all_reduce"
NAME = "oneshot"
SOURCE = "oneshot.cu"


def staging_elems(count, nranks):
    """Elements of each half of a rank's staging buffer: a slot of `count`
    per rank (its own unused: it reads its input)."""
    return count * nranks


def parallel_elems(count, nranks):
    """Elements the blocks stride over (sets the grid)."""
    return count
