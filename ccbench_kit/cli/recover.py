"""``ccbench recover PATH [-o OUT]``: fold the sizes a run left beside its
results file (``PATH.ccb-pending-*.npz``, and the template written before
the first size) into a results file.

A run folds them in itself when it fails, is interrupted or terminated; they
stay only when the launcher itself was killed, or the file could not be
written.  The recovered file is marked incomplete.
"""
import os

from .. import argtypes as T
from ..dataset.checkpoint import merge_pending, output_lock, pending_files, pending_runs
from ..errors import ConfigError
from ..output_path import check_output


def add_parser(sub):
    p = sub.add_parser("recover", help="fold leftover sidecar files of a run into its results",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("path", type=T.path("a results file"),
                   help="the run's --out (its sidecars are PATH.ccb-pending-*)")
    p.add_argument("-o", "--out", type=T.path("a results file"), default=None,
                   help="write the results here instead of PATH")
    p.add_argument("--run", default=None, metavar="ID",
                   help="the run whose sidecars to fold in, when several runs left some")
    p.set_defaults(func=main)


def main(args):

    path = args.path
    runs = pending_runs(path)
    if args.run is not None and args.run not in runs:
        raise ConfigError(f"no sidecars of run {args.run!r} beside {path} (runs: "
                          f"{', '.join(r or '(unnamed)' for r in runs) or 'none'})", "--run")
    found = pending_files(path, args.run)
    if not runs:
        if os.path.exists(path):
            print(f"# nothing to recover: no sidecar files beside {path}")
            return 0
        raise ConfigError(f"{path}: no such results file, and no sidecar files "
                          f"({os.path.basename(path)}.ccb-pending-*) beside it", "PATH")
    target = args.out or path
    check_output(target, "-o/--out" if args.out else "PATH")
    with output_lock(path, "PATH"):   # not while a run still writes it
        added = merge_pending(path, into=args.out, run_id=args.run)
    print(f"# recovered {added} size{'s' if added != 1 else ''} from {len(found)} sidecar "
          f"file{'s' if len(found) != 1 else ''} into {target}")
    return 0
