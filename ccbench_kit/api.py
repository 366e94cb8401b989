"""The Python API: run, load, save.  The CLI is a thin shell over this."""
import collections.abc
import datetime
import inspect
import itertools
import os
import shutil
import tempfile
import uuid

from . import config, run_fields
from .backends import backend_class
from .config import RunConfig
from . import dataset
from .dataset.checkpoint import Checkpoint
from .errors import ConfigError, RunError
from .mpi_env import inside_mpi_job, start_mpi
from .output_path import check_output
from .preflight import check_run
from .harness import Sweep
from .launch.command import launcher
from .launch.debug import rank_env as debug_env
from .launch.cycles import check_cycles, run_cycles, save_cycles
from .launch.stable import Rounds, check_target, run_until_stable
from .launch.job import Job, Part, round_path
from .launch.mpirun import launch
from .formats.nccl_tests.write_table import run_lines

__all__ = ["run", "run_many", "make_config", "make_configs", "inside_mpi_job", "RunConfig"]

#: `run`'s keywords that say how and where the ranks start, not what they
#: measure: the place fields of `run_fields` (hosts, slurm, env...)
LAUNCH_KEYWORDS = tuple(f.name for f in run_fields.in_section(run_fields.PLACE))
# the launch keywords that a cluster's or an MPI job's ranks, already running, take too
_ANY_RANKS = ("progress", "client")


def make_config(collective, nranks=2, sizes=None, **keywords):
    """A validated, frozen `RunConfig` from `run`'s keywords (see `run`;
    `run_fields.FIELDS` declares each, with its flag, default and help).
    ``ccbench run`` builds its configurations with `make_configs`, once, and
    hands them to `run_many`."""
    return config.build(collective, nranks, sizes, **keywords)


def make_configs(collectives_, nranks=2, sizes=None, **keywords):
    """The configurations of a run of several parts, one after another.

    `collectives_`: names (a list, or comma-separated).  ``dtype="all"``
    makes one configuration per data type the backend runs
    (`Backend.data_types`), ``op="all"`` one per reduction op
    (`Backend.reduction_ops`; a collective that does not reduce runs once);
    a comma-separated `dtype` or `op` (``"fp32,bf16"``) one per name.
    Every part shares the first one's seed.  `part_names` names them.
    """
    names = collectives_.split(",") if isinstance(collectives_, str) else list(collectives_)
    cls = backend_class(keywords.get("backend") or run_fields.default("backend"))
    dtypes = _each(keywords.get("dtype"), cls.data_types())
    ops = _each(keywords.get("op"), cls.reduction_ops())
    cfgs = []
    for name in (n for n in names if n):
        for dtype in dtypes:
            for op in ops:
                given = {**keywords, "dtype": dtype, "op": op}
                given = {k: v for k, v in given.items() if v is not None or k not in ("dtype", "op")}
                if cfgs:
                    given["seed"] = cfgs[0].inputs.seed
                cfg = make_config(name, nranks, sizes, **given)
                if all(_coordinates(c) != _coordinates(cfg) for c in cfgs):
                    cfgs.append(cfg)  # an op of a collective that doesn't reduce: once
    return cfgs


def _each(value, every):
    """The values a dtype or op keyword asks for: ``"all"`` is `every`, a
    comma-separated list each one, anything else itself (None: the default)."""
    if value == "all":
        return list(every)
    if isinstance(value, str) and "," in value:
        return [v.strip() for v in value.split(",") if v.strip()] or [value]
    return [value]


def _coordinates(cfg):
    return cfg.collective, cfg.sweep.dtype, cfg.sweep.op


def part_names(cfgs):
    """The name of each configuration's part of a results file (its group):
    the collective, then the data type and the op where the parts differ
    in them (``all_reduce.bf16``, ``all_reduce.fp32.max``)."""
    dtypes = len({c.sweep.dtype for c in cfgs}) > 1
    ops = len({c.sweep.op for c in cfgs if c.sweep.op != "none"}) > 1
    names = [".".join([c.collective] + ([c.sweep.dtype] if dtypes else [])
                      + ([c.sweep.op] if ops and c.sweep.op != "none" else [])) for c in cfgs]
    return names


def job_size(default):
    """The ranks a run will have: the MPI job's size when this process is
    already one of its ranks, else `default`."""
    if not inside_mpi_job():
        return default
    return start_mpi().COMM_WORLD.Get_size()


def run(collective, nranks=None, sizes=None, *, progress=None, timeout=None, hosts=None,
        hosts_file=None, nnodes=None, ranks_per_node=None, slurm=None, env=None,
        client=None, cycles=1, until_stable=None, stable_cap=None, job_per_cycle=False,
        mpi_log_dir=None, debug=False, **options):
    """Benchmark one collective and return its results Dataset (docs/data-contract.md).

    Every keyword below that ``ccbench run`` has a flag for is declared once
    in `ccbench_kit.run_fields` (its flag, default, help text and check);
    ``[f.name for f in run_fields.FIELDS]`` lists them.

    Parameters
    ----------
    collective : str or RunConfig
        ``all_reduce``, ``allr``, ``all_gather``... (see `ccbench_kit.collectives`),
        or a configuration `make_config` built (then `nranks`, `sizes` and
        the configuration keywords below are not given).
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
    mpi_log_dir : str, optional
        Also keep each rank's stdout and stderr in files in this folder
        (``--mpi-log-dir``; `launch.ranklogs`).
    debug : bool
        Print the launch command and the ranks' environment, relay the
        ranks' stderr, and NCCL_DEBUG=INFO for the nccl backend
        (``--debug``; `launch.debug`).
    client : distributed.Client, optional
        Run on the workers of a Dask-MPI cluster (``ccbench cluster start``);
        see `launch.dask`.  `timeout` is then the whole sweep's, and
        `progress` defaults to a progress bar in a notebook.
    cycles : int
        Run the whole sweep this many times, each a run of its own, and keep
        every cycle's iterations (``--cycles``, nccl-tests' ``-N``;
        `launch.cycles`).  Every cycle runs in the same job, as nccl-tests'
        cycles do in one process.
    job_per_cycle : bool
        With `cycles`: start a fresh job for each cycle, so that the spread
        between cycles includes start-up (``--job-per-cycle``).
    until_stable : float, optional
        Repeat the sizes whose bootstrap interval of the mean is wider than
        this relative half-width, up to `stable_cap` iterations a size
        (``--until-stable``, ``--stable-cap``; `launch.stable`).

    Returns
    -------
    xarray.Dataset
        On rank 0 when run in-process inside an MPI job; None on other ranks.
    """
    env = run_fields.get("env").validate(env)
    launch_kw = dict(progress=progress, hosts=hosts, hosts_file=hosts_file, nnodes=nnodes,
                     ranks_per_node=ranks_per_node, slurm=slurm, env=env, client=client,
                     mpi_log_dir=mpi_log_dir, debug=debug)
    for key in ("dtype", "op"):
        if _each(options.get(key), ()) != [options.get(key)]:  # "all" or a list
            raise ConfigError(f"{options[key]!r} makes one run per {key}: use "
                              "ccbench_kit.run_many, which returns one Dataset each", key)
    if cycles != 1 or until_stable is not None:
        cfg = collective if isinstance(collective, RunConfig) else make_config(
            collective, 2 if nranks is None else nranks, sizes, timeout=timeout, **options)
        name = cfg.sweep.collective
        results = _repeated({name: cfg}, check_cycles(cycles, "cycles"), until_stable,
                            stable_cap, launch_kw, job_per_cycle=job_per_cycle)
        return None if results is None else results[name]
    if isinstance(collective, RunConfig):
        given = [k for k, v in (("nranks", nranks), ("sizes", sizes), ("timeout", timeout))
                 if v is not None] + sorted(options)
        if given:
            raise TypeError(f"run(config) takes no {given[0]!r}: it is in the configuration")
        cfg = collective
    else:
        cfg = None
    if client is not None:
        placed = [k for k in LAUNCH_KEYWORDS if k not in _ANY_RANKS and launch_kw[k]]
        if placed:
            raise ConfigError(f"{placed[0]} applies when ccbench starts the ranks; a "
                              "cluster's ranks already run (choose them at `ccbench "
                              "cluster start`)", "client")
        # lazy: launch.dask imports distributed, an optional dependency (cluster extra)
        from .launch import dask as _dask
        workers = _dask.worker_ranks(client, cfg.nranks if cfg else nranks)
        cfg = cfg or make_config(collective, len(workers), sizes, **options)
        check_run(cfg, ranks_here=0)  # the workers run already: the output and results only
        return _dask.run_on_workers(client, workers, cfg, progress=progress, timeout=timeout)
    if inside_mpi_job():
        if mpi_log_dir or debug:  # the user's own launcher started these ranks
            raise ConfigError("applies when ccbench starts the ranks; this process is already "
                              "a rank of an MPI job (give its launcher the option instead)",
                              "--mpi-log-dir" if mpi_log_dir else "--debug")
        cfg = cfg or make_config(collective, job_size(None), sizes, timeout=timeout, **options)
        return _run_in_process(cfg, progress=progress)
    cfg = cfg or make_config(collective, 2 if nranks is None else nranks, sizes,
                             timeout=timeout, **options)
    name = cfg.collective
    return _launched({name: cfg}, cfg.output.out, launch_kw)[name]


def _launched(parts, out, launch_kw):
    """{name: Dataset} of `parts` ({name: RunConfig}) run by one launch, into
    `out`.

    One part goes straight into `out`; several each into a part file beside
    it, then all into `out` (the first in the root group), also when the job
    fails part-way (the parts done, and the sizes done of the part it failed
    in).  Without `out`, into temporary files, loaded and removed."""
    stem = out or _temporary_stem()
    paths = {n: (stem if len(parts) == 1 else f"{stem}.{n}.part") for n in parts}
    if out and len(parts) > 1:
        check_output(out, "--out")
    try:
        _launch_job([(n, c.replace(out=paths[n])) for n, c in parts.items()], launch_kw)
    except RunError as e:
        if out and len(parts) > 1 and _gather_parts(paths, out):
            e.args = (str(e).replace(paths[list(parts)[e.part]], out),)
        raise
    if out and len(parts) > 1:
        return _gather_parts(paths, out)
    if out:
        return ResultFiles(paths)
    results = {n: dataset.load(p).load() for n, p in paths.items()}
    for p in paths.values():
        os.unlink(p)
    return results


class ResultFiles(collections.abc.Mapping):
    """{name: Dataset} of results files, each opened when first asked for.

    A caller that needs no data (``ccbench run``, which prints the tables
    rank 0 formatted: `run_many`'s `table`) then never imports xarray:
    0.6 s of CPU a launch, half of the launcher's."""

    def __init__(self, paths):
        self.paths = dict(paths)
        self._opened = {}

    def __getitem__(self, name):
        if name not in self._opened:
            self._opened[name] = dataset.load(self.paths[name])
        return self._opened[name]

    def __iter__(self):
        return iter(self.paths)

    def __len__(self):
        return len(self.paths)


def _temporary_stem():
    """A results path in the temporary folder, not made here: on another
    host rank 0 writes it there (and an empty file would be left)."""
    return os.path.join(tempfile.gettempdir(), f"ccbench-{uuid.uuid4().hex[:12]}.nc")


def _launch_job(parts, launch_kw, on_part=None, rounds=None):
    """Run `parts` ([(name, RunConfig)], each with its ``out``) as one
    `launch.job.Job`: one mpirun, hosts or srun launch for them all.

    `on_part(index)`: part `index`'s results file is complete.  `rounds`:
    the job's ``--until-stable`` rounds (`launch.stable.Rounds.spec`).
    Raises the launcher's RunError (its ``part``: the index of the part it
    failed in)."""
    kw = {k: launch_kw.get(k) for k in LAUNCH_KEYWORDS}
    first = parts[0][1]
    remote = bool(kw["hosts"] or kw["hosts_file"] or kw["slurm"])
    for _, cfg in parts:  # before mpirun starts: the files, and whether the ranks fit here
        check_run(cfg, ranks_here=0 if remote else cfg.nranks)
    env = debug_env(first.backend.name, kw["env"]) if kw["debug"] else kw["env"]
    command = launcher(first.nranks, hosts=kw["hosts"], hosts_file=kw["hosts_file"],
                       nnodes=kw["nnodes"], ranks_per_node=kw["ranks_per_node"],
                       slurm=kw["slurm"], env=env, log_dir=kw["mpi_log_dir"])
    progress = kw["progress"]

    def follow(ev):
        if on_part and ev.get("event") == "part-done":
            on_part(int(ev["index"]))
        if progress:
            progress(ev)
    launch(Job("sweep", tuple(Part(n, c) for n, c in parts), rounds=rounds,
               table=launch_kw.get("table")),
           on_event=follow, command=command, env=env, debug=kw["debug"])
    # a part's first file: its only one, or its first round's
    missing = [p for p in (round_path(c.output.out, 0) if rounds else c.output.out
                           for _, c in parts) if not os.path.exists(p)]
    if command and missing:
        raise RunError(f"the run finished but {missing[0]} is not here: rank 0 wrote it on "
                       "its own host; give --out a path on a shared file system, or "
                       "launch from the first host")


def _gather_parts(paths, out):
    """The part files in `paths` ({name: path}) that exist, saved together
    into `out` and removed; {name: Dataset}, loaded."""
    done = {}
    for name, path in paths.items():
        if os.path.exists(path):
            with dataset.load(path) as ds:
                done[name] = ds.load()
    if done:
        dataset.save(done, out)
        for name in done:
            os.unlink(paths[name])
    return done


def _repeated(parts, cycles, until_stable, stable_cap, launch_kw, out=None, on_cycle=None,
              job_per_cycle=False):
    """{name: Dataset} of `parts` ({name: RunConfig}) run in `cycles` cycles,
    or until stable (not both): the launchers of `launch.cycles` and
    `launch.stable`.  The results go to `out`, else the first part's
    ``out`` (a temporary file when none, its Datasets loaded)."""
    if until_stable is not None and cycles > 1:
        raise ConfigError("repeats sizes itself; not with cycles", "until_stable")
    first = next(iter(parts.values()))
    out, tmp = out or first.output.out, None
    if not out:
        tmp = tempfile.mkdtemp(prefix="ccbench-")
        out = os.path.join(tmp, "results.nc")
    check_run(first.replace(out=out), ranks_here=0)
    try:
        if until_stable is not None and _one_launch(launch_kw):
            iters = first.sweep.iters
            results = _stable_in_one_job(parts, out, Rounds(
                *check_target(until_stable, stable_cap, iters), iters), launch_kw)
        elif until_stable is not None:
            iters = first.sweep.iters
            target, cap = check_target(until_stable, stable_cap, iters)
            results = run_until_stable(
                lambda some, path: _in_sequence(
                    {k: c.replace(sizes=tuple(some)) for k, c in parts.items()}, path,
                    launch_kw),
                [int(s) for s in first.sweep.sizes], target, cap, iters, out)
        elif job_per_cycle or not _one_launch(launch_kw):
            results = run_cycles(lambda out: _in_sequence(parts, out, launch_kw), cycles, out,
                                 on_cycle=on_cycle)
        else:
            results = _cycles_in_one_job(parts, cycles, out, launch_kw, on_cycle)
        if results is None or not tmp:
            return results
        return {k: ds.load() for k, ds in results.items()}
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def run_many(collectives_, nranks=None, sizes=None, *, out=None, cycles=1, until_stable=None,
             stable_cap=None, job_per_cycle=False, on_cycle=None, table=None, **options):
    """Run several parts one after another; {name: Dataset}.

    Parameters
    ----------
    collectives_ : list of str or RunConfig, or str
        Collective names (a list or comma-separated), or configurations
        `make_config` built (then `nranks`, `sizes` and the configuration
        keywords are not given).  With names, ``dtype="all"`` and
        ``op="all"`` make one part per data type / reduction op
        (`make_configs`).
    out : str, optional
        Every part lands in that one file (the first in the root group, the
        others in groups named after them: `part_names`; see `dataset.io`),
        rewritten after each part so that finished ones are never lost.
    cycles, until_stable, stable_cap, job_per_cycle :
        As `run`'s, over all the parts.
    on_cycle : callable, optional
        With `cycles`: called with (cycle index, {name: Dataset}) after each.
    table : dict, optional
        Where the kit starts the ranks (mpirun, hosts, srun): rank 0 formats
        each part's nccl-tests table with these keywords of
        `formats.nccl_tests.write_table.run_lines` (``stats``,
        ``rank_stat``, ``show_io``, ``show_ran``) and `progress` gets it in
        an event ``{"event": "table", "name": ..., "lines": [...],
        "failed": N}``, so that the caller can print it without reading
        the results (``ccbench run`` does).
    **options
        `run`'s launch keywords (``progress``, ``hosts``...) and
        configuration keywords.

    Returns
    -------
    Mapping
        {name: xarray.Dataset}, a file opened when its Dataset is first
        asked for; None on ranks other than 0 of an MPI job.
    """
    launch_kw = {k: v for k, v in options.items() if k in LAUNCH_KEYWORDS}
    config_kw = {k: v for k, v in options.items() if k not in LAUNCH_KEYWORDS}
    run_fields.get("env").validate(launch_kw.get("env"))
    if table is not None:
        _check_table(table)
        launch_kw["table"] = table
    if out is not None:  # out=False or 0 is a wrong path, not "no file"
        check_output(out, "--out")
    if isinstance(collectives_, str) or not all(isinstance(c, RunConfig) for c in collectives_):
        n = nranks if nranks is not None else 2
        cfgs = make_configs(collectives_, job_size(n), sizes, **config_kw)
    else:
        cfgs = list(collectives_)
    parts = dict(zip(part_names(cfgs), cfgs))
    if cycles != 1 or until_stable is not None:
        return _repeated(parts, check_cycles(cycles, "cycles"), until_stable, stable_cap,
                         launch_kw, out=out, on_cycle=on_cycle, job_per_cycle=job_per_cycle)
    return _in_sequence(parts, out, launch_kw)


def _check_table(table):
    """`run_many`'s `table`: keywords `run_lines` takes, in a dict."""
    try:
        inspect.signature(run_lines).bind("name", None, **table)
    except TypeError as e:
        raise ConfigError(f"{table!r}: not keywords of write_table.run_lines ({e})",
                          "table") from None


def _in_sequence(parts, out, launch_kw):
    """{name: Dataset} of `parts` ({name: RunConfig}) run one after another
    into `out`: one launch for them all (`_launched`); a part at a time
    in-process or on a Dask cluster, whose ranks already run."""
    if _one_launch(launch_kw):
        return _launched(parts, out, launch_kw)
    progress = launch_kw.get("progress")
    done = {}
    for name, cfg in parts.items():
        # ranks that already run format no table (run_many's `table`)
        kw = {k: v for k, v in launch_kw.items() if k != "table"}
        if progress is not None and len(parts) > 1:  # events name the part, not the collective
            kw["progress"] = lambda ev, name=name: progress({**ev, "collective": name})
        part = out if len(parts) == 1 else (f"{out}.{name}.part" if out else "")
        done[name] = ds = run(cfg.replace(out=part or cfg.output.out), **kw)
        if ds is None:  # a rank other than 0 of an MPI job: nothing to keep
            continue
        if out and len(parts) > 1:
            done[name] = ds.load()
            dataset.save(done, out)
            os.unlink(part)
    return done if all(d is not None for d in done.values()) else None


def _one_launch(launch_kw):
    """Whether the kit starts the ranks (mpirun, hosts, srun), so that every
    part runs in one launch; not in-process nor on a Dask cluster, whose
    ranks already run."""
    return launch_kw.get("client") is None and not inside_mpi_job()


def _cycles_in_one_job(parts, n, out, launch_kw, on_cycle=None):
    """{name: combined Dataset} of `n` cycles of `parts` run as the parts of
    one job (`launch.cycles`); `on_cycle(c, {name: Dataset})` as each
    cycle's last part is done."""
    names = list(parts)
    order = [(c, name) for c in range(n) for name in names]
    paths = [f"{out}.cycle{c}.{name}.part" for c, name in order]
    done = []

    def part_done(index):
        c, name = order[index]
        if name != names[-1]:
            return
        cycle = {}
        for k, nm in enumerate(names):
            with dataset.load(paths[c * len(names) + k]) as ds:
                cycle[nm] = ds.load()
        done.append(cycle)
        if on_cycle:
            on_cycle(c, cycle)
    try:
        _launch_job([(name, parts[name].replace(out=paths[k])) for k, (_, name) in
                     enumerate(order)], launch_kw, on_part=part_done)
    except BaseException as e:
        save_cycles(done, n, out, e)
        raise
    finally:
        for path in paths:
            if os.path.exists(path):
                os.unlink(path)
    return save_cycles(done, n, out)


def _stable_in_one_job(parts, out, rounds, launch_kw):
    """{name: Dataset} of `parts` run until stable (`launch.stable`), every
    round in one job: rank 0 decides between rounds, each round of a part
    lands in its own file, merged here into `out`."""
    bases = {name: f"{out}.{name}" for name in parts}
    _launch_job([(n, c.replace(out=bases[n])) for n, c in parts.items()], launch_kw,
                rounds=rounds.spec())
    files = []
    for name, base in bases.items():
        for k in itertools.count():
            path = round_path(base, k)
            if not os.path.exists(path):
                break
            with dataset.load(path) as ds:
                rounds.record(name, ds.load())
            files.append(path)
    merged = rounds.merged()
    dataset.save(merged, out)
    for path in files:
        os.unlink(path)
    return merged


def _run_in_process(cfg, progress=None):
    MPI = start_mpi()
    comm = MPI.COMM_WORLD.Dup()
    # every rank runs rank 0's seed (one drawn at random differs per rank)
    cfg = cfg.replace(seed=comm.bcast(cfg.inputs.seed, root=0))
    out = cfg.output.out
    try:
        return Sweep(comm, cfg, emit=progress,
                     checkpoint=Checkpoint(out) if out else None).run()
    finally:
        comm.Free()


def default_out(collective):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("results", f"{collective}-{stamp}.nc")
