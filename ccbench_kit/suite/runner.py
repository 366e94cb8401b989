"""Running a suite: each combination here with mpirun, or as one sbatch job
each; then one DataTree file and one report of everything that finished.

The work directory (``results/NAME.suite/`` by default) holds
``manifest.json`` (every combination, its state, job id and error), one
results file per combination under ``parts/``, and in Slurm mode the batch
scripts (``jobs/``) and their logs (``logs/``).  A failed combination is
recorded and the others go on; `collect` gathers whatever finished.
"""
import datetime
import json
import os
import sys
from dataclasses import dataclass, field
import re

from .._files import atomic_write_text
from ..errors import CCBenchError, ConfigError, RunError
from .. import api
from ..api import make_config
from .. import dataset
from ..launch import hosts as _hosts, slurm as _slurm
from ..launch.job import RANK_MODULE, Job
from ..launch.sweep_task import TABLE_FLAG
from ..output_path import check_output, check_output_folder

MANIFEST = "manifest.json"


@dataclass
class Entry:
    key: str
    axes: dict
    part: str
    state: str = "pending"      # pending, done, failed, written, submitted
    error: str = ""
    job_id: str = ""
    script: str = ""


@dataclass
class SuiteResult:
    entries: list
    out: str = None             # the DataTree file, when anything finished
    report: str = None
    failed: list = field(default_factory=list)   # (key, reason)

    @property
    def ok(self):
        return not self.failed


def _paths(suite):
    return {name: os.path.join(suite.workdir, name) for name in ("parts", "jobs", "logs")}


def _manifest_path(suite):
    return os.path.join(suite.workdir, MANIFEST)


def write_manifest(suite, entries, mode):
    data = {"name": suite.name, "spec": suite.path, "mode": mode,
            "updated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "combinations": [e.__dict__ for e in entries]}
    atomic_write_text(_manifest_path(suite), json.dumps(data, indent=1))


def read_manifest(suite):
    path = _manifest_path(suite)
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"the suite has not been run: {path} is missing; run "
                          f"`ccbench suite {suite.path}` first", suite.path) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path} is not a suite manifest ({e})", suite.path) from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", suite.path) from None
    fields = set(Entry.__dataclass_fields__)
    combos = data.get("combinations") if isinstance(data, dict) else None
    if not isinstance(combos, list) or not all(
            isinstance(e, dict) and {"key", "axes", "part"} <= set(e) <= fields
            and all(isinstance(e[k], str) for k in set(e) - {"axes"}) for e in combos):
        raise ConfigError(f"{path} is not a suite manifest (expected {{\"combinations\": "
                          "[{key, axes, part, state...}]}); run the suite again to rewrite it",
                          suite.path)
    return data.get("mode", "mpirun"), [Entry(**e) for e in combos]


def one_line(error):
    """An error as one line: its first, and the first line of the detail a
    launcher error carries after a colon."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


def _say(progress, text):
    if progress:
        progress(text)


def run_suite(suite, *, slurm=None, dry_run=False, report=True, progress=None):
    """Run every combination of `suite` (`spec.load_suite`).

    Parameters
    ----------
    slurm : bool, optional
        Force Slurm mode (one sbatch job per combination) or mpirun mode;
        default the suite's `launcher`.
    dry_run : bool
        Slurm mode: write the batch scripts and the manifest, submit nothing.
    report : bool
        Render the suite's report (when it names one) after a local run.
    progress : callable, optional
        Called with one line of text per combination.

    Returns
    -------
    SuiteResult
        Slurm mode: the submitted entries (gather them with `collect`).
    """
    mode = "slurm" if (slurm if slurm is not None else suite.launcher == "slurm") else "mpirun"
    _check_outputs(suite, report)
    for d in _paths(suite).values():
        os.makedirs(d, exist_ok=True)
    entries = [Entry(c.key, c.axes, os.path.join(_paths(suite)["parts"], f"{c.flat}.nc"))
               for c in suite.combinations]
    if mode == "slurm":
        return _submit_all(suite, entries, dry_run, progress)
    write_manifest(suite, entries, mode)
    for combo, entry in zip(suite.combinations, entries):
        _run_here(suite, combo, entry, progress)
        write_manifest(suite, entries, mode)
    return collect(suite, report=report, progress=progress)


def _run_here(suite, combo, entry, progress):

    _say(progress, f"[{combo.key}] {combo.nranks} ranks, env {combo.axes['env']} ...")
    if os.path.exists(entry.part):
        os.unlink(entry.part)
    try:
        opts = dict(combo.options)
        launch = {"hosts": suite.hosts, "hosts_file": suite.hosts_file, "nnodes": combo.nnodes,
                  "ranks_per_node": suite.ranks_per_node if combo.nnodes else None}
        api.run(combo.collective, combo.nranks, out=entry.part, env=combo.env,
                command=f"ccbench suite {suite.path}  # {combo.key}", **launch, **opts)
        entry.state, entry.error = "done", ""
    except CCBenchError as e:
        entry.state, entry.error = "failed", one_line(e)
    _say(progress, f"[{combo.key}] {entry.state}" + (f": {entry.error}" if entry.error else ""))


def _submit_all(suite, entries, dry_run, progress):

    if not dry_run:
        _slurm.require_tools("sbatch")
    paths = _paths(suite)
    # a job of an earlier submission that Slurm still holds writes the same
    # part file: it is kept, never doubled
    queued = {} if dry_run else _queued_jobs(suite)
    for combo, entry in zip(suite.combinations, entries):
        if combo.key in queued:
            entry.job_id, entry.state = queued[combo.key], "submitted"
            _say(progress, f"[{combo.key}] already queued as job {entry.job_id}; not submitted "
                           "again")
            continue
        try:
            nnodes = combo.nnodes or 1
            hosts = _slurm_hosts(suite, nnodes)
            cfg = make_config(combo.collective, combo.nranks, out=entry.part,
                              command=f"ccbench suite {suite.path}  # {combo.key}",
                              **combo.options)
            # the job's log shows the table as sizes complete (tail -f)
            argv = [sys.executable, "-m", RANK_MODULE, Job.sweep({cfg.collective: cfg}).word(),
                    TABLE_FLAG]
            text = _slurm.sbatch_script(
                argv, dict(suite.slurm), combo.nranks, nnodes,
                job_name=f"ccb-{suite.name}-{combo.flat}"[:120],
                output=os.path.join(paths["logs"], f"{combo.flat}.%j.out"), env=combo.env,
                workdir=os.path.dirname(suite.path), hosts=hosts)
            entry.script = os.path.join(paths["jobs"], f"{combo.flat}.sbatch")
            with open(entry.script, "w") as f:
                f.write(text)
            if dry_run:
                entry.state = "written"
            else:
                entry.job_id = _slurm.submit(entry.script)
                entry.state = "submitted"
        except CCBenchError as e:
            entry.state, entry.error = "failed", one_line(e)
        _say(progress, f"[{combo.key}] {entry.state}"
             + (f" as job {entry.job_id}" if entry.job_id else "")
             + (f": {entry.error}" if entry.error else ""))
    write_manifest(suite, entries, "slurm")
    return SuiteResult(entries, failed=[(e.key, e.error) for e in entries if e.state == "failed"])


def _slurm_hosts(suite, nnodes):
    """The first `nnodes` of the suite's hosts (e.g. a topology-sorted host
    file), in rank order, or None to let Slurm choose."""
    if not (suite.hosts or suite.hosts_file):
        return None
    found = _hosts.read_hostfile(suite.hosts_file) if suite.hosts_file else \
        _hosts.parse_hosts(suite.hosts)
    names = list(dict.fromkeys(h.name for h in found))
    if nnodes > len(names):
        raise ConfigError(f"{nnodes} nodes asked for but the suite names only {len(names)} "
                          "hosts", "matrix.nnodes")
    return names[:nnodes]


def _part_state(entry):
    """("done" | "partial" | "missing" | "unreadable", detail) of a results file."""

    if not os.path.exists(entry.part):
        return "missing", "no results file"
    try:
        ds = next(iter(dataset.open_parts(entry.part).values()))
    except CCBenchError as e:
        return "unreadable", str(e)
    if ds.attrs.get("complete", "true") != "true":
        return "partial", ds.attrs.get("incomplete_reason", "incomplete")
    return "done", ""


# Slurm job states that end a job without its results
_FAILED_STATES = ("FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY",
                  "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def _job_info(entries):
    """({job id: squeue/sacct details}, note when Slurm could not be asked)."""

    ids = [e.job_id for e in entries if e.job_id]
    if not ids:
        return {}, ""
    try:
        return _slurm.job_details(ids), ""
    except RunError as e:
        return {}, str(e).split(";")[0]


def _log_nodes(suite, entry):
    """Nodes the job's log blames ("srun: error: node3: task 2: Killed",
    "Node failure on node3", "*** JOB 12 ON node3 CANCELLED")."""
    path = os.path.join(_paths(suite)["logs"], f"{entry.key.replace('/', '--')}.{entry.job_id}.out")
    try:
        with open(path, errors="replace") as f:
            text = f.read()[-200000:]
    except OSError:
        return []
    found = re.findall(r"srun: error: ([\w.\-]+): tasks? [\d\-,]+: (?!Exited with exit code)",
                       text)
    found += re.findall(r"[Nn]ode failure on ([\w.\-]+)", text)
    found += re.findall(r"\*\*\* (?:JOB|STEP) [\d.]+ ON ([\w.\-]+) CANCELLED", text)
    return list(dict.fromkeys(found))


def _failure(suite, entry, info):
    """One line naming why job `entry` failed and on which node, or ""."""

    if not info or info["state"] not in _FAILED_STATES:
        return ""
    text = f"job {entry.job_id} {info['state']}"
    if info["nodes"]:
        text += f" on {info['nodes']}"
    problems = _slurm.node_problems(info["nodes"])
    blamed = _log_nodes(suite, entry)
    if problems:
        text += ": " + ", ".join(f"{n} {p}" for n, p in problems.items())
    elif blamed:
        text += ": failed on " + ", ".join(blamed)
    if info["reason"] and info["reason"] not in text:
        text += f" [{info['reason']}]"
    return text


def status(suite):
    """[(key, job state or run state, results state, detail)] per combination.

    Slurm job states come from squeue/sacct; without them the state says so.
    A failed job's detail names its nodes and the ones Slurm saw go down.
    """
    mode, entries = read_manifest(suite)
    jobs, note = _job_info(entries)
    rows = []
    for e in entries:
        result, detail = _part_state(e)
        info = jobs.get(e.job_id)
        state = (info["state"] if info else f"unknown ({note})" if note else "unknown") \
            if e.job_id else e.state
        if info and info["state"] == "PENDING" and info.get("reason"):
            # squeue's reason: Resources, Priority, or one that never clears
            # (PartitionNodeLimit, ReqNodeNotAvail: more nodes than exist)
            detail = f"pending: {info['reason']}" + (
                " (the job asks for more nodes than the partition has; it will not start)"
                if info["reason"] in _NEVER_STARTS else "")
        rows.append((e.key, state, result, e.error or _failure(suite, e, info) or detail))
    return rows


_NEVER_STARTS = ("PartitionNodeLimit", "ReqNodeNotAvail", "BadConstraints",
                 "PartitionConfig", "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved")
# states of a job that may still write its part file
_LIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
                "RESIZING", "SIGNALING", "STAGE_OUT")


def _queued_jobs(suite):
    """{combination key: job id} of this suite's jobs Slurm still runs or
    holds, from the manifest of an earlier submission."""
    try:
        _, old = read_manifest(suite)
    except ConfigError:
        return {}
    live = [e for e in old if e.job_id]
    jobs, _ = _job_info(live)
    out = {}
    for e in live:
        state = (jobs.get(e.job_id) or {}).get("state", "")
        if state.split(" ")[0].rstrip("+") in _LIVE_STATES:   # "CANCELLED by 0" -> CANCELLED
            out[e.key] = e.job_id
    return out


def _check_outputs(suite, report):
    """The suite's results file, report and work folders can be written:
    checked before the first combination runs."""

    check_output(suite.out, f"{suite.path}: out")
    if report and suite.report:
        check_output(suite.report, f"{suite.path}: report")
        check_output(os.path.splitext(suite.report)[0] + ".ipynb", f"{suite.path}: report")
    for d in _paths(suite).values():
        check_output_folder(d, f"{suite.path}: work folder")


def collect(suite, report=True, progress=None):
    """One DataTree file (suite.out) of every combination with results, and
    the report; the others are listed in `failed`."""


    _check_outputs(suite, report)
    _, entries = read_manifest(suite)
    jobs, _note = _job_info(entries)
    parts, failed = {}, []
    for e in entries:
        state, detail = _part_state(e)
        detail = _failure(suite, e, jobs.get(e.job_id)) or detail
        if state in ("done", "partial"):
            ds = next(iter(dataset.open_parts(e.part).values())).load()
            ds.attrs["suite"] = suite.name
            ds.attrs["suite_axes"] = json.dumps(e.axes)
            parts[e.key] = ds
        if state != "done":
            failed.append((e.key, e.error or f"{state}: {detail}"))
    result = SuiteResult(entries, failed=failed)
    if not parts:
        return result
    # xarray only where the results are joined: `ccbench suite` imports this
    # module before it reads its arguments, and bad input needs none
    import xarray as xr  # lazy: (above)
    tree = xr.DataTree.from_dict(parts)
    result.out = dataset.save(tree, suite.out)
    _say(progress, f"results: {result.out} ({len(parts)} of {len(entries)} combinations)")
    if report and suite.report:
        from ..report.driver import render  # lazy: the report's modules, as xarray above
        result.report = render([result.out], suite.report, stats=suite.stats, title=suite.title)
        _say(progress, f"report: {result.report}")
    return result


def overview(tree_or_path):
    """A table (pandas DataFrame) of a suite's results: one row per
    combination and algorithm with busbw at the largest size."""


    parts = dataset.open_parts(tree_or_path) if isinstance(tree_or_path, (str, os.PathLike)) else \
        {n.path.strip("/"): n.to_dataset(inherit=False) for n in tree_or_path.subtree
         if n.has_data}
    rows = []
    for key, ds in parts.items():
        bw = ds.ccb.busbw().isel(size=-1)
        for alg in bw["algorithm"].values:
            for pl in bw["placement"].values:
                rows.append({"combination": key, "ranks": int(ds.attrs.get("nranks", 0)),
                             "algorithm": str(alg), "placement": str(pl),
                             "size": int(ds["size"].values[-1]),
                             "busbw": float(bw.sel(algorithm=alg, placement=pl))})
    import pandas as pd  # lazy: as xarray in `collect`
    return pd.DataFrame(rows)
