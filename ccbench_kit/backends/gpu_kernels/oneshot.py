"""One-shot all_reduce (``--algorithms oneshot``): every rank reads every
rank's whole input from peer memory and sums it; 2 barriers, (p-1)·n
elements read over the links per rank.  The latency choice: one step."""
COLLECTIVE = "all_reduce"
NAME = "oneshot"
SOURCE = "oneshot.cu"


def staging_elems(count, nranks):
    """Elements of each rank's staging buffer for a call of `count`."""
    return count


def parallel_elems(count, nranks):
    """Elements the blocks stride over (sets the grid)."""
    return count
