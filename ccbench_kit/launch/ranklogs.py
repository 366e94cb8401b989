"""``--mpi-log-dir DIR``: every rank's output also kept in a file of its own.

nccom-test saves the output of each node of an MPI run to a file in DIR.
The kit keeps the launcher's view (progress, errors and the table still
come back to the terminal) and copies each rank's stdout and stderr:

- under mpirun, Open MPI's ``--output-filename DIR``: ``DIR/1/rank.N/stdout``
  and ``stderr``, written on the host where rank N runs (a folder on a
  shared file system gathers every host's);
- under srun, each rank's streams go through ``tee`` into
  ``DIR/HOST.rank.N.stdout`` and ``.stderr`` (srun's own ``--output`` would
  take them away from the launcher, which reads its progress from them).

MPICH's Hydra has no copy of that kind (its ``-outfile-pattern`` diverts
the output), so there the flag is refused.
"""
import os
import stat

from ..output_path import OutputError, check_output_folder

FLAG = "--mpi-log-dir"

# bash: run the rank with both streams copied into DIR ($0) under the
# node's name and the rank Slurm gave (the folder made on a node that does
# not share it); `exec` keeps the rank's pid the step's task, the tees are
# its children
_SRUN_TEE = ('mkdir -p -- "$0"; log="$0/${SLURMD_NODENAME:-$(hostname)}.rank.${SLURM_PROCID}"; '
             'exec "$@" > >(exec tee -a "$log.stdout") 2> >(exec tee -a "$log.stderr" >&2)')


def check_log_dir(folder):
    """`folder` as an absolute path, checked as any output folder is
    (`output_path.check_output_folder`), and refused when it, or anything
    already in it, is a symbolic link, a device, a FIFO or a socket: the
    launcher writes files there under names of its own, which must not lead
    out of the folder or into something that is not a file.  The folder is
    made here (on the launching host)."""
    if folder is None:
        return None
    folder = os.path.abspath(check_output_folder(os.fspath(folder), FLAG))
    if os.path.islink(folder):
        raise OutputError(f"{folder} is a symbolic link; name the folder itself", FLAG)
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise OutputError(f"{path} is a symbolic link; rank logs are not written "
                                  "through one", FLAG)
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise OutputError(f"{path} is not a regular file; rank logs would be "
                                  "written into it", FLAG)
    os.makedirs(folder, exist_ok=True)
    return folder


def mpirun_options(folder):
    """Open MPI's mpirun options that copy each rank's output under `folder`."""
    return ["--output-filename", folder] if folder else []


def srun_argv(argv, folder):
    """`argv` run under srun with its output copied under `folder` (see the
    module's text); `argv` itself when no folder is given."""
    if not folder:
        return list(argv)
    return ["bash", "-c", _SRUN_TEE, folder, *argv]
