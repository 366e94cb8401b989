"""The shape of the code: imports run one way, with no cycle.

Every module of ``ccbench_kit`` is parsed with `ast` (no import runs), and
every import in it is an edge: module-level and function-level ones,
absolute and relative, ``from . import x`` naming a submodule or a name.
An edge points at the most specific module that exists (``from ..launch
import watchdog`` -> ``ccbench_kit.launch.watchdog``; ``from ..api import
run`` -> ``ccbench_kit.api``).  The package's own ``__init__`` is the public
facade (it imports `api`), so edges into ``ccbench_kit`` itself are not
followed; see docs/architecture.md for the layers.
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


def _resolve(name, modules):
    """The most specific module of `modules` that `name` is in, or None."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@functools.lru_cache(maxsize=None)
def import_graph():
    """{module: {imported module: first line}} inside ccbench_kit."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
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
                if target and target not in (name, "ccbench_kit"):
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
    assert "ccbench_kit.harness" in g["ccbench_kit.launch.worker"]  # function-level
    assert "ccbench_kit.launch.events" in g["ccbench_kit.launch.worker"]  # from . import x
    assert "ccbench_kit.config" in g["ccbench_kit.launch.worker"]  # from ..config import Y
    assert "ccbench_kit.backends.base" in g["ccbench_kit.backends"]  # a package's __init__


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
    {"__main__", "cli"},
    {"widgets", "suite", "report", "health"},      # notebooks, reports and the doctor drive the API
    {"api", "preflight"},                          # preflight: checks before a launch
    {"launch"},                                    # mpirun, Slurm, Dask-MPI, the watchdog
    {"harness"},                                   # one rank's sweep
    {"backends", "checks", "clock", "config"},
    {"compare", "importers", "formats", "output", "theory"},  # files in, files out, models
    {"collectives", "inputs"},                     # collectives' facts; their parsed inputs
    {"dataset"},                                   # the schema; imports nothing above it
    {"errors", "units", "dtypes", "_files", "_optional", "mpi_env", "progress_board",
     "hostinfo", "joborigin", "output_path", "bounded", "resources", "markup",
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


def _component(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "ccbench_kit"


def _level(component):
    """0 for the top layer; None for a component no layer names."""
    return next((k for k, layer in enumerate(LAYERS) if component in layer), None)


def layer_violations(graph):
    bad = []
    for mod, edges in graph.items():
        if mod in PLUGINS or mod == "ccbench_kit":  # the package's facade is on top
            continue
        src = _component(mod)
        for target, line in edges.items():
            dst = _component(target)
            if dst != src and _level(dst) < _level(src):
                bad.append(f"{mod} (line {line}) imports {target}: {src} may not import {dst}")
    return bad


def test_every_component_has_a_layer():
    named = {_component(m) for m in import_graph()} - {"ccbench_kit"}
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
