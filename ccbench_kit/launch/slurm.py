"""Slurm: srun inside an allocation, a new one with salloc, or a batch job.

As nccom-test's ``-S/--slurm-mode``: with ``--slurm-job-id`` the ranks run
as a step of that job (``srun --jobid``); inside an allocation (SLURM_JOB_ID
set) as a step of it; otherwise ``salloc`` makes a new allocation for the
run.  ``--slurm-setup-script`` runs once on every node before the ranks.
Suites submit one ``sbatch`` job per combination (`sbatch_script`).
"""
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
import getpass

from .._version import __version__
from ..errors import ConfigError, RunError
from . import node_setup

_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")
# a partition, account, time limit or MPI plugin: Slurm's own names use
# these characters; anything else (a newline above all) could end the
# #SBATCH line and start a command in the batch script
_SLURM_WORD = re.compile(r"^[A-Za-z0-9_.:,+@/\-]+$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FLAGS = {"partition": "--slurm-partition / slurm.partition",
          "time_limit": "--slurm-time / slurm.time_limit",
          "account": "slurm.account", "mpi": "--srun-mpi / slurm.mpi"}


@dataclass
class SlurmOptions:
    """How to run under Slurm.

    Parameters
    ----------
    job_id : str, optional
        An existing allocation (``--slurm-job-id``); default the one this
        process runs in (SLURM_JOB_ID), else a new one.
    setup_script : str, optional
        Run on each node before the ranks (``--slurm-setup-script``); the
        keyword ``default`` runs the kit's own check of each node instead
        (`node_setup`; a file named so is ``./default``).
    partition, time_limit, account : str, optional
        For a new allocation or batch job (``-p``, ``-t``, ``-A``).
    mpi : str, optional
        srun's ``--mpi`` plugin (``pmix`` for Open MPI 4/5); default the
        cluster's MpiDefault.
    srun_args : list of str
        More srun options, passed as they are.
    """

    job_id: str = None
    setup_script: str = None
    partition: str = None
    time_limit: str = None
    account: str = None
    mpi: str = None
    srun_args: list = field(default_factory=list)

    def validate(self):
        """Check every field where it enters: nothing here may become a
        line of a batch script or split into an unintended argument."""
        for name, flag in _FLAGS.items():
            value = getattr(self, name)
            if value is None or value == "":
                setattr(self, name, None)
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int)) or \
                    not _SLURM_WORD.match(str(value)):
                raise ConfigError(f"{value!r} is not a Slurm {name.replace('_', ' ')} (letters, "
                                  "digits and _ . : , + @ / -)", flag)
            setattr(self, name, str(value))
        self.srun_args = srun_arguments(self.srun_args)
        if self.job_id is not None:
            self.job_id = str(self.job_id).strip()
            if not _JOB_ID.match(self.job_id):
                raise ConfigError(f"{self.job_id!r} is not a Slurm job id (digits, or "
                                  "ARRAYJOB_TASK)", "--slurm-job-id")
        if self.setup_script and self.setup_script != node_setup.KEYWORD:
            if not isinstance(self.setup_script, (str, os.PathLike)) or \
                    _CONTROL.search(os.fspath(self.setup_script)):
                raise ConfigError(f"{self.setup_script!r} is not a file name",
                                  "--slurm-setup-script")
            path = os.path.abspath(self.setup_script)
            if not os.path.isfile(path):
                raise ConfigError(f"{self.setup_script}: no such file", "--slurm-setup-script")
            self.setup_script = path
        return self

    def allocation(self, environ=None):
        """The job to run in: `job_id`, else this process's allocation, else None."""
        environ = os.environ if environ is None else environ
        return self.job_id or environ.get("SLURM_JOB_ID") or None


def srun_arguments(value):
    """More srun options as a list of arguments: a string is split as a
    shell would (``"--exclusive --mem=0"`` is two arguments, not one per
    character), a list is taken as it is; each argument is text without
    control characters."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = shlex.split(value)
        except ValueError as e:
            raise ConfigError(f"{value!r}: {e}", "slurm.srun_args") from None
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"expected a list of srun options, got {type(value).__name__}",
                          "slurm.srun_args")
    out = []
    for arg in value:
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)) or \
                _CONTROL.search(str(arg)):
            raise ConfigError(f"{arg!r} is not one srun option (text on one line)",
                              "slurm.srun_args")
        out.append(str(arg))
    return out


def _directive(flag, value):
    """One ``#SBATCH --flag=value`` line; a value that could end the line
    (or hide the rest of it) is refused."""
    text = str(value)
    if _CONTROL.search(text):
        raise ConfigError(f"{text!r}: a control character (newline) cannot go in a batch "
                          "script directive", flag)
    if re.search(r"\s|[\"'\\]", text):
        raise ConfigError(f"{text!r}: blanks and quotes cannot go in a batch script directive; "
                          "use a path without them", flag)
    return f"#SBATCH --{flag}={text}"


def as_options(slurm):
    """SlurmOptions from True, a dict or SlurmOptions (validated)."""
    if isinstance(slurm, SlurmOptions):
        return slurm.validate()
    if slurm is True:
        return SlurmOptions().validate()
    if isinstance(slurm, dict):
        unknown = set(slurm) - set(SlurmOptions.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown Slurm option(s) {', '.join(sorted(unknown))}; use "
                              + ", ".join(SlurmOptions.__dataclass_fields__), "slurm")
        return SlurmOptions(**slurm).validate()
    raise ConfigError(f"cannot read Slurm options from {slurm!r}", "-S/--slurm-mode")


def setup_argv(opts):
    """The command of the setup step on each node: the user's script, or
    the kit's own check for the keyword ``default`` (`node_setup`)."""
    if opts.setup_script == node_setup.KEYWORD:
        return node_setup.argv(__version__)
    return [opts.setup_script]


def require_tools(*tools):
    """Raise RunError naming the first Slurm command missing from PATH."""
    for tool in tools:
        if shutil.which(tool) is None:
            raise RunError(f"-S/--slurm-mode: {tool} not found on PATH; run on a Slurm "
                           "login node (or inside an allocation), or drop -S to launch "
                           "with mpirun")


def tools_needed(opts, environ=None):
    """The Slurm commands `srun_command` will run: srun, and salloc without
    an allocation."""
    return ("srun",) if as_options(opts).allocation(environ) else ("salloc", "srun")


def _split(nranks, nnodes):
    if not isinstance(nnodes, int) or nnodes < 1:
        raise ConfigError(f"must be a positive integer, got {nnodes!r}", "-N/--nnodes")
    if nranks % nnodes:
        raise ConfigError(f"{nranks} ranks don't divide evenly among {nnodes} nodes; "
                          "use a multiple of the node count", "-r/--nworkers")
    return nranks // nnodes


def _alloc_args(opts, nnodes, hosts=None):
    args = ["--nodes", str(nnodes)]
    if hosts:
        args += ["--nodelist", ",".join(dict.fromkeys(hosts))]
    for flag, value in (("--partition", opts.partition), ("--time", opts.time_limit),
                        ("--account", opts.account)):
        if value:
            args += [flag, str(value)]
    return args


def _placement(per_node, hosts):
    """srun options that lay the ranks out: in the given host order (Slurm
    sorts a plain ``--nodelist`` by name, which would undo a topology-sorted
    host file), or ``per_node`` ranks on each node in Slurm's order."""
    if not hosts:
        return ["--ntasks-per-node", str(per_node)]
    hosts = list(dict.fromkeys(hosts))
    # arbitrary distribution: the node list names the node of each task
    return ["--distribution=arbitrary", "--nodelist",
            ",".join(h for h in hosts for _ in range(per_node))]


# Variables the kit gives an srun step (and an sbatch job) unless the user set them
STEP_DEFAULTS = {"SLURM_PMIX_FENCE": "ring"}


def step_env(environ=None):
    """`STEP_DEFAULTS` the user did not set, for an srun step.

    SLURM_PMIX_FENCE=ring: Slurm's pmix plugin runs a fence with data (the
    modex in MPI_Init) as a ring and one without (MPI_Init's closing
    barrier) as a tree by default.  On the testbed (Slurm 22.05, Open MPI
    4.1.4) about 3 starts in 100 then lost a rank to SIGSEGV in MPI_Init: a
    peer's first MPI message reached it while it still waited in the modex,
    before it could receive one (docs/doctor.md).  With both fences on the
    ring, none in 192 (bench/RESULTS.md: 6 in 186 with the default)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in STEP_DEFAULTS.items() if k not in environ}


def srun_command(nranks, argv, opts, nnodes=1, hosts=None, environ=None):
    """The command that runs `argv` as `nranks` ranks on `nnodes` nodes.

    Inside an allocation: ``srun --jobid J ...``.  Without one: ``salloc ...``
    around the steps.  A setup script makes it ``sh -c 'srun setup && exec
    srun ranks'`` so that both steps share the allocation.  With `hosts`,
    rank r runs on ``hosts[r // ranks per node]``.  Commands are found on
    PATH when run (see `require_tools`).
    """
    opts = as_options(opts)
    per_node = _split(nranks, nnodes)
    job = opts.allocation(environ)
    srun = "srun"
    step = [srun]
    if job:
        step += ["--jobid", job]
    step += ["--nodes", str(nnodes), "--ntasks", str(nranks)] + \
        _placement(per_node, hosts) + ["--kill-on-bad-exit=1"]
    if opts.mpi:
        step.append(f"--mpi={opts.mpi}")
    step += list(opts.srun_args)
    ranks = step + list(argv)
    if opts.setup_script:
        setup = [srun] + (["--jobid", job] if job else []) + [
            "--nodes", str(nnodes), "--ntasks", str(nnodes), "--ntasks-per-node", "1"] \
            + (["--nodelist", ",".join(dict.fromkeys(hosts))] if hosts else []) \
            + setup_argv(opts)
        inner = ["sh", "-c", f"{shlex.join(setup)} && exec {shlex.join(ranks)}"]
    else:
        inner = ranks
    if job:
        return inner
    return ["salloc"] + _alloc_args(opts, nnodes, hosts) + \
        ["--ntasks-per-node", str(per_node), "--job-name", "ccbench"] + inner


# -- batch jobs (suites) ---------------------------------------------------

def sbatch_script(argv, opts, nranks, nnodes=1, job_name="ccbench", output=None,
                  env=None, workdir=None, hosts=None):
    """The text of an sbatch script that runs `argv` on `nranks` ranks.

    `env` is exported before the ranks start (a suite's environment
    variant); `output` is Slurm's log file (``%j`` = job id); `hosts`
    (e.g. topology-sorted) are the nodes, in rank order.
    """
    opts = as_options(opts)
    per_node = _split(nranks, nnodes)
    if not re.match(r"^[\w.\-]+$", job_name):
        raise ConfigError(f"job name {job_name!r}: use letters, digits, . _ -", "name")
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job_name}", f"#SBATCH --nodes={nnodes}",
             f"#SBATCH --ntasks-per-node={per_node}", "#SBATCH --exclusive",
             # a combination that loses a node fails and says so; Slurm's
             # default would rerun it on other nodes under the same name
             "#SBATCH --no-requeue"]
    for flag, value in (("partition", opts.partition), ("time", opts.time_limit),
                        ("account", opts.account), ("output", output),
                        ("chdir", workdir),
                        ("nodelist", ",".join(dict.fromkeys(hosts or [])))):
        if value:
            lines.append(_directive(flag, value))
    lines += ["set -euo pipefail"]
    # step_env's defaults, decided where the job runs: a user's own setting wins
    lines += [f'export {k}="${{{k}:-{v}}}"' for k, v in STEP_DEFAULTS.items()]
    for k, v in sorted((env or {}).items()):
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise ConfigError(f"{k!r} is not an environment variable name", "env")
        lines.append(f"export {k}={shlex.quote(str(v))}")
    srun = ["srun", "--nodes", str(nnodes), "--ntasks", str(nranks)] + \
        _placement(per_node, hosts) + ["--kill-on-bad-exit=1"]
    if opts.mpi:
        srun.append(f"--mpi={opts.mpi}")
    srun += list(opts.srun_args)
    if opts.setup_script:
        lines.append(shlex.join(["srun", "--ntasks-per-node", "1", *setup_argv(opts)]))
    lines.append(shlex.join(srun + list(argv)))
    return "\n".join(lines) + "\n"


def submit(script_path):
    """``sbatch --parsable SCRIPT``; the job id."""
    require_tools("sbatch")
    proc = subprocess.run(["sbatch", "--parsable", os.fspath(script_path)],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RunError(f"sbatch {script_path} failed ({proc.returncode}): "
                       f"{proc.stderr.strip() or proc.stdout.strip()}")
    job = proc.stdout.strip().split(";")[0]
    if not _JOB_ID.match(job):
        raise RunError(f"sbatch {script_path} printed {proc.stdout.strip()!r}, not a job id")
    return job


def job_states(job_ids):
    """{job id: state} from squeue (pending, running, and finished jobs
    slurmctld still holds) and sacct (older ones, where accounting runs).

    Jobs neither knows are left out.
    """
    return {j: d["state"] for j, d in job_details(job_ids).items()}


def job_details(job_ids):
    """{job id: {"state", "nodes", "reason"}} as `job_states`; ``nodes`` is
    Slurm's node list of the job ("node[1-2]"), ``reason`` its pending or
    failure reason ("" when none)."""
    job_ids = [str(j) for j in job_ids]
    if not job_ids:
        return {}
    out = {}
    require_tools("squeue")
    # -t all: finished jobs too, for as long as slurmctld keeps them (MinJobAge)
    proc = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i|%T|%N|%r", "-j",
                           ",".join(job_ids)], capture_output=True, text=True, timeout=60)
    # squeue fails for an id that left the queue; sacct still knows it
    if proc.returncode == 0:
        out.update(_rows(proc.stdout))
    missing = [j for j in job_ids if j not in out]
    sacct = shutil.which("sacct")
    if missing and sacct:
        proc = subprocess.run([sacct, "-n", "-X", "-P", "-o", "JobID,State,NodeList,Reason",
                               "-j", ",".join(missing)], capture_output=True, text=True,
                              timeout=60)
        if proc.returncode == 0:
            out.update(_rows(proc.stdout))
    return {j: out[j] for j in job_ids if j in out}


def _rows(text):
    out = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) >= 2 and parts[0]:
            nodes = parts[2] if len(parts) > 2 and parts[2] not in ("", "None assigned") else ""
            reason = parts[3] if len(parts) > 3 and parts[3] not in ("", "None") else ""
            # sacct writes "CANCELLED by 0": the state is the first word
            out[parts[0]] = {"state": parts[1].split()[0], "nodes": nodes, "reason": reason}
    return out


def node_problems(nodes):
    """{node: "down* (Not responding)"} for the nodes of Slurm node list
    `nodes` that are down, drained or failing (sinfo); {} when none."""
    if not nodes or shutil.which("sinfo") is None:
        return {}
    proc = subprocess.run(["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%t|%E"],
                          capture_output=True, text=True, timeout=60)
    bad = {}
    if proc.returncode == 0:
        for line in proc.stdout.splitlines():
            parts = line.split("|")
            if len(parts) == 3 and parts[1].rstrip("*~#$@+") in (
                    "down", "drain", "drng", "fail", "failg", "unk") or \
                    len(parts) == 3 and parts[1].endswith("*"):
                reason = parts[2].strip()
                bad[parts[0]] = parts[1] + (f" ({reason})" if reason and reason != "none" else "")
    return bad


# -- checks before anything runs --------------------------------------------

_DEFAULT_CONFS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf",
                  "/run/slurm/conf/slurm.conf")


def _client_error(tool, stderr):
    """One line from a Slurm client's stderr: the munge failure when there
    is one (Slurm buries it among retries), else the first error."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    munge = next((ln for ln in lines if "Munge encode failed" in ln or "munge" in ln.lower()
                  and "error" in ln.lower() and "restart with" not in ln), None)
    if munge:
        return ("cannot authenticate to Slurm (is munged running?): "
                + munge.split("error: ", 1)[-1])
    err = next((ln for ln in lines if "error" in ln.lower()), lines[0] if lines else "failed")
    return f"{tool}: {err.split('error: ', 1)[-1]}"


def _client(argv, environ):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=environ)
    except subprocess.TimeoutExpired:
        raise RunError(f"-S/--slurm-mode: {argv[0]} did not answer in 30 s; is slurmctld "
                       "reachable from here?") from None
    if proc.returncode != 0:
        raise RunError(f"-S/--slurm-mode: {_client_error(argv[0], proc.stderr)}")
    return proc.stdout


def preflight(opts, nnodes=1, environ=None):
    """Check, before any rank or file exists, what Slurm would only refuse
    after a wait: a slurm.conf, munge, the partition, the node count, and
    that a given job is ours and running.  Raises ConfigError/RunError."""

    opts = as_options(opts)
    env = dict(os.environ if environ is None else environ)
    conf = env.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        raise ConfigError(f"SLURM_CONF={conf}: no such file; point it at the cluster's "
                          "slurm.conf", "-S/--slurm-mode")
    if not conf and not any(os.path.isfile(p) for p in _DEFAULT_CONFS):
        raise ConfigError(f"no slurm.conf: {_DEFAULT_CONFS[0]} is missing and SLURM_CONF is "
                          "not set", "-S/--slurm-mode")
    job = opts.allocation(env)
    if job:
        out = _client(["squeue", "-h", "-t", "all", "-j", job, "-o", "%i|%u|%T|%D"], env) \
            if _job_known(job, env) else ""
        row = next((ln.split("|") for ln in out.splitlines() if ln.split("|")[0] == job), None)
        if row is None:
            raise ConfigError(f"no job {job} in this cluster (squeue does not know it)",
                              "--slurm-job-id")
        me = getpass.getuser()
        if row[1] != me:
            raise ConfigError(f"job {job} belongs to {row[1]}, not to {me}", "--slurm-job-id")
        if row[2] != "RUNNING":
            raise ConfigError(f"job {job} is {row[2]}, not running", "--slurm-job-id")
        if nnodes > int(row[3]):
            raise ConfigError(f"{nnodes} nodes asked for but job {job} has {row[3]}",
                              "-N/--nnodes")
        return
    parts = {}
    default = None
    for line in _client(["sinfo", "-h", "-o", "%P|%D"], env).splitlines():
        name, count = line.split("|")
        if name.endswith("*"):
            name = default = name[:-1]
        parts[name] = parts.get(name, 0) + int(count)
    partition = opts.partition or default
    if opts.partition and opts.partition not in parts:
        raise ConfigError(f"no partition {opts.partition!r}; this cluster has "
                          + ", ".join(sorted(parts)), "--slurm-partition")
    if partition in parts and nnodes > parts[partition]:
        raise ConfigError(f"{nnodes} nodes asked for but partition {partition} has "
                          f"{parts[partition]}", "-N/--nnodes")


def _job_known(job, env):
    """squeue -j fails outright ("Invalid job id") for a job it never had."""
    proc = subprocess.run(["squeue", "-h", "-t", "all", "-j", job, "-o", "%i"],
                          capture_output=True, text=True, timeout=30, env=env)
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise RunError(f"-S/--slurm-mode: {_client_error('squeue', proc.stderr)}")
    return proc.returncode == 0
