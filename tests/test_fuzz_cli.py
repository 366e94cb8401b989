"""Generated bad input (issue 17): argument vectors for every subcommand,
JSON and YAML inputs, importer inputs.  Each ends in exit 0, or one line on
stderr and a documented non-zero status (2 for bad input), never a
traceback.

The CLI runs in-process; ``run`` always gets ``--out`` naming a FIFO, so
that a valid vector is refused by the output check after every flag was
validated, and no mpirun starts.  ``bench/fuzz_cli.py`` runs 10^4 of these.
"""
import json
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ccbench_kit.cli import main

DATA = Path(__file__).parent / "data" / "baselines"
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize="FUZZ_SEED" not in os.environ,
                suppress_health_check=list(HealthCheck), database=None)
TALLY = os.environ.get("FUZZ_TALLY")

# -- values a user may type -------------------------------------------------------

WEIRD = ["", " ", "-", "--", "0", "-1", "nan", "inf", "-inf", "1e308", "99999999999999999999",
         "2**40", "0x10", "abc", "\t", "é", "1,2", ",", "[1,2]", "{}", "null", "8 8"]
INTS = st.one_of(st.integers(-5, 70).map(str), st.sampled_from(WEIRD),
                 st.integers(-2**70, 2**70).map(str))
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.sampled_from(WEIRD))
SIZES = st.one_of(st.sampled_from(["8", "1K", "64M", "1G", "1kb", "1MB", "12XB", "4Q", "1T", "0"]),
                  st.sampled_from(WEIRD), st.integers(-2**40, 2**50).map(str))
NAMES = st.one_of(st.sampled_from(["all_reduce", "allr", "all_gather", "alltoallv", "permute",
                                   "broadcast", "reduce", "ring", "mpi", "all", "nccl", "fp32",
                                   "bf16", "sum", "avg", "p99", "both", "in_place", "AND 0x7",
                                   "MOD 2", "DIV 4", "%8", "XOR 2"]),
                  st.sampled_from(WEIRD), st.text(max_size=12))

RUN_FLAGS = {
    "-r": INTS, "-b": SIZES, "-e": SIZES, "-f": st.one_of(FLOATS, SIZES), "-i": SIZES,
    "-n": INTS, "-w": INTS, "-m": INTS, "-d": NAMES, "-o": NAMES, "--root": INTS,
    "-c": st.sampled_from(["random", "all_ones", "bogus", ""]), "--seed": INTS,
    "--placement": NAMES, "--algorithms": NAMES, "--backend": st.sampled_from(["mpi", "nccl", "tpu", ""]),
    "--timeout": FLOATS, "--checkpoint-every": FLOATS, "--split": NAMES,
    "--data-parallel-dimension": INTS, "-t": NAMES, "--coalesced-cc-size-ratio": st.sampled_from(
        ["[1,2,1]", "1", "-2", "0", "[]", "[1e400]", "x"]), "--json-format": NAMES,
    "-N": INTS, "--ranks-per-node": INTS, "--hosts": NAMES, "-G": INTS,
}
JSON_FLAGS = ("--alltoallv-metadata", "--custom-replica-group", "--custom-src-target-pairs")

# JSON documents: the shapes the flags take, and anything else
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40),
                              st.floats(allow_nan=False), st.text(max_size=5)),
                    lambda kids: st.one_of(st.lists(kids, max_size=5),
                                           st.dictionaries(st.sampled_from(
                                               ["replica_groups", "send_counts", "send_displs",
                                                "recv_counts", "recv_displs", "src_target_pairs",
                                                "x"]), kids, max_size=5)),
                    max_leaves=30)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    os.mkfifo(d / "fifo")
    return d


def tally(outcome):
    """Append one example's outcome (an exit status, or what a surface that
    is not the CLI did) to FUZZ_TALLY with its test's name; the bench
    scripts count them (bench/_fuzz_runner.py)."""
    if TALLY:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split("::")[-1].split(" ")[0]
        with open(TALLY, "a") as f:
            f.write(f"{test} {outcome}\n")


def call(argv, capsys):
    """Run the CLI in-process; assert the outcome is one of the allowed ones."""
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse: --help, --version, and its own errors
        rc = e.code
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, (argv, err)
    tally(rc)
    if rc in (0, None):
        return 0, err
    assert rc in (1, 2, 3), (argv, rc, err)
    errors = [ln for ln in lines if ln.startswith("ccbench: error:")]
    assert len(errors) == 1 and (len(lines) == 1 or not lines[-1].startswith(" ")), (argv, err)
    return rc, err


@FUZZ
@given(st.data())
def test_run_flags(place, capsys, data):
    collective = data.draw(st.one_of(NAMES, st.sampled_from(["all_reduce", "alltoallv,permute"])))
    flags = data.draw(st.lists(st.sampled_from(sorted(RUN_FLAGS)), max_size=5, unique=True))
    argv = ["run", collective]
    for flag in flags:
        argv += [flag, data.draw(RUN_FLAGS[flag])]
    for flag in data.draw(st.lists(st.sampled_from(JSON_FLAGS), max_size=1)):
        path = place / f"in{abs(hash(flag))}.json"
        path.write_text(data.draw(st.one_of(JSON.map(json.dumps), st.sampled_from(
            ["[" * 5000, "{not json", "", "\x00", "[[0,1],[2]]"]))))
        argv += [flag, str(path)]
    rc, _ = call(argv + ["--out", str(place / "fifo")], capsys)
    assert rc == 2  # never launched: the FIFO is refused at the latest
    assert stat.S_ISFIFO(os.stat(place / "fifo").st_mode)


OTHER = {
    "show": lambda d: [d.draw(st.sampled_from(["{f}", "{nc}", "/dev/null", "", "{fifo}"]))],
    "import": lambda d: [d.draw(st.sampled_from(["{f}", "{log}", "{json}"])),
                         *d.draw(st.sampled_from([[], ["-o", "{fifo}"], ["-o", "/dev/null"],
                                                  ["-o", "{dir}"], ["--nranks", d.draw(INTS)],
                                                  ["--collective", d.draw(NAMES)]]))],
    "compare": lambda d: ["{log}", d.draw(st.sampled_from(["{f}", "{log}", "{ag}"])),
                          *d.draw(st.sampled_from([[], ["--min-ratio", d.draw(FLOATS)],
                                                   ["--bootstrap", d.draw(INTS)],
                                                   ["--confidence", d.draw(FLOATS)],
                                                   ["--stat", d.draw(NAMES)],
                                                   ["--csv", "{fifo}"], ["--seed", d.draw(INTS)],
                                                   ["-b", d.draw(SIZES)]]))],
    "export": lambda d: [d.draw(st.sampled_from(["{f}", "{log}"])),
                         *d.draw(st.sampled_from([["--csv", "{fifo}"], ["--aws-naming", "{fifo}"],
                                                  ["--csv", "/dev/null"], ["--nodes", d.draw(INTS)],
                                                  ["-t", d.draw(NAMES), "--csv", "{fifo}"]]))],
    "report": lambda d: [d.draw(st.sampled_from(["{f}", "{log}"])), "-o",
                         d.draw(st.sampled_from(["{fifo}", "{dir}", "x.pdf", ""])),
                         *d.draw(st.sampled_from([[], ["--compare"], ["--timeout", d.draw(FLOATS)],
                                                  ["-t", d.draw(NAMES)]]))],
    "suite": lambda d: [d.draw(st.sampled_from(["status", "collect", "x"])), "{f}"],
    "recover": lambda d: [d.draw(st.sampled_from(["{f}", "{nope}", ""])),
                          *d.draw(st.sampled_from([[], ["-o", "{fifo}"]]))],
    "cluster": lambda d: d.draw(st.sampled_from([["start", "-np", d.draw(INTS), "--scheduler-file",
                                                  "{fifo}"], ["stop", "--timeout", d.draw(FLOATS),
                                                              "--scheduler-file", "{nope}"],
                                                 ["hostfile", "-i", "{f}", "--topology", "{f}"]])),
}


@FUZZ
@given(st.data())
def test_other_subcommands(place, capsys, data):
    garbage = data.draw(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(
        lambda b: b.decode("latin-1")), JSON.map(json.dumps)))
    (place / "f").write_text(garbage, encoding="utf-8", errors="replace")
    names = {"f": place / "f", "fifo": place / "fifo", "dir": place, "nope": place / "nope.nc",
             "nc": place / "f", "log": DATA / "all_reduce_h200x2.txt",
             "json": DATA / "all_reduce_h200x2.json", "ag": DATA / "all_gather_h200x2.txt"}
    cmd = data.draw(st.sampled_from(sorted(OTHER)))
    # only our placeholders: a drawn value may hold braces of its own
    argv = [cmd] + [re.sub(r"\{(\w+)\}", lambda m: str(names.get(m.group(1), m.group(0))), str(a))
                    for a in OTHER[cmd](data)]
    call(argv, capsys)
    assert stat.S_ISFIFO(os.stat(place / "fifo").st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# YAML suites: aliases of aliases, deep nesting, and anything else
def _bomb(levels, fan):
    lines = ["a0: &a0 [x, y]"]
    for k in range(1, levels):
        lines.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * fan)}]")
    return "\n".join(lines) + "\nmatrix: {collectives: [all_reduce]}\n"


YAML = st.one_of(
    st.builds(_bomb, st.integers(2, 12), st.integers(2, 12)),
    st.integers(1, 3000).map(lambda n: "a: " + "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: "".join(f"{' ' * k}k{k}:\n" for k in range(n)) + "x"),
    st.sampled_from(["&a [*a]", "a: !!python/object:os.system x", "matrix: [1", "\t\x00",
                     "matrix: {collectives: []}", "matrix: {collectives: [all_reduce], ranks: [-1]}"]),
    st.text(max_size=300))


@FUZZ
@given(YAML)
def test_suite_yaml(place, capsys, text):
    path = place / "suite.yaml"
    path.write_text(text, encoding="utf-8", errors="replace")
    from ccbench_kit.errors import ConfigError
    from ccbench_kit.suite import load_suite
    try:
        load_suite(path)
    except ConfigError as e:
        assert "\n" not in str(e)


# importer inputs: nccl-tests rows with any numbers in the time column
ROW = "{size:>12} {count:>13}     float     sum      -1 {t1:>8} {a:>7} {b:>7}       0 {t2:>8} {a:>7} {b:>7}       0"
NUM = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32).map(lambda x: f"{x:.2f}"),
                st.sampled_from(["nan", "inf", "-inf", "0.00", "-1.00", "N/A", "", "x"]))


@FUZZ
@given(st.lists(st.tuples(NUM, NUM, NUM), min_size=1, max_size=6))
def test_importer_times(place, capsys, rows):
    head = (DATA / "all_reduce_h200x2.txt").read_text().splitlines()[:12]
    body = [ROW.format(size=8 << k, count=2 << k, t1=t1, t2=t2, a=a, b="0.00")
            for k, (t1, t2, a) in enumerate(rows)]
    path = place / "log.txt"
    path.write_text("\n".join(head + body + ["# Out of bounds values : 0 OK",
                                             "# Avg bus bandwidth    : 0.1", ""]))
    rc, err = call(["import", str(path)], capsys)
    times = []
    for t1, t2, _ in rows:
        for t in (t1, t2):
            try:
                times.append(float(t))
            except ValueError:
                pass
    if rc == 0 and any(not (t > 0 and t < float("inf")) for t in times):
        assert "BROKEN" in err  # never "check: ok" over times that are no times
