"""Results as CSV: one row per (collective, algorithm, placement, size) with
time statistics (µs), algbw and busbw (GB/s), for spreadsheets and for the
AWS nccl-tests recipe's tooling (its file naming,
``nccl_{nodes}_{mode}_{op}_{pattern}[_topo]_{timestamp}_results.csv``).
"""
import datetime
import os
import re
import sys

import numpy as np
import pandas as pd

from ..._files import atomic_write_text
from ...dataset.schema import attr_json
from ...dataset.stats import check_stat
from ...errors import ConfigError
from ...markup import csv_cell
from ...inputs.groups import SPLIT_ENV, mask_of_groups, parse_split, read_mask
from ...output_path import derived_file

DEFAULT_STATS = ("avg", "min", "max", "p50", "p99", "std")


def _col(stat):
    return f"time_{stat}_us"


def summary_frame(ds, stats=DEFAULT_STATS, rank_stat="max", name=None):
    """A pandas DataFrame: one row per (algorithm, placement, size).

    algbw and busbw use the first of `stats` (avg by default); time columns
    are `stat` over iterations of the `rank_stat` over ranks.  Imported
    baselines also get the printed ``reported_*`` numbers (their mean when
    nccl-tests repeated the sweep with -N).
    """

    stats = [check_stat(s, "-t/--stats") for s in stats]
    if "std" == stats[0]:
        raise ConfigError("the first statistic sets algbw and busbw; std cannot", "-t/--stats")
    a = ds.attrs
    times = {s: np.asarray(ds.ccb.time(s, rank_stat).transpose("algorithm", "placement", "size").values,
                           dtype=float) for s in stats}
    alg = np.asarray(ds.ccb.algbw(stats[0], rank_stat).transpose("algorithm", "placement", "size").values,
                     dtype=float)
    factor = ds.ccb.bus_factor
    it = ds.ccb.iteration_time(rank_stat)
    n_iter = np.asarray(np.isfinite(it).sum("iteration").transpose("algorithm", "placement", "size").values)
    wrong = np.asarray(ds["wrong"].transpose("algorithm", "placement", "size").values)
    reported = {}
    for v in ("reported_time", "reported_algbw", "reported_busbw"):
        if v in ds:
            da = ds[v].mean("cycle") if "cycle" in ds[v].dims else ds[v]
            reported[v] = np.asarray(da.transpose("algorithm", "placement", "size").values, dtype=float)
    rows = []
    for ai, alg_name in enumerate(ds["algorithm"].values):
        for pi, pl in enumerate(ds["placement"].values):
            for si, size in enumerate(ds["size"].values):
                row = {"collective": a.get("collective", ""), "dtype": a.get("dtype", ""),
                       "op": a.get("op", ""), "nranks": a.get("nranks", ""),
                       "algorithm": str(alg_name), "placement": str(pl), "size": int(size),
                       "count": int(ds["count"].values[si]), "iterations": int(n_iter[ai, pi, si])}
                for s in stats:
                    row[_col(s)] = times[s][ai, pi, si]
                row["algbw_GBps"] = alg[ai, pi, si]
                row["busbw_GBps"] = alg[ai, pi, si] * factor
                row["wrong"] = int(wrong[ai, pi, si])
                for v, arr in reported.items():
                    row[v] = arr[ai, pi, si]
                row["source"] = a.get("source", "") or name or ""
                rows.append(row)
    df = pd.DataFrame(rows)
    df.attrs["time"] = f"{', '.join(stats)} over iterations of the {rank_stat} over ranks"
    return df


def csv_text(frame):
    """`frame` as CSV text that no spreadsheet runs: every string cell that
    starts like a formula is made inert (markup.csv_cell); numbers stay
    numbers."""
    frame = frame.copy()
    for col in frame.columns:   # object or pandas' own string columns: never numbers
        if not pd.api.types.is_numeric_dtype(frame[col]):
            frame[col] = frame[col].map(csv_cell)
    return frame.to_csv(index=False)


def write_csv(parts, path, stats=DEFAULT_STATS, rank_stat="max"):
    """Every result set in `parts` ({name: Dataset}) into one CSV (``-`` = stdout)."""

    frame = pd.concat([summary_frame(ds, stats, rank_stat, name) for name, ds in parts.items()],
                      ignore_index=True)
    if path in (None, "-"):
        sys.stdout.write(csv_text(frame))
    else:
        atomic_write_text(path, csv_text(frame))
    return frame


# -- the AWS recipe's naming ----------------------------------------------------

def _nodes(ds):
    hosts = attr_json(ds, "hosts", []) or []
    if not hosts and "host" in ds.coords:
        hosts = sorted({str(h) for h in ds["host"].values} - {""})
    return len(set(hosts)) if hosts else "unknown"


def _pattern(ds):
    """The recipe's split-mask field: the ``AND`` mask of the run's replica
    groups (``--split 'AND 0x1'``, ``MOD 8`` on 8 ranks, the environment's
    NCCL_TESTS_SPLIT_MASK...), ``0x0`` for one group; groups no mask makes
    are named by their count and size (``groups3x2``).  A file without
    groups (an import) is named from the NCCL_TESTS_SPLIT variables it
    recorded."""
    groups = attr_json(ds, "groups", None)
    if groups:
        nranks = int(ds.attrs.get("nranks") or sum(len(g) for g in groups))
        mask = mask_of_groups(groups, nranks)
        return f"groups{len(groups)}x{len(groups[0])}" if mask is None else hex(mask)
    env = attr_json(ds, "env", {}) or {}
    if not isinstance(env, dict):
        return "0x0"
    for key in SPLIT_ENV:
        if env.get(key):
            return _env_pattern(key, str(env[key]))
    return "0x0"


def _env_pattern(key, value):
    """An NCCL_TESTS_SPLIT(_MASK) value as the recipe's field: a mask in
    hex, other operations as written without blanks (``MOD8``)."""
    try:
        if key == "NCCL_TESTS_SPLIT_MASK":
            return hex(read_mask(value, key))
        op, number = parse_split(value, key)
    except ConfigError:  # as recorded, without blanks: `derived_file` judges the name
        return value.replace(" ", "").replace("&", "AND")
    if op == "&":
        return hex(number)
    return {"|": "OR", "%": "MOD", "/": "DIV"}[op] + str(number)


def _timestamp(ds):
    created = str(ds.attrs.get("created", ""))
    try:
        when = datetime.datetime.fromisoformat(created)
    except ValueError:
        when = datetime.datetime.now()
    return when.strftime("%Y%m%d_%H%M%S")


def aws_filename(ds, mode="ami", pattern=None, topo=False, nodes=None):
    """``nccl_{nodes}_{mode}_{op}_{pattern}[_topo]_{timestamp}_results.csv``.

    op is the recipe's spelling (allreduce, allgather, reducescatter...);
    nodes the number of distinct hosts; pattern the NCCL_TESTS_SPLIT mask
    (0x0 when none); timestamp the run's ``created`` time.
    """
    if mode not in ("ami", "container"):
        raise ConfigError(f"mode must be ami or container, got {mode!r}", "--mode")
    if pattern is not None and not re.fullmatch(r"[A-Za-z0-9.\-]+", str(pattern)):
        raise ConfigError(f"{pattern!r}: a pattern is letters, digits, . and - (it becomes "
                          "part of a file name)", "--pattern")
    op = str(ds.attrs.get("collective", "unknown")).replace("_", "")
    parts = ["nccl", str(nodes if nodes is not None else _nodes(ds)), mode, op,
             pattern or _pattern(ds)]
    if topo:
        parts.append("topo")
    parts += [_timestamp(ds), "results"]
    return "_".join(parts) + ".csv"


def write_aws(parts, folder, mode="ami", pattern=None, topo=False, nodes=None,
              stats=DEFAULT_STATS, rank_stat="max"):
    """One CSV per result set in `folder`, named as the AWS recipe names them."""
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, ds in parts.items():
        fname = aws_filename(ds, mode, pattern, topo, nodes)
        path = derived_file(folder, fname, "--aws-naming")
        if path in written:
            stem = fname[:-len("_results.csv")]
            path = derived_file(folder, f"{stem}_{name}_results.csv", "--aws-naming")
        atomic_write_text(path, csv_text(summary_frame(ds, stats, rank_stat, name)))
        written.append(path)
    return written

