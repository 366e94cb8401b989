"""Two-shot all_reduce (``--algorithms twoshot``): a direct reduce-scatter
(rank r sums chunk r from every rank) then a direct all-gather of the
reduced chunks; 3 barriers, 2·(p-1)/p·n elements over the links per rank.
The bandwidth choice."""
COLLECTIVE = "all_reduce"
NAME = "twoshot"
SOURCE = "twoshot.cu"


def staging_elems(count, nranks):
    """Elements of each rank's staging buffer for a call of `count`."""
    return count


def parallel_elems(count, nranks):
    """Elements the blocks stride over (sets the grid): one chunk."""
    return -(-count // nranks)
