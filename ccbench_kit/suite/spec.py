"""A suite file (YAML, loaded safely) and the combinations it expands to.

Example::

    name: nightly
    report: reports/nightly.html      # optional; paths are relative to this file
    launcher: mpirun                  # or slurm (one sbatch job per combination)
    run:                              # keywords of ccbench_kit.run for every combination
      minbytes: 8
      maxbytes: 64M
      stepfactor: 4
      iters: 20
      check: random
    matrix:
      collectives: [all_reduce, all_gather]
      algorithms:                     # every algorithm of a collective is one Dataset
        all_reduce: [ring, mpi]
        all_gather: [mpi]
      nranks: [4, 8]                  # or nnodes: [2, 4] with ranks_per_node
      env:                            # environment variants
        env1: {}
        env2: {NCCL_ALGO: Ring, OMPI_MCA_btl: "self,tcp"}
      split_mask: ["0x0", "0x7"]      # NCCL_TESTS_SPLIT_MASK: parallel groups
    slurm: {partition: gpu, time_limit: "00:30:00", setup_script: setup.sh}

Each combination (collective x env x nodes x ranks x split) is one node of
the suite's DataTree, at ``collective/variant/...`` (only the axes that vary
appear in the path).
"""
import itertools
import os
import re
from dataclasses import dataclass, field

from .._optional import require
from ..errors import ConfigError
from .. import collectives as _collectives
from ..bounded import load_yaml, read_text
from .. import run_fields
from ..backends import backend_class
from ..launch.slurm import as_options

TOP_KEYS = ("name", "workdir", "out", "report", "launcher", "run", "matrix", "hosts",
            "hosts_file", "ranks_per_node", "slurm", "stats", "title")
MATRIX_KEYS = ("collectives", "algorithms", "nranks", "nnodes", "env", "split_mask", "split")
LAUNCHERS = ("mpirun", "slurm")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PART = re.compile(r"[^A-Za-z0-9_.\-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass
class Combination:
    """One run of the suite: where it goes in the tree and how to run it."""

    key: str                    # DataTree path: "all_reduce/env2/r8"
    collective: str
    axes: dict                  # the matrix values that made it
    nranks: int
    nnodes: int = None
    env: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)   # make_config keywords

    @property
    def flat(self):
        """The key as one file name."""
        return self.key.replace("/", "--")


@dataclass
class Suite:
    path: str
    name: str
    workdir: str
    out: str
    report: str
    launcher: str
    stats: list
    title: str
    hosts: list = None
    hosts_file: str = None
    ranks_per_node: int = None
    slurm: dict = field(default_factory=dict)
    combinations: list = field(default_factory=list)


def _err(path, where, message):
    return ConfigError(f"{where}: {message}", os.fspath(path))


def _run_keys():
    """A suite's ``run:`` keys: ``sizes`` and the run keywords a suite may
    set (`run_fields`; the matrix sets the algorithms and the split, the
    suite names the files)."""
    return sorted({"sizes", *(f.name for f in run_fields.FIELDS
                              if f.suite and f.section in run_fields.SECTIONS)})


def load_suite(path):
    """Read and check a suite file; raise ConfigError naming the file and key."""
    yaml = require("yaml", "suite")
    path = os.path.abspath(os.fspath(path))
    try:
        data = load_yaml(read_text(path, "a suite file"))
    except OSError as e:
        raise ConfigError(f"cannot read suite file: {e.strerror}", path) from e
    except UnicodeDecodeError:
        raise ConfigError("cannot read suite file: not UTF-8 text", path) from None
    except ConfigError as e:
        raise ConfigError(str(e).split(": ", 1)[1], path) from None
    except ValueError as e:
        raise ConfigError(f"refused: the YAML {e}", path) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"not valid YAML: {where}{problem}", path) from None
    return parse_suite(data, path)


def parse_suite(data, path):
    """A `Suite` from the parsed YAML `data` (a dict)."""
    if not isinstance(data, dict):
        raise _err(path, "top level", "expected a mapping with at least `matrix`")
    _unknown(path, "top level", data, TOP_KEYS)
    here = os.path.dirname(os.path.abspath(path))

    def rel(p, key):
        if p in (None, ""):
            return None
        if not isinstance(p, (str, int)) or isinstance(p, bool) or _CONTROL.search(str(p)):
            # a path reaches batch scripts and command lines: one line of text
            raise _err(path, key, f"{p!r} is not a file name (text on one line)")
        return os.path.normpath(os.path.join(here, str(p)))

    name = str(data.get("name") or os.path.splitext(os.path.basename(path))[0])
    if not re.match(r"^[A-Za-z0-9_.\-]+$", name):
        raise _err(path, "name", f"{name!r}: use letters, digits, . _ -")
    launcher = data.get("launcher", "mpirun")
    if launcher not in LAUNCHERS:
        raise _err(path, "launcher", f"{launcher!r}: use one of {', '.join(LAUNCHERS)}")
    stats = data.get("stats", ["avg", "p50", "p99"])
    stats = [stats] if isinstance(stats, str) else stats
    workdir = rel(data.get("workdir"), "workdir") or os.path.join(here, "results", f"{name}.suite")
    report = data.get("report")
    if report is True:
        report = os.path.join("reports", f"{name}.html")
    suite = Suite(path=path, name=name, workdir=workdir,
                  out=rel(data.get("out"), "out") or os.path.join(here, "results", f"{name}.nc"),
                  report=rel(report, "report") if report else None, launcher=launcher,
                  stats=list(stats), title=str(data.get("title") or f"suite {name}"),
                  hosts=data.get("hosts"), hosts_file=rel(data.get("hosts_file"), "hosts_file"),
                  ranks_per_node=data.get("ranks_per_node"),
                  slurm=_mapping(path, "slurm", data.get("slurm") or {}))
    if suite.slurm.get("setup_script"):
        suite.slurm["setup_script"] = rel(suite.slurm["setup_script"], "slurm.setup_script")
    try:  # every batch script of the suite gets these: check them before writing any
        # (the setup script is looked for when a job is written: it may be made later)
        as_options({k: v for k, v in suite.slurm.items() if k != "setup_script"})
    except ConfigError as e:
        raise ConfigError(str(e), path) from None
    run = _mapping(path, "run", data.get("run") or {})
    _unknown(path, "run", run, _run_keys())
    if "matrix" not in data:
        raise _err(path, "matrix", "missing: the suite needs at least matrix.collectives")
    suite.combinations = expand(path, _mapping(path, "matrix", data["matrix"]), run,
                                suite.ranks_per_node)
    return suite


def _mapping(path, where, value):
    if not isinstance(value, dict):
        raise _err(path, where, f"expected a mapping, got {type(value).__name__}")
    return dict(value)


def _unknown(path, where, data, allowed):
    extra = [k for k in data if k not in allowed]
    if extra:
        raise _err(path, where, f"unknown key {extra[0]!r}; use {', '.join(allowed)}")


def _list(path, where, value, kind=None):
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _err(path, where, "empty list")
    if kind is int and not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                               for v in values):
        raise _err(path, where, f"expected positive integers, got {value!r}")
    return values


def expand(path, matrix, run, ranks_per_node=None):
    """Every combination of the matrix, in file order.

    With `nnodes` and no `nranks`, a combination runs `ranks_per_node` ranks
    on each node.
    """

    _unknown(path, "matrix", matrix, MATRIX_KEYS)
    if "collectives" not in matrix:
        raise _err(path, "matrix.collectives", "missing: name at least one collective")
    colls = []
    for c in _list(path, "matrix.collectives", matrix["collectives"]):
        try:
            colls.append(_collectives.get(c, f"{path}: matrix.collectives").name)
        except ConfigError as e:
            raise ConfigError(str(e)) from None
    # no algorithms named: the backend's own (nccl's for backend: nccl, not mpi)
    default_algs = [_default_algorithm(path, run)]
    algs = matrix.get("algorithms", run.get("algorithms", default_algs))
    if isinstance(algs, dict):
        unknown = [c for c in algs if c not in matrix["collectives"] and c not in colls]
        if unknown:
            raise _err(path, "matrix.algorithms", f"{unknown[0]!r} is not in matrix.collectives")
    envs = _environments(path, matrix)
    nnodes = _list(path, "matrix.nnodes", matrix["nnodes"], int) if "nnodes" in matrix \
        else [None]
    nranks = _list(path, "matrix.nranks", matrix["nranks"], int) if "nranks" in matrix \
        else [None]
    if "split_mask" in matrix and "split" in matrix:
        raise _err(path, "matrix", "give split_mask or split, not both")
    if "split_mask" in matrix:
        masks = [_mask(path, m) for m in _list(path, "matrix.split_mask", matrix["split_mask"])]
        splits = [None if int(m, 16) == 0 else f"AND {m}" for m in masks]
        split_names = [f"mask{m}" for m in masks]
    else:
        splits = [s or None for s in _list(path, "matrix.split", matrix.get("split", [None]))]
        split_names = ["nosplit" if s is None else _PART.sub("", s.lower()) for s in splits]
    combos = []
    axes = [("env", list(envs)), ("nnodes", nnodes), ("nranks", nranks),
            ("split", list(range(len(splits))))]
    varying = {name for name, values in axes if len(values) > 1}
    for coll in colls:
        for variant, nodes, ranks, si in itertools.product(*(v for _, v in axes)):
            if ranks is None and nodes is not None:
                if not ranks_per_node:
                    raise _err(path, "matrix.nnodes", "needs matrix.nranks or a top-level "
                                                      "ranks_per_node")
                ranks = nodes * ranks_per_node
            ranks = 2 if ranks is None else ranks
            parts = [coll]
            if "env" in varying:
                parts.append(_PART.sub("_", variant))
            if "nnodes" in varying:
                parts.append(f"n{nodes}")
            if "nranks" in varying:
                parts.append(f"r{ranks}")
            if "split" in varying:
                parts.append(split_names[si])
            opts = dict(run)
            opts["algorithms"] = algs.get(coll, algs.get(_alias(coll, algs), default_algs)) \
                if isinstance(algs, dict) else algs
            if splits[si]:
                opts["split"] = splits[si]
            combos.append(Combination(
                key="/".join(parts), collective=coll, nranks=ranks, nnodes=nodes,
                env=envs[variant], options=opts,
                axes={"collective": coll, "env": variant, "nnodes": nodes, "nranks": ranks,
                      "split": splits[si] or "none"}))
    keys = [c.key for c in combos]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup:
        raise _err(path, "matrix", f"two combinations are both named {dup!r}; name the "
                                   "variants so that they differ")
    return combos


def _environments(path, matrix):
    """{variant: {name: value}} of ``matrix.env``, every name and value
    checked: a value no process can be given (`run_fields.environment`)
    fails here, before any combination runs."""
    envs = _mapping(path, "matrix.env", matrix.get("env", {"default": {}}))
    for variant, values in envs.items():
        values = _mapping(path, f"matrix.env.{variant}", values or {})
        for k in values:
            if not _ENV_NAME.match(str(k)):
                raise _err(path, f"matrix.env.{variant}", f"{k!r} is not an environment "
                                                          "variable name")
        envs[variant] = {str(k): str(v) for k, v in values.items()}
        try:
            run_fields.environment(envs[variant], f"matrix.env.{variant}")
        except ConfigError as e:
            raise ConfigError(str(e), os.fspath(path)) from None
    return envs


def _alias(coll, algs):
    for name in algs:
        try:
            if _collectives.get(name).name == coll:
                return name
        except ConfigError:
            continue
    return coll


def _mask(path, mask):
    """A split mask as nccl-tests reads NCCL_TESTS_SPLIT_MASK (hexadecimal, 0x
    optional), written 0x...; YAML turns an unquoted 0x7 into the number 7."""
    if isinstance(mask, int) and not isinstance(mask, bool) and mask >= 0:
        return f"0x{mask:x}"
    text = str(mask).strip().lower()
    digits = text[2:] if text.startswith("0x") else text
    if not digits or not re.match(r"^[0-9a-f]+$", digits):
        raise _err(path, "matrix.split_mask", f"{mask!r} is not a hexadecimal mask")
    return f"0x{int(digits, 16):x}"


def _default_algorithm(path, run):
    """The algorithm of the suite's backend (``run.backend``, else the
    default one) when the suite names none: its library's own."""
    name = run.get("backend") or run_fields.default("backend")
    try:
        return backend_class(name).default_algorithm
    except ConfigError as e:
        raise _err(path, "run.backend", str(e).removeprefix("--backend: ")) from None
