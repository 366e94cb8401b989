"""The Python API with wrong types (issue 37): one ConfigError naming the
keyword, checked where the run's keywords are (run_fields, config), before
anything starts; a failed run leaves no empty temporary file; a missing
NCCL is the machine's setup (exit 2), not a failed run."""
import glob
import os
import tempfile

import pytest

import ccbench_kit as ccb
from ccbench_kit.errors import ConfigError


@pytest.mark.parametrize("call, message", [
    (lambda d: ccb.run("all_reduce", True, [8]),
     'nranks: True is a bool, not a whole number of ranks (an int: ccb.run("all_reduce", 2))'),
    (lambda d: ccb.run("all_reduce", "2"),
     "nranks: '2' is a str, not a whole number of ranks"),
    (lambda d: ccb.run("all_reduce", 2.0, [8]), "nranks: 2.0 is a float, not a whole number"),
    (lambda d: ccb.run("all_reduce", 0, [8]), "-r/--nworkers: need at least 1 rank, got 0"),
    (lambda d: ccb.run("all_reduce", 2, [8], env={"A": 1}),
     "env: A=1 is an int, not text; give A='1'"),
    (lambda d: ccb.run("all_reduce", 2, [8], env="A=1"),
     "env: 'A=1' is a str, not a dict of variables"),
    (lambda d: ccb.run("all_reduce", 2, [8], env={"A=B": "1"}), "env: 'A=B' is not a variable name"),
    (lambda d: ccb.run("all_reduce", 2, [8], out=123), "--out: 123 is an int, not a path"),
    (lambda d: ccb.run_many("all_reduce", 2, [8], out=123),
     "--out: 123 is not a path (text or os.PathLike); name a file"),
    (lambda d: ccb.run_many("all_reduce", 2, [8], env={"A": 1.5}), "env: A=1.5 is a float"),
])
def test_wrong_types_are_one_config_error_naming_the_keyword(tmp_path, monkeypatch, call,
                                                             message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as e:
        call(tmp_path)
    assert str(e.value).startswith(message), str(e.value)
    assert not any(tmp_path.iterdir())          # nothing written, nothing started


def test_a_path_object_is_still_a_path(tmp_path):
    from ccbench_kit.api import make_config
    assert make_config("all_reduce", 2, [8], out=tmp_path / "r.nc").output.out == \
        str(tmp_path / "r.nc")


def test_a_failed_run_leaves_no_empty_temporary_file(monkeypatch, tmp_path):
    """`ccb.run` without `out` writes to a temporary file; a run that fails
    before its first size (here: Open MPI is told to use a transport that
    does not exist, so MPI_Init fails in every rank) must not leave it
    behind, empty."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(ccb.RunError):
        ccb.run("all_reduce", 2, [8], env={"OMPI_MCA_pml": "no_such_pml"})
    assert glob.glob(os.path.join(tmp_path, "ccbench-*.nc")) == []
