"""Two-shot all_reduce (``--algorithms twoshot``): a direct reduce-scatter
(rank r sums chunk r, pushed to it by every rank) then a direct all-gather
(rank r pushes its sum to every peer); 2 barriers, 2·(p-1)/p·n elements
over the links per rank.  The bandwidth choice."""
COLLECTIVE = "all_reduce"
NAME = "twoshot"
SOURCE = "twoshot.cu"


def staging_elems(count, nranks):
    """Elements of each half of a rank's staging buffer: p slots of one
    chunk and the result area (p chunks); a chunk of 16-byte words can
    hold up to 8 elements more than count/p."""
    return 2 * nranks * (-(-count // nranks) + 8)


def parallel_elems(count, nranks):
    """Elements the blocks stride over (sets the grid): one chunk."""
    return -(-count // nranks)
