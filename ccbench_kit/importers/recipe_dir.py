"""A whole log directory of NVIDIA's NCCL microbenchmark recipe.

The recipe's sweep job leaves, per node count::

    LOG_<DATE>-<JOBID>_sweep_N<NODES>/
        1_1_LOG_all_reduce_env1_args1_job<JOBID>_iter1.txt   <- one nccl-tests log each
        1_1_LOG_all_reduce_env1_args1_job<JOBID>/            (debug logs: ignored)
        1_1_LOG_all_reduce_env1_args1_job<JOBID>_iter1/      (per-rank output: ignored)
        *.yml                                                (metadata: ignored)

`log_files` finds the logs in a directory (at any depth: the experiment
folder above the LOG_* folders works too), skipping the folders the recipe
says to ignore; each log imports as nccl-tests output.  Its result set is
named after the recipe's labels, ``all_reduce-N2-env1-args1`` (``-iterK``
after the first iteration; no ``-N`` outside a ``_sweep_N`` folder), and
keeps them as attrs: ``recipe_nnodes``, ``recipe_env``, ``recipe_args``,
``recipe_iter``, ``recipe_job``, ``recipe_log`` (the file) and
``recipe_name`` (the name).
"""
import os
import re

from ..errors import ConfigError

LOG_NAME = re.compile(r"^\d+_\d+_LOG_.+_iter\d+\.txt$")
# the labels in a log's name: test, collective, environment and argument
# variants, Slurm job, iteration
LABELS = re.compile(r"^\d+_\d+_LOG_(?P<test>.+?)_env(?P<env>[^_]+)_args(?P<args>[^_]+)"
                    r"_job(?P<job>[^_]+)_iter(?P<iter>\d+)\.txt$")
SWEEP_DIR = re.compile(r"_sweep_N(\d+)$")


def log_files(directory):
    """{name: path} of the recipe's result logs under `directory`, in order;
    ConfigError when there are none."""
    found = find_logs(directory)
    if not found:
        raise ConfigError(f"{directory}: no NCCL microbenchmark recipe logs "
                          "(N_M_LOG_<collective>_env<E>_args<A>_job<J>_iter<I>.txt) in it", "DIR")
    return found


def find_logs(directory):
    """{name: path} of the recipe's result logs under `directory` ({} when none)."""
    found = {}
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        # the per-test folders hold debug and per-rank logs, not results
        dirs[:] = [d for d in dirs if not re.match(r"^\d+_\d+_LOG_", d)]
        m = SWEEP_DIR.search(os.path.basename(root))
        for name in sorted(files):
            if LOG_NAME.match(name):
                key = name[:-4] if not m else f"N{m.group(1)}/{name[:-4]}"
                found[key] = os.path.join(root, name)
    return found


def labels(key):
    """The recipe's labels of the log `key` (`find_logs`' name): {"name",
    "nnodes", "env", "args", "job", "iter"}; nnodes is "" outside a sweep
    folder, and a name the recipe did not make keeps only "name"."""
    nnodes, _, stem = key.rpartition("/")
    m = LABELS.match(stem + ".txt")
    if not m:
        return {"name": stem}
    got = {"nnodes": nnodes[1:], **m.groupdict()}
    name = "-".join([got["test"]] + ([f"N{got['nnodes']}"] if got["nnodes"] else [])
                    + [f"env{got['env']}", f"args{got['args']}"])
    if got["iter"] != "1":
        name += f"-iter{got['iter']}"
    del got["test"]
    return {"name": name, **got}


def open_dir(directory, read):
    """{name: Dataset} of every recipe log under `directory`, named after its
    labels (`labels`); `read(path)` gives a file's {name: Dataset}
    (``importers.read``)."""
    parts = {}
    for key, path in log_files(directory).items():
        found = labels(key)
        for ds in read(path).values():
            ds.attrs["recipe_log"] = os.path.relpath(path, directory)
            ds.attrs.update({f"recipe_{k}": v for k, v in found.items()})
            parts[found["name"]] = ds
    return parts
