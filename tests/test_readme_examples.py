"""The README's Python examples run as written (issue 37: its own
``run_many("all_reduce", dtype="all")`` was reported to fail): the
"Look at the data" block on a real results file, and every inline
``ccb.run``/``ccb.run_many`` example built into its configurations and
checked as a launch would check them (no rank starts: the suite stays
fast)."""
import re
from pathlib import Path

import ccbench_kit as ccb
from ccbench_kit import api
from ccbench_kit.preflight import check_run

README = (Path(__file__).parent.parent / "README.md").read_text()
RESULTS = Path(__file__).parent / "data" / "history" / "base-allreduce-3r.nc"


def test_the_look_at_the_data_block_runs():
    blocks = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if "ccb.load(" in b]
    assert blocks
    for block in blocks:
        namespace = {}
        exec(compile(block.replace("results/ar.nc", str(RESULTS)), "README.md", "exec"),
             namespace)
        assert namespace["ds"].ccb.attrs["nranks"] == 3


def _configs(call):
    """The configurations an inline example's call would run."""
    name, args = re.fullmatch(r"ccb\.(run_many|run)\((.*)\)", call).groups()
    positional, keywords = eval(f"(lambda *a, **k: (a, k))({args})", {"ccb": ccb})
    for launch_only in ("cycles", "until_stable", "stable_cap", "client"):
        keywords.pop(launch_only, None)
    nranks = keywords.pop("nranks", positional[1] if len(positional) > 1 else 2)
    return api.make_configs(positional[0], nranks, keywords.pop("sizes", None), **keywords)


def test_every_inline_run_example_makes_valid_configurations():
    shown_right = "\n".join(line for line in README.splitlines()
                             if "of the wrong type" not in line)  # the fault table's bad calls
    calls = set(re.findall(r"`(ccb\.run(?:_many)?\([^`]*\))`", shown_right))
    assert 'ccb.run_many("all_reduce", dtype="all")' in calls
    for call in sorted(calls):
        cfgs = _configs(call)
        assert cfgs, call
        for cfg in cfgs:
            check_run(cfg, ranks_here=0)
    dtypes = {c.sweep.dtype for c in _configs('ccb.run_many("all_reduce", dtype="all")')}
    assert {"fp32", "bf16", "int8", "fp64"} <= dtypes
