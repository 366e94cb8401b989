"""``ccb.run``'s seconds keywords from Python (issue 28, found by
bench/fuzz_surfaces.py): a string, a bool or NaN is one ConfigError naming
the flag, never a TypeError from comparing it with 0; nothing starts."""
import os

import pytest

import ccbench_kit as ccb
from ccbench_kit.api import make_config
from ccbench_kit.errors import ConfigError


@pytest.mark.parametrize("key, flag", [("checkpoint_every", "--checkpoint-every"),
                                       ("timeout", "--timeout")])
@pytest.mark.parametrize("value", ["0.0", "5", True, float("nan"), -1, [1], b"1"])
def test_seconds_that_are_no_number_are_one_line(tmp_path, key, flag, value):
    with pytest.raises(ConfigError) as e:
        ccb.run("all_reduce", 2, [8], out=str(tmp_path / "r.nc"), **{key: value})
    assert str(e.value).startswith(f"{flag}: must be a") and repr(value) in str(e.value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("key, value", [("checkpoint_every", 0), ("checkpoint_every", 2.5),
                                        ("timeout", 3), ("timeout", 0.5)])
def test_numbers_still_configure_the_run(key, value):
    cfg = make_config("all_reduce", 2, [8], **{key: value})
    got = cfg.output.checkpoint_every if key == "checkpoint_every" else cfg.launch.timeout
    assert got == float(value)


@pytest.mark.parametrize("action", [["add", "x.nc"], ["list"], ["check"], ["rebuild"]])
@pytest.mark.parametrize("where", ["", "  "])
def test_an_empty_history_path_is_refused_not_the_working_directory(tmp_path, monkeypatch,
                                                                   capsys, action, where):
    from ccbench_kit.cli import main
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.nc").write_bytes(b"")
    rc = main(["history", action[0], "--history", where, *action[1:]])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("ccbench: error: --history: an empty path"), err
    assert sorted(os.listdir(tmp_path)) == ["x.nc"]


@pytest.mark.parametrize("root", ["0", True, 1.0, None])
def test_a_root_that_is_no_rank_number_is_one_line(root):
    with pytest.raises(ConfigError) as e:
        make_config("broadcast", 2, [8], root=root)
    assert str(e.value).startswith(f"--root: root {root!r} is not a rank of 0..1")
