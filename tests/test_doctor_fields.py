"""The doctor's options are declared once (`ccbench_kit.health.fields`):
``ccbench doctor``'s flags, `make_plan`'s keywords, defaults and checks, and
the command line `reproduce` writes all come from that table, and an option
added to it reaches every one of them with no other edit."""
import argparse
import shlex
from dataclasses import replace

import pytest

from ccbench_kit import run_fields
from ccbench_kit.cli import build_parser
from ccbench_kit.errors import ConfigError
from ccbench_kit.health import api, fields
from ccbench_kit.health.fields import FIELDS, Option


def _doctor_parser():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["doctor"]


def _parse(command):
    """The parsed flags of a ``ccbench doctor ...`` command line."""
    words = shlex.split(command)
    assert words[:2] == ["ccbench", "doctor"]
    return _doctor_parser().parse_args(words[2:])


def test_every_option_is_a_flag_of_ccbench_doctor_with_its_default_and_help():
    actions = {a.dest: a for a in _doctor_parser()._actions}
    text = _doctor_parser().format_help()
    for f in FIELDS:
        a = actions[f.name]
        assert tuple(a.option_strings[:len(f.flags)]) == f.flags, f.name
        assert f.flags[0] in text, f.name
        if f.group != run_fields.HOSTS:  # the launch flags' own default and help
            assert (a.default, a.help) == (f.default, f.help), f.name
    assert "--bw-size SIZE" in text and "pair bandwidth message (default 2M)" in text
    assert api.MEASUREMENT == {"ranks_per_node": 2, "repeats": 5, "bw_bytes": "2M",
                               "local_bytes": "1M", "lat_iters": 50, "bw_iters": 3}


def test_make_plan_checks_each_option_naming_its_flag():
    plan = api.make_plan(3)
    assert {k: plan[k] for k in api.MEASUREMENT} == {
        "ranks_per_node": 2, "repeats": 5, "bw_bytes": 2 << 20, "local_bytes": 1 << 20,
        "lat_iters": 50, "bw_iters": 3}
    with pytest.raises(ConfigError, match=r"^--repeats: must be an integer >= 1, got 0$"):
        api.make_plan(3, repeats=0)
    with pytest.raises(ConfigError,
                       match=r"^--bw-size: must be a positive multiple of 8 bytes, got 12$"):
        api.make_plan(3, bw_bytes=12)
    with pytest.raises(ConfigError, match=r"^--ranks-per-node: must be an integer >= 1"):
        api.make_plan(3, ranks_per_node=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bw_size'"):
        api.make_plan(3, bw_size="1M")


# plans as `doctor` makes them: odd and even node counts, every measured
# option away from its default, each backend, bisection both ways, --per-gpu
PLANS = [
    (["a", "b", "c"], dict(repeats=3, bw_bytes="64K", local_bytes=24, lat_iters=7,
                           bw_iters=1, ranks_per_node=3, backend="mpi", bisect=False)),
    (["n1", "n2", "n3", "n4", "n5"], dict(backend="tcp", bisect=True)),
    (["x", "y"], dict(backend="nccl", ranks_per_node=1, repeats=9)),
    (["h gpu0", "h gpu1", "h gpu2"], dict(per_gpu=True, ranks_per_node=1, backend="nccl",
                                          repeats=2, bw_bytes="8M")),
]


@pytest.mark.parametrize("names, given", PLANS)
def test_reproduce_round_trips(names, given):
    plan = api.make_plan(len(names), **given)
    command = api.reproduce(names, plan)
    args = _parse(command)
    assert api.make_plan(len(names), **fields.plan_keywords(args)) == plan
    if given.get("per_gpu"):  # this host's GPUs: no hosts, its settings its own
        assert "--hosts" not in command and "--ranks-per-node" not in command
    else:
        assert args.hosts == names
    assert command.startswith("ccbench doctor ")


def test_reproduce_writes_what_differs_from_nothing():
    plan = api.make_plan(5, backend="mpi", bisect=True)
    assert api.reproduce(["n1", "n2", "n3", "n4", "n5"], plan) == (
        "ccbench doctor --hosts n1 n2 n3 n4 n5 --ranks-per-node 2 --repeats 5 "
        "--bw-size 2097152 --local-size 1048576 --lat-iters 50 --bw-iters 3 --bisect "
        "--backend mpi")


def test_a_new_option_is_one_entry(monkeypatch):
    """An option added to the table (and nothing else) is a flag of
    ``ccbench doctor`` with its help, a checked keyword of `make_plan` and
    `doctor` with its default, a key of the plan the ranks read, and a word
    of `reproduce`'s command line that parses back."""
    spin = Option("spin_us", fields.PLAN, ("--spin-us",),
                  "busy-wait N µs between pair tests (default %(default)s)",
                  default=0, type=int, check=run_fields.integer_at_least(0),
                  group=fields.MEASURE_GROUP, cli={"metavar": "N"})
    monkeypatch.setattr(fields, "FIELDS", (*FIELDS, spin))
    assert "--spin-us N" in _doctor_parser().format_help()
    assert api.make_plan(3)["spin_us"] == 0
    plan = api.make_plan(3, spin_us=40, backend="tcp")
    command = api.reproduce(["a", "b", "c"], plan)
    assert "--spin-us 40" in command
    assert api.make_plan(3, **fields.plan_keywords(_parse(command))) == plan
    with pytest.raises(ConfigError, match=r"^--spin-us: must be an integer >= 0, got -1$"):
        api.make_plan(3, spin_us=-1)
    # `ccbench doctor`'s keywords for `doctor` carry it too
    assert fields.keywords(_parse("ccbench doctor --spin-us 7"), fields.PLAN)["spin_us"] == 7


def test_the_option_flags_of_per_gpu_and_local_refusals_come_from_the_table(monkeypatch):
    moved = replace(fields.get("topology"), flags=("--topology-file",))
    monkeypatch.setattr(fields, "FIELDS", tuple(moved if f.name == "topology" else f
                                               for f in FIELDS))
    with pytest.raises(ConfigError, match=r"^--topology-file: --per-gpu checks this host's"):
        api.per_gpu_refuse(topology="t.json")
