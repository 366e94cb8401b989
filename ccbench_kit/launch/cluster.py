"""A Dask-MPI cluster in the background: ``ccbench cluster start|stop``.

mpirun (or srun) starts ``dask-mpi``: rank 0 is the scheduler, ranks 1..N-1
are workers, each a plain ``distributed.Worker`` (a nanny would fork, and a
forked child can't use its parent's MPI) with one thread.  The scheduler and
workers listen on loopback unless an interface is given, and there is no
dashboard unless asked for.

Next to the scheduler file sit ``NAME.launcher.json`` (the launcher's pid,
the cluster id its processes carry in CCB_CLUSTER_ID, the log) and the log,
so that ``stop`` can find and end every process, from any shell.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import asdict, dataclass

from .._files import atomic_write_text
from ..errors import ConfigError, RunError
from .._optional import require
from .command import launcher
from .mpirun import mpirun_command, mpirun_env

DEFAULT_SCHEDULER_FILE = os.path.join("~", ".ccbench", "scheduler.json")
ENV_MARK = "CCB_CLUSTER_ID"


def scheduler_path(scheduler_file=None):
    return os.path.abspath(os.path.expanduser(scheduler_file or DEFAULT_SCHEDULER_FILE))


def _state_path(scheduler_file):
    return os.path.splitext(scheduler_file)[0] + ".launcher.json"


@dataclass
class ClusterInfo:
    """What `start` wrote down about a running cluster."""

    scheduler_file: str
    pid: int
    cluster_id: str
    log: str
    command: list
    nranks: int
    address: str = ""

    @property
    def nworkers(self):
        return self.nranks - 1


class Cluster:
    """A started cluster; a context manager that stops it on exit.

    Examples
    --------
    >>> with cluster.start(4) as c:
    ...     ds = ccbench_kit.run("all_reduce", sizes="8:1M:4", client=c.client())
    """

    def __init__(self, info, proc=None):
        self.info, self._proc, self._client = info, proc, None

    def __getattr__(self, name):
        return getattr(self.__dict__["info"], name)

    def client(self, **kwargs):
        """A `distributed.Client` connected to the scheduler (one, reused)."""
        if self._client is None:
            from distributed import Client  # lazy: optional dependency (cluster extra)
            self._client = Client(scheduler_file=self.info.scheduler_file, **kwargs)
        return self._client

    def processes(self):
        """pids of the launcher and every rank on this host."""
        return cluster_processes(self.info)

    def stop(self, timeout=30):
        if self._client is not None:
            self._client.close()
            self._client = None
        return stop(self.info.scheduler_file, timeout=timeout, proc=self._proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def cluster_command(nranks, scheduler_file, *, interface="lo", dashboard=None, hosts=None,
                    hosts_file=None, nnodes=None, ranks_per_node=None, slurm=None, env=None):
    """The launcher command line that starts dask-mpi on `nranks` ranks.

    Returns ``(command, keepalive)``: keep `keepalive` until the ranks run
    (it owns a temporary host file).
    """

    argv = [sys.executable, "-m", "dask_mpi.cli", "--scheduler-file", scheduler_file,
            "--scheduler-port", "0", "--worker-class", "distributed.Worker",
            "--nthreads", "1", "--memory-limit", "0", "--interface", interface]
    argv += ["--dashboard-address", dashboard] if dashboard else ["--no-dashboard"]
    build = launcher(nranks, hosts=hosts, hosts_file=hosts_file, nnodes=nnodes,
                     ranks_per_node=ranks_per_node, slurm=slurm, env=env)
    if build is None:
        return mpirun_command(nranks, argv), None
    return build(argv), build


def start(nranks, *, scheduler_file=None, interface=None, dashboard=None, timeout=120,
          hosts=None, hosts_file=None, nnodes=None, ranks_per_node=None, slurm=None,
          env=None):
    """Start a cluster of ``nranks - 1`` workers in the background.

    Parameters
    ----------
    nranks : int
        MPI ranks: the scheduler and the workers.
    scheduler_file : str, optional
        Default ``~/.ccbench/scheduler.json``.
    interface : str, optional
        Network interface to listen on; default ``lo`` (this host only).
        Several hosts need one they share (``eth0``, ``ib0``...).
    dashboard : str, optional
        Dashboard address (``127.0.0.1:8787``); default none.
    timeout : float
        Seconds to wait for every worker.
    hosts, hosts_file, nnodes, ranks_per_node, slurm, env
        As `ccbench_kit.run`.

    Returns
    -------
    Cluster
    """
    require("dask_mpi", "cluster")
    require("distributed", "cluster")
    if not isinstance(nranks, int) or nranks < 2:
        raise ConfigError(f"a cluster needs at least 2 ranks (a scheduler and a worker), "
                          f"got {nranks}", "-np")
    remote = bool(hosts or hosts_file or slurm)
    if interface is None:
        if remote:
            raise ConfigError("several hosts need a network interface they share (eth0, "
                              "ib0...); the default, lo, reaches this host only", "--interface")
        interface = "lo"
    path = scheduler_path(scheduler_file)
    _refuse_running(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    for stale in (path, _state_path(path)):
        if os.path.exists(stale):
            os.unlink(stale)
    cmd, keepalive = cluster_command(
        nranks, path, interface=interface, dashboard=dashboard, hosts=hosts,
        hosts_file=hosts_file, nnodes=nnodes, ranks_per_node=ranks_per_node, slurm=slurm,
        env=env)
    cluster_id = uuid.uuid4().hex
    log = os.path.splitext(path)[0] + ".log"
    proc_env = {**mpirun_env(), **(keepalive.env if keepalive else {}), **(env or {}),
                ENV_MARK: cluster_id}
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=proc_env,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    info = ClusterInfo(path, proc.pid, cluster_id, log, cmd, nranks)
    _write_state(info)
    try:
        info.address = _wait_for_workers(info, proc, timeout)
    except BaseException:
        stop(path, timeout=10, proc=proc)
        raise
    del keepalive
    _write_state(info)
    return Cluster(info, proc)


def connect(scheduler_file=None, timeout=5):
    """A `distributed.Client` of the cluster whose scheduler wrote
    `scheduler_file`; ConfigError naming --scheduler-file when the file is
    missing or unreadable, or no scheduler answers there."""
    require("distributed", "cluster")
    path = scheduler_path(scheduler_file)
    try:
        with open(path) as f:
            address = json.load(f)["address"]
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: no cluster wrote it; start one with "
                          "`ccbench cluster start`", "--scheduler-file") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path} is not a Dask scheduler file ({e})",
                          "--scheduler-file") from None
    from distributed import Client  # lazy: optional dependency (cluster extra)
    # Client's own timeout covers the connection, not a peer that accepts
    # it and never speaks (a stopped scheduler, another program on the
    # port): the whole handshake gets a deadline here
    box = {}

    def attempt():
        try:
            box["client"] = Client(address, timeout=timeout, set_as_default=False)
        except BaseException as e:      # handed to the caller's thread
            box["error"] = e
    thread = threading.Thread(target=attempt, daemon=True, name="ccbench-connect")
    thread.start()
    thread.join(timeout + 5)
    error = box.get("error")
    if "client" not in box and (error is None or isinstance(error, (OSError, TimeoutError))):
        raise ConfigError(f"no scheduler answers at {address} (from {path}) within "
                          f"{timeout:.0f} s: the cluster is not running", "--scheduler-file")
    if error is not None:
        raise error
    return box["client"]


def _refuse_running(path):
    info = read_state(path, missing_ok=True)
    if info and _alive(info.pid):
        raise ConfigError(f"a cluster is already running with {path} (launcher pid "
                          f"{info.pid}); stop it (ccbench cluster stop --scheduler-file "
                          f"{path}) or use another scheduler file", "--scheduler-file")


def _write_state(info):
    atomic_write_text(_state_path(info.scheduler_file), json.dumps(asdict(info)))


def read_state(scheduler_file=None, missing_ok=False):
    """The `ClusterInfo` of the cluster using `scheduler_file`."""
    path = _state_path(scheduler_path(scheduler_file))
    try:
        with open(path) as f:
            return ClusterInfo(**json.load(f))
    except FileNotFoundError:
        if missing_ok:
            return None
        raise ConfigError(f"no cluster started with {scheduler_path(scheduler_file)} ({path} "
                          "is missing); start one with `ccbench cluster start`",
                          "--scheduler-file") from None
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{path} is not a cluster state file ({e})", "--scheduler-file") from e


def _log_tail(info, lines=15):
    try:
        with open(info.log, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).strip()
    except OSError:
        return ""


def _wait_for_workers(info, proc, timeout):
    from distributed import Client  # lazy: optional dependency (cluster extra)

    deadline = time.monotonic() + timeout
    while not os.path.exists(info.scheduler_file):
        _check_running(info, proc)
        if time.monotonic() > deadline:
            raise RunError(f"the scheduler did not start within {timeout:.0f} s; log "
                           f"{info.log}:\n{_log_tail(info)}")
        time.sleep(0.1)
    with Client(scheduler_file=info.scheduler_file, set_as_default=False,
                timeout=max(deadline - time.monotonic(), 1)) as client:
        while len(client.scheduler_info(n_workers=-1)["workers"]) < info.nworkers:
            _check_running(info, proc)
            if time.monotonic() > deadline:
                n = len(client.scheduler_info(n_workers=-1)["workers"])
                raise RunError(f"{n} of {info.nworkers} workers joined within {timeout:.0f} "
                               f"s; log {info.log}:\n{_log_tail(info)}")
            time.sleep(0.1)
        return client.scheduler.address


def _check_running(info, proc):
    rc = proc.poll()
    if rc is not None:
        raise RunError(f"the cluster's launcher exited with status {rc} while starting; "
                       f"log {info.log}:\n{_log_tail(info)}")


def _alive(pid):
    import psutil  # lazy: optional dependency (cluster extra)
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cluster_processes(info):
    """pids on this host that belong to the cluster: the launcher, its
    children, and anything carrying the cluster's id in its environment."""
    import psutil  # lazy: optional dependency (cluster extra)

    pids = set()
    try:
        root = psutil.Process(info.pid)
        pids.add(root.pid)
        pids.update(p.pid for p in root.children(recursive=True))
    except psutil.NoSuchProcess:
        pass
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid not in pids and p.environ().get(ENV_MARK) == info.cluster_id:
                pids.add(p.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
    return sorted(pid for pid in pids if _alive(pid))


def stop(scheduler_file=None, timeout=30, proc=None):
    """Shut the cluster down: ask the scheduler (workers and mpirun then exit
    by themselves), and end by signal whatever is left after `timeout`.

    Returns ``"shut down"`` or ``"killed"``.
    """
    info = read_state(scheduler_file)
    how = "shut down"
    if _alive(info.pid) and os.path.exists(info.scheduler_file):
        try:
            from distributed import Client  # lazy: optional dependency (cluster extra)
            # not the default client: shutdown() would leave dask's scheduler
            # setting pointing at a cluster that is gone
            with Client(scheduler_file=info.scheduler_file, timeout=min(timeout, 10),
                        set_as_default=False) as c:
                c.shutdown()
        except (OSError, TimeoutError):
            how = "killed"
    deadline = time.monotonic() + timeout
    while cluster_processes(info) and time.monotonic() < deadline:
        if proc is not None:
            proc.poll()  # reap our own child, so it doesn't linger as a zombie
        time.sleep(0.1)
    left = cluster_processes(info)
    if left:
        how = "killed"
        _signal_all(info, left, signal.SIGTERM)
        time.sleep(2)
        _signal_all(info, cluster_processes(info), signal.SIGKILL)
    if proc is not None:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    for path in (info.scheduler_file, _state_path(info.scheduler_file)):
        if os.path.exists(path):
            os.unlink(path)
    return how


def _signal_all(info, pids, sig):
    try:
        os.killpg(info.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def status(scheduler_file=None):
    """The scheduler's address and each worker's MPI rank and host."""
    info = read_state(scheduler_file)
    out = {"address": info.address, "pid": info.pid, "running": _alive(info.pid),
           "workers": []}
    if not out["running"]:
        return out
    from distributed import Client  # lazy: optional dependency (cluster extra)
    with Client(scheduler_file=info.scheduler_file, timeout=10, set_as_default=False) as c:
        for addr, w in sorted(c.scheduler_info(n_workers=-1)["workers"].items(),
                              key=lambda kv: kv[1].get("name", "")):
            name = str(w.get("name", ""))
            out["workers"].append({"address": addr, "host": w.get("host", ""),
                                   "rank": name.rsplit("-", 1)[-1]})
    return out
