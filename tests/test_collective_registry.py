"""One place for each collective's facts: ``collectives.def`` (one
``CCB_COLL(ID, name, NCCL)`` line each) is the source that C and Python both
read -- ext/registry.c, the CCBN_* enum of ext/nccl_api.h and the names of
ext/nccl_loop.c include it as an X-macro, ext/_nccl.pyx asks the loop for
the names, the Python registry parses it.  Every reader must give the same
names, ids and order; the theory's cost models and the spellings name
registered collectives.

The C files are parsed as text, so a hard-coded list is found even where the
NCCL extension cannot be used (no CUDA here); the built extensions are asked
too."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

from ccbench_kit import _nccl, collectives
from ccbench_kit.backends import nccl
from ccbench_kit.collectives import registry
from ccbench_kit.api import make_config
from ccbench_kit.errors import ConfigError
from ccbench_kit.theory import models

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXT = ROOT / "ext"
NAMES = list(collectives.NAMES)


def def_rows():
    """(ID, name, NCCL case) of collectives.def's lines, in order, read here
    by a pattern of the test's own (not the kit's parser)."""
    text = registry.DEF_FILE.read_text()
    return re.findall(r"^CCB_COLL\((\w+), (\w+), (\w+)\)$", text, re.M)


def test_the_registry_is_the_def_file_in_order():
    rows = def_rows()
    assert [name for _, name, _ in rows] == NAMES
    assert NAMES[:3] == ["all_reduce", "all_gather", "reduce_scatter"]
    assert [ident for ident, _, _ in rows] == [n.upper() for n in NAMES]
    # one module per line, and no module without a line
    modules = sorted(p.stem for p in registry.DEF_FILE.parent.glob("*.py")
                     if p.stem not in ("__init__", "base", "registry"))
    assert modules == sorted(NAMES)


@pytest.mark.parametrize("path", ["registry.c", "nccl_api.h", "nccl_loop.c"])
def test_every_c_reader_includes_the_def_file_and_lists_nothing_itself(path):
    text = (EXT / path).read_text()
    assert '#include "collectives.def"' in text
    for name in NAMES:  # no name written as a string or a table symbol
        assert f'"{name}"' not in text, f"{path} spells {name}"
        assert f"ccb_{name}_algorithms" not in text, f"{path} names ccb_{name}_algorithms"
    assert "CCBN_ALL_REDUCE =" not in text  # no enum value written out


def test_the_built_extensions_give_the_same_names_and_ids():
    # ids: the engine's collective i and the NCCL loop's kind i are NAMES[i]
    # the engine cimports mpi4py.MPI: imported here it would start MPI in the
    # pytest process (a singleton) and every later `ccbench run` would see
    # itself inside that job; so it is asked in a process of its own
    engine = subprocess.run([sys.executable, "-c", "import json; from ccbench_kit import _engine; "
                             "print(json.dumps(list(_engine.collectives())))"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(engine.stdout) == NAMES
    assert list(_nccl.KINDS) == NAMES
    assert "KINDS = (" not in (EXT / "_nccl.pyx").read_text()  # not written out in Cython


def test_a_def_line_that_is_not_one_is_named():
    assert registry.read_def("/* c */\nCCB_COLL(X_Y, x_y, NONE)\n") == [("X_Y", "x_y", None)]
    with pytest.raises(ValueError, match=r"collectives.def:2: not CCB_COLL"):
        registry.read_def("\nCCB_COLL(X, y, NATIVE)")
    with pytest.raises(ValueError, match=r"collectives.def:1: not CCB_COLL"):
        registry.read_def("CCB_COLL(X, x, MAYBE)")


def test_nccl_capabilities_come_from_the_registry():
    for coll in collectives.all_collectives():
        assert coll.nccl in ("native", "native_since_2_28", "p2p", None), coll.name
        assert coll.nccl == dict((n, registry.NCCL_CASES[c]) for _, n, c in def_rows())[coll.name]
        algs = nccl.nccl_algorithms(coll.name)
        assert algs[0] == "nccl", coll.name
        assert ("nccl:p2p" in algs) == (coll.nccl == "native_since_2_28"), coll.name
        assert ("nccl:ring" in algs) == (coll.nccl == "native"), coll.name
        assert (coll.name in nccl.NO_IN_PLACE) == (not coll.nccl_in_place)


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


def test_a_collective_without_an_nccl_form_is_refused_in_one_line(monkeypatch):
    # opt-in: a line with NONE (what a new collective gets until the NCCL
    # loop has a case for it) -- here all_reduce's, as a stand-in
    monkeypatch.setitem(registry.NCCL, "all_reduce", None)
    assert collectives.get("all_reduce").nccl is None
    assert nccl.nccl_algorithms("all_reduce") == []
    with pytest.raises(ConfigError) as e:
        make_config("all_reduce", 2, [8, 64], backend="nccl")
    assert str(e.value) == "--backend: all_reduce does not run on backend nccl; choose " \
                           "another backend"


def test_the_importers_spellings_are_the_registrys_aliases():
    from ccbench_kit.formats.common.build import find_collective
    from ccbench_kit.formats.nccom import common as nccom
    # every word nccom-test takes is a registered name or alias
    assert {w: find_collective(w).name for w in nccom.OPS}["redsct"] == "reduce_scatter"
    assert all(collectives.get(w) for w in nccom.OPS)
    for spelling, name in (("a2av", "alltoallv"), ("rs", "reduce_scatter"),
                           ("send_recv", "sendrecv"), ("all_reduce_perf", "all_reduce"),
                           ("AllGather", "all_gather")):
        assert find_collective(spelling).name == name
    assert find_collective("allreducex") is None


def test_the_worked_example_collective_takes_three_files(tmp_path):
    # tests/example_collective/: the module, the C table and one .def line
    # (docs/architecture.md, "A new collective").  Built here with the real
    # compiler against the real ext/ sources, with the line appended.
    import shutil
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from example_collective import alltoall_pairs as example
    finally:
        sys.path.remove(str(ROOT / "tests"))
    text = registry.DEF_FILE.read_text() + example.DEF_LINE + "\n"
    (tmp_path / "collectives.def").write_text(text)
    rows = registry.read_def(text)
    assert [n for _, n, _ in rows] == NAMES + ["alltoall_pairs"]
    assert rows[-1] == ("ALLTOALL_PAIRS", "alltoall_pairs", None)
    assert example.COLLECTIVE.name == "alltoall_pairs"
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        pytest.skip("no mpicc")
    inc = ["-I", str(tmp_path), "-I", str(EXT)]  # the new .def first
    # the engine's registry lists it, and its table compiles against coll.h
    for src in (EXT / "registry.c", ROOT / "tests/example_collective/coll_alltoall_pairs.c"):
        subprocess.run([mpicc, "-std=c11", "-Wall", "-Werror", "-c", *inc, str(src), "-o",
                        str(tmp_path / (src.stem + ".o"))], check=True, capture_output=True)
    nm = lambda o: subprocess.run(["nm", str(tmp_path / o)], capture_output=True,  # noqa: E731
                                  text=True, check=True).stdout
    assert re.search(r"U ccb_alltoall_pairs_algorithms$", nm("registry.o"), re.M)
    assert re.search(r"[DR] ccb_alltoall_pairs_algorithms$", nm("coll_alltoall_pairs.o"), re.M)
    # the NCCL loop gets an id after the others, and compiles without a case for it
    probe = tmp_path / "ids.c"
    probe.write_text('#include "nccl_api.h"\n'
                     f"_Static_assert(CCBN_ALLTOALL_PAIRS == {len(NAMES)}, \"id\");\n"
                     f"_Static_assert(CCBN_NKINDS == {len(NAMES) + 1}, \"count\");\n")
    for src in (probe, EXT / "nccl_loop.c"):
        subprocess.run(["cc", "-std=c11", "-Wall", "-fsyntax-only", *inc, str(src)],
                       check=True, capture_output=True)
