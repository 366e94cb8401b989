"""Start a run under Open MPI's mpirun on this machine and collect it."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from ..errors import RunError
from . import events, worker


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def mpirun_command(nranks, argv, hosts=None, mca=None, hostfile=None, ranks_per_node=None,
                   export=()):
    """The mpirun command line for `nranks` ranks running `argv`.

    With `hostfile`, `ranks_per_node` ranks run on each of its hosts in file
    order (``--map-by ppr:K:node``; a host without ``slots=`` counts its
    cores, so Open MPI itself sees oversubscription).  `export` names
    environment variables to pass to ranks on other hosts (``-x``).
    """
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise RunError("mpirun not found: install Open MPI (apt-get install openmpi-bin "
                       "libopenmpi-dev) or run `make setup`")
    cmd = [mpirun, "-np", str(nranks)]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if hostfile:
        cmd += ["--hostfile", hostfile, "--map-by", f"ppr:{ranks_per_node or 1}:node"]
    elif hosts:
        cmd += ["--host", ",".join(hosts)]
    elif nranks > usable_cores():
        cmd.append("--oversubscribe")
    for name in export:
        cmd += ["-x", name]
    for k, v in (mca or {}).items():
        cmd += ["--mca", k, str(v)]
    return cmd + list(argv)


def mpirun_env():
    env = dict(os.environ)
    # Containers often forbid process_vm_readv, and vader's single-copy path
    # then fails at the first large message; copy-in/copy-out always works.
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def launch(cfg, on_event=None, timeout=None, hosts=None, command=None, env=None):
    """Run `cfg` on `cfg.nranks` ranks under mpirun; return the Dataset path.

    Parameters
    ----------
    cfg : RunConfig
        ``cfg.out`` must be set; rank 0 writes there after each size.
    on_event : callable, optional
        Called with each progress event (dicts, see `events`).
    timeout : float, optional
        Seconds for the whole job; past it the job is killed.
    command : callable, optional
        ``command(argv)`` gives the whole launcher command line (a placement
        on several hosts, srun); default ``mpirun -np N`` here or on `hosts`.
    env : dict, optional
        Variables added to the launcher's environment (NCCL_*, OMPI_*...).
    """
    fd, cfg_path = tempfile.mkstemp(prefix="ccbench-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        f.write(cfg.to_json())
    # Ranks on other hosts can't read our /tmp: they get the config inline.
    argv = [sys.executable, "-m", "ccbench_kit.launch.worker",
            worker.inline_config(cfg) if command else cfg_path]
    cmd = command(argv) if command else mpirun_command(cfg.nranks, argv, hosts=hosts)
    errors, tail = [], []
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**mpirun_env(), **(env or {})},
                                start_new_session=True)

        def pump(stream, is_stdout):
            for line in stream:
                ev = events.parse(line)
                if ev is None:
                    tail.append(line)
                    del tail[:-40]
                    if is_stdout:
                        sys.stdout.write(line)
                    continue
                if ev.get("event") == "error":
                    errors.append(ev)
                elif on_event:
                    on_event(ev)

        threads = [threading.Thread(target=pump, args=(proc.stdout, True), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, False), daemon=True)]
        for t in threads:
            t.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise RunError(f"the run did not finish within {timeout:.0f} s; it was stopped. "
                           f"Results for the sizes done so far are in {cfg.out}")
        except KeyboardInterrupt:
            _kill(proc)
            raise
        for t in threads:
            t.join(timeout=5)
    finally:
        os.unlink(cfg_path)
    if errors:
        first = errors[0]
        raise RunError(first["message"] + (f"\n{first['traceback']}" if "traceback" in first else ""))
    if rc != 0:
        detail = "".join(tail[-8:]).strip()
        raise RunError(f"mpirun exited with status {rc}" + (f":\n{detail}" if detail else ""))
    return cfg.out


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=3)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
