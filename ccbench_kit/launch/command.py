"""Which launcher starts the ranks: mpirun here, mpirun across hosts, or srun."""
import os
import tempfile
import weakref

from ..errors import ConfigError
from . import hosts as _hosts, leftovers, ranklogs, slurm as _slurm
from .mpirun import mpirun_command

# how a `Launcher` starts the ranks
HERE, HOSTS, SRUN = "mpirun", "mpirun --hostfile", "srun"


class Launcher:
    """How the ranks of one job start: ``launcher(argv)`` is the whole
    launch command line for `argv` on every rank.

    The hosts given are read once, here, and checked against the node and
    rank counts before anything starts.

    Parameters
    ----------
    nranks : int
        The job's ranks.
    hosts, hosts_file, nnodes, ranks_per_node
        See `hosts.place`; `hosts` may be `hosts.Host`s already read.  With
        `slurm`, the hosts become srun's ``--nodelist``.
    slurm : bool, dict or `slurm.SlurmOptions`, optional
        Launch with srun (nccom-test's ``-S``).
    env : dict, optional
        Variables the ranks need on every host (exported with ``-x``).
    log_dir : str, optional
        Also keep each rank's output in files there (``--mpi-log-dir``;
        `ranklogs`).

    Attributes
    ----------
    kind : str
        `HERE` (plain mpirun on this machine), `HOSTS` or `SRUN`.
    hosts : list of hosts.Host or None
        The hosts given, as read (None: none given).
    placement : hosts.Placement or None
        Where each rank runs, where the kit knows it (the watchdog names
        the host of a rank it never heard from).
    env : dict
        Variables added to the launcher's own environment
        (`slurm.step_env` for srun; none for mpirun).
    """

    def __init__(self, nranks, *, hosts=None, hosts_file=None, nnodes=None,
                 ranks_per_node=None, slurm=None, env=None, log_dir=None):
        self.nranks = nranks
        self.log_dir = ranklogs.check_log_dir(log_dir)
        self.hosts = _hosts.given_hosts(hosts, hosts_file)
        self.placement, self.env = None, {}
        if slurm:
            self._srun(_slurm.as_options(slurm), nnodes, ranks_per_node)
            return
        self.placement = _hosts.place(nranks, self.hosts, None, nnodes, ranks_per_node)
        if self.placement is not None and self.placement.nnodes > 1 and \
                not os.environ.get("OMPI_MCA_plm_rsh_agent"):  # an agent maps names its own way
            _hosts.check_one_name_each(self.placement.names,
                                       "--hosts-file" if hosts_file else "--hosts")
        self.kind = HERE if self.placement is None else HOSTS
        self._export = sorted(env or {})
        if self.placement is not None:
            # named as a run folder is: a launcher killed with SIGKILL leaves
            # it, and the next run removes it (`leftovers.sweep`)
            fd, self._hostfile = tempfile.mkstemp(prefix=leftovers.run_prefix() + "hosts-",
                                                  suffix=".txt")
            os.close(fd)
            _hosts.write_hostfile(self.placement.hosts, self._hostfile)
            # the host file lives as long as the launcher that names it
            weakref.finalize(self, _unlink, self._hostfile)

    def _srun(self, opts, nnodes, ranks_per_node):
        """Set up an srun launch: the node count, the options checked, the
        tools and the allocation looked at now, not at launch."""
        self.kind, self._opts = SRUN, opts
        names = [h.name for h in self.hosts] if self.hosts else None
        nranks = self.nranks
        if nnodes is None:
            nnodes = len(names) if names else (
                -(-nranks // ranks_per_node) if ranks_per_node else 1)
        if ranks_per_node is not None and ranks_per_node * nnodes != nranks:
            raise ConfigError(f"{ranks_per_node} ranks per node x {nnodes} nodes is not "
                              f"-r {nranks}", "--ranks-per-node")
        if names and nnodes > len(names):
            raise ConfigError(f"{nnodes} nodes asked for but only {len(names)} hosts given",
                              "-N/--nnodes")
        self._nnodes, self._nodelist = nnodes, names[:nnodes] if names else None
        self([])  # raise bad options now, not at launch
        self.env = _slurm.step_env()
        _slurm.require_tools(*_slurm.tools_needed(opts))
        _slurm.preflight(opts, nnodes)
        if names and nranks % nnodes == 0:
            # srun lays the ranks out in the given host order (arbitrary
            # distribution, launch/slurm.py)
            self.placement = _hosts.Placement(
                tuple(_hosts.Host(n) for n in self._nodelist), nranks // nnodes)

    @property
    def remote(self):
        """Whether the ranks may run on other hosts than this one."""
        return self.kind != HERE

    def __call__(self, argv):
        """The launch command line for `argv` (a list of words)."""
        if self.kind == SRUN:
            return _slurm.srun_command(self.nranks, ranklogs.srun_argv(argv, self.log_dir),
                                       self._opts, nnodes=self._nnodes, hosts=self._nodelist)
        if self.kind == HERE:
            return mpirun_command(self.nranks, argv, log_dir=self.log_dir)
        return mpirun_command(self.nranks, argv, hostfile=self._hostfile,
                              ranks_per_node=self.placement.ranks_per_node,
                              export=self._export, log_dir=self.log_dir)


def launcher(nranks, **given):
    """The `Launcher` of `nranks` ranks (keywords: `Launcher`'s), or None for
    plain ``mpirun -np N`` on this machine with nothing of its own to add
    (`mpirun.run_ranks` builds that one)."""
    built = Launcher(nranks, **given)
    return None if built.kind == HERE and built.log_dir is None else built


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
