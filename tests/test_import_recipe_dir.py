"""`ccbench import DIR`: a log directory of NVIDIA's NCCL microbenchmark
recipe imports as a whole, its debug and per-rank folders skipped."""
import shutil
from pathlib import Path

import pytest

from ccbench_kit.errors import ConfigError
from ccbench_kit.importers import read
from ccbench_kit.importers.recipe_dir import log_files, open_dir

DATA = Path(__file__).parent / "data" / "baselines"


def _recipe_tree(root):
    sweep = root / "microbenchmark_nccl_h200_root_4242" / "LOG_20261124-4242_sweep_N2"
    for d in ("1_1_LOG_all_reduce_env1_args1_job4242", "1_1_LOG_all_reduce_env1_args1_job4242_iter1"):
        (sweep / d).mkdir(parents=True)
        # per-rank output that looks like a log: must be skipped
        shutil.copy(DATA / "all_gather_h200x2.txt", sweep / d / "1_9_LOG_x_env1_args1_job1_iter1.txt")
    shutil.copy(DATA / "all_reduce_h200x2.txt", sweep / "1_1_LOG_all_reduce_env1_args1_job4242_iter1.txt")
    shutil.copy(DATA / "all_gather_h200x2.txt", sweep / "1_2_LOG_all_gather_env1_args1_job4242_iter1.txt")
    (sweep / "sweep.yml").write_text("nodes: 2\n")
    return sweep


def test_recipe_directory_imports_as_a_whole(tmp_path, cli):
    sweep = _recipe_tree(tmp_path)
    assert list(log_files(tmp_path)) == ["N2/1_1_LOG_all_reduce_env1_args1_job4242_iter1",
                                         "N2/1_2_LOG_all_gather_env1_args1_job4242_iter1"]
    parts = open_dir(sweep.parent, read)
    assert [ds.attrs["collective"] for ds in parts.values()] == ["all_reduce", "all_gather"]
    assert parts["all_reduce-N2-env1-args1"].attrs["recipe_log"] == \
        "LOG_20261124-4242_sweep_N2/1_1_LOG_all_reduce_env1_args1_job4242_iter1.txt"
    r = cli("import", tmp_path, "-o", tmp_path / "recipe.nc")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith(f"# wrote 2 result sets to {tmp_path / 'recipe.nc'}")


def test_directory_without_recipe_logs(tmp_path, cli):
    (tmp_path / "notes.txt").write_text("nothing\n")
    with pytest.raises(ConfigError, match=r"no NCCL microbenchmark recipe logs"):
        log_files(tmp_path)
    r = cli("import", tmp_path)
    assert r.returncode == 2 and r.stderr == (
        f"ccbench: error: {tmp_path}: expected NCCL Inspector files (*.log, *.jsonl) or NCCL "
        "microbenchmark recipe logs (N_M_LOG_*_iterK.txt) in the folder\n")


def test_recipe_labels_name_the_result_sets(tmp_path, cli):
    """The recipe's env/args variants, node counts and iterations tell its
    logs apart: they name the imported result sets and stay as attrs."""
    from ccbench_kit.dataset import open_parts
    from ccbench_kit.importers.recipe_dir import labels
    _recipe_tree(tmp_path)
    n4 = tmp_path / "microbenchmark_nccl_h200_root_4242" / "LOG_20261125-4250_sweep_N4"
    n4.mkdir()
    for name in ("1_1_LOG_all_reduce_env1_args1_job4250_iter1.txt",
                 "1_1_LOG_all_reduce_env1_args1_job4250_iter2.txt",
                 "1_5_LOG_all_reduce_env2_args3_job4250_iter1.txt"):
        shutil.copy(DATA / "all_reduce_h200x2.txt", n4 / name)
    out = tmp_path / "recipe.nc"
    r = cli("import", tmp_path, "-o", out)
    assert r.returncode == 0, r.stderr
    parts = open_parts(out)
    assert sorted(parts) == ["all_gather-N2-env1-args1", "all_reduce-N2-env1-args1",
                             "all_reduce-N4-env1-args1", "all_reduce-N4-env1-args1-iter2",
                             "all_reduce-N4-env2-args3"]
    a = parts["all_reduce-N4-env2-args3"].attrs
    assert {k: a[k] for k in ("recipe_nnodes", "recipe_env", "recipe_args", "recipe_iter",
                              "recipe_job", "collective")} == {
        "recipe_nnodes": "4", "recipe_env": "2", "recipe_args": "3", "recipe_iter": "1",
        "recipe_job": "4250", "collective": "all_reduce"}
    assert a["recipe_log"] == ("microbenchmark_nccl_h200_root_4242/LOG_20261125-4250_sweep_N4/"
                               "1_5_LOG_all_reduce_env2_args3_job4250_iter1.txt")
    assert [ln.split(":")[0] for ln in r.stdout.splitlines() if ln.startswith("# all_")] == [
        "# all_reduce-N2-env1-args1", "# all_gather-N2-env1-args1",
        "# all_reduce-N4-env1-args1", "# all_reduce-N4-env1-args1-iter2",
        "# all_reduce-N4-env2-args3"]
    # a log outside a sweep folder has no node count; a name of another shape
    # keeps its file name
    assert labels("1_1_LOG_sendrecv_env2_args1_job7_iter1")["name"] == "sendrecv-env2-args1"
    assert labels("N8/1_1_LOG_odd_iter1") == {"name": "1_1_LOG_odd_iter1"}
