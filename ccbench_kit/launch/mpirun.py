"""Start a run under the kit's MPI launcher on this machine and collect it
(Open MPI's mpirun or Hydra's mpiexec: `mpi_impl`)."""
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import ctypes

from ..errors import EXIT_SIGINT, CCBenchError, Interrupted, RunError, print_warning
from ..progress_board import Board, ALG, PLACEMENT
from . import events, leftovers, lifeline, mpi_impl, ranklogs
from .job import RANK_MODULE, Job
from .debug import launch_lines
from .heartbeat import Beats
from .watchdog import (Monitor, cause_first, dead_ranks, is_death_notice, kill_tree,
                       unanswered_hosts, unanswered_message, describe_stall)
from .. import dataset
from ..dataset.checkpoint import clear_pending, merge_pending, new_run_id, output_lock


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def mpirun_command(nranks, argv, hosts=None, mca=None, hostfile=None, ranks_per_node=None,
                   export=(), log_dir=None):
    """The launcher command line for `nranks` ranks running `argv`: Open
    MPI's mpirun, or Hydra's mpiexec when the kit runs an MPICH-family MPI.

    With `hostfile`, `ranks_per_node` ranks run on each of its hosts in file
    order (``--map-by ppr:K:node``; a host without ``slots=`` counts its
    cores, so Open MPI itself sees oversubscription).  `export` names
    environment variables to pass to ranks on other hosts (``-x``).
    `log_dir` (checked by `ranklogs.check_log_dir`) also keeps each rank's
    output in files there (``--mpi-log-dir``).
    """
    fam = mpi_impl.family()
    mpirun = mpi_impl.launcher_path(fam)
    if fam == mpi_impl.MPICH:
        return mpi_impl.hydra_command(mpirun, nranks, argv, hosts=hosts, hostfile=hostfile,
                                      ranks_per_node=ranks_per_node, export=export, mca=mca,
                                      log_dir=log_dir)
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
    return cmd + ranklogs.mpirun_options(log_dir) + list(argv)


_CMA_PROBE = r"""
import ctypes, sys
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
libc = ctypes.CDLL(None, use_errno=True)
libc.process_vm_readv.restype = ctypes.c_ssize_t
libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                                  ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
n = int(sys.argv[3])
out = ctypes.create_string_buffer(n)
got = libc.process_vm_readv(int(sys.argv[1]), ctypes.byref(iovec(ctypes.addressof(out), n)), 1,
                            ctypes.byref(iovec(int(sys.argv[2]), n)), 1, 0)
sys.exit(0 if got == n and out.raw == b"ccbench-cma-probe" else 1)
"""


@functools.lru_cache(maxsize=1)
def single_copy_works():
    """Whether one process may read another's memory (process_vm_readv): the
    single copy (CMA) that Open MPI's shared-memory transport uses for large
    messages.  Containers often forbid it (seccomp, Yama ptrace scope), and
    then vader fails at the first large message.  Probed with a child
    process reading this one, as ranks read their siblings."""
    probe = ctypes.create_string_buffer(b"ccbench-cma-probe", 17)
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", "-c", _CMA_PROBE, str(os.getpid()),
                               str(ctypes.addressof(probe)), "17"],
                              capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def mpirun_env():
    env = dict(os.environ)
    # Large messages between ranks of one host go by a single copy (CMA)
    # where the system allows it (about twice the bandwidth of copying in
    # and out of shared memory; bench/RESULTS.md); copy-in/copy-out where
    # it does not, since vader would fail at the first large message.
    if not single_copy_works():
        env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    # a host that does not answer: ssh gives up after 20 s (and mpirun says
    # which host, `watchdog.unanswered_hosts`), not after the kernel's two
    # minutes of SYN retries; a launch agent of the user's own is left alone
    if "OMPI_MCA_plm_rsh_agent" not in env and "OMPI_MCA_plm_rsh_args" not in env:
        env["OMPI_MCA_plm_rsh_args"] = "-o ConnectTimeout=20"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def launch(job, on_event=None, timeout=None, hosts=None, command=None, env=None, debug=False):
    """Run `job` under mpirun, every part in one launch; return the results
    files' paths, one a part.

    Parameters
    ----------
    job : `job.Job` or RunConfig
        A sweep job (a RunConfig is a job of one part).  Every part's
        ``output.out`` must be set; rank 0 keeps each up to date as sizes
        complete (`dataset.checkpoint`).
    on_event : callable, optional
        Called with each progress event (dicts, see `events`): ``part`` as a
        part starts, ``size`` as a size is done, ``part-done`` when its
        results file is complete.
    timeout : float, optional
        Seconds for the whole job; past it the job is killed.
    command : launch.command.Launcher, optional
        ``command(argv)`` gives the whole launcher command line (a placement
        on several hosts, srun), its ``env`` and ``placement`` what the
        launch adds; default ``mpirun -np N`` here or on `hosts`.
    env : dict, optional
        Variables added to the launcher's environment (NCCL_*, OMPI_*...).
    debug : bool
        Show the command, the ranks' environment and their stderr (`debug`).

    Raises
    ------
    RunError
        The job failed: its message says why and where the sizes done are;
        its ``part`` is the index of the part it failed in (the parts before
        it are complete in their files).
    """
    if not isinstance(job, Job):
        job = Job.sweep({job.collective: job})
    with contextlib.ExitStack() as locks:
        for cfg in job.configs:  # one run writes a file at a time
            locks.enter_context(output_lock(cfg.output.out))
        return _launch(job, on_event, timeout, hosts, command, env, new_run_id(), debug)


def _launch(job, on_event, timeout, hosts, command, env, run_id, debug=False):
    cfgs = job.configs
    # a file from an earlier run is not this run's result
    earlier = [_stamp(c.output.out) for c in cfgs]
    leftovers.sweep()                 # what runs killed by SIGKILL left in TMPDIR
    current = [0]                     # the part in flight, from rank 0's events

    def follow(ev):
        if ev.get("event") == "part":
            current[0] = int(ev["index"])
        if on_event:
            on_event(ev)
    with tempfile.TemporaryDirectory(prefix=leftovers.run_prefix()) as run_dir:
        job_path = os.path.join(run_dir, "job.json")
        with open(job_path, "w") as f:
            f.write(job.to_json())
        # Ranks on other hosts can't read our /tmp: they get the job inline
        failure, exit_code, errors, _ = run_ranks(
            RANK_MODULE, [job.word() if command else job_path],
            cfgs[0].nranks, run_dir, describe=lambda stall: stall_message(stall, cfgs[current[0]]),
            call_timeout=cfgs[0].launch.timeout, on_event=follow, timeout=timeout,
            hosts=hosts, command=command, env=env, run_id=run_id, debug=debug)
    if failure is not None:
        k = current[0]
        out = cfgs[k].output.out
        rescued = bool(errors) and errors[0].get("kind") == "ResultsRescued"
        if rescued:  # rank 0 put every size done elsewhere, and said where
            clear_pending(out, run_id)
        err = RunError(failure + ("" if rescued else
                                  _saved_note(out, failure, earlier[k], run_id)))
        err.exit_code, err.part = exit_code, k
        raise err
    return [c.output.out for c in cfgs]


def run_ranks(module, args, nranks, run_dir, *, describe, call_timeout=None, on_event=None,
              timeout=None, hosts=None, command=None, env=None, run_id=None, debug=False,
              bounded_start=False):
    """Run ``python -m MODULE ARGS --board=PATH`` on `nranks` ranks and watch it.

    `run_id` (CCB_RUN_ID of every process) names the run's sidecar files
    and finds its processes; default a new one.  `debug` prints the command
    and the ranks' environment first and relays their stderr (`debug`).
    `bounded_start`: a start-up past `call_timeout` is a stall too
    (`watchdog.Monitor`).

    The ranks beat (`heartbeat`) and fill the board in `run_dir`; a stall is
    turned into a message by ``describe(stall)``.  Returns ``(failure,
    exit_code, errors)``: why the job failed (None if it did not), the exit
    code that failure calls for, the error events the ranks sent, and the
    ranks the launcher reports killed by a signal ((rank, host, signal), the
    one whose death caused the others first; `watchdog.cause_first`).
    Every process of the job is gone on return.
    """
    board_path = os.path.join(run_dir, "board")
    board = Board(board_path, nranks, create=True)
    # ranks use the board only where its path exists (this host)
    argv = [sys.executable, "-m", module, *args, f"--board={board_path}"]
    cmd = command(argv) if command else mpirun_command(nranks, argv, hosts=hosts)
    placement = command.placement if command else None
    placed = [placement.host_of_rank(r) for r in range(nranks)] if placement else []
    run_id = run_id or uuid.uuid4().hex
    job_env = {**mpirun_env(), **(command.env if command else {}), **(env or {}),
               **lifeline.launcher_env(), "CCB_RUN_ID": run_id}
    if debug:
        for line in launch_lines(cmd, job_env):
            print(line, file=sys.stderr, flush=True)
    beats = Beats()
    # mpirun and the ranks die with this process, even by SIGKILL (`lifeline`)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=job_env, start_new_session=True,
                            preexec_fn=lifeline.terminate_with_parent)
    noted = []

    def on_rank_event(ev):
        if not noted:  # the ranks are up: mpirun's session folder names the job
            noted.append(leftovers.note_family(run_dir, proc.pid))
        if on_event:
            on_event(ev)
    output = _Output(proc, on_rank_event, beats, relay_stderr=debug)
    exit_code = RunError.exit_code
    failure = None
    stalls = []

    def described(stall):
        stalls.append(stall)
        return describe(stall)
    try:
        monitor = Monitor(board, call_timeout, beats, placed, bounded_start)
        failure = _supervise(proc, monitor, described, timeout)
    except (KeyboardInterrupt, Interrupted) as e:
        failure = f"interrupted by {getattr(e, 'signal_name', 'SIGINT')}"
        exit_code = getattr(e, "exit_code", EXIT_SIGINT)
    finally:
        # mpirun may be gone while a rank it could not reach is not; a hung
        # job has nothing left to flush and a stopped rank ignores SIGTERM:
        # no grace for it
        # the job stops where the stall was seen: no size after the one named
        # a job stopped here cannot unlink its shared memory: its family,
        # read while its mpirun lives, names the segments to remove after
        family = leftovers.job_family(proc.pid) if proc.poll() is None else None
        kill_tree(proc, run_id, grace=0.5 if failure or proc.poll() is not None else 3.0,
                  at_once=bool(stalls))
        leftovers.remove_segments(family)
        output.join()
        del board
    rc = proc.returncode
    dead = cause_first(dead_ranks("".join(output.deaths)), output.errors) if rc != 0 else []
    if failure is None and output.errors:
        failure = output.errors[0]["message"]
        if "traceback" in output.errors[0]:
            failure += "\n" + output.errors[0]["traceback"]
    if failure is None and rc != 0:
        unanswered = unanswered_hosts("".join(output.tail)) if not beats else []
        if dead:
            failure = died_message(dead)
        elif unanswered:  # one line, not Open MPI's banner
            failure = unanswered_message(unanswered, list(hosts or []) + placed)
        else:
            detail = "".join(output.tail[-8:]).strip()
            failure = f"{os.path.basename(cmd[0])} exited with status {rc}" + \
                (f":\n{detail}" if detail else "")
    return failure, exit_code, output.errors, dead


def died_message(dead):
    """One line for `watchdog.dead_ranks`' findings."""
    return "; ".join(f"rank {r} on host {h} died (signal {sig})" for r, h, sig in dead)


class _Output:
    """Relays the job's output; keeps progress events, errors, a tail and
    the launcher's reports of ranks' ends (`deaths`)."""

    #: seconds `join` waits on a pipe that neither ends nor brings a line
    #: once the job is gone (a process outside the job holding it open)
    QUIET_S = 5.0
    #: lines of the tail kept (the failure's detail)
    TAIL = 40
    #: reports of ranks' ends kept, the first ones, from the whole output and
    #: not from the tail: after a death the survivors' tracebacks and Open
    #: MPI's banners (17 lines each) can come before srun's report of the
    #: dead node, as its report may come last (`watchdog.cause_first`), and
    #: push it out of the tail; srun writes about one a task, so the bound
    #: is only against a flood
    DEATHS = 4096

    def __init__(self, proc, on_event, beats=None, relay_stderr=False):
        self.errors, self.tail, self.on_event, self.beats = [], [], on_event, beats
        self.deaths = []
        self.relay_stderr = relay_stderr
        # per pump (stdout, stderr), each written by its own thread only:
        # lines taken so far (`join`'s sign of progress), and whether it is
        # inside a line's handling (an event's callback)
        self.lines, self.handling = [0, 0], [False, False]
        self.threads = [threading.Thread(target=self._pump, args=(proc.stdout, 0), daemon=True),
                        threading.Thread(target=self._pump, args=(proc.stderr, 1), daemon=True)]
        for t in self.threads:
            t.start()

    def _pump(self, stream, k):
        for line in stream:
            self.lines[k] += 1
            self.handling[k] = True
            try:
                self._take(line, is_stdout=k == 0)
            finally:
                self.handling[k] = False

    def _take(self, line, is_stdout):
        ev = events.parse(line)
        if ev is None:
            self.tail.append(line)
            del self.tail[:-self.TAIL]
            if len(self.deaths) < self.DEATHS and is_death_notice(line):
                self.deaths.append(line)
            if is_stdout:
                sys.stdout.write(line)
            elif self.relay_stderr:
                sys.stderr.write(line)
                sys.stderr.flush()
        elif ev.get("event") == "error":
            self.errors.append(ev)
        elif ev.get("event") == "warning":  # shown even without a progress callback
            print_warning(ev.get("message"))
        elif self.beats is not None and self.beats.take(ev):
            pass
        elif self.on_event:
            self.on_event(ev)

    def join(self):
        """Wait until both pipes are read to their end and every line handled
        (a part's last event loads its results: on a loaded machine that
        took longer than any fixed wait, and the job's last cycle was lost);
        give up only on a pipe that brought nothing for `QUIET_S` while no
        line was being handled."""
        while any(t.is_alive() for t in self.threads):
            seen = list(self.lines)
            for t in self.threads:
                t.join(timeout=self.QUIET_S)
            if self.lines == seen and not any(self.handling):
                return


def _supervise(proc, monitor, describe, timeout):
    """Wait for the job; return why it had to be stopped, or None."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            proc.wait(timeout=0.2)
            return None
        except subprocess.TimeoutExpired:
            pass
        stall = monitor.poll()
        if stall is not None:
            return describe(stall)
        if deadline is not None and time.monotonic() > deadline:
            return f"the run did not finish within {timeout:.0f} s; it was stopped"


def stall_message(stall, cfg):
    """The watchdog's finding for a sweep, in one paragraph."""
    row = stall.row
    algs, places = cfg.sweep.algorithms, cfg.sweep.placements
    alg = algs[row[ALG]] if row[ALG] < len(algs) else "?"
    placement = places[row[PLACEMENT]] if row[PLACEMENT] < len(places) else "?"
    return describe_stall(stall, f"{cfg.collective}/{alg} ({placement.replace('_', '-')})")


def _stamp(path):
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return None
    return st.st_ino, st.st_mtime_ns


def _saved_note(out, reason, earlier=None, run_id=None):
    """Fold in the sizes rank 0 kept beside the file, mark it incomplete,
    and say what it holds."""
    if out:
        try:
            merge_pending(out, run_id=run_id)
        except CCBenchError as e:  # a failed write, or the results rescued elsewhere
            return f". {e}"
        except Exception as e:
            return f". The sizes kept beside {out} could not be merged into it ({e})"
    if not out or not os.path.exists(out) or _stamp(out) == earlier:
        return ". No size had completed, so no results were saved"
    try:
        parts = {k: v.load() for k, v in dataset.open_parts(out).items()}
    except Exception as e:
        return f". The results file {out} could not be read back ({e})"
    for ds in parts.values():
        ds.attrs["complete"] = "false"
        ds.attrs["incomplete_reason"] = reason.splitlines()[0]
    try:
        dataset.save_or_rescue(parts, out)
    except CCBenchError as e:
        return f". {e}"
    n = next(iter(parts.values())).sizes["size"]
    return f". Results for the {n} size{'s' if n != 1 else ''} done before are in {out}"
