"""``-d all`` / ``-o all`` (nccl-tests: every data type, every op), and
comma-separated lists of them: each one is a part of its own, run one after
another with 3 real ranks into one results file (groups named
``COLLECTIVE.DTYPE`` / ``COLLECTIVE.OP``), each checked against numpy by
``--check``.  What ``all`` expands to without running: test_run_fields.py."""
import numpy as np

from ccbench_kit.dataset.io import open_parts
from ccbench_kit.dtypes import get_dtype


def _tables(stdout):
    """{part name: (type, redop, #wrong out-of-place)} of the printed tables."""
    found, name = {}, None
    for line in stdout.splitlines():
        if line.startswith("# ccbench "):
            name = line.split()[2].rstrip(":")
        words = line.split()
        if name and words and words[0].isdigit() and len(words) > 9:
            found[name] = (words[2], words[3], int(words[9]))
    return found


def test_several_data_types_run_each_into_one_file(tmp_path):
    from conftest import run_cli
    out = tmp_path / "d.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 96, "-n", 2, "-w", 1, "--placement",
                   "out_of_place", "-c", "random", "-d", "fp32,bf16,int32", "--non-interactive",
                   "--out", out, timeout=400, check=True)
    parts = open_parts(out)
    assert list(parts) == ["all_reduce.fp32", "all_reduce.bf16", "all_reduce.int32"]
    for name, ds in parts.items():
        dtype = get_dtype(name.split(".")[1])
        assert ds.attrs["dtype"] == dtype.name and ds.attrs["collective"] == "all_reduce"
        # every element of every rank's output was compared with numpy's sum
        assert int(ds["count"].sel(size=96)) == 96 // dtype.itemsize
        assert int(ds["wrong"].sum()) == 0 and np.isfinite(ds["latency"]).all()
    assert _tables(proc.stdout) == {"all_reduce.fp32": ("fp32", "sum", 0),
                                    "all_reduce.bf16": ("bf16", "sum", 0),
                                    "all_reduce.int32": ("int32", "sum", 0)}
    assert not list(tmp_path.glob("*.part")) and f"# results: {out}" in proc.stdout


def test_op_all_runs_every_reduction_op_and_a_plain_collective_once(tmp_path):
    from conftest import run_cli
    out = tmp_path / "o.nc"
    proc = run_cli("run", "all_reduce", "-r", 3, "-b", 96, "-n", 2, "-w", 1, "--placement",
                   "out_of_place", "-c", "-o", "all", "--non-interactive", "--out", out,
                   timeout=500, check=True)
    parts = open_parts(out)
    ops = ["sum", "prod", "min", "max", "avg"]
    assert list(parts) == [f"all_reduce.{op}" for op in ops]
    for op in ops:
        ds = parts[f"all_reduce.{op}"]
        assert ds.attrs["op"] == op and int(ds["wrong"].sum()) == 0
    printed = _tables(proc.stdout)
    assert {n: v[1] for n, v in printed.items()} == {f"all_reduce.{op}": op for op in ops}
