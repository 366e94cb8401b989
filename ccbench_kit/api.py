"""The Python API: run, load, save.  The CLI is a thin shell over this."""
import datetime
import os
import secrets
import tempfile

from . import collectives
from .backends import backend_algorithms, check_backend_options
from .config import RunConfig
from .dataset import load, save
from .dataset.schema import PLACEMENTS
from .errors import ConfigError
from .output_path import check_output
from .preflight import check_run
from .units import parse_size, sweep

__all__ = ["load", "run", "run_many", "save", "make_config", "inside_mpi_job"]

_MPI_ENV = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS")


def inside_mpi_job():
    """True when this process is already a rank of an MPI job."""
    if any(k in os.environ for k in _MPI_ENV):
        return True
    import sys
    mpi = sys.modules.get("mpi4py.MPI")
    # a singleton MPI (size 1, no launcher) is not a job to run inside
    return bool(mpi and mpi.Is_initialized() and not mpi.Is_finalized()
                and mpi.COMM_WORLD.Get_size() > 1)


def _placements(placement):
    if placement in (None, "both"):
        return list(PLACEMENTS)
    if isinstance(placement, str):
        return [p.strip() for p in placement.replace("-", "_").split(",")]
    return list(placement)


def make_config(collective, nranks=2, sizes=None, *, minbytes="32M", maxbytes=None,
                stepfactor=None, stepbytes=None, algorithms=None, dtype="fp32",
                op="sum", root=0, placement="both", warmup=5, iters=20, agg_iters=1,
                blocking=False, check=None, seed=None, stats=("avg",), backend="mpi",
                out=None, command="", timeout=None, skip_oversize=False, checkpoint_every=None,
                split=None,
                data_parallel_dimension=None, replica_groups=None, alltoallv_metadata=None,
                src_target_pairs=None, unique_buff=False, coalesced_ratio=None, timing="",
                backend_options=None):
    """A validated `RunConfig` from keyword arguments (see `run`).

    `timing` (cuda-events, batch, graph) and `backend_options` (nccl:
    graph_launches, mem_type, register) go to the backend."""
    coll = collectives.get(collective)
    if sizes is None:
        sizes = sweep(minbytes, maxbytes if maxbytes is not None else minbytes,
                      stepfactor, stepbytes)
    else:
        sizes = [parse_size(s, "sizes") for s in ([sizes] if isinstance(sizes, (int, str)) else sizes)]
    if algorithms is None:  # the library's own: MPI's or NCCL's
        algorithms = ["nccl" if backend == "nccl" else "mpi"]
    if isinstance(algorithms, str):
        algorithms = [a.strip() for a in algorithms.split(",") if a.strip()]
    if check is True:
        check = "random"
    if check and seed is None and check == "random":
        seed = secrets.randbelow(2**31)
    cfg = RunConfig(
        collective=coll.name, sizes=list(sizes), nranks=nranks, algorithms=list(algorithms),
        dtype=dtype, op=op, root=root, placements=_placements(placement), warmup=warmup,
        iters=iters, agg_iters=agg_iters, blocking=bool(blocking), check=check or "",
        seed=int(seed or 0), stats=list(stats), backend=backend, out=out or "", command=command)
    if timeout is not None:
        if not timeout > 0:
            raise ConfigError(f"must be a positive number of seconds, got {timeout}", "--timeout")
        cfg.options["timeout"] = float(timeout)
    if skip_oversize:
        cfg.options["skip_oversize"] = True
    if checkpoint_every is not None:
        if not checkpoint_every >= 0:
            raise ConfigError(f"must be a number of seconds >= 0, got {checkpoint_every}",
                              "--checkpoint-every")
        cfg.options["checkpoint_every"] = float(checkpoint_every)
    cfg.timing = timing or ""
    cfg.options.update(backend_options or {})
    cfg.validate(backend_algorithms(backend, coll.name))
    check_backend_options(cfg)
    from .inputs import parse_inputs, split_layout
    for k, v in parse_inputs(cfg.collective, cfg.nranks, split=split,
                             data_parallel_dimension=data_parallel_dimension,
                             replica_groups=replica_groups, alltoallv_metadata=alltoallv_metadata,
                             src_target_pairs=src_target_pairs,
                             coalesced_ratio=coalesced_ratio).items():
        setattr(cfg, k, v)
    cfg.unique_buff = bool(unique_buff)
    group_size = len(cfg.groups[0]) if cfg.groups else cfg.nranks
    if coll.rooted and cfg.root >= group_size:
        raise ConfigError(f"root {cfg.root} is not a rank of the replica groups' "
                          f"0..{group_size - 1}", "--root")
    # Sizes too small for one element per rank are dropped from a sweep (as
    # nccl-tests prints empty rows for them); if none is left it is an error.
    valid, first_error = [], None
    for s in cfg.sizes:
        try:
            lay = coll.layout(s, _itemsize(cfg.dtype), group_size)
            if cfg.coalesced_ratio:
                split_layout(coll, lay.size, _itemsize(cfg.dtype), group_size, cfg.coalesced_ratio)
            valid.append(s)
        except ConfigError as e:
            first_error = first_error or e
    if not valid:
        raise first_error
    cfg.skipped_sizes = [s for s in cfg.sizes if s not in valid]
    cfg.sizes = valid
    return cfg


def _itemsize(dtype):
    from .dtypes import get_dtype
    return get_dtype(dtype).itemsize


def run(collective, nranks=None, sizes=None, *, progress=None, timeout=None, hosts=None,
        hosts_file=None, nnodes=None, ranks_per_node=None, slurm=None, env=None,
        client=None, **options):
    """Benchmark one collective and return its ``ccbench/1`` Dataset.

    Parameters
    ----------
    collective : str
        ``all_reduce``, ``allr``, ``all_gather``... (see `ccbench_kit.collectives`).
    nranks : int
        Ranks to start with mpirun on this machine (default 2), or the first
        `nranks` workers of `client`'s cluster (default all). Ignored
        in-process, where the job's own size is used.
    sizes : list of int or str, optional
        Sizes in bytes (``"64M"`` style accepted); else `minbytes`, `maxbytes`
        and `stepfactor` or `stepbytes` make a sweep, as ``-b -e -f -i`` do.
    algorithms : list of str
        ``["mpi", "ring"]``...; ``["all"]`` for every one.  Default: the
        library's own (``mpi``, or ``nccl`` with ``backend="nccl"``).
    check : {None, "random", "all_ones"}
        Compare every output with a numpy golden result (fills `wrong`).
    out : str, optional
        Results file (netCDF); kept up to date as sizes complete (see
        `checkpoint_every`). A temporary file
        otherwise.
    progress : callable, optional
        Called with a dict per completed size.
    timeout : float, optional
        Seconds one collective call may take before the watchdog stops the
        run and names the ranks that did not arrive (default: 30 s plus
        1 s per 50 MB). Sizes done before are kept in `out`.
    skip_oversize : bool
        Skip sizes that don't fit in memory instead of stopping there.
    checkpoint_every : float, optional
        Seconds between rewrites of the results file while the sweep runs
        (default 10; 0: after every size).  Each rewrite leaves the GPUs idle
        for tens of ms, which changes the latency of the next small size;
        sizes done in between are kept in small sidecar files and folded
        into the results if the run dies.
    split, data_parallel_dimension, replica_groups : optional
        Replica groups that run the collective concurrently: an
        ``NCCL_TESTS_SPLIT`` spec (``"AND 0x7"``, ``"MOD 8"``; the variable
        itself applies when none is given), a group size, or a JSON file /
        list of lists of ranks (see `ccbench_kit.inputs.groups`).
    alltoallv_metadata, src_target_pairs : str or parsed JSON, optional
        alltoallv counts and permute pairs in nccom-test's JSON format.
    unique_buff : bool
        A different buffer set for every operation (up to a memory budget).
    coalesced_ratio : str or list, optional
        Split each operation into coalesced collectives, e.g. ``[1, 2, 1]``.
    hosts, hosts_file, nnodes, ranks_per_node : optional
        Run on several hosts (``--hosts``, ``--hosts-file``, ``-N``): ranks
        are placed in equal blocks, in host order (`launch.hosts.place`).
        Rank 0 writes `out` on the first host: use a shared file system, or
        run from that host.
    slurm : bool, dict or `launch.slurm.SlurmOptions`, optional
        Launch with srun, in an allocation or a new one (``-S``).
    env : dict, optional
        Environment variables for the ranks (NCCL_*, OMPI_*...).
    client : distributed.Client, optional
        Run on the workers of a Dask-MPI cluster (``ccbench cluster start``);
        see `launch.dask`.  `timeout` is then the whole sweep's, and
        `progress` defaults to a progress bar in a notebook.

    Returns
    -------
    xarray.Dataset
        On rank 0 when run in-process inside an MPI job; None on other ranks.
    """
    if client is not None:
        placed = [f for f, v in (("hosts", hosts), ("hosts_file", hosts_file),
                                 ("nnodes", nnodes), ("ranks_per_node", ranks_per_node),
                                 ("slurm", slurm), ("env", env)) if v]
        if placed:
            raise ConfigError(f"{placed[0]} applies when ccbench starts the ranks; a "
                              "cluster's ranks already run (choose them at `ccbench "
                              "cluster start`)", "client")
        from .launch import dask as _dask
        workers = _dask.worker_ranks(client, nranks)
        cfg = make_config(collective, len(workers), sizes, **options)
        check_run(cfg, ranks_here=0)  # the workers run already; the output and results
        return _dask.run_on_workers(client, workers, cfg, progress=progress, timeout=timeout)
    if inside_mpi_job():
        return _run_in_process(collective, sizes, progress=progress, **options)
    nranks = 2 if nranks is None else nranks
    cfg = make_config(collective, nranks, sizes, timeout=timeout, **options)
    # before mpirun starts: where the results go, and whether the ranks fit here
    check_run(cfg, ranks_here=0 if (hosts or hosts_file or slurm) else nranks)
    from .launch.command import launcher
    command = launcher(nranks, hosts=hosts, hosts_file=hosts_file, nnodes=nnodes,
                       ranks_per_node=ranks_per_node, slurm=slurm, env=env)
    tmp = None
    if not cfg.out:
        fd, tmp = tempfile.mkstemp(prefix="ccbench-", suffix=".nc")
        os.close(fd)
        cfg.out = tmp
        if command:  # so that a file rank 0 wrote elsewhere is not mistaken for it
            os.unlink(tmp)
    from .launch.mpirun import launch

    launch(cfg, on_event=progress, command=command, env=env)
    if command and not os.path.exists(cfg.out):
        from .errors import RunError
        raise RunError(f"the run finished but {cfg.out} is not here: rank 0 wrote it on "
                       "its own host; give --out a path on a shared file system, or "
                       "launch from the first host")
    ds = load(cfg.out)
    if tmp:
        ds = ds.load()
        os.unlink(tmp)
    return ds


def run_many(collectives_, nranks=None, sizes=None, *, out=None, **options):
    """Run several collectives one after another; {collective: Dataset}.

    With `out`, every collective lands in that one file (the first in the
    root group, the others in groups named after them; see `dataset.io`),
    rewritten after each collective so that finished ones are never lost.
    """
    names = [collectives.get(c).name for c in collectives_]
    if out:
        check_output(out, "--out")
    done = {}
    for name in names:
        part = None
        if out:
            part = f"{out}.{name}.part"
        done[name] = run(name, nranks, sizes, out=part, **options)
        if done[name] is None:  # a rank other than 0 of an MPI job: nothing to keep
            continue
        if out:
            done[name] = done[name].load()
            save(done, out)
            os.unlink(part)
    return done if all(d is not None for d in done.values()) else None


def _run_in_process(collective, sizes, progress=None, **options):
    from mpi4py import MPI

    from .harness import Sweep

    comm = MPI.COMM_WORLD.Dup()
    options.pop("nranks", None)
    cfg = make_config(collective, comm.Get_size(), sizes, **options)
    # every rank runs rank 0's seed (one drawn at random differs per rank)
    cfg.seed = comm.bcast(cfg.seed, root=0)
    from .dataset.checkpoint import Checkpoint
    try:
        return Sweep(comm, cfg, emit=progress,
                     checkpoint=Checkpoint(cfg.out) if cfg.out else None).run()
    finally:
        comm.Free()


def default_out(collective):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("results", f"{collective}-{stamp}.nc")
