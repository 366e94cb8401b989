"""The shape of the code: imports run one way, with no cycle.

Every module of ``ccbench_kit`` is parsed with `ast` (no import runs), and
every import in it is an edge: module-level and function-level ones,
absolute and relative, ``from . import x`` naming a submodule or a name.
An edge points at the most specific module that exists (``from ..launch
import watchdog`` -> ``ccbench_kit.launch.watchdog``; ``from ..api import
run`` -> ``ccbench_kit.api``).  The package's own ``__init__`` is the public
facade (it imports `api` and `health`): it is the top layer, so an edge
into it from any module of the package (``from .. import __version__``) is
a layer violation like any other; see docs/architecture.md for the layers.
"""
import ast
import functools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "ccbench_kit"


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules():
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


# the compiled extensions (ext/*.pyx; setup.py also builds _engine as
# _engine_mpich): modules an import can name, with no Python source to parse
COMPILED = {f"ccbench_kit.{p.stem}" for p in (ROOT / "ext").glob("*.pyx")} \
    | {"ccbench_kit._engine_mpich"}


def _resolve(name, modules):
    """The most specific module of `modules` that `name` is in, or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@functools.lru_cache(maxsize=None)
def import_graph():
    """{module: {imported module: first line}} inside ccbench_kit."""
    sources = _modules()
    modules = set(sources) | COMPILED
    graph = {}
    for name, path in sources.items():
        is_pkg = path.name == "__init__.py"
        package = name if is_pkg else name.rpartition(".")[0]
        edges = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                # `from pkg import sub` imports the submodule pkg.sub; `from
                # mod import name` the module
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod
                           for a in node.names]
            for t in targets:
                if not t.startswith("ccbench_kit"):
                    continue
                target = _resolve(t, modules)
                if target and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


def find_cycles(graph):
    """Every strongly connected component with more than one module
    (Tarjan's algorithm), each as one cycle through it."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_one_cycle(graph, set(c)) for c in comps]


def _one_cycle(graph, comp):
    """A shortest cycle through the smallest module of `comp`, as a path."""
    start = min(comp)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for w in sorted(graph[path[-1]]):
            if w == start:
                return path + [start]
            if w in comp and w not in seen:
                seen.add(w)
                paths.append(path + [w])
    return sorted(comp)


def _describe(graph, cycle):
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) \
        + f" -> {cycle[-1]}"


def test_the_graph_sees_every_kind_of_import():
    g = import_graph()
    # function-level, `from . import submodule`, `from ..mod import name`
    assert "ccbench_kit.dataset.checkpoint" in g["ccbench_kit.launch.sweep_task"]  # function-level
    assert "ccbench_kit.launch.events" in g["ccbench_kit.launch.sweep_task"]  # from . import x
    assert "ccbench_kit.config" in g["ccbench_kit.launch.job"]  # from ..config import Y
    assert "ccbench_kit.backends.base" in g["ccbench_kit.backends"]  # a package's __init__
    assert "ccbench_kit._nccl" in g["ccbench_kit.backends.nccl"]  # a compiled extension


def test_no_import_cycle():
    g = import_graph()
    cycles = find_cycles(g)
    assert not cycles, "import cycles in ccbench_kit:\n" + "\n".join(
        _describe(g, c) for c in cycles)


def test_cycle_finder_names_a_cycle():
    g = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert find_cycles(g) == [["a", "b", "c", "a"]]
    assert _describe(g, ["a", "b", "c", "a"]) == \
        "a (line 1) -> b (line 2) -> c (line 3) -> a"


# The layers, top to bottom (docs/architecture.md draws them).  A module may
# import its own layer and the layers below it, never one above.
LAYERS = [
    {"ccbench_kit"},                               # the facade: `import ccbench_kit as ccb`
    {"__main__", "cli"},
    {"widgets", "suite", "report", "health", "history"},      # notebooks, reports and the doctor drive the API
    {"api", "preflight"},                          # preflight: checks before a launch
    {"launch"},                                    # mpirun, Slurm, Dask-MPI, the watchdog
    {"harness", "session"},                        # one rank's sweep; what a job's parts share
    {"backends", "checks", "clock", "config", "run_fields"},
    {"compare", "importers", "formats", "output", "theory"},  # files in, files out, models
    {"collectives", "inputs"},                     # collectives' facts; their parsed inputs
    {"dataset"},                                   # the schema; imports nothing above it
    {"_version", "errors", "units", "dtypes", "_files", "_optional", "mpi_env", "progress_board",
     "blas_threads", "hostinfo", "joborigin", "output_path", "bounded", "resources", "markup", "argtypes",
     "_engine", "_nccl"},                          # foundations and the compiled engine
]
# Modules that are plugins of another library and so face upward on purpose:
# they import what they serve lazily, inside the function that needs it.
PLUGINS = {
    "ccbench_kit.dataset.accessor": "the ds.ccb accessor (xarray): its methods "
                                    "call compare and collectives",
    "ccbench_kit.dataset.backend": "the xarray engine ccbench: it reads files "
                                   "through importers",
}


def test_the_xarray_plugins_load_nothing_above_their_layer():
    """xarray loads every engine's module for any file a user opens: ours
    (and the accessor, which io registers) must not pull the layers above."""
    import subprocess
    import sys
    code = ("import sys, ccbench_kit.dataset.backend, ccbench_kit.dataset.accessor; "
            "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('ccbench_kit.')}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    loaded = set(ast.literal_eval(out))
    assert all(_level(c) >= _level("dataset") for c in loaded), loaded


@pytest.mark.parametrize("first", ["ccbench_kit", "xarray", None])
def test_ds_ccb_is_on_a_results_file_plain_xarray_opens(tmp_path, first):
    """``xr.open_dataset(results.nc).ccb`` whichever was imported first, the
    kit or xarray, and with the kit not imported at all: xarray loads the
    kit's engine module when it lists its engines, and that registers it."""
    import subprocess
    import sys
    import numpy as np
    import ccbench_kit as ccb
    from ccbench_kit.dataset.schema import make_dataset
    path = tmp_path / "r.nc"
    lat = np.arange(1.0, 7.0).reshape(1, 1, 1, 2, 3)   # µs: rank 1 is the slower
    ccb.save(make_dataset(algorithms=["ring"], placements=["out_of_place"], sizes=[64],
                          counts=[16], in_bytes=[64], out_bytes=[64], latency=lat,
                          wrong=np.zeros((1, 1, 1), np.int64), ranks=[0, 1],
                          hosts=["a", "b"], devices=["cpu", "cpu"],
                          attrs={"collective": "all_reduce", "dtype": "fp32", "nranks": 2}),
             path)
    imports = {"ccbench_kit": "import ccbench_kit, xarray as xr",
               "xarray": "import xarray as xr, ccbench_kit", None: "import xarray as xr"}[first]
    code = (f"{imports}\nds = xr.open_dataset({str(path)!r})\n"
            "print(float(ds.ccb.time('median').squeeze()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 5.0   # the slowest rank's median of 4, 5, 6


def _component(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ccbench_kit"


def _level(component):
    """0 for the top layer; None for a component no layer names."""
    return next((k for k, layer in enumerate(LAYERS) if component in layer), None)


def layer_violations(graph):
    bad = []
    for mod, edges in graph.items():
        if mod in PLUGINS:
            continue
        src = _component(mod)
        for target, line in edges.items():
            dst = _component(target)
            if dst != src and _level(dst) < _level(src):
                bad.append(f"{mod} (line {line}) imports {target}: {src} may not import {dst}")
    return bad


def test_every_component_has_a_layer():
    named = {_component(m) for m in import_graph()}
    assert sorted(c for c in named if _level(c) is None) == []


def test_layers_run_one_way():
    bad = layer_violations(import_graph())
    assert not bad, "imports against the layers (docs/architecture.md):\n" + "\n".join(bad)


@pytest.mark.parametrize("src,dst", [("harness", "launch"), ("backends", "api"),
                                     ("dataset", "api"), ("launch", "cli")])
def test_layer_check_catches_upward_imports(src, dst):
    g = {f"ccbench_kit.{src}": {f"ccbench_kit.{dst}": 7}, f"ccbench_kit.{dst}": {}}
    assert layer_violations(g) == [f"ccbench_kit.{src} (line 7) imports ccbench_kit.{dst}: "
                                   f"{src} may not import {dst}"]


def test_an_import_of_the_facade_from_below_is_a_violation():
    # `from .. import __version__` in harness.py: the facade imports api,
    # which imports the harness, so this only works by the order of lines
    graph = import_graph()
    assert "ccbench_kit" not in graph["ccbench_kit.harness"]
    g = {"ccbench_kit.harness": {"ccbench_kit": 13}, "ccbench_kit": {"ccbench_kit.api": 9}}
    assert layer_violations(g) == ["ccbench_kit.harness (line 13) imports ccbench_kit: "
                                   "harness may not import ccbench_kit"]


# -- function length ---------------------------------------------------------------
# A function whose code (its docstring not counted) runs over MAX_LINES lines
# says why in a comment that starts with "# why long:", in the lines between
# its `def` and its first statement after the docstring, or on that first
# statement's line.  docs/architecture.md states the convention.
MAX_LINES = 80
WHY = "# why long:"


def long_functions_without_why(root=PKG, base=ROOT):
    bad = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            body = node.body
            has_doc = (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                       and isinstance(body[0].value.value, str))
            doc_lines = body[0].end_lineno - body[0].lineno + 1 if has_doc else 0
            length = node.end_lineno - node.lineno + 1 - doc_lines
            if length <= MAX_LINES:
                continue
            first = body[1] if has_doc and len(body) > 1 else body[0]
            head = lines[node.lineno - 1:first.lineno]
            if not any(WHY in ln for ln in head):
                bad.append(f"{path.relative_to(base)}:{node.lineno} {node.name}() is "
                           f"{length} lines; say why ({WHY} ...) or split it")
    return bad


def test_long_functions_say_why():
    bad = long_functions_without_why()
    assert not bad, "\n".join(bad)


def test_the_length_check_counts_code_not_docstrings(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(81))
    (tmp_path / "m.py").write_text(f'def f():\n    """Doc.\n\n    More.\n    """\n{body}\n'
                                   f'def g():\n    """Doc."""\n    {WHY} a table\n{body}\n'
                                   'def h():\n' + "\n".join(f"    y{i} = {i}" for i in range(79)))
    # f: 81 lines of code (the docstring not counted); g says why; h has 80
    assert long_functions_without_why(tmp_path, tmp_path) == [
        "m.py:1 f() is 82 lines; say why (# why long: ...) or split it"]


# -- imports at the head of the module ---------------------------------------------
# A module's header says what it uses: every import sits at module level,
# except an optional dependency (its pip extra named where it is missing),
# mpi4py (importing mpi4py.MPI starts MPI, which only a rank may do), and an
# import that would close a cycle.  Such an import says why in a comment
# that starts with "# lazy:", on its line or the line above it.
LAZY = "# lazy:"


def function_imports(path):
    """(function, import node, the lines from the one above it to its end,
    the module's text) of every import inside a function of `path`."""
    text = path.read_text()
    lines = text.splitlines()
    for fn in ast.walk(ast.parse(text, str(path))):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                yield fn, node, lines[max(node.lineno - 2, 0):node.end_lineno], text


def unexplained_function_imports(root=PKG, base=ROOT):
    bad = []
    for path in sorted(root.rglob("*.py")):
        for fn, node, near, text in function_imports(path):
            if not any(LAZY in ln for ln in near):
                what = ast.get_source_segment(text, node).split("\n")[0]
                bad.append(f"{path.relative_to(base)}:{node.lineno} `{what}` inside "
                           f"{fn.name}(): move it to the module's head or say why "
                           f"({LAZY} ...)")
    return bad


def test_imports_inside_functions_say_why():
    bad = unexplained_function_imports()
    assert not bad, "\n".join(bad)


def test_the_import_check_finds_an_unexplained_one(tmp_path):
    (tmp_path / "m.py").write_text(
        "import os\n\n\ndef f():\n    import json\n    return json\n\n\n"
        "def g():\n    # lazy: optional dependency (report extra)\n    import matplotlib\n"
        "    from mpi4py import MPI  # lazy: importing mpi4py.MPI starts MPI\n"
        "    return matplotlib, MPI\n")
    assert unexplained_function_imports(tmp_path, tmp_path) == [
        "m.py:5 `import json` inside f(): move it to the module's head or say why (# lazy: ...)"]


def test_every_package_directory_is_in_the_architecture_doc():
    # docs/architecture.md is where a newcomer starts: each package of the
    # kit appears there as `path/` (relative to ccbench_kit/)
    doc = (ROOT / "docs" / "architecture.md").read_text()
    packages = sorted(str(p.parent.relative_to(PKG)) for p in PKG.rglob("__init__.py")
                      if p.parent != PKG)
    assert [p for p in packages if f"{p}/" not in doc] == []


ENDS_A_BLOCK = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def unreachable_statements(roots=("ccbench_kit", "tests", "testbed", "bench"), base=ROOT):
    """'path:line' of each statement that follows a return, raise, continue
    or break in the same block: code that never runs (a test's assertions
    left under a helper's return were found this way)."""
    found = []
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(node, field, None)
                    if not isinstance(block, list):
                        continue
                    for stmt, after in zip(block, block[1:]):
                        if isinstance(stmt, ENDS_A_BLOCK):
                            found.append(f"{path.relative_to(base)}:{after.lineno}")
    return found


def test_no_statement_follows_a_return():
    assert unreachable_statements() == []


def test_the_unreachable_check_finds_one(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text(
        "def f():\n    return 1\n    assert False\n\ndef g():\n    if 1:\n        raise E\n    x = 2\n")
    assert unreachable_statements(("tests",), tmp_path) == ["tests/t.py:3"]


# -- a lazy import that says "import cycle" must close one -------------------------
CYCLE = "import cycle"


def _import_targets(node, package, modules):
    """The kit's modules that one Import/ImportFrom node names (as `import_graph`)."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        mod = node.module or ""
        if node.level:
            base = package.split(".")
            base = base[:len(base) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in modules else mod for a in node.names]
    return {_resolve(t, modules) for t in targets if t.startswith("ccbench_kit")} - {None}


def head_import_graph():
    """{module: {module}}: the imports a module runs when it is imported
    (its top-level statements, those under a top-level if/try too)."""
    sources = _modules()
    modules = set(sources) | COMPILED
    graph = {}
    for name, path in sources.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for top in ast.parse(path.read_text(), str(path)).body:
            if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for node in ast.walk(top):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    edges |= _import_targets(node, package, modules)
        graph[name] = edges - {name}
    return graph


def _reaches(graph, start, goal):
    seen, todo = {start}, [start]
    while todo:
        here = todo.pop()
        if here == goal:
            return True
        for nxt in graph.get(here, ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def false_cycle_comments():
    """'path:line' of each in-function import whose ``# lazy:`` comment says
    it would close an import cycle, where the module it imports does not
    (through the imports run at import time) import this module back."""
    sources = {p: n for n, p in _modules().items()}
    graph = head_import_graph()
    modules = set(graph) | COMPILED
    bad = []
    for path, name in sources.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for _, node, near, _ in function_imports(path):
            if CYCLE not in " ".join(near):
                continue
            targets = _import_targets(node, package, modules)
            if not any(_reaches(graph, t, name) for t in targets):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return bad


def test_a_lazy_import_said_to_close_a_cycle_closes_one():
    assert false_cycle_comments() == []


def test_the_cycle_check_reads_imports_run_at_import_time():
    g = head_import_graph()
    assert "ccbench_kit.launch.job" in g["ccbench_kit.launch.worker"]      # module level
    assert "ccbench_kit.dataset.checkpoint" not in g["ccbench_kit.launch.sweep_task"]  # in a function
    assert _reaches({"a": {"b"}, "b": {"c"}, "c": set()}, "a", "c")
    assert not _reaches({"a": {"b"}, "b": set(), "c": {"a"}}, "a", "c")


# the backends built in (backends._REGISTRY), as a name the doctor might test
BUILT_IN_BACKENDS = {"mpi", "nccl", "torch", "tcp"}


def _backend_name_tests(path, imported=None):
    """(line, name) of every comparison in `path` with a built-in backend's
    name as a literal (``backend == "tcp"``, ``name in ("mpi", "nccl")``) or
    as a module constant holding one (``TCP = "tcp"`` here, or in
    `imported`: {name: value} of the constants other modules define)."""
    tree = ast.parse(path.read_text())
    names = {**(imported or {}), **_string_constants(tree)}

    def value(c):
        if isinstance(c, ast.Constant):
            return c.value
        return names.get(c.id) if isinstance(c, ast.Name) else None
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            consts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            found += [(node.lineno, value(c)) for c in consts if value(c) in BUILT_IN_BACKENDS]
    return found


def _string_constants(tree):
    """{name: value} of a parsed module's module-level string constants."""
    return {t.id: node.value.value for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) for t in node.targets
            if isinstance(t, ast.Name)}


def test_the_doctor_tests_no_backend_by_name():
    """A transport is a Backend (issue 34): what the doctor needs to know of
    one is a class member (`Backend.node_backend`, `ring_algorithm`,
    `doctor_env`, ...), so health/ never compares a backend's name."""
    from ccbench_kit.backends import _REGISTRY
    assert set(_REGISTRY) == BUILT_IN_BACKENDS
    paths = sorted((PKG / "health").rglob("*.py"))
    constants = {}   # every health module's, as any of them may import another's
    for p in paths:
        constants.update(_string_constants(ast.parse(p.read_text())))
    found = {p.name: _backend_name_tests(p, constants) for p in paths}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_backend_name_check_finds_one(tmp_path):
    src = tmp_path / "x.py"
    src.write_text('TCP = "tcp"\ndef f(b):\n    if b == "nccl":\n        return 1\n'
                   '    return b in ("mpi", "other") or b != TCP or b == OTHER\n')
    assert _backend_name_tests(src, {"OTHER": "torch"}) == [
        (3, "nccl"), (5, "mpi"), (5, "tcp"), (5, "torch")]
