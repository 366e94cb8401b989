"""Direct reduce_scatter (``--algorithms direct``): rank r sums part r of
every rank's input straight from peer memory; 2 barriers."""
COLLECTIVE = "reduce_scatter"
NAME = "direct"
SOURCE = "reduce_scatter_direct.cu"


def staging_elems(count, nranks):
    """Elements of each rank's staging buffer: its whole input."""
    return count * nranks


def parallel_elems(count, nranks):
    return count
