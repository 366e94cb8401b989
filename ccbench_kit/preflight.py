"""Checks of a run before anything is launched: where its results go, and
whether it fits in memory here.  A refusal is one line naming the flag,
exit 2, and costs no mpirun start and no sweep."""
from .collectives import get as get_collective
from .dtypes import get_dtype
from .output_path import check_output
from .resources import check_run_fits, results_bytes

#: netCDF's headers, attrs and coords besides the per-iteration data
FILE_OVERHEAD = 1 << 20


def estimated_file_bytes(cfg):
    """About the size of `cfg`'s results file (the per-iteration data
    compress little: noisy float64 timings)."""
    return FILE_OVERHEAD + results_bytes(cfg.nranks, cfg.iters, len(cfg.sizes),
                                         len(cfg.algorithms), len(cfg.placements))


def smallest_buffer_bytes(cfg):
    """Host bytes one rank holds for the smallest size (send and receive
    buffers, twice for out-of-place and in-place); 0 on GPUs."""
    if cfg.backend != "mpi" or not cfg.sizes:
        return 0
    coll = get_collective(cfg.collective)
    group = len(cfg.groups[0]) if cfg.groups else cfg.nranks
    lay = coll.layout(min(cfg.sizes), get_dtype(cfg.dtype).itemsize, group)
    return 2 * (lay.send_elems + lay.recv_elems) * get_dtype(cfg.dtype).itemsize


def check_run(cfg, ranks_here, flag="--out"):
    """Raise `ConfigError` (exit 2) unless `cfg.out` can take the results and
    `ranks_here` ranks of `cfg` fit in this host's memory."""
    if cfg.out:
        check_output(cfg.out, flag, need=estimated_file_bytes(cfg))
    check_run_fits(cfg, ranks_here, smallest_buffer_bytes(cfg))
