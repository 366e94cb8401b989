"""One RunConfig, built once from `ccbench_kit.run`'s keywords, frozen, in
typed sections; fault injection is nowhere in the production signatures."""
import dataclasses
import inspect
import pathlib

import pytest

from ccbench_kit import api, config
from ccbench_kit.config import RunConfig

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_built_once_frozen_and_shipped_as_it_is():
    cfg = api.make_config("alltoall", 3, sizes=[4, 12, 1000], algorithms="all", check=True,
                          placement="out_of_place", checkpoint_every=0, timeout=7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.sweep.iters = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.output = None
    # 4 B is less than one fp32 element per rank: dropped, and said so
    assert cfg.sweep.sizes == (12, 1000) and cfg.sweep.skipped_sizes == (4,)
    from ccbench_kit.backends.mpi import engine_algorithms
    assert cfg.sweep.algorithms == tuple(engine_algorithms("alltoall"))  # "all", expanded
    assert (cfg.sweep.op, cfg.sweep.root) == ("none", -1)  # alltoall: no op, no root
    assert cfg.inputs.check == "random" and 0 <= cfg.inputs.seed < 2**31
    assert (cfg.output.checkpoint_every, cfg.launch.timeout) == (0.0, 7.0)
    assert cfg.backend == config.BackendConfig("mpi", {"segment_bytes": 0})
    again = RunConfig.from_json(cfg.to_json())
    assert again == cfg and again.digest() == cfg.digest()
    moved = cfg.replace(out="x.nc", seed=3)
    assert (moved.output.out, moved.inputs.seed, moved.sweep) == ("x.nc", 3, cfg.sweep)
    assert cfg.output.out == ""


def test_make_config_takes_the_keywords_run_takes_and_no_others():
    assert len(inspect.signature(api.make_config).parameters) < 15
    with pytest.raises(TypeError, match="unexpected keyword argument 'iterations'"):
        api.make_config("all_reduce", 2, sizes=[8], iterations=3)
    cfg = api.make_config("all_reduce", 2, sizes=[8])
    with pytest.raises(TypeError, match=r"run\(config\) takes no 'iters'"):
        api.run(cfg, iters=3)
    assert set(config.KEYWORDS["backend"]) == {"backend", "timing", "backend_options"}


def test_fault_injection_is_not_in_production_signatures():
    generated = {"_engine.c", "_nccl.c"}  # Cython's output
    files = [*ROOT.glob("ccbench_kit/**/*.py"),
             *(p for p in ROOT.glob("ext/*") if p.suffix in (".c", ".h", ".pyx")
               and p.name not in generated)]
    found = {str(p.relative_to(ROOT)) for p in files
             if "hang_at" in p.read_text() or "CCB_FAULT_INJECT" in p.read_text()}
    assert found == {"ccbench_kit/launch/faults.py"}  # the test-support module alone
