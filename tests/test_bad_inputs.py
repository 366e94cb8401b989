"""The table of bad inputs: each gives one line that names the problem and
the flag or file, a non-zero exit, and no traceback (issue 8).

The CLI runs in-process (``ccbench_kit.cli.main``) so the table stays fast;
tests/test_spine_run.py runs the same path as real subprocesses."""
import json
import re
import shlex
from pathlib import Path

import pytest

from ccbench_kit.cli import main

FIXTURES = Path(__file__).parent / "data" / "baselines"  # nccl-tests logs (data/baselines/README.md)
AR = FIXTURES / "all_reduce_h200x2.txt"
AG = FIXTURES / "all_gather_h200x2.txt"

FILES = {
    "a2av_len.json": {"send_counts": [1, 2], "send_displs": [0, 1], "recv_counts": [1, 2], "recv_displs": [0, 1]},
    "a2av_neg.json": [{"send_counts": [1, 1, 1], "send_displs": [0, -1, 2], "recv_counts": [1, 1, 1], "recv_displs": [0, 1, 2]}],
    "a2av_overlap.json": [{"send_counts": [2, 2, 2], "send_displs": [0, 1, 4], "recv_counts": [2, 2, 2], "recv_displs": [0, 2, 4]}],
    "groups_overlap.json": [[0, 1], [1, 2]],
    "groups_missing.json": [[0, 1]],
    "groups_range.json": [[0, 1, 2], [7]],
    "groups_toomany.json": [[0, 1, 2, 3, 4, 5]],
    "pairs_dup.json": [[0, 1], [1, 1], [2, 0]],
    "topo.json": {"topology": 5},
}
TEXT = {
    "broken.json": "{not json",
    "garbage.txt": "hello world\nthis is not a log\n",
    "hosts.txt": "host-a\n",
}

BAD = [
    # the run command: sizes, counts, names
    ("run all_reduce -r 0", "argument -r/--nworkers: must be an integer from 1 to 1048576, got 0"),
    ("run all_reduce -b 1G -e 1K", "-b/--minbytes: minimum size 1 GiB is larger than -e/--maxbytes 1 KiB"),
    ("run nope", "COLLECTIVE: unknown collective 'nope'; choose one of all_reduce"),
    ("run all_reduce --algorithms bogus", "--algorithms: unknown algorithm 'bogus' for all_reduce on backend mpi"),
    ("run all_reduce -b 12XB", "-b/--minbytes: cannot read size '12XB'"),
    ("run all_reduce -e 4Q", "-e/--maxbytes: cannot read size '4Q'"),
    ("run all_reduce -f 1", "-f/--stepfactor: step factor must be > 1, got 1"),
    ("run all_reduce -i 0 -b 8 -e 64", "-i/--stepbytes: step must be at least 1 byte"),
    ("run all_reduce -d fp128", "-d/--datatype: unknown data type 'fp128'"),
    ("run all_reduce -o xor", "-o/--op: unknown reduction op 'xor'"),
    ("run all_reduce -t p101", "-t/--stats: unknown statistic 'p101'"),
    ("run all_reduce -n 0", "argument -n/--iters: must be an integer from 1 to 1000000000, got 0"),
    ("run all_reduce -w -1", "argument -w/--warmup_iters/--warmup-iters: must be an integer from 0 to 1000000000, got -1"),
    ("run all_reduce -m 0", "argument -m/--agg-iters: must be an integer from 1 to 1000000, got 0"),
    ("run broadcast -r 3 --root 5", "--root: root 5 is not a rank of 0..2"),
    ("run all_gather -r 3 -b 8 -e 8", "-b/--minbytes: all_gather size 8 B is too small to give every rank one element; the smallest is 12 B"),
    ("run all_reduce --placement sideways", "--placement: unknown placement 'sideways'"),
    ("run all_reduce --backend tpu", "--backend: unknown backend 'tpu'"),
    # a type the backend has in no version: refused before launch, not by every rank
    ("run all_reduce --backend torch -d fp8_e4m3", "-d/--datatype: torch.distributed has no "
     "fp8_e4m3 on both gloo and NCCL; use one of uint8, int8, int32, int64, fp16, bf16, fp32, fp64"),
    ("run all_reduce --backend nccl -d int16", "-d/--datatype: NCCL has no int16 type; use one of "
     "int8, uint8, int32, uint32, int64, uint64, fp16, fp32, fp64, bf16, fp8_e4m3, fp8_e5m2"),
    ("run all_reduce --timeout -3", "argument --timeout: must be a finite number > 0 and <= 1e+07, got '-3'"),
    ("run all_reduce --seed abc", "argument --seed: expected an integer, got 'abc'"),
    # JSON inputs
    ("run alltoallv -r 3 --alltoallv-metadata {a2av_len.json}", "--alltoallv-metadata: {a2av_len.json}: entry 0: send_counts has 2 values but the replica group has 3 ranks"),
    ("run alltoallv -r 3 --alltoallv-metadata {a2av_neg.json}", "entry 0: send_displs[1] is negative (-1)"),
    ("run alltoallv -r 3 --alltoallv-metadata {a2av_overlap.json}", "entry 0: send ranges overlap"),
    ("run alltoallv -r 3 --alltoallv-metadata {broken.json}", "--alltoallv-metadata: {broken.json}: not valid JSON"),
    ("run alltoallv -r 3 --alltoallv-metadata {missing.json}", "--alltoallv-metadata: {missing.json}: no such file"),
    ("run all_reduce -r 3 --custom-replica-group {groups_overlap.json}", "rank 1 is in group 0 and again in group 1"),
    ("run all_reduce -r 3 --custom-replica-group {groups_missing.json}", "rank 2 is in no group"),
    ("run all_reduce -r 3 --custom-replica-group {groups_range.json}", "--custom-replica-group: {groups_range.json}: the groups name 4 ranks but -r/--nworkers is 3"),
    ("run all_reduce -r 3 --custom-replica-group {groups_toomany.json}", "the groups name 6 ranks but -r/--nworkers is 3"),
    ("run permute -r 3 --custom-src-target-pairs {pairs_dup.json}", "--custom-src-target-pairs: {pairs_dup.json}: not a permutation: rank 1 receives twice"),
    ("run all_reduce -r 4 --split 'MOD x'", "--split: cannot read 'x' as a number"),
    ("run all_reduce -r 4 --split 'XOR 2'", "--split: cannot read 'XOR 2': expected AND, OR, MOD or DIV"),
    ("run all_reduce -r 4 --data-parallel-dimension 3", "--data-parallel-dimension: 3 does not divide the 4 ranks"),
    ("run all_reduce -r 4 --coalesced-cc-size-ratio 1 -2", "--coalesced-cc-size-ratio: ratios must be positive numbers, got -2"),
    ("run all_reduce --hosts-file {nohosts.txt}", "--hosts-file: cannot read host file {nohosts.txt}"),
    ("cluster hostfile -i {hosts.txt} --topology {topo.json}", "--topology: expected DescribeInstanceTopology output"),
    # importers
    ("import {garbage.txt}", "{garbage.txt}:1: expected a format ccbench can import"),
    ("import {trunc.txt}", "{trunc.txt}:22: expected 13 columns as the header at line 11 says"),
    ("import {trunc.json}", "{trunc.json}:173: expected the rest of the JSON document"),
    ("import {badheader.txt}", "{badheader.txt}:11: expected a header naming size, count, type"),
    ("import {nonexistent.txt}", "{nonexistent.txt}: expected an existing file"),
    (f"compare {AR} {AG}", "nothing to compare: the run has all_gather fp32, the baseline all_reduce fp32"),
    # reports and results files
    ("report {nonexistent.nc} -o {r.html}", "results: {nonexistent.nc}: no such results file"),
    (f"report {AR} -o " "{r.html} --theory h900", "theory: unknown theory preset 'h900'"),
    (f"report {AR} -o " "{r.html} -t pfoo", "stats: unknown statistic 'pfoo'"),
    (f"report {AR} -o " "{r.pdf}", "-o/--output: {r.pdf}: the report is HTML; name it NAME.html"),
    ("show {garbage.txt}", "{garbage.txt}: not a readable netCDF results file"),
    ("show {v4.nc}", "{v4.nc}: schema ccbench/4 is newer than this kit reads (newest ccbench/3)"),
    ("show {other.nc}", "{other.nc}: not a ccbench results file (schema attr is 'other/1')"),
    ("suite {nosuite.yaml}", "{nosuite.yaml}: cannot read suite file"),
    # issue 17: every flag value checked by the parser
    ("run ''", "argument collective: expected comma-separated collective names with none empty, got ''"),
    ("run all_reduce,", "argument collective: expected comma-separated collective names with none empty"),
    ("run all_reduce --algorithms ''", "argument --algorithms: expected comma-separated algorithm names with none empty"),
    ("run all_reduce --seed -1", "argument --seed: must be an integer from 0 to 4294967295, got -1"),
    ("run all_reduce --seed 99999999999", "argument --seed: must be an integer from 0 to 4294967295"),
    ("run all_reduce -n 10000000000", "argument -n/--iters: must be an integer from 1 to 1000000000"),
    ("run all_reduce --timeout nan", "argument --timeout: must be a finite number > 0"),
    ("run all_reduce --checkpoint-every -1", "argument --checkpoint-every: must be a finite number >= 0"),
    ("run all_reduce -d ''", "argument -d/--datatype: expected a data type, got an empty string"),
    ("compare {AR} {AR} --confidence 1.5", "argument --confidence: must be a finite number > 0 and < 1"),
    ("export {AR} --nodes 0 --csv", "argument --nodes: must be an integer >= 1, got 0"),
    # ... bounded JSON and YAML
    ("run all_reduce -r 3 --custom-replica-group {deep.json}", "--custom-replica-group: {deep.json}: not a JSON input the kit takes: nested deeper than 64 levels"),
    ("suite {bomb.yaml}", "{bomb.yaml}: refused: the YAML expands to more than 1000000 nodes"),
    ("suite {loop.yaml}", "{loop.yaml}: refused: the YAML an alias refers to a node that contains it"),
    ("import {deep.json}", "{deep.json}:1: expected a format ccbench can import"),
    # ... output paths, before any work
    ("run all_reduce --out /dev/null", "--out: /dev/null is a character device; ccbench writes regular files only and does not replace it"),
    ("import {AR} -o {fifo}", "-o/--out: {fifo} is a FIFO"),
    ("export {AR} --csv {fifo}", "--csv: {fifo} is a FIFO"),
    ("run all_reduce --out {broken.json}/x.nc", "{broken.json} is a file, not a folder"),
    ("show {fifo}", "{fifo}: not a results file (not a regular file)"),
    ("compare {fifo} " f"{AR}", "{fifo}: expected a regular file"),
    ("report {gpu.nc} -o {r.html}", "results: {gpu.nc}: a GPU check (`ccbench doctor --local`), not a collective's results"),
    ("compare " f"{AR}" " {gpu.nc}", "{gpu.nc}: a GPU check (`ccbench doctor --local`), not a collective's results"),
    ("compare {gpu.nc} " f"{AR}", f"RUN: {AR}: not a GPU check file like the baseline " "{gpu.nc}"),
    # ... results files, comparisons, recovery
    ("show {fake.nc}", "{fake.nc}: claims schema ccbench/1 but lacks dim 'algorithm'"),
    ("report {AR} {AG} --compare -o {r.html}", "nothing to compare: the run has all_gather fp32, the baseline all_reduce fp32"),
    ("recover {nonexistent.nc}", "PATH: {nonexistent.nc}: no such results file, and no sidecar files"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    for name, obj in FILES.items():
        (d / name).write_text(json.dumps(obj))
    for name, text in TEXT.items():
        (d / name).write_text(text)
    (d / "trunc.txt").write_text(AR.read_text()[:2000])
    (d / "trunc.json").write_text(AR.with_suffix(".json").read_text()[:3000])
    (d / "badheader.txt").write_text(AR.read_text().replace("   redop", "   xxxxx")
                                     .replace("  busbw  #wrong     time", "  xxxxx  #wrong     time"))
    import os

    import numpy as np
    import xarray as xr
    xr.Dataset(attrs={"schema": "ccbench/4"}).to_netcdf(d / "v4.nc", engine="h5netcdf")
    xr.Dataset(attrs={"schema": "other/1"}).to_netcdf(d / "other.nc", engine="h5netcdf")
    xr.Dataset({"latency": ("x", np.ones(3))}, attrs={"schema": "ccbench/1"}).to_netcdf(
        d / "fake.nc", engine="h5netcdf")
    xr.Dataset({"hbm_gbps": (("node", "gpu", "repeat"), np.ones((1, 2, 3)))},
               coords={"node": ["n1"], "gpu": [0, 1], "repeat": [0, 1, 2],
                       "gpu_name": (("node", "gpu"), [["H200", "H200"]])},
               attrs={"schema": "ccbench/3", "kind": "gpu-check", "kit_version": "x",
                      "created": "2026-11-29"}).to_netcdf(d / "gpu.nc", engine="h5netcdf")
    (d / "deep.json").write_text("[" * 100 + "]" * 100)
    levels = ["a0: &a0 [x, y]"] + [f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 10)}]"
                                    for k in range(1, 9)]
    (d / "bomb.yaml").write_text("\n".join(levels) + "\nmatrix: {collectives: [all_reduce]}\n")
    (d / "loop.yaml").write_text("&a [*a]\n")
    os.mkfifo(d / "fifo")
    return d


def test_the_table_is_long_enough():
    assert len(BAD) >= 30


@pytest.mark.parametrize("argv,message", BAD, ids=[a for a, _ in BAD])
def test_bad_input(argv, message, files, capsys):
    names = {k: str(files / k) for k in ["missing.json", "nohosts.txt", "nonexistent.txt",
                                          "nonexistent.nc", "r.html", "r.pdf", "nosuite.yaml",
                                          "v4.nc", "other.nc", "trunc.txt", "trunc.json", "badheader.txt",
                                          "fake.nc", "deep.json", "bomb.yaml", "loop.yaml", "fifo", "gpu.nc",
                                          *FILES, *TEXT]}
    names.update(AR=str(AR), AG=str(AG))
    def fill(text):
        return re.sub(r"\{([\w.]+)\}", lambda m: names[m.group(1)], text)
    argv, message = fill(argv), fill(message)
    try:
        rc = main(shlex.split(argv))
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    assert rc not in (0, None)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("ccbench: error: ")
    assert message in err[0]


def test_a_type_the_backend_lacks_is_refused_before_launch(tmp_path, capsys):
    """Exit 2 and the bare reason: the ranks, had they started, would each
    have refused it (exit 3, 'No size had completed')."""
    out = tmp_path / "r.nc"
    rc = main(["run", "all_reduce", "--backend", "torch", "-d", "fp8_e5m2", "-r", "2",
               "-b", "8", "-e", "8", "--out", str(out)])
    assert rc == 2
    assert capsys.readouterr().err.strip() == (
        "ccbench: error: -d/--datatype: torch.distributed has no fp8_e5m2 on both gloo and "
        "NCCL; use one of uint8, int8, int32, int64, fp16, bf16, fp32, fp64")
    assert list(tmp_path.iterdir()) == []
