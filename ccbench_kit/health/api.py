"""``ccbench_kit.doctor(...)``: a health check of a set of nodes.

One MPI job (one start-up): the local check, node by node, then the pair
matrix in waves of disjoint pairs, repeated; then `verdict.judge`.  A job
that hangs is stopped by the watchdog, which names the rank and host the
others waited for (`launch.heartbeat`): that host is the verdict.
"""
import datetime
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
import subprocess

from ..errors import EXIT_SIGINT, EXIT_SIGTERM, ConfigError, RunError
from ..launch.leftovers import DOCTOR_PREFIX, run_prefix
from ..output_path import check_distinct, check_output
from ..units import approx_size
from ..resources import RANK_BASE_BYTES, memory_available
from ..backends import backend_class
from ..backends.nccl import visible_gpus
from . import baseline as _baseline
from . import fields as _fields, plan as _plan
from . import cluster as _cluster, results, verdict as _verdict
from .bisect import THRESHOLD, leaf_order
from .probe import PAIR_COPIES, STEPS
from .._files import atomic_write_text
from ..dataset import save
from ..launch import hosts as _hosts, slurm as _slurm
from ..launch.command import launcher
from ..launch.job import RANK_MODULE, Job
from ..launch.hosts import load_topology
from ..launch.mpirun import died_message, run_ranks
from ..launch.watchdog import describe_stall
from ..progress_board import ALG, OP, PLACEMENT
from .collective import TCP, transports

# Exit codes, for CI and Slurm prologs (docs/doctor.md)
HEALTHY, OUTLIER, BAD_INPUT, RUN_FAILED = 0, 1, 2, 3


@dataclass
class Diagnosis:
    """What a health check found.

    Attributes
    ----------
    verdict : verdict.Verdict
        The findings (empty: no outlier) and each node's ratios.
    exit_code : int
        0 healthy, 1 outlier found (or a node that hangs or never starts),
        3 the run failed without naming a node.
    out : str
        The results file (``pairs`` and ``local`` parts), also when the run
        was stopped: it holds every step measured before.
    message : str
        Why the run stopped early (empty if it did not).
    command : str
        The command line that reproduces this check.
    """

    verdict: object
    exit_code: int
    out: str = ""
    message: str = ""
    command: str = ""
    nodes: list = field(default_factory=list)

    @property
    def line(self):
        return self.verdict.line()


def default_out():
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("results", f"doctor-{stamp}.nc")


# the measurement unless told otherwise: `make_plan`'s, `doctor`'s and
# ``ccbench doctor``'s defaults (`fields`, the doctor's option table)
BISECT_FROM = _fields.BISECT_FROM
MEASUREMENT = _fields.measurement()


def make_plan(nnodes, *, leaf_of=None, bisect=None, backend=TCP, per_gpu=False, **measure):
    """The measurement plan the ranks follow (a JSON-able dict).

    `measure`: the measured options of `fields` (ranks_per_node, repeats,
    bw_bytes, local_bytes, lat_iters, bw_iters), each its default when not
    given and checked by its field.
    `bisect`: True runs the bisection (`health.bisect`) instead of the pair
    matrix, False the matrix, None the bisection from `BISECT_FROM` nodes.
    `backend`: a kit backend's name (`collective.transports`).
    `per_gpu`: the nodes are this host's GPUs (``--per-gpu``)."""
    plan = {**_fields.checked_measurement(measure), "backend": backend,
            "per_gpu": bool(per_gpu)}
    if bisect is None:
        bisect = nnodes >= BISECT_FROM
    if bisect and nnodes < 4:
        raise ConfigError(f"bisection splits the nodes in halves of at least 2: it needs at "
                          f"least 4 nodes, got {nnodes}", _fields.flag("bisect"))
    plan["waves"] = [] if bisect else _plan.schedule(nnodes, leaf_of)
    # each node's leaf switch: the verdict judges the uplinks between leaves
    plan["leaf"] = [leaf_of(k) for k in range(nnodes)] if leaf_of else None
    if bisect:
        plan["bisect"] = {"order": leaf_order(nnodes, leaf_of), "threshold": THRESHOLD,
                          "leaf": plan["leaf"]}
    return plan


def leaves(names, topology):
    """``leaf_of(node index)`` from a DescribeInstanceTopology file (the last
    network node of each host is its leaf switch), or None."""
    if not topology:
        return None
    topo = load_topology(topology)
    unknown = [n for n in names if n not in topo]
    if unknown:
        raise ConfigError(f"host {unknown[0]!r} is not in the topology file", "--topology")
    leaf = [topo[n][-1] for n in names]
    return lambda k: leaf[k]


def choose_backend(name, remote=False):
    """(backend, why): the doctor's transport (`collective.transports`: any
    kit backend, built in or registered; tcp is the management network's).

    None picks nccl where this host has GPUs, else mpi.  A backend this
    host cannot run is bad input (`Backend.doctor_check`: nccl without a
    GPU), unless the ranks run elsewhere (`remote`: under Slurm, launched
    from a login node)."""
    if name is not None and name not in transports():
        raise ConfigError(f"unknown backend {name!r}; choose one of {', '.join(transports())}",
                          "--backend")
    if name is not None:
        backend_class(name).doctor_check(remote)
        return name, "asked for"
    gpus, why = visible_gpus()
    why = why.split(";")[0]
    if gpus:
        return "nccl", f"the default: {gpus} GPU(s) on this host"
    return "mpi", f"the default: no GPU on this host ({why})"


def per_gpu_refuse(**given):
    """ConfigError when a setting that ``--per-gpu`` fixes itself is given:
    it checks this host's GPUs, one rank each, through nccl."""
    flags = {"hosts": _fields.flag("hosts"), "hosts_file": _fields.flag("hosts_file"),
             "nnodes": _fields.flag("nnodes"), "slurm": "-S/--slurm-mode",
             "client": _fields.flag("scheduler_file"),
             "ranks_per_node": _fields.flag("ranks_per_node"),
             "topology": _fields.flag("topology")}
    for key, flag in flags.items():
        if given.get(key):
            raise ConfigError(f"--per-gpu checks this host's GPUs, one rank each; {flag} "
                              "does not apply", flag)
    fixed = _fields.PER_GPU_FIXES["backend"]
    if given.get("backend") not in (None, fixed):
        raise ConfigError(f"--per-gpu measures the GPUs through {fixed}, not "
                          f"{given['backend']}", _fields.flag("backend"))


def per_gpu_nodes(count, why="", host=None):
    """The nodes of ``--per-gpu``: this host's `count` GPUs, ``HOST:gpuK``
    (at least 2: the verdict compares them; `why`: why none are seen)."""
    if count < 2:
        why = f" ({why.split(';')[0]})" if why and not count else ""
        raise ConfigError(f"compares this host's GPUs with each other: it needs at "
                          f"least 2, this host has {count}{why}", "--per-gpu")
    host = host or socket.gethostname()
    return [f"{host} gpu{k}" for k in range(count)]  # the label `health.gpu` gives a GPU


def joint_verdict(diagnoses):
    """(verdict line, exit code) of checks run back to back (``--local
    --per-gpu``): every GPU or link any of them names, once; else the worst
    of "unknown", "cannot tell", "none"; the highest exit code."""
    named = [f.label for d in diagnoses for f in d.verdict.findings]
    code = max(d.exit_code for d in diagnoses)
    if named:
        return "verdict: " + ", ".join(dict.fromkeys(named)), code
    lines = [d.line for d in diagnoses]
    for worst in ("verdict: unknown", "verdict: cannot tell"):
        # "verdict: unknown (node2: ...)" says where a start crashed
        found = next((line for line in lines if line.startswith(worst)), None)
        if found:
            return found, code
    return "verdict: none", code


def resolve_nodes(hosts=None, hosts_file=None, nnodes=None, slurm=None):
    """The node names to check, in order; raises ConfigError on bad input."""
    given = _hosts.given_hosts(hosts, hosts_file)
    names = [h.name for h in given] if given else allocation_nodes(slurm) if slurm else None
    if names is None:
        raise ConfigError("name the nodes to check: --hosts, --hosts-file or -S (the "
                          "nodes of a Slurm allocation)", "--hosts")
    if nnodes is not None:
        if not isinstance(nnodes, int) or nnodes < 1:
            raise ConfigError(f"must be a positive integer, got {nnodes!r}", "-N/--nnodes")
        if nnodes > len(names):
            raise ConfigError(f"{nnodes} nodes asked for but only {len(names)} are there "
                              f"({', '.join(names)})", "-N/--nnodes")
        names = names[:nnodes]
    if len(names) < 2:
        raise ConfigError(f"a health check compares nodes: it needs at least 2, got "
                          f"{len(names)} ({', '.join(names)})",
                          "-N/--nnodes" if nnodes is not None else "--hosts")
    return names


def check_names_resolve(names, hosts_file=None, slurm=None):
    """Before any launch, a host name that does not resolve stops the check
    (one line naming the first few, resolved concurrently).  Not where
    something else maps names to nodes: Slurm (its NodeAddr) or a launch
    agent of the site's own (OMPI_MCA_plm_rsh_agent: an ssh alias, a
    container or namespace name), which the kit cannot ask."""
    if slurm or os.environ.get("OMPI_MCA_plm_rsh_agent"):
        return
    _hosts.check_resolvable(names, "--hosts-file" if hosts_file else "--hosts")


def allocation_nodes(slurm):
    """Node names of the Slurm allocation `slurm` runs in, or None outside one."""
    opts = _slurm.as_options(slurm)
    job = opts.allocation()
    if not job:
        return None
    _slurm.require_tools("squeue", "scontrol")
    q = subprocess.run(["squeue", "-h", "-j", str(job), "-o", "%N"], capture_output=True,
                       text=True, timeout=30)
    nodelist = q.stdout.strip()
    if q.returncode != 0 or not nodelist:
        raise ConfigError(f"Slurm job {job} is not running here (squeue: "
                          f"{(q.stderr or 'no nodes').strip()})", "--slurm-job-id")
    h = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                       text=True, timeout=30)
    return h.stdout.split()


def doctor(hosts=None, *, hosts_file=None, nnodes=None, slurm=None, client=None, out=None,
           ranks_per_node=None, topology=None, bisect=None, timeout=None, env=None,
           thresholds=None, backend=None, baseline=None, save_baseline=None, per_gpu=False,
           command="", **measure):
    """Check the nodes; return a `Diagnosis`.

    Parameters
    ----------
    hosts, hosts_file, nnodes
        The nodes (``--hosts``, ``--hosts-file``, ``-N``: the first N of them).
    slurm : bool or dict, optional
        Launch with srun (``-S``); without hosts, the allocation's nodes.
    client : distributed.Client, optional
        Check the nodes of a Dask-MPI cluster's workers (``ccbench cluster
        start``), on those workers (`health.cluster`); no hosts then.
    out : str, optional
        Results file (default ``results/doctor-STAMP.nc``).
    ranks_per_node : int, optional
        Ranks on each node: the local check is an all_reduce among them
        (default 2; on a cluster, the fewest workers any node has).
    **measure
        The measurement (`fields`, each its default unless given):
        ``repeats``, the times every measurement is repeated (interleaved;
        the verdict needs most repeats to agree); ``bw_bytes`` and
        ``local_bytes`` (int or str), the message of the pair bandwidth
        test and the size of the local all_reduce; ``lat_iters`` and
        ``bw_iters``, the ping-pongs and exchanges of each pair test.
    topology : str or dict, optional
        DescribeInstanceTopology output: pairs that would share a leaf's
        uplink don't run at the same time (`plan.waves`); bisection splits
        the nodes along the leaves.
    bisect : bool, optional
        True: bisection of a slow all_reduce (O(log N) rounds,
        `health.bisect`) instead of the pair matrix; False: the matrix;
        None (default): bisection from `BISECT_FROM` nodes.
    timeout : float, optional
        Seconds without progress before the watchdog stops the job and
        names the node it waits for (default 30 s plus 1 s per 50 MB).
    thresholds : dict, optional
        ``{"local": 2.0, "bandwidth": 0.75, "latency": 2.0}`` (`verdict`).
    backend : str, optional
        The kit backend the pair tests, the local all_reduce and the
        bisection run through: "tcp" (sockets, the management network),
        "mpi", "nccl", "torch" or a registered one (`choose_backend`; None:
        nccl where this host has GPUs, else mpi).  nccl runs one rank per GPU.
    baseline : str, optional
        A baseline file saved by an earlier check of these nodes
        (`save_baseline`) through the same backend: every node's link is
        also scored against it (`verdict`), which sees a fault that hits
        many nodes alike.
    save_baseline : str, optional
        Save this run's figures as the healthy baseline of these nodes.
    per_gpu : bool
        Check this host's GPUs as nodes (``--per-gpu``): one rank per GPU,
        node ``HOST gpuK``, through nccl; the pairs are pairs of GPUs, each
        GPU's local check is its own one-rank all_reduce, and every repeat
        adds the host's all_reduce over all its GPUs (`per_gpu_nodes`).
    """
    if per_gpu:
        per_gpu_refuse(hosts=hosts, hosts_file=hosts_file, nnodes=nnodes, slurm=slurm,
                       client=client, ranks_per_node=ranks_per_node, topology=topology,
                       backend=backend)
        names = per_gpu_nodes(*visible_gpus())
        ranks_per_node, backend = (_fields.PER_GPU_FIXES[k] for k in ("ranks_per_node",
                                                                       "backend"))
    timeout = _fields.get("timeout").validate(timeout)
    backend, why = choose_backend(backend, remote=bool(slurm) or client is not None)
    check_distinct({"--out": out, "--save-baseline": save_baseline}, {"--baseline": baseline})
    reference = _baseline.load(baseline, "--baseline") if baseline else None
    if save_baseline:
        check_output(save_baseline, "--save-baseline")
    judged = dict(thresholds=thresholds, baseline=reference, save_baseline=save_baseline,
                  backend_note=f"measured through --backend {backend} ({why})")
    if client is not None:
        return _doctor_cluster(client, hosts or hosts_file or slurm, nnodes, out, ranks_per_node,
                               timeout, judged, command, dict(measure, bisect=bisect,
                                                              backend=backend))
    if not per_gpu:
        if ranks_per_node is None:  # a device backend: one rank per device
            ranks_per_node = backend_class(backend).doctor_ranks_per_node(remote=bool(slurm))
        names = resolve_nodes(hosts, hosts_file, nnodes, slurm)
    plan = make_plan(len(names), ranks_per_node=ranks_per_node,
                     leaf_of=leaves(names, topology), bisect=bisect, backend=backend,
                     per_gpu=per_gpu, **measure)
    if reference is not None:
        check_baseline(reference, names, backend)
    if not per_gpu and (hosts or hosts_file):
        check_names_resolve(names, hosts_file, slurm)   # after the cheap checks of the flags
        if not (slurm or os.environ.get("OMPI_MCA_plm_rsh_agent")):
            check_fits_here(plan, len(_hosts.this_host(names)))
    plan["hosts"] = names
    out = os.path.abspath(out or default_out())
    plan["out"] = out + ".raw.json"
    nranks = len(names) * ranks_per_node
    # every node's ranks run the local check at once, on hosts that may run
    # other work too: a rank that polls without yielding holds the core its
    # node-mate needs for its whole time slice
    env = {"OMPI_MCA_mpi_yield_when_idle": os.environ.get("OMPI_MCA_mpi_yield_when_idle", "1"),
           **backend_class(backend).doctor_env(plan["bw_bytes"]),
           **(env or {})}
    # --per-gpu: plain mpirun on this host, rank k on GPU k
    cmd = launcher(nranks) if per_gpu else launcher(
        nranks, hosts=names, slurm=slurm, nnodes=len(names), ranks_per_node=ranks_per_node,
        env=env)
    return _launch_checked(plan, nranks, cmd, env, timeout, names, out, judged, command)


def _launch_checked(plan, nranks, cmd, env, timeout, names, out, judged, command):
    """Run the ranks and make the `Diagnosis`; a run that failed before its
    first measurement for a reason that is not the nodes' (`_false_start`)
    is started once more, and the notes say so."""
    raw_path, stalls, earlier = plan["out"], [], []

    def describe(stall):
        stalls.append(stall)
        return describe_stall(stall, step_name(stall.row))
    for attempt in (1, 2):
        results.remove(raw_path)
        launched = time.time()
        with tempfile.TemporaryDirectory(prefix=run_prefix(DOCTOR_PREFIX)) as run_dir:
            failure, exit_code, _, dead = run_ranks(
                RANK_MODULE, [Job.doctor(plan).word()], nranks, run_dir,
                describe=describe, call_timeout=timeout, command=cmd, env=env,
                bounded_start=timeout is not None)  # --timeout holds from the start
        interrupted = failure is not None and exit_code in (EXIT_SIGINT, EXIT_SIGTERM)
        # a rank the launcher saw killed by a signal, not by the watchdog
        # (its stop kills ranks too) nor on the user's Ctrl-C or SIGTERM
        died = dead if failure is not None and not stalls and not interrupted else []
        if died:
            # the first is the cause (`watchdog.cause_first`: the rank a
            # survivor lost its connection to); the ranks that lost their peer
            # then fail (ConnectionResetError) and srun stops the others
            then = "" if failure == died_message(dead) else f"; then {failure}"
            failure = f"{died_message(died[:1])} " + (
                f"during the check{then}" if _measured(raw_path)
                else "before the first measurement")
        false_start = _false_start(failure, stalls, died, raw_path)
        if attempt == 2 or not false_start:
            break
        earlier.append(f"attempt 1 {false_start} and was started again: "
                       f"{failure.splitlines()[0]}")
        stalls.clear()
    diagnosis = _finish(raw_path, out, names, plan, failure, stalls, judged, command,
                        launched, died, earlier)
    if interrupted:
        diagnosis.exit_code = exit_code   # stopped by the user: 130/143, partial results kept
    return diagnosis


def host_bytes(plan):
    """(bytes, flag): the host memory one node's ranks hold at most in a
    check of `plan` (None where the buffers are a device's), and the size
    flag that decides it.  Every rank: its interpreter and the local step's
    buffers (the all_reduce's two and the copy rate's two of 4x the size,
    `probe.memcpy_bandwidth`); the node's leader also the pair's
    (`probe.PAIR_COPIES`)."""
    backend = plan["backend"]
    if not backend_class(backend).host_buffers:
        return None, None
    local = plan["ranks_per_node"] * 8 * plan["local_bytes"]
    pair = PAIR_COPIES * plan["bw_bytes"]
    need = plan["ranks_per_node"] * RANK_BASE_BYTES + max(local, pair)
    return need, "--bw-size" if pair >= local else "--local-size"


def check_fits_here(plan, nodes_here, available=None):
    """ConfigError naming --bw-size (or --local-size), before any launch,
    when the `nodes_here` nodes of the check that are this host cannot hold
    its buffers in the memory available here (`resources.memory_available`:
    MemAvailable, cgroup, Slurm): past it a rank is killed, or the host
    swaps and the check hangs.  Other hosts' memory is not known before
    the launch."""
    need, flag = host_bytes(plan)
    if need is None or nodes_here < 1:
        return
    need *= nodes_here
    have = memory_available() if available is None else available
    if need > have:
        size = approx_size(plan["bw_bytes"] if flag == "--bw-size" else plan["local_bytes"])
        raise ConfigError(
            f"{size} needs about {approx_size(need)} of memory on this host ({nodes_here} "
            f"node{'s' if nodes_here != 1 else ''} of the check, {plan['ranks_per_node']} "
            f"rank{'s' if plan['ranks_per_node'] != 1 else ''} each), but only "
            f"{approx_size(have)} is available here; give a smaller size", flag)


def check_baseline(baseline, names, backend):
    """ConfigError (naming --baseline and the file) when `baseline` has no
    pair rates through `backend` or was saved on other nodes."""
    fig = results.pair_figure(backend)
    if fig not in baseline.figures:
        raise ConfigError(f"{baseline.path}: no pair rates measured through --backend "
                          f"{backend} (it holds {', '.join(baseline.figures) or 'nothing'}); "
                          f"save one with --backend {backend} --save-baseline", "--baseline")
    theirs = [str(n) for n in baseline.identity.get("nodes", [])]
    if sorted(theirs) != sorted(names):
        raise ConfigError(f"{baseline.path}: recorded on {', '.join(theirs)}, this check "
                          f"measures {', '.join(names)}: a baseline of other nodes",
                          "--baseline")


def _false_start(failure, stalls, died, raw_path):
    """Why a failed run is started once more (one place for every such
    case), or "": it failed before any record was written, and

    - every rank was alive and stuck together (no culprit): MPI's own
      start-up stopped (Open MPI's TCP wire-up hangs when its handshake meets
      a lost packet), not a node;
    - or a rank was killed by a signal (`died`): a crash in MPI/PMIx
      start-up (srun --mpi=pmix, a few runs in a hundred on the testbed).
    One more start says whether it was the node."""
    if failure is None or _measured(raw_path):
        return ""
    if stalls and stalls[-1].kind == "stuck":
        return "stopped before its first measurement"
    if died:
        return "crashed before its first measurement"
    return ""


def _measured(raw_path):
    """Whether rank 0 wrote any record of this run."""
    if not os.path.exists(raw_path):
        return False
    raw = results.Raw.read(raw_path)
    return bool(raw.local or raw.pair or raw.bisect or raw.host)


def _doctor_cluster(client, hosts_given, nnodes, out, ranks_per_node, timeout, judged,
                    command, measure):
    """`doctor` on the workers of a Dask-MPI cluster (`health.cluster`)."""
    if hosts_given:
        raise ConfigError("the cluster's workers are the nodes checked: give --scheduler-file "
                          "or the hosts (--hosts, --hosts-file, -S), not both",
                          "--scheduler-file")
    workers, names = _cluster.choose_workers(client, ranks_per_node, nnodes)
    plan = make_plan(len(names), ranks_per_node=len(workers) // len(names), **measure)
    plan["hosts"] = names
    out = os.path.abspath(out or default_out())
    plan["out"] = raw_path = out + ".raw.json"
    results.remove(raw_path)
    launched = time.time()
    text, failure = _cluster.run_on_workers(client, workers, plan, timeout)
    if text is not None:
        atomic_write_text(raw_path, text)  # rank 0's host may not share our disk
    if judged["baseline"] is not None:
        check_baseline(judged["baseline"], names, plan["backend"])
    return _finish(raw_path, out, names, plan, failure, [], judged, command, launched)


def step_name(row):
    """The doctor's step in a board row, for the watchdog's message."""
    if not int(row[OP]):   # no step entered yet
        return "doctor start-up (MPI's first messages, the pair connections, the backend)"
    k = int(row[PLACEMENT])
    step = STEPS[k] if 0 <= k < len(STEPS) else "?"
    unit = "node" if step.startswith("local") else "wave"
    return f"doctor {step} ({unit} {int(row[ALG])})"


def _finish(raw_path, out, names, plan, failure, stalls, judged, command, launched, died=(),
            earlier=()):
    """The `Diagnosis` of a run that ended (`died`: ranks killed by a
    signal; `earlier`: why an earlier start was not this run, the notes
    that come first, also in the results file)."""
    raw = None
    if os.path.exists(raw_path):
        raw = results.Raw.read(raw_path)
        raw.complete = failure is None
    if failure is not None:
        hang = stalls[-1] if stalls else None
        if hang:
            verdict = _verdict.hang_verdict(hang, failure)
        elif died:
            verdict = _verdict.death_verdict(died, failure, _measured(raw_path), bool(earlier))
        else:
            verdict = _verdict.Verdict(notes=[failure], failed=True)
        code = OUTLIER if verdict.findings else RUN_FAILED
    else:
        if raw is None:
            raise RunError(f"the health check finished but its records ({raw_path}) are missing: "
                           "rank 0 wrote them on its own host; give --out a path on a shared "
                           "file system")
        verdict = _verdict.judge(raw, judged["thresholds"], baseline=judged["baseline"])
        code = OUTLIER if verdict.findings or verdict.undecided else HEALTHY
    verdict.notes[:0] = [*earlier, judged["backend_note"]]
    if raw is not None and (raw.local or raw.pair):
        parts = results.to_datasets(raw, {
            "command": command, "doctor_verdict": verdict.to_dict(),
            "doctor_nodes": names, "doctor_plan": {k: v for k, v in plan.items()
                                                   if k != "out"},
            "doctor_timing": timing(raw, launched),
            **({"doctor_host_allreduce": results.host_allreduce(raw)} if raw.host else {}),
            **({"doctor_bisect": {"path": raw.bisect, "note": raw.bisect_note}}
               if plan.get("bisect") else {})})
        if failure is not None:
            for ds in parts.values():
                ds.attrs["incomplete_reason"] = failure.splitlines()[0]
        save(parts, out)
        results.remove(raw_path)
        if judged["save_baseline"] and failure is None:
            _baseline.save(results.figures(raw), judged["save_baseline"])
            verdict.notes.append(f"baseline saved: {judged['save_baseline']}")
    else:
        out = ""
        results.remove(raw_path)
    return Diagnosis(verdict, code, out, failure or "", command or reproduce(names, plan),
                     names)


def timing(raw, launched):
    """Seconds: the job's start-up (launch to the first measurement), the
    measuring, and each repeat's pair matrix (`bench/doctor_scaling.py`)."""
    if not raw.started:
        return {}
    ats = sorted(r["at"] for r in raw.local + raw.pair + raw.bisect)
    per_rep = {}
    for r in raw.pair:
        per_rep.setdefault(r["rep"], []).append(r["at"])
    return {"startup_s": round(raw.started - launched, 3),
            "measure_s": round((ats[-1] if ats else raw.started) - raw.started, 3),
            "waves": len(raw.plan["waves"]), "repeats": raw.plan["repeats"],
            **({"bisect_steps": len(raw.bisect)} if raw.plan.get("bisect") else {})}


def reproduce(names, plan):
    """A command line that runs this check again (`fields.reproduce`)."""
    return _fields.reproduce(names, plan)
