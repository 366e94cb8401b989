"""Checks of a run before anything is launched: where its results go, and
whether it fits in memory here.  A refusal is one line naming the flag,
exit 2, and costs no mpirun start and no sweep."""
from .backends import backend_class
from .collectives import get as get_collective
from .dtypes import get_dtype
from .output_path import check_output
from .resources import check_run_fits, results_bytes

#: netCDF's headers, attrs and coords besides the per-iteration data
FILE_OVERHEAD = 1 << 20


def run_shape(cfg):
    """The counts that size a run's results: ranks, iterations, sizes,
    algorithms, placements."""
    sw = cfg.sweep
    return {"nranks": cfg.nranks, "iters": sw.iters, "sizes": len(sw.sizes),
            "algorithms": len(sw.algorithms), "placements": len(sw.placements)}


def estimated_file_bytes(cfg):
    """About the size of `cfg`'s results file (the per-iteration data
    compress little: noisy float64 timings)."""
    n = run_shape(cfg)
    return FILE_OVERHEAD + results_bytes(n["nranks"], n["iters"], n["sizes"], n["algorithms"],
                                         n["placements"])


def smallest_buffer_bytes(cfg):
    """Host bytes one rank holds for the smallest size (send and receive
    buffers, twice for out-of-place and in-place); 0 on GPUs."""
    sw = cfg.sweep
    if not backend_class(cfg.backend.name).host_buffers or not sw.sizes:
        return 0
    coll = get_collective(sw.collective)
    groups = cfg.inputs.groups
    itemsize = get_dtype(sw.dtype).itemsize
    lay = coll.layout(min(sw.sizes), itemsize, len(groups[0]) if groups else cfg.nranks)
    return 2 * (lay.send_elems + lay.recv_elems) * itemsize


def check_run(cfg, ranks_here, flag="--out"):
    """Raise `ConfigError` (exit 2) unless the results file can take the
    results and `ranks_here` ranks of `cfg` fit in this host's memory."""
    if cfg.output.out:
        check_output(cfg.output.out, flag, need=estimated_file_bytes(cfg))
    check_run_fits(run_shape(cfg), ranks_here, smallest_buffer_bytes(cfg))
    if ranks_here:
        # the ranks run here: a library they load missing is this machine's
        # setup (exit 2, nothing started), not a run that failed (exit 3)
        backend_class(cfg.backend.name).check_local_setup()
