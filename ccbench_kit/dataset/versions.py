"""The schema's version history, and the one path that brings old files up.

pyperf is the model: every version of the results format is recorded with
what it added, a file says which version it is (the ``schema`` attr,
``ccbench/N``), and a file of an older version is read through a chain of
small upgrade steps, ``1 -> 2 -> ...``, each filling the defaults of what its
version added.  A step never overwrites what the file has: files written by
the kits of round 1 say ``ccbench/1`` but already carry some of version 2's
additions.  A file newer than this kit, or one that is not ours, is refused
with one line naming the file and the versions (`SchemaError`).

To add version N+1: append a `Version` to `HISTORY` listing its additions
(`Added`, with a default for everything every file of the new version has),
give it an ``upgrade`` step, and add a row to docs/data-contract.md's table
(tests/test_schema_versions.py checks that the table names every addition).
"""
import re
from dataclasses import dataclass

from ..errors import CCBenchError

NAME = "ccbench"
# what a file holds (attr ``kind``, version 3; `schema.KINDS` says what each has)
SWEEP, GPU_CHECK = "sweep", "gpu-check"
_SCHEMA = re.compile(r"^ccbench/(\d+)$")


class SchemaError(CCBenchError):
    """A file that is not a ccbench results file this kit can read."""


@dataclass(frozen=True)
class Added:
    """One thing a version added.

    Attributes
    ----------
    name : str
    kind : str
        ``attr``, ``coord``, ``variable`` or ``dim``.
    meaning : str
        What it says, for the docs.
    default : str, optional
        How the upgrade step fills it in older files; None for what stays
        optional (absent = the feature was not used), whose meaning then says
        what absence means.
    """

    name: str
    kind: str
    meaning: str
    default: str = None


@dataclass(frozen=True)
class Version:
    number: int
    summary: str
    added: tuple = ()
    upgrade: object = None  # the step from number - 1: Dataset -> Dataset

    @property
    def schema(self):
        return f"{NAME}/{self.number}"


def _fill_v2(ds):
    """1 -> 2: every file now says whether it is complete and what p its
    bus factor uses; round-1 files may already say both."""
    a = ds.attrs
    a.setdefault("complete", "true")          # a v1 kit wrote only finished sweeps
    if "group_size" not in a:                  # one group of every rank
        try:
            a["group_size"] = int(a.get("nranks"))
        except (TypeError, ValueError):        # "" in a hand-made file: count the ranks
            a["group_size"] = int(ds.sizes.get("rank", 1))
    return ds


def _fill_v3(ds):
    """2 -> 3: every file now says what it holds; before, every file of
    this schema held a collective's results."""
    ds.attrs.setdefault("kind", SWEEP)
    return ds


_RUN = "run attr, written by every run of the kit (not by importers)"

HISTORY = (
    Version(1, "the original contract: dims (algorithm, placement, size, rank, iteration); "
               "coords size, count, in_bytes, out_bytes, algorithm, placement, rank, host, "
               "device, iteration; latency, optional start, wrong; the run attrs; imported "
               "baselines as rank -1, iteration 0 with attr aggregated"),
    Version(2, "the additions of round 1: replica groups, completeness, the run's "
               "configuration and clocks, NCCL details, imported baselines' printed numbers",
            added=(
                Added("complete", "attr", '"true" or "false": the sweep finished', '"true"'),
                Added("group_size", "attr", "ranks in one replica group: the bus factor's p",
                      "nranks"),
                Added("incomplete_reason", "attr",
                      "why the sweep stopped; present only when complete is \"false\""),
                Added("group", "coord", "along rank: each rank's replica group; absent: one "
                      "group (0) of every rank"),
                Added("group_rank", "coord", "along rank: the rank within its group; absent: "
                      "the rank itself"),
                Added("groups", "attr", "JSON list of each group's ranks; absent: one group"),
                Added("config", "attr", "JSON of the run's whole configuration; " + _RUN),
                Added("seed", "attr", "seed of the random check data; " + _RUN),
                Added("check", "attr", "check data (random, all_ones) or none; " + _RUN),
                Added("agg_iters", "attr", "operations per timed iteration (-m); " + _RUN),
                Added("blocking", "attr", "a barrier after every operation (-z); " + _RUN),
                Added("unique_buff", "attr", "a fresh buffer for every operation; " + _RUN),
                Added("coalesced_ratio", "attr", "JSON list of the split of each size "
                      "(--coalesced-cc-size-ratio); absent: one operation per size"),
                Added("clock_offsets_us", "attr", "JSON list: each rank's clock offset to "
                      "rank 0, µs; " + _RUN),
                Added("clock_errors_us", "attr", "JSON list: the offsets' error bounds, µs; "
                      + _RUN),
                Added("skipped_sizes", "attr", "JSON list of sizes too small for the rank "
                      "count; " + _RUN),
                Added("skipped_oversize", "attr", "JSON list of sizes skipped for lack of "
                      "memory (--skip-oversize); " + _RUN),
                Added("nccl_version", "attr", "NCCL runs: NCCL's version"),
                Added("cuda_runtime", "attr", "NCCL runs: the CUDA runtime's version"),
                Added("cuda_driver", "attr", "NCCL runs: the driver's CUDA version"),
                Added("nccl_library", "attr", "NCCL runs: the libnccl file loaded"),
                Added("cudart_library", "attr", "NCCL runs: the libcudart file loaded"),
                Added("mem_type", "attr", "NCCL runs: how buffers were allocated"),
                Added("register", "attr", "NCCL runs: buffer registration"),
                Added("graph_launches", "attr", "NCCL runs: CUDA-graph launches (-G)"),
                Added("nccl_ran", "attr", "NCCL runs: JSON, what NCCL chose per size"),
                Added("not_available", "attr", "NCCL runs: JSON, algorithms NCCL refused"),
                Added("gpus", "attr", "NCCL runs: JSON, one entry per rank's GPU"),
                Added("topology", "attr", "NCCL runs: JSON, the GPUs' links"),
                Added("fresh_buffers", "attr", "NCCL runs: buffers allocated anew per size"),
                Added("nccl_ran_note", "attr", "NCCL runs: how nccl_ran was found"),
                Added("ranks_per_host", "attr", "JSON {host: ranks placed there}; " + _RUN
                      + "; absent in older files"),
                Added("cpus_available", "attr", "JSON {host: CPUs in the union of its ranks' "
                      "affinity masks}; absent: not measured"),
                Added("oversubscribed", "attr", '"true" when a host had more ranks than '
                      "cpus_available; absent: not checked"),
                Added("load_average", "attr", "rank 0's host's 1-minute load average at the "
                      "start; absent: not measured"),
                Added("memcpy_gbps", "attr", "host-buffer runs: the memcpy rate (GB/s) the run "
                      "measured, the cpu preset's peak; absent: peak not recorded"),
                Added("memcpy_method", "attr", "how memcpy_gbps was measured"),
                Added("launcher", "attr", '"dask-mpi" for runs on a Dask-MPI cluster; absent: '
                      "mpirun or in-process"),
                Added("suite", "attr", "suite runs: the suite's name"),
                Added("suite_axes", "attr", "suite runs: JSON, this run's matrix values"),
                Added("format", "attr", "imported baselines: the tool and format read"),
                Added("imported", "attr", "imported baselines: when the file was imported"),
                Added("reported_check", "attr", "imported baselines: do the printed "
                      "bandwidths agree with size / time and the bus factor"),
                Added("reported_mismatch", "attr", "imported baselines: JSON, the rows "
                      "that disagree"),
                Added("reported_bw_unit", "attr", "imported baselines: the unit the tool "
                      "printed bandwidth in, when not GB/s"),
                Added("reported_time", "variable", "imported baselines: the time printed, µs"),
                Added("reported_algbw", "variable", "imported baselines: the algbw printed"),
                Added("reported_busbw", "variable", "imported baselines: the busbw printed"),
                Added("reported_time_stats", "variable", "imported baselines: the time "
                      "statistics printed (dim stat)"),
                Added("reported_time_cv", "variable", "imported baselines: the printed "
                      "coefficient of variation"),
                Added("reported_error", "variable", "imported baselines: the printed "
                      "error column"),
                Added("cycle", "dim", "imported baselines: one entry per repetition of the "
                      "sweep (nccl-tests -N)"),
                Added("stat", "dim", "imported baselines: the statistics of "
                      "reported_time_stats"),
                Added("algorithm_used", "coord", "imported baselines: the algorithm the tool "
                      "said it used"),
            ),
            upgrade=_fill_v2),
    Version(3, "results kinds: a file says what it holds, a collective's results or the "
               "doctor's GPU check, which until then had its own schema",
            added=(
                Added("kind", "attr", '"sweep" (a collective\'s results: the dims above) or '
                      '"gpu-check" (`ccbench doctor --local`: dims node, gpu, repeat)',
                      '"sweep"'),
            ),
            upgrade=_fill_v3),
)

# Files written under a schema of their own before a version took them in:
# schema -> (the version they are read as, the attrs that version gives them).
LEGACY = {
    # the doctor's GPU check, written by its own writer until version 3
    "ccbench-doctor-gpu/1": (3, {"kind": GPU_CHECK}),
}

CURRENT = HISTORY[-1]
SCHEMA = CURRENT.schema


def version_of(schema):
    """The version number in a ``schema`` attr (``"ccbench/2"`` -> 2), or None
    when the string is not ours."""
    m = _SCHEMA.match(str(schema))
    return int(m.group(1)) if m else None


def upgrade(ds, where="<dataset>"):
    """`ds` brought to the newest version, one step per version in between.

    Returns `ds` itself when it is current, else a shallow copy (lazy data
    stay lazy) with attr ``schema_upgraded_from`` naming the version read.

    Raises
    ------
    SchemaError
        `ds` is not a ccbench results Dataset, or is newer than this kit.
    """
    schema = ds.attrs.get("schema")
    legacy = LEGACY.get(str(schema))
    number = legacy[0] if legacy else version_of(schema)
    if number is None or number < 1:
        raise SchemaError(f"{where}: not a ccbench results file (schema attr is {schema!r}); "
                          "import baselines with `ccbench import`")
    if number > CURRENT.number:
        raise SchemaError(f"{where}: schema {schema} is newer than this kit reads "
                          f"(newest {SCHEMA}); update ccbench_kit to read it")
    if number == CURRENT.number and not legacy:
        return ds
    ds = ds.copy()
    ds.attrs = dict(ds.attrs)
    if legacy:
        ds.attrs.update(legacy[1])
    for version in HISTORY[number:]:
        ds = version.upgrade(ds)
    ds.attrs["schema"] = SCHEMA
    ds.attrs["schema_upgraded_from"] = str(schema)
    return ds
