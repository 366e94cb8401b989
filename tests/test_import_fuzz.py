"""Fuzzing every importer: mutated real outputs either import into a valid
results Dataset (current schema) or raise ImporterError — never anything else.

Mutations are made in memory (no subprocess, no files).  Examples per test:
``FUZZ_EXAMPLES`` (default 100; 6 tests = 600 in ``make test``);
``bench/import_fuzz.py`` runs 10,000.
"""
import json
import os
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccbench_kit import importers
from ccbench_kit.dataset import SCHEMA
from ccbench_kit.importers import ImporterError

DATA = Path(__file__).parent / "data" / "baselines"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="FUZZ_SEED" not in os.environ,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
                database=None)


def _read(name):
    return (DATA / name).read_text()


def _generated_logs():
    """-I columns, -d/-o sweeps with -N cycles, several tests: shapes the
    fixtures lack, printed as nccl-tests prints them."""
    from test_import_nccl_tests import HEADER, footer, fstr, preamble, row, sweep_rows
    per_iter = preamble(ranks=2, minb=1024, maxb=2048) + [
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max"
        "    i_p99    i_cv% "]
    extra = ("  %7s  %7s  %7s  %7s" % (fstr(9.0, 7), fstr(12.5, 7), fstr(12.1, 7), fstr(5.5, 7)),) * 2
    per_iter += [row(s, s // 4, "float", "sum", -1, (10.25, 10.5), 1.0, extra=extra)
                 for s in (1024, 2048)] + footer()
    sweeps = preamble(ranks=4, minb=1024, maxb=2048) + HEADER.split("\n")
    for typ, isz in (("float", 4), ("half", 2)):
        for cycle in range(2):
            sweeps += sweep_rows([1024, 2048], [(20.0 + cycle, 21.0)] * 2, 1.5, typ=typ, itemsize=isz)
    sweeps += footer() + preamble("all_gather_perf", ranks=2, minb=1024, maxb=1024) \
        + HEADER.split("\n") + sweep_rows([1024], [(5.0, 5.5)], 0.5, op="none") + footer()
    return ["\n".join(per_iter), "\n".join(sweeps)]


def _short_json(name, keep=6):
    doc = json.loads(_read(name))
    doc["results"] = doc["results"][-keep:]
    return json.dumps(doc, indent=1)


SEEDS = {
    "nccl_text": [_read("all_reduce_h200x2.txt"), _read("all_gather_h200x2.txt"),
                  _read("nccl_tests_8xh100_excerpt.txt"), _read("nccl_tests_p5en_excerpt.txt")]
    + _generated_logs(),
    "nccl_json": [_short_json("all_reduce_h200x2.json"), _short_json("all_gather_h200x2.json")],
    "nccom_text": [_read(n) for n in sorted(os.listdir(DATA)) if n.startswith("nccom_") and n.endswith(".txt")],
    "nccom_json": [_read("nccom_results.json")],
    "allgatherp": [_read("allgatherp_8ranks.txt")],
}

NASTY = st.sampled_from(["N/A", "nan", "-nan", "inf", "-1", "0", "1e+99", "1e-400", "-0", "",
                         "#", "{", "}", "\x00", "é", "99999999999999999999999", "0x10", "1.5.5",
                         "size", "time", "algbw", "busbw", "#wrong", "Avg bus bandwidth :",
                         "size(B)", "count(elems)", "Algorithm", "Ranks: 0", "In-Place: Yes",
                         "# Collective test starting: alltoall_perf", "[1,0]<stdout>:",
                         "vm:1:1 [0] NCCL INFO NCCL_ALGO set by environment to Tree"])
TOKEN = NASTY | st.text(max_size=12)
HINTS = st.fixed_dictionaries({
    "collective": st.sampled_from([None, "all_reduce", "all_gather", "allg", "bogus"]),
    "nranks": st.sampled_from([None, 2, 8, 32, 128]),
    "partial": st.booleans()})


@st.composite
def mutated_text(draw, seeds):
    lines = draw(st.sampled_from(seeds)).split("\n")
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["delete", "duplicate", "cut", "token", "insert", "swap",
                                   "prefix", "truncate"]))
        i = draw(st.integers(0, max(len(lines) - 1, 0))) if lines else 0
        if not lines:
            lines = [draw(TOKEN)]
        elif op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines[i] = lines[i][:draw(st.integers(0, len(lines[i])))]
        elif op == "token":
            toks = lines[i].split()
            if toks:
                toks[draw(st.integers(0, len(toks) - 1))] = draw(TOKEN)
            lines[i] = "  ".join(toks)
        elif op == "insert":
            lines.insert(i, draw(TOKEN) + " " + draw(TOKEN))
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "prefix":
            lines = [f"[1,{k % 3}]<stdout>:{ln}" for k, ln in enumerate(lines)]
        else:
            lines = lines[:i]
    return "\n".join(lines)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10 ** 12) | st.floats(allow_nan=False)
    | st.sampled_from(["nan", "inf", "-1", "", "float", "    -1"]) | st.text(max_size=5),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=6)


def _paths(node, path=()):
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, path + (k,))
    elif isinstance(node, list):
        for k, v in enumerate(node):
            yield from _paths(v, path + (k,))


@st.composite
def mutated_json(draw, seeds):
    doc = json.loads(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if op == "replace":
            parent[path[-1]] = draw(JSON_VALUES)
        elif op == "delete":
            del parent[path[-1]]
        elif isinstance(parent, list):
            parent.insert(path[-1], json.loads(json.dumps(parent[path[-1]])))
    text = json.dumps(doc, indent=draw(st.sampled_from([None, 1])))
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return text


def _tally(outcome):
    # bench/import_fuzz.py counts outcomes through this file
    path = os.environ.get("FUZZ_TALLY")
    if path:
        with open(path, "a") as f:
            f.write(outcome + "\n")


def check(text, hints, name="fuzz.txt"):
    """Import `text`: ImporterError is fine; a result must be a sound Dataset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            datasets = importers.read_text(text, name, **hints)
        except ImporterError as e:
            assert e.path == name or e.path in ("--nranks",)
            assert str(e).count("\n") == 0
            _tally("ImporterError")
            return None
        for ds in datasets:
            assert ds.attrs["schema"] == SCHEMA and ds.attrs["timing"] == "imported"
            assert ds["latency"].dims == ("algorithm", "placement", "size", "rank", "iteration")
            assert ds["reported_busbw"].dims[:3] == ("algorithm", "placement", "size")
            assert len(np.unique(ds["size"].values)) == ds.sizes["size"]
            for k, v in ds.attrs.items():
                assert isinstance(v, (str, int, float, np.integer, np.floating)), k
            ds.ccb.busbw()
        _tally("imported")
        return datasets


@FUZZ
@given(mutated_text(SEEDS["nccl_text"]), HINTS)
def test_fuzz_nccl_tests_text(text, hints):
    check(text, hints)


@FUZZ
@given(mutated_json(SEEDS["nccl_json"]), HINTS)
def test_fuzz_nccl_tests_json(text, hints):
    check(text, hints, "fuzz.json")


@FUZZ
@given(mutated_text(SEEDS["nccom_text"]), HINTS)
def test_fuzz_nccom_text(text, hints):
    check(text, hints)


@FUZZ
@given(mutated_json(SEEDS["nccom_json"]), HINTS)
def test_fuzz_nccom_json(text, hints):
    check(text, hints, "fuzz.json")


@FUZZ
@given(mutated_text(SEEDS["allgatherp"]), HINTS)
def test_fuzz_allgatherp(text, hints):
    check(text, hints)


@FUZZ
@given(st.text(max_size=400) | st.binary(max_size=400).map(lambda b: b.decode("latin-1")), HINTS)
def test_fuzz_garbage(text, hints):
    check(text, hints)
