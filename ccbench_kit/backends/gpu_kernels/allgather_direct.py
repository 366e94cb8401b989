"""Direct all_gather (``--algorithms direct``): every rank pushes its part
to every peer at once; 1 barrier."""
COLLECTIVE = "all_gather"
NAME = "direct"
SOURCE = "allgather_direct.cu"


def staging_elems(count, nranks):
    """Elements of each half of a rank's staging buffer: a slot a rank."""
    return count * nranks


def parallel_elems(count, nranks):
    return count
