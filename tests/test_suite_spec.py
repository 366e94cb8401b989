"""Suite files: what a matrix expands to, and one clear line for each bad file."""
import textwrap

import pytest

from ccbench_kit.errors import ConfigError
from ccbench_kit.suite import load_suite


def _write(tmp_path, text, name="suite.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_matrix_expands_in_file_order(tmp_path):
    path = _write(tmp_path, """\
        name: nightly
        report: out/nightly.html
        run: {minbytes: 8, maxbytes: 1M, stepfactor: 4, iters: 5, check: random}
        matrix:
          collectives: [allr, all_gather]
          algorithms: {allr: [ring, mpi], all_gather: [mpi]}
          env:
            env1: {NCCL_ALGO: Ring}
            env2: {OMPI_MCA_btl: "self,tcp", NCCL_PROTO: 0}
          nranks: [4, 8]
          split_mask: [0x0, "7"]
        """)
    s = load_suite(path)
    assert s.name == "nightly" and s.launcher == "mpirun"
    assert s.report == str(tmp_path / "out" / "nightly.html")   # relative to the file
    assert s.out == str(tmp_path / "results" / "nightly.nc")
    assert s.workdir == str(tmp_path / "results" / "nightly.suite")
    keys = [c.key for c in s.combinations]
    assert keys[:4] == ["all_reduce/env1/r4/mask0x0", "all_reduce/env1/r4/mask0x7",
                        "all_reduce/env1/r8/mask0x0", "all_reduce/env1/r8/mask0x7"]
    assert len(keys) == 16 and keys[-1] == "all_gather/env2/r8/mask0x7"
    c = s.combinations[1]
    assert (c.collective, c.nranks, c.env) == ("all_reduce", 4, {"NCCL_ALGO": "Ring"})
    assert c.options == {"minbytes": 8, "maxbytes": "1M", "stepfactor": 4, "iters": 5,
                         "check": "random", "algorithms": ["ring", "mpi"], "split": "AND 0x7"}
    assert "split" not in s.combinations[0].options  # mask 0: one group of every rank
    assert s.combinations[-1].options["algorithms"] == ["mpi"]
    assert s.combinations[-1].env == {"OMPI_MCA_btl": "self,tcp", "NCCL_PROTO": "0"}
    assert c.axes == {"collective": "all_reduce", "env": "env1", "nnodes": None, "nranks": 4,
                      "split": "AND 0x7"}
    assert c.flat == "all_reduce--env1--r4--mask0x7"


def test_node_counts_with_ranks_per_node(tmp_path):
    s = load_suite(_write(tmp_path, """\
        launcher: slurm
        ranks_per_node: 8
        slurm: {partition: gpu, setup_script: setup.sh}
        matrix: {collectives: [all_reduce], nnodes: [1, 2, 4]}
        """))
    assert [(c.key, c.nnodes, c.nranks) for c in s.combinations] == [
        ("all_reduce/n1", 1, 8), ("all_reduce/n2", 2, 16), ("all_reduce/n4", 4, 32)]
    assert s.slurm == {"partition": "gpu", "setup_script": str(tmp_path / "setup.sh")}
    assert s.name == "suite"


@pytest.mark.parametrize("text, message", [
    ("matrix: {collectives: [all_reduce]}\nfoo: 1\n",
     "top level: unknown key 'foo'; use name, workdir, out, report, launcher, run, matrix, "
     "hosts, hosts_file, ranks_per_node, slurm, stats, title"),
    ("name: x\n", "matrix: missing: the suite needs at least matrix.collectives"),
    ("matrix: {nranks: [2]}\n", "matrix.collectives: missing: name at least one collective"),
    ("matrix: {collectives: [all_reduce], nranks: [0, 2]}\n",
     "matrix.nranks: expected positive integers, got [0, 2]"),
    ("matrix: {collectives: [all_reduce], nranks: []}\n", "matrix.nranks: empty list"),
    ("matrix: {collectives: [all_reduce], env: {a: {BAD-NAME: 1}}}\n",
     "matrix.env.a: 'BAD-NAME' is not an environment variable name"),
    ("matrix: {collectives: [all_reduce], env: [a, b]}\n",
     "matrix.env: expected a mapping, got list"),
    ("matrix: {collectives: [all_reduce], split_mask: [0xZZ]}\n",
     "matrix.split_mask: '0xZZ' is not a hexadecimal mask"),
    ("matrix: {collectives: [all_reduce], split_mask: [1], split: ['MOD 2']}\n",
     "matrix: give split_mask or split, not both"),
    ("matrix: {collectives: [all_reduce], nnodes: [2]}\n",
     "matrix.nnodes: needs matrix.nranks or a top-level ranks_per_node"),
    ("matrix: {collectives: [all_reduce], env: {a b: {}, a_b: {}}}\n",
     "matrix: two combinations are both named 'all_reduce/a_b'; name the variants so that "
     "they differ"),
    ("matrix: {collectives: [all_reduce], algorithms: {all_gather: [mpi]}}\n",
     "matrix.algorithms: 'all_gather' is not in matrix.collectives"),
    ("run: {iterations: 5}\nmatrix: {collectives: [all_reduce]}\n",
     "run: unknown key 'iterations'; use "),
    ("launcher: pbs\nmatrix: {collectives: [all_reduce]}\n",
     "launcher: 'pbs': use one of mpirun, slurm"),
    ("name: a/b\nmatrix: {collectives: [all_reduce]}\n", "name: 'a/b': use letters, digits, . _ -"),
    ("- just\n- a list\n", "top level: expected a mapping with at least `matrix`"),
])
def test_bad_suite_files(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}: {message}")


def test_unknown_collective_names_the_file(tmp_path):
    path = _write(tmp_path, "matrix: {collectives: [all_reduce, allfoo]}\n")
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}: matrix.collectives: unknown collective 'allfoo'")


def test_yaml_is_loaded_safely(tmp_path):
    marker = tmp_path / "pwned"
    path = _write(tmp_path, f"matrix: !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}: not valid YAML: line 1: could not determine a "
                                   "constructor for the tag")
    assert not marker.exists()
    path = _write(tmp_path, "matrix: {collectives: [all_reduce]\n", "broken.yaml")
    with pytest.raises(ConfigError, match=r"broken.yaml: not valid YAML: line 2: "):
        load_suite(path)


def test_cli_bad_suite_is_one_line(cli, tmp_path):
    path = _write(tmp_path, "matrix: {collectives: [all_reduce], nranks: [0]}\n")
    r = cli("suite", path, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"ccbench: error: {path}: matrix.nranks: expected positive "
                                "integers, got [0]")
    r = cli("suite", "status", path, "extra", timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == (
        "ccbench: error: FILE: give one suite file: ccbench suite [status|collect] FILE.yaml")


def test_no_algorithms_means_the_suite_backends_own(tmp_path):
    # a suite of the nccl backend that names no algorithm runs NCCL's choice
    # (it expanded to mpi, which config refuses for nccl: a suite that never ran)
    path = _write(tmp_path, """\
        name: gpus
        run: {backend: nccl, maxbytes: 1M}
        matrix:
          collectives: [all_reduce, broadcast]
          algorithms: {broadcast: [nccl:ring]}
        """)
    s = load_suite(path)
    assert [c.options["algorithms"] for c in s.combinations] == [["nccl"], ["nccl:ring"]]
    plain = load_suite(_write(tmp_path, """\
        name: cpus
        matrix: {collectives: [all_gather]}
        """, "cpus.yaml"))
    assert plain.combinations[0].options["algorithms"] == ["mpi"]
    with pytest.raises(ConfigError, match=r"run\.backend.*unknown backend 'gloo3'"):
        load_suite(_write(tmp_path, """\
            name: bad
            run: {backend: gloo3}
            matrix: {collectives: [all_gather]}
            """, "bad.yaml"))
