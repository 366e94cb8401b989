"""The run's keywords are declared once (`ccbench_kit.run_fields`): the CLI's
flags, `make_config`'s keywords and defaults, the suite file's ``run:`` keys
and the Run panel's controls all come from that table, and a field added to
it reaches every one of them with no other edit but its attribute in
`config` (docs/architecture.md, "Adding a sweep-level flag")."""
import argparse
import dataclasses
import inspect
import shlex

import pytest

from ccbench_kit import api, backends, config, run_fields
from ccbench_kit.cli import build_parser
from ccbench_kit.cli import run as cli_run
from ccbench_kit.errors import ConfigError
from ccbench_kit.run_fields import FIELDS, Field
from ccbench_kit.suite.spec import parse_suite

# ``ccbench run``'s flags of the command line alone: where the sizes come
# from, how the table and JSON are written, the history; and the Slurm
# flags `cli.cluster` gathers into `run`'s ``slurm`` keyword
CLI_ONLY = {"help", "collective", "nworkers", "sizes", "msglen", "history", "average",
            "show_algorithm", "show_input_output_size", "json_file", "json_format",
            "non_interactive", "slurm_mode", "slurm_job_id", "slurm_setup_script", "slurm_partition",
            "slurm_time", "srun_mpi", "mpi_log_dir", "debug"}


def _run_parser():
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def _backend_dests():
    g = argparse.ArgumentParser(add_help=False)
    for name in backends.names():
        backends.backend_class(name).add_arguments(g)
    return {a.dest for a in g._actions}


def test_every_flag_of_ccbench_run_is_a_field_or_the_command_lines_own():
    actions = {a.dest: a for a in _run_parser()._actions}
    with_flags = [f for f in FIELDS if f.flags]
    assert set(actions) - _backend_dests() - CLI_ONLY == {f.name for f in with_flags}
    for f in with_flags:
        a = actions[f.name]
        assert (tuple(a.option_strings), a.default, a.help) == (f.flags, f.default, f.help), f
    # spellings and defaults nccl-tests and nccom-test users type
    assert actions["iters"].option_strings == ["-n", "--iters"] and actions["iters"].default == 20
    assert actions["warmup"].option_strings == ["-w", "--warmup_iters", "--warmup-iters"]
    assert actions["warmup"].default == 5 and actions["minbytes"].default == "32M"


def test_make_config_takes_each_field_default_from_the_table():
    assert config.KEYWORDS == run_fields.by_section()
    cfg = api.make_config("all_reduce", 2)
    assert (cfg.sweep.iters, cfg.sweep.warmup, cfg.sweep.sizes) == (20, 5, (32 << 20,))
    assert cfg.output.checkpoint_every == run_fields.DEFAULT_CHECKPOINT_EVERY
    # the sections' own defaults are the table's too, where a field is
    # stored as given (algorithms and the root are worked out from others)
    plain = [("sweep", config.SweepConfig, ("warmup", "iters", "agg_iters", "blocking")),
             ("launch", config.LaunchConfig, ("timeout", "skip_oversize")),
             ("output", config.OutputConfig, ("stats", "command"))]
    for section, cls, names in plain:
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        assert {n: defaults[n] for n in names} == {n: run_fields.default(n) for n in names}


def test_the_api_says_the_flag_the_table_names():
    with pytest.raises(ConfigError, match=r"^-n/--iters: must be an integer >= 1, got 0$"):
        api.make_config("all_reduce", 2, iters=0)
    with pytest.raises(ConfigError, match=r"^--timeout: must be a positive number of seconds"):
        api.make_config("all_reduce", 2, timeout=-1)


def test_cycles_and_until_stable_are_keywords_of_run_as_of_the_cli():
    params = inspect.signature(api.run).parameters
    for f in run_fields.in_section(run_fields.REPEAT):
        assert f.name in params and params[f.name].default == f.default, f.name
    assert set(inspect.signature(api.run_many).parameters) >= {"cycles", "until_stable",
                                                              "stable_cap"}


def test_where_the_ranks_run_is_declared_for_run_and_every_launching_command():
    params = inspect.signature(api.run).parameters
    for f in run_fields.in_section(run_fields.PLACE):
        assert f.name in params and params[f.name].default == f.default, f.name
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("run", "doctor"):
        dests = {a.dest: a.option_strings for a in sub.choices[command]._actions}
        assert dests["nnodes"] == ["-N", "--nnodes"] and dests["hosts"] == ["--hosts"]
    start = sub.choices["cluster"]._actions[-1].choices["start"]
    assert {"hosts", "hosts_file", "nnodes", "ranks_per_node"} <= {a.dest for a in start._actions}


def test_run_panel_names_run_keywords():
    from ccbench_kit.widgets.run_panel import PANEL_CHOICES
    assert set(PANEL_CHOICES) - {"nranks"} <= {f.name for f in FIELDS}


def test_a_new_field_reaches_argparse_the_api_and_the_suite(monkeypatch, tmp_path):
    # the worked example of docs/architecture.md: one Field, and its section's
    # dataclass made again from the table (as importing config makes it)
    new = Field("spin_us", "sweep", ("--spin-us",), "busy-wait this long between iterations",
                default=0, type=int, check=run_fields.integer_at_least(0),
                group=run_fields.ITERATIONS)
    monkeypatch.setattr(run_fields, "FIELDS", FIELDS + (new,))
    monkeypatch.setattr(config, "SweepConfig", config.make_section("sweep"))

    args = build_parser().parse_args(["run", "all_reduce", "--spin-us", "7", "-b", "8"])
    assert args.spin_us == 7
    keywords = cli_run._config_keywords(args, ["ccbench", "run"])
    assert keywords["spin_us"] == 7
    assert api.make_config("all_reduce", 2, **keywords).sweep.spin_us == 7
    assert api.make_config("all_reduce", 2, sizes=[8]).sweep.spin_us == 0  # its default
    with pytest.raises(ConfigError, match=r"^--spin-us: must be an integer >= 0, got -1$"):
        api.make_config("all_reduce", 2, spin_us=-1)
    suite = parse_suite({"run": {"spin_us": 3, "sizes": [8]},
                         "matrix": {"collectives": ["all_reduce"]}}, str(tmp_path / "s.yaml"))
    assert suite.combinations[0].options["spin_us"] == 3
    assert "--spin-us" in _run_parser().format_help()


def test_a_field_without_its_attribute_fails_loudly(monkeypatch):
    orphan = Field("orphan", "sweep", ("--orphan",), default=1)
    monkeypatch.setattr(run_fields, "FIELDS", FIELDS + (orphan,))
    with pytest.raises(TypeError, match="SweepConfig has no attribute 'orphan'"):
        api.make_config("all_reduce", 2, sizes=[8])


def test_dtype_all_and_op_all_expand_per_backend_without_running():
    cfgs = api.make_configs("all_reduce", 3, [96], dtype="all")
    assert [c.sweep.dtype for c in cfgs] == list(backends.backend_class("mpi").data_types())
    assert api.part_names(cfgs)[:2] == ["all_reduce.uint8", "all_reduce.int8"]
    nccl = api.make_configs("all_reduce", 3, [96], dtype="all", backend="nccl")
    names = [c.sweep.dtype for c in nccl]
    assert names == list(backends.backend_class("nccl").data_types())
    assert "int16" not in names and "bf16" in names  # NCCL has no 16-bit integers
    cfgs = api.make_configs("all_reduce,all_gather", 3, [96], op="all", seed=5)
    assert api.part_names(cfgs) == ["all_reduce.sum", "all_reduce.prod", "all_reduce.min",
                                    "all_reduce.max", "all_reduce.avg", "all_gather"]
    assert {c.inputs.seed for c in cfgs} == {5}
    with pytest.raises(ConfigError, match=r"^-d/--datatype: unknown data type 'fp33'"):
        api.make_configs("all_reduce", 3, [96], dtype="fp32,fp33")


def test_command_line_keywords_are_the_tables():
    args = build_parser().parse_args(shlex.split("run all_reduce -n 3 -c 1 -z 1"))
    kw = cli_run._config_keywords(args, ["ccbench", "run"])
    assert set(kw) == {f.name for f in FIELDS if f.section in run_fields.SECTIONS} - {"out", "timing"}
    assert (kw["iters"], kw["check"], kw["blocking"]) == (3, "random", 1)


def test_run_points_several_data_types_to_run_many():
    with pytest.raises(ConfigError, match=r"^dtype: 'all' makes one run per dtype: use "
                                          r"ccbench_kit.run_many"):
        api.run("all_reduce", 2, [96], dtype="all")
    with pytest.raises(ConfigError, match=r"^op: 'sum,max' makes one run per op"):
        api.run("all_reduce", 2, [96], op="sum,max")
