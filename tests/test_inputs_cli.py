"""Inputs through the CLI: bad ones give one line naming the flag and the file,
a non-zero exit and no traceback, before any rank starts; good ones reach the
collectives.  Bad input fails before mpirun, so most cases call the CLI's
main() in this process; two run the installed `ccbench` as users do."""
import json

import pytest

import ccbench_kit as ccb
from ccbench_kit.cli import main
from conftest import run_cli


def _entry(sc, sd, rc, rd):
    return {"send_counts": sc, "send_displs": sd, "recv_counts": rc, "recv_displs": rd}


BAD_JSON = [
    # (collective, nranks, flag, content, message)
    ("alltoallv", 3, "--alltoallv-metadata",
     {"alltoallv_metadata": [_entry([4, 4], [0, 4], [4, 4], [0, 4])]},
     "entry 0: send_counts has 2 values but the replica group has 3 ranks"),
    ("alltoallv", 2, "--alltoallv-metadata",
     {"alltoallv_metadata": [_entry([4, 4], [0, 4], [4, 4], [-4, 4])]},
     "entry 0: recv_displs[0] is negative (-4)"),
    ("alltoallv", 2, "--alltoallv-metadata",
     {"alltoallv_metadata": [_entry([4, 4], [0, 2], [4, 4], [0, 4])]},
     "entry 0: send ranges overlap: peer 0 has elements [0, 4) and peer 1 has [2, 6)"),
    ("all_reduce", 4, "--custom-replica-group", {"replica_groups": [[0, 1], [1, 2, 3]]},
     "rank 1 is in group 0 and again in group 1"),
    ("all_reduce", 4, "--custom-replica-group", {"replica_groups": [[0, 1], [2]]},
     "rank 3 is in no group; every rank must be in exactly one"),
    ("all_reduce", 4, "--custom-replica-group", {"replica_groups": [[0], [1], [2], [7]]},
     "rank 7 in group 3 is out of range: -r/--nworkers 4 gives ranks 0..3"),
    ("all_reduce", 4, "--custom-replica-group", {"replica_groups": [[0, 1, 2, 3], [4, 5, 6, 7]]},
     "the groups name 8 ranks but -r/--nworkers is 4"),
    ("permute", 3, "--custom-src-target-pairs", {"src_target_pairs": [[[0, 1], [1, 2], [2, 1]]]},
     "not a permutation: rank 1 receives twice, in [0, 1] and [2, 1]"),
    ("permute", 3, "--custom-src-target-pairs", {"src_target_pairs": [[[0, 1], [1, 0]]]},
     "not a permutation: rank 2 sends nothing"),
]


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli(capsys, monkeypatch, *args, env=None):
    """The CLI in this process: exit code and output, as a CompletedProcess."""
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    capsys.readouterr()
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return _Result(rc, out.out, out.err)


def _one_line_error(proc, prefix):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"ccbench: error: {prefix}"), lines[0]
    return lines[0]


@pytest.mark.parametrize("case", [0, 3])
def test_bad_input_from_the_installed_command(tmp_path, case):
    coll, nranks, flag, content, message = BAD_JSON[case]
    path = tmp_path / "input.json"
    path.write_text(json.dumps(content))
    proc = run_cli("run", coll, "-r", nranks, flag, path)
    assert message in _one_line_error(proc, f"{flag}: {path}: ")


@pytest.mark.parametrize("coll, nranks, flag, content, message", BAD_JSON,
                         ids=[m.split(":")[-1][:30] for *_, m in BAD_JSON])
def test_bad_json_input_is_one_line_naming_flag_and_file(tmp_path, capsys, monkeypatch, coll,
                                                         nranks, flag, content, message):
    path = tmp_path / "input.json"
    path.write_text(json.dumps(content))
    proc = _cli(capsys, monkeypatch, "run", coll, "-r", nranks, "-b", "1K", flag, path,
                "--out", tmp_path / "x.nc")
    line = _one_line_error(proc, f"{flag}: {path}: ")
    assert message in line
    assert not (tmp_path / "x.nc").exists()


@pytest.mark.parametrize("args, env, prefix, message", [
    (["--split", "XOR 3"], None, "--split: ", "expected AND, OR, MOD or DIV"),
    (["--split", "MOD 0"], None, "--split: ", "'MOD 0' divides by zero"),
    ([], {"NCCL_TESTS_SPLIT": "DIV 3"}, "NCCL_TESTS_SPLIT: ",
     "groups must all have the same size, got sizes [3, 1]"),
    (["--data-parallel-dimension", "3"], None, "--data-parallel-dimension: ",
     "3 does not divide the 4 ranks"),
    (["--split", "AND 1", "--data-parallel-dimension", "2"], None, "--data-parallel-dimension: ",
     "give only one of --split, --data-parallel-dimension"),
    (["--custom-replica-group", "/nonexistent/g.json"], None,
     "--custom-replica-group: /nonexistent/g.json: ", "no such file"),
    (["--coalesced-cc-size-ratio", "[1,0]"], None, "--coalesced-cc-size-ratio: ",
     "ratios must be positive numbers, got 0"),
    (["--coalesced-cc-size-ratio", "1", "1000"], None, "--coalesced-cc-size-ratio: ",
     "part 0 of 1024 B split [1, 1000] is 1 B, too small for all_reduce"),
    (["--alltoallv-metadata", "m.json"], None, "--alltoallv-metadata: ",
     "applies to alltoallv only, not all_reduce"),
    (["--json-format", "nccl-tests"], None, "--json-format: ", "needs --report-to-json-file PATH"),
])
def test_bad_specs(capsys, monkeypatch, args, env, prefix, message):
    proc = _cli(capsys, monkeypatch, "run", "all_reduce", "-r", 4, "-b", "1K", *args, env=env)
    assert message in _one_line_error(proc, prefix)


def test_invalid_json_names_line_and_column(tmp_path, capsys, monkeypatch):
    path = tmp_path / "g.json"
    path.write_text('{"replica_groups": [[0, 1],\n  [2, 3]')
    proc = _cli(capsys, monkeypatch, "run", "all_reduce", "-r", 4, "--custom-replica-group", path)
    assert "not valid JSON: Expecting ',' delimiter at line 2, column 9" in \
        _one_line_error(proc, f"--custom-replica-group: {path}: ")


def test_pairs_and_metadata_reach_the_collectives(tmp_path):
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps({"src_target_pairs": [[[0, 2], [1, 0], [2, 1], [3, 3]]]}))
    out = tmp_path / "p.nc"
    proc = run_cli("run", "permute", "-r", 4, "-b", "1000", "-n", 3, "-w", 1, "--check",
                   "--custom-src-target-pairs", pairs, "--out", out, timeout=180)
    assert proc.returncode == 0, proc.stderr
    ds = ccb.load(out)
    assert json.loads(ds.attrs["config"])["pairs"] == [[0, 2], [1, 0], [2, 1], [3, 3]]
    assert (ds["wrong"].values == 0).all()
    # alltoallv metadata per group rank, on 2 concurrent groups of 2 ranks: group rank 0
    # sends 3 to itself and 5 to group rank 1, which sends 2 back and 7 to itself,
    # displacements out of order
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"alltoallv_metadata": [
        _entry([3, 5], [5, 0], [3, 2], [0, 3]), _entry([2, 7], [7, 0], [5, 7], [7, 0])]}))
    out = tmp_path / "v.nc"
    proc = run_cli("run", "alltoallv", "-r", 4, "--split", "MOD 2", "-b", "64", "-n", 3, "-w", 1,
                   "--check",
                   "--placement", "out_of_place", "--alltoallv-metadata", meta, "--out", out,
                   timeout=180)
    assert proc.returncode == 0, proc.stderr
    ds = ccb.load(out)
    assert (ds["wrong"].values == 0).all()
    # one entry per world rank, each its group rank's
    assert json.loads(ds.attrs["config"])["alltoallv"][2]["send_displs"] == [7, 0]
    # size = the most one rank sends or receives: group rank 1 receives 5 + 7 = 12 fp32
    assert list(ds["size"].values) == [48]
