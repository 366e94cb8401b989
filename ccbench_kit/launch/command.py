"""Which launcher starts the ranks: mpirun here, mpirun across hosts, or srun."""
import os
import tempfile
import weakref

from ..errors import ConfigError
from . import hosts as _hosts, ranklogs, slurm as _slurm
from .mpirun import mpirun_command


def launcher(nranks, *, hosts=None, hosts_file=None, nnodes=None, ranks_per_node=None,
             slurm=None, env=None, log_dir=None):
    """A ``command(argv)`` building the whole launch command, or None for plain
    ``mpirun -np N`` on this machine; its ``env`` (srun), if any, is added to
    the launcher's environment (`slurm.step_env`).

    Parameters
    ----------
    hosts, hosts_file, nnodes, ranks_per_node
        See `hosts.place`.  With `slurm`, hosts become srun's ``--nodelist``.
    slurm : bool, dict or `slurm.SlurmOptions`, optional
        Launch with srun (nccom-test's ``-S``).
    env : dict, optional
        Variables the ranks need on every host (exported with ``-x``).
    log_dir : str, optional
        Also keep each rank's output in files there (``--mpi-log-dir``;
        `ranklogs`).
    """
    log_dir = ranklogs.check_log_dir(log_dir)
    if slurm:

        opts = _slurm.as_options(slurm)
        names = None
        if hosts or hosts_file:
            if hosts and hosts_file:
                raise ConfigError("give --hosts or --hosts-file, not both", "--hosts")
            found = _hosts.read_hostfile(hosts_file) if hosts_file else \
                _hosts.parse_hosts(hosts)
            names = [h.name for h in found]
        if nnodes is None:
            nnodes = len(names) if names else (
                -(-nranks // ranks_per_node) if ranks_per_node else 1)
        if ranks_per_node is not None and ranks_per_node * nnodes != nranks:
            raise ConfigError(f"{ranks_per_node} ranks per node x {nnodes} nodes is not "
                              f"-r {nranks}", "--ranks-per-node")
        if names and nnodes > len(names):
            raise ConfigError(f"{nnodes} nodes asked for but only {len(names)} hosts given",
                              "-N/--nnodes")

        def srun(argv):
            return _slurm.srun_command(nranks, ranklogs.srun_argv(argv, log_dir), opts,
                                       nnodes=nnodes, hosts=names[:nnodes] if names else None)
        srun([])  # raise bad options now, not at launch
        srun.env = _slurm.step_env()
        _slurm.require_tools(*_slurm.tools_needed(opts))
        _slurm.preflight(opts, nnodes)
        if names and nranks % nnodes == 0:
            # where each rank runs, so that the watchdog can name the host of a
            # rank it never heard from: srun lays the ranks out in the given
            # host order (arbitrary distribution, launch/slurm.py)
            srun.placement = _hosts.Placement(
                tuple(_hosts.Host(n) for n in names[:nnodes]), nranks // nnodes)
        return srun
    placement = _hosts.place(nranks, hosts, hosts_file, nnodes, ranks_per_node)
    if placement is not None and placement.nnodes > 1 and \
            not os.environ.get("OMPI_MCA_plm_rsh_agent"):  # an agent maps names its own way
        _hosts.check_one_name_each(placement.names, "--hosts-file" if hosts_file else "--hosts")
    if placement is None:
        if log_dir is None:
            return None
        return lambda argv: mpirun_command(nranks, argv, log_dir=log_dir)
    export = sorted(env or {})
    fd, hostfile = tempfile.mkstemp(prefix="ccbench-hosts-", suffix=".txt")
    os.close(fd)
    _hosts.write_hostfile(placement.hosts, hostfile)

    def mpirun(argv):
        return mpirun_command(nranks, argv, hostfile=hostfile,
                              ranks_per_node=placement.ranks_per_node, export=export,
                              log_dir=log_dir)
    # the host file lives as long as the command that names it
    weakref.finalize(mpirun, _unlink, hostfile)
    mpirun.placement = placement
    return mpirun


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
