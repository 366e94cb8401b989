"""One place for each collective's facts: the Python registry
(`ccbench_kit.collectives`) is the source; the C engine's registry, the NCCL
side (the C enum, its names and the Cython table) and the theory's cost
models must agree with it on names, ids and order.

The C and Cython files are parsed as text, so that a mismatch is found even
where the NCCL extension cannot be loaded (no CUDA here); the built engine
is asked too."""
import pathlib
import re

from ccbench_kit import collectives
from ccbench_kit.backends import nccl
from ccbench_kit.theory import models

EXT = pathlib.Path(__file__).resolve().parent.parent / "ext"
NAMES = list(collectives.NAMES)


def c_registry():
    """Collective names in ext/registry.c's table, in order."""
    text = (EXT / "registry.c").read_text()
    table = text[text.index("collectives[] = {"):]
    table = table[:table.index("};")]
    return re.findall(r'\{"(\w+)", ccb_(\w+)_algorithms\}', table)


def nccl_enum():
    """(name, id) of the CCBN_* kinds in ext/nccl_api.h."""
    text = (EXT / "nccl_api.h").read_text()
    body = re.search(r"enum \{([^}]*CCBN_NKINDS[^}]*)\}", text).group(1)
    names = re.findall(r"CCBN_(\w+)", body)
    assert names[-1] == "NKINDS" and "CCBN_ALL_REDUCE = 0" in body
    return [(n.lower(), i) for i, n in enumerate(names[:-1])]


def nccl_loop_names():
    text = (EXT / "nccl_loop.c").read_text()
    body = re.search(r"names\[CCBN_NKINDS\] = \{([^}]*)\}", text).group(1)
    return re.findall(r'"(\w+)"', body)


def nccl_pyx_kinds():
    text = (EXT / "_nccl.pyx").read_text()
    body = re.search(r"^KINDS = \(([^)]*)\)", text, re.M).group(1)
    return re.findall(r'"(\w+)"', body)


def test_the_c_engine_lists_the_python_registry_in_order():
    pairs = c_registry()
    assert [name for name, _ in pairs] == NAMES
    assert all(name == table for name, table in pairs)  # {"x", ccb_x_algorithms}
    from ccbench_kit import _engine
    assert _engine.collectives() == NAMES  # and the built engine says the same


def test_the_nccl_side_agrees_with_itself_and_the_registry():
    kinds = nccl_enum()
    names = [n for n, _ in kinds]
    # the C enum's ids, the C names table and the Cython KINDS: one order
    assert nccl_loop_names() == names
    assert nccl_pyx_kinds() == names
    assert [i for _, i in kinds] == list(range(len(NAMES)))
    assert sorted(names) == sorted(NAMES)


def test_nccl_capabilities_come_from_the_registry():
    for coll in collectives.all_collectives():
        assert coll.nccl in ("native", "native_since_2_28", "p2p"), coll.name
        algs = nccl.nccl_algorithms(coll.name)
        assert algs[0] == "nccl", coll.name
        assert ("nccl:p2p" in algs) == (coll.nccl == "native_since_2_28"), coll.name
        assert ("nccl:ring" in algs) == (coll.nccl == "native"), coll.name
        assert (coll.name in nccl.NO_IN_PLACE) == (not coll.nccl_in_place)
    assert set(nccl.NATIVE) | set(nccl.NATIVE_SINCE_2_28) | set(nccl.P2P_ONLY) == set(NAMES)


def test_cost_models_and_spellings_name_registered_collectives():
    assert set(models.MODELS) <= set(NAMES)
    spellings = {}
    for coll in collectives.all_collectives():
        for s in (coll.name, *coll.aliases):
            key = s.replace("-", "_")
            assert spellings.setdefault(key, coll.name) == coll.name, f"{s} names two"
            assert collectives.get(s).name == coll.name
    # the theory asks the registry for names: an alias resolves there
    assert models.canonical_collective("allr") == "all_reduce"
