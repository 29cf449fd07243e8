"""Every name the code, tests and benchmarks take from a fedevo module exists there.

Much of what reads fedevo's internals runs only on a GPU (`pytest -m cuda`, benchmarks/gpu_session.sh) or as a
benchmark, never in this suite; a module's name moved or renamed would break them unseen until a GPU session, whose
time is short. This reads their imports and attribute uses statically (`from fedevo.x import a`, `import
fedevo.x as m` / `from fedevo import x` then `x.a`, and the package's relative imports) and checks each name."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for d in ("fedevo", "tests", "benchmarks", "experiments") for p in (ROOT / d).rglob("*.py"))


def _package_of(path: Path) -> str:
    """The dotted package a file of fedevo/ belongs to (for its relative imports); '' outside fedevo/."""
    if not path.is_relative_to(ROOT / "fedevo"):
        return ""
    return ".".join(path.relative_to(ROOT).parts[:-1])


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def references(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for every name the file takes from a fedevo module: each `from fedevo.x import a`
    that is not a module, and each `m.a` (read or assigned) where `m` names a fedevo module in that scope (a
    function's imports hold in it and the functions inside it; a name assigned in a scope is that scope's own)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _package_of(path)
    out: list = []
    _scope(tree, {}, package, out)
    return out


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(scope: ast.AST):
    """The nodes of a scope, not those of the functions (and classes' bodies' functions) defined inside it."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _FUNCTIONS):
            todo.extend(ast.iter_child_nodes(node))


def _scope(scope: ast.AST, inherited: dict, package: str, out: list) -> None:
    aliases = dict(inherited)  # a local name bound to a fedevo module
    if not isinstance(scope, ast.Module):  # a function's parameters are its own names
        for a in ast.walk(scope.args):
            if isinstance(a, ast.arg):
                aliases.pop(a.arg, None)
    nodes = list(_own_nodes(scope))
    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            aliases.pop(node.id, None)  # the scope's own variable (an import below binds it again)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("fedevo") and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node, package)
            if not mod.startswith("fedevo"):
                continue
            for a in node.names:
                if a.name == "*":
                    continue
                sub = f"{mod}.{a.name}"
                if _is_module(sub):
                    aliases[a.asname or a.name] = sub
                else:
                    out.append((node.lineno, mod, a.name))
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            out.append((node.lineno, aliases[node.value.id], node.attr))
        elif isinstance(node, _FUNCTIONS):
            _scope(node, aliases, package, out)


def test_names_taken_from_fedevo_exist():
    missing = []
    for path in SOURCES:
        for line, mod, name in references(path):
            module = importlib.import_module(mod)
            if not hasattr(module, name) and not _is_module(f"{mod}.{name}"):
                missing.append(f"{path.relative_to(ROOT)}:{line}: {mod} has no {name!r}")
    assert len(SOURCES) > 300 and not missing, "\n".join(missing)


def test_the_check_sees_a_missing_name(tmp_path):
    """The check itself: a file taking a name fedevo lacks, in both spellings, is caught."""
    bad = tmp_path / "probe.py"
    bad.write_text("from fedevo.fl import stacked\nfrom fedevo.fl.stacked import no_such_thing\n"
                   "stacked.nor_this\nstacked.train_members\n")
    got = {(m, n) for _, m, n in references(bad)}
    assert {("fedevo.fl.stacked", "no_such_thing"), ("fedevo.fl.stacked", "nor_this"),
            ("fedevo.fl.stacked", "train_members")} <= got
    shadowed = tmp_path / "shadowed.py"  # a module's name in one function, a list's in another (fedevo/api.py)
    shadowed.write_text("def a():\n    from fedevo.auditing import targets\n    return targets.from_run\n"
                        "def b(stacked):\n    targets = []\n    targets.append(1)\n    return stacked.anything\n")
    assert [(m, n) for _, m, n in references(shadowed)] == [("fedevo.auditing.targets", "from_run")]
    stacked = importlib.import_module("fedevo.fl.stacked")
    assert not hasattr(stacked, "no_such_thing") and hasattr(stacked, "train_members")
