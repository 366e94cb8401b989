"""``--slurm-setup-script default``: the kit's own setup step on every node.

nccom-test's ``default`` script installs the latest Neuron software on each
node of the allocation before the benchmark.  The kit installs nothing on
the nodes (they may have no network, and a changed environment would not
be the one measured); its default step checks, once per node, what the
ranks will need, so that a node that cannot run them fails the run before
any rank starts, naming the node and what is missing:

- this interpreter (the same path as on the launching host);
- ccbench_kit at the launching host's version;
- the engine built for the MPI that mpi4py loads there (MPI is loaded, not
  started).

Run as ``python -m ccbench_kit.launch.node_setup VERSION``; prints one line
per node and exits 0, or 1 with one line saying what is wrong.
"""
import os
import socket
import sys

from .._version import __version__
from ..backends.mpi import engine

#: the keyword of --slurm-setup-script that selects this step
KEYWORD = "default"


def argv(version):
    """The setup step's command line on a node: this interpreter, this module,
    the version the launching host runs."""
    return [sys.executable, "-m", __name__, version]


def check(version):
    """One line saying the node is ready; raises RuntimeError saying why not."""
    if __version__ != version:
        raise RuntimeError(f"ccbench_kit {__version__} here "
                           f"({os.path.dirname(os.path.dirname(__file__))}), {version} on the "
                           "launching host")
    # a step of srun --mpi=pmix looks like a rank: load MPI, do not start it
    import mpi4py  # lazy: importing mpi4py.MPI starts MPI; only where a rank runs
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    try:
        built = engine().BUILD_MPI
    except ImportError as e:
        raise RuntimeError(str(e).splitlines()[0]) from None
    return f"ccbench setup: {socket.gethostname()}: ccbench_kit {version}, {sys.executable}, " \
           f"engine for {built}: ready"


def main(args=None):
    args = sys.argv[1:] if args is None else args
    if len(args) != 1:
        print("usage: python -m ccbench_kit.launch.node_setup VERSION", file=sys.stderr)
        return 2
    try:
        print(check(args[0]), flush=True)
    except (RuntimeError, ImportError) as e:
        print(f"ccbench setup: {socket.gethostname()}: not ready: {e}", file=sys.stderr,
              flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
