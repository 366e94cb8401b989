"""Which MPI the kit runs, and how its launcher is spoken.

The one place that decides: the engine's ``BUILD_MPI`` (the MPI it was
compiled against, which mpi4py must have loaded too).  Open MPI is started
with ``mpirun`` (``mpirun.openmpi`` where Debian's alternatives hold both),
the MPICH family with Hydra's ``mpiexec`` (``mpiexec.mpich``).  Where the two
differ:

=====================  ============================  ===========================
                       Open MPI mpirun               Hydra mpiexec
=====================  ============================  ===========================
ranks                  ``-np N``                     ``-n N``
more ranks than cores  ``--oversubscribe``           allowed as is
as root                ``--allow-run-as-root``       nothing needed
hosts, K per host      ``--hostfile F --map-by       ``-hosts a,b -ppn K``
                       ppr:K:node``
variables to ranks     ``-x NAME`` each              ``-genvlist A,B``
tuning                 ``--mca k v``                 environment (MPIR_CVAR_*)
=====================  ============================  ===========================

Both leave the rest of the environment to local ranks.  Time limits and
teardown are the kit's own (the watchdog, and a sweep of every process
carrying the run's id), so neither launcher's timeout flags are used.
"""
import functools
import shutil

from ..errors import ConfigError, RunError
from .ranklogs import FLAG as LOG_DIR_FLAG
from ..backends.mpi import engine

OPEN_MPI, MPICH = "openmpi", "mpich"
_EXECUTABLES = {OPEN_MPI: ("mpirun.openmpi", "mpirun"),
                MPICH: ("mpiexec.mpich", "mpiexec.hydra", "mpiexec")}
_PACKAGES = {OPEN_MPI: "openmpi-bin libopenmpi-dev", MPICH: "mpich libmpich-dev"}


def family_of(build_mpi):
    """``openmpi`` or ``mpich`` for a BUILD_MPI string."""
    return OPEN_MPI if str(build_mpi).startswith("Open MPI") else MPICH


@functools.lru_cache(maxsize=1)
def family():
    """The MPI family of the engine this environment loads."""
    return family_of(engine().BUILD_MPI)


def launcher_path(fam=None):
    """The launcher executable for `fam` (default: the kit's MPI)."""
    fam = fam or family()
    for name in _EXECUTABLES[fam]:
        path = shutil.which(name)
        if path:
            return path
    raise RunError(f"{' or '.join(_EXECUTABLES[fam])} not found: install "
                   f"{_PACKAGES[fam]} or run `make setup{' MPI=mpich' if fam == MPICH else ''}`")


def hydra_command(exe, nranks, argv, hosts=None, hostfile=None, ranks_per_node=None,
                  export=(), mca=None, log_dir=None):
    """Hydra's ``mpiexec`` command line for `nranks` ranks running `argv`;
    `log_dir` (``--mpi-log-dir``) is refused: Hydra has no copy of the
    ranks' output that leaves it to the launcher."""
    if log_dir:
        raise ConfigError("MPICH's mpiexec cannot copy each rank's output into files (its "
                          "-outfile-pattern takes it from the launcher); use Open MPI or "
                          "-S/--slurm-mode", LOG_DIR_FLAG)
    if mca:
        raise RunError("MCA parameters are Open MPI's; with MPICH set MPIR_CVAR_* "
                       "variables instead: " + ", ".join(mca))
    cmd = [exe, "-n", str(nranks)]
    if hostfile:
        names = read_hostnames(hostfile)
        cmd += ["-hosts", ",".join(names), "-ppn", str(ranks_per_node or 1)]
    elif hosts:
        cmd += ["-hosts", ",".join(hosts)]
    if export:
        cmd += ["-genvlist", ",".join(export)]
    return cmd + list(argv)


def read_hostnames(hostfile):
    """Host names of an Open MPI style host file (``name slots=K``), in order."""
    names = []
    with open(hostfile) as f:
        for line in f:
            word = line.split("#", 1)[0].split()
            if word:
                names.append(word[0].split(":", 1)[0])
    return names
