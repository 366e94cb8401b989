"""Direct all_gather (``--algorithms direct``): every rank reads every
other rank's part from peer memory at once; 2 barriers."""
COLLECTIVE = "all_gather"
NAME = "direct"
SOURCE = "allgather_direct.cu"


def staging_elems(count, nranks):
    """Elements of each rank's staging buffer: its own part."""
    return count


def parallel_elems(count, nranks):
    return count
