"""Direct reduce_scatter (``--algorithms direct``): every rank pushes part
r of its input to rank r, which sums them; 1 barrier."""
COLLECTIVE = "reduce_scatter"
NAME = "direct"
SOURCE = "reduce_scatter_direct.cu"


def staging_elems(count, nranks):
    """Elements of each half of a rank's staging buffer: a slot a rank."""
    return count * nranks


def parallel_elems(count, nranks):
    return count
