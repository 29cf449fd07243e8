"""The import graph of fedevo/: no cycle between modules, and dependencies point one way (README's layout).

The graph is read from the source with the AST (every ``import`` / ``from ... import`` of a fedevo module,
those inside functions included), not from ``sys.modules``: a lazy import inside a function closes a cycle
just as well as one at the top of a file. An edge goes to the module named: ``from fedevo.viz import front``
is an edge to fedevo.viz.front (a module), ``from fedevo.viz import write_front_html`` one to fedevo.viz (the
package's __init__). Importing a submodule also runs its parents' __init__, but those implicit edges are left
out (every module would otherwise depend on fedevo/__init__.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "fedevo"

# Cycles outside this test's reach, each with why it is still here. Keys: the modules of one strongly connected
# component, sorted. An entry that no longer holds fails the test too (so that the list shrinks as they are fixed).
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}

# The layers, lowest first: data -> models -> privacy -> fl -> search (with its run directory and picking.py: pure
# functions over its rows, importing only errors and objectives) -> plots, retraining, audit -> the Python API -> the CLI. A module may import its own layer and lower ones. The top-level
# modules (config.py, problem.py, errors.py, ...) are shared and have no layer of their own: an import is followed
# through them, so that models -> config -> privacy counts as models reaching privacy.
LAYERS: dict[str, int] = {
    "native": 0, "data": 1, "models": 2, "secagg": 3, "privacy": 4, "fl": 5, "objectives": 6, "searching": 7,
    "picking": 7, "viz": 8, "retraining": 8, "auditing": 8, "api": 9, "cli": 10, "__main__": 11,
}

# Imports that point up a layer, each with why it is still here. Keys: (the importing layer, the module reached).
# An entry that no longer holds fails the test too.
KNOWN_BACKWARD: dict[tuple[str, str], str] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """fedevo's modules (not fedevo/examples/: the user's code to copy, shipped as data: `fedevo examples`)."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py")) if "examples" not in p.relative_to(root).parts}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest prefix of `name` that is a fedevo module."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def imports_of(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            names = [f"{prefix}.{a.name}" for a in node.names]  # a submodule if there is one, else its package
        else:
            continue
        for n in names:
            target = _resolve(n, known)
            if target is not None and target != mod:
                out.add(target)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imports_of(m, p, known) for m, p in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    counter = [0]

    def visit(v: str) -> None:  # recursion depth <= number of modules (~150)
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def a_cycle(graph: dict[str, set[str]], comp: tuple[str, ...]) -> list[str]:
    """One concrete cycle through the first module of a component (for the failure message)."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return list(comp)


def test_graph_sees_lazy_and_relative_imports():
    g = import_graph()
    assert len(g) > 50
    # relative, at the top of the module
    assert "fedevo.searching.runner" in g["fedevo.searching.log"]
    # `from ..picking import marks` inside a method
    assert "fedevo.picking" in g["fedevo.searching.rundata"]


def test_no_import_cycle():
    g = import_graph()
    found = cycles(g)
    new = [c for c in found if c not in KNOWN_CYCLES]
    msg = "; ".join(" -> ".join(a_cycle(g, c)) for c in new)
    assert not new, f"import cycles in fedevo/: {msg}"
    fixed = [c for c in KNOWN_CYCLES if c not in found]
    assert not fixed, f"no longer cycles, remove from KNOWN_CYCLES: {fixed}"


def test_search_never_imports_the_plots():
    g = import_graph()
    bad = sorted((m, t) for m, ts in g.items() if m == "fedevo.searching" or m.startswith("fedevo.searching.")
                 for t in ts if t == "fedevo.viz" or t.startswith("fedevo.viz."))
    assert not bad, f"fedevo/searching/ imports fedevo/viz/: {bad}"


def _layer(mod: str) -> int | None:
    parts = mod.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def backward(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """Every import that reaches a higher layer, directly or through shared top-level modules: (the importing
    module's layer, the module reached) -> one path to it."""
    out: dict[tuple[str, str], list[str]] = {}
    for mod in sorted(graph):
        rank = _layer(mod)
        if rank is None:
            continue
        seen = {mod}
        frontier = [[mod]]
        while frontier:
            nxt = []
            for path in frontier:
                for w in sorted(graph[path[-1]] - seen):
                    seen.add(w)
                    rw = _layer(w)
                    if rw is None:
                        nxt.append(path + [w])
                    elif rw > rank:
                        out.setdefault((mod.split(".")[1], w), path + [w])
            frontier = nxt
    return out


def test_layers_point_one_way():
    found = backward(import_graph())
    new = {k: v for k, v in found.items() if k not in KNOWN_BACKWARD}
    msg = "; ".join(" -> ".join(path) for path in new.values())
    assert not new, f"imports that point up a layer in fedevo/ (README's layout): {msg}"
    fixed = [k for k in KNOWN_BACKWARD if k not in found]
    assert not fixed, f"no longer pointing up a layer, remove from KNOWN_BACKWARD: {fixed}"


def test_every_package_has_a_layer():
    """A new subpackage of fedevo/ is placed in a layer (else its imports go unchecked)."""
    packages = {m.split(".")[1] for m, p in modules().items() if p.parent != ROOT}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


def test_layer_check_sees_a_lazy_import_through_a_shared_module(tmp_path):
    """The checker itself: data reaching fl through a top-level module, by an import inside a function."""
    pkg = tmp_path / "fedevo"
    for sub in ("data", "fl"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "fl" / "rounds.py").write_text("from ..data import load\n")
    (pkg / "shared.py").write_text("def f():\n    from .fl import rounds\n    return rounds\n")
    (pkg / "data" / "load.py").write_text("from .. import shared\n")
    assert backward(import_graph(pkg)) == {("data", "fedevo.fl.rounds"):
                                           ["fedevo.data.load", "fedevo.shared", "fedevo.fl.rounds"]}
    (pkg / "data" / "load.py").write_text("import os\n")
    assert backward(import_graph(pkg)) == {}


def test_cycle_finder_finds_a_cycle(tmp_path):
    """The checker itself: a three-module cycle through a lazy import, and a clean package, on disk."""
    pkg = tmp_path / "fedevo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import f\n")
    (pkg / "sub" / "a.py").write_text("from ..b import g\n\ndef f():\n    return g()\n")
    (pkg / "b.py").write_text("def g():\n    from fedevo.c import h\n    return h()\n")
    (pkg / "c.py").write_text("import os\n\ndef h():\n    from .sub import a\n    return a\n")
    g = import_graph(pkg)
    assert cycles(g) == [("fedevo.b", "fedevo.c", "fedevo.sub.a")]
    assert a_cycle(g, cycles(g)[0]) == ["fedevo.b", "fedevo.c", "fedevo.sub.a", "fedevo.b"]
    (pkg / "c.py").write_text("def h():\n    return 1\n")
    assert cycles(import_graph(pkg)) == []
