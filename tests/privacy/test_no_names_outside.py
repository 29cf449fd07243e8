"""Issue 25: no code outside fedevo/privacy/ decides anything by a mechanism or trust model's name.

Every registered name (fedevo.privacy.registry) is looked for as a string literal, with the AST, where it would
decide something: compared with (or tested for membership in) an expression about a mechanism or trust model, as
the value of a `mechanism` / `trust` key, keyword, default argument or `.get("mechanism", ...)` fallback, as a
subscript of such an expression, as a match case on one, or as a key of a table keyed by two or more names.
Help text, docstrings, messages and ordinary uses of the same words (plotly's method="update", ray's
address="local", a loss's reduction="none", the aggregation value "secagg", the fedevo.secagg package) are not in
those places, so they need no exception. The exceptions below are named with their reason; one that no longer
matches anything fails the test, so the list cannot go stale.
"""

from __future__ import annotations

import ast
from pathlib import Path

from fedevo.privacy import registry

ROOT = Path(__file__).resolve().parents[2] / "fedevo"
CONTEXT = ("mechanism", "mech", "trust", "privacy")  # an expression whose names mention these is about privacy
KEYS = ("mechanism", "trust")

# (path under fedevo/, literal, rule): reason
EXCEPTIONS: dict[tuple[str, str, str], str] = {}


def names() -> set[str]:
    return set(registry.mechanisms()) | set(registry.trusts())


def _mentions(node: ast.AST) -> bool:
    for n in ast.walk(node):
        text = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
            n.arg if isinstance(n, ast.arg) else n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) \
            else None
        if text and any(c in text.lower() for c in CONTEXT):
            return True
    return False


def _literals(node: ast.AST, known: set[str]) -> list[str]:
    """The name literals of a constant, or of a tuple / list / set of constants."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [x.value for x in items if isinstance(x, ast.Constant) and x.value in known]


def _is_key(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in KEYS


def findings(tree: ast.AST, known: set[str]) -> list[tuple[int, str, str]]:
    """(line, literal, rule) for every deciding use of a name literal."""
    out: list[tuple[int, str, str]] = []

    def add(node, values, rule):
        out.extend((node.lineno, v, rule) for v in values)

    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for i, op in enumerate(operands):
                lits = _literals(op, known)
                if lits and any(_mentions(o) for j, o in enumerate(operands) if j != i):
                    add(node, lits, "compare")
        elif isinstance(node, ast.Dict):
            keyed = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in known]
            if len(set(keyed)) >= 2:
                add(node, keyed, "table")
            for k, v in zip(node.keys, node.values):
                if k is not None and _is_key(k):
                    add(node, _literals(v, known), "value")
        elif isinstance(node, ast.keyword):
            if node.arg in KEYS:
                add(node.value, _literals(node.value, known), "keyword")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + \
                [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, d in pairs:
                if any(c in arg.arg.lower() for c in CONTEXT):
                    add(d, _literals(d, known), "default")
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and node.args \
                    and _is_key(node.args[0]):
                for extra in node.args[1:]:
                    add(extra, _literals(extra, known), "fallback")
        elif isinstance(node, ast.Subscript):
            if _mentions(node.value):
                add(node, _literals(node.slice, known), "subscript")
        elif isinstance(node, ast.Match):
            if _mentions(node.subject):
                for case in node.cases:
                    for p in ast.walk(case.pattern):
                        if isinstance(p, ast.MatchValue):
                            add(p, _literals(p.value, known), "match")
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and _is_key(node.elts[0]):
            add(node, _literals(node.elts[1], known), "pair")
    return out


def scan(root: Path = ROOT) -> dict[tuple[str, str, str], list[int]]:
    known = names()
    found: dict[tuple[str, str, str], list[int]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("privacy/"):
            continue
        for line, lit, rule in findings(ast.parse(path.read_text(encoding="utf-8")), known):
            found.setdefault((rel, lit, rule), []).append(line)
    return found


def test_no_mechanism_or_trust_name_decides_outside_privacy():
    found = scan()
    bad = {k: v for k, v in found.items() if k not in EXCEPTIONS}
    assert not bad, "mechanism/trust names deciding outside fedevo/privacy/ (ask the registry or the mechanism " \
                    "instead): " + "; ".join(f"{p}:{lines} {lit!r} ({rule})" for (p, lit, rule), lines in bad.items())
    stale = [k for k in EXCEPTIONS if k not in found]
    assert not stale, f"exceptions that match nothing any more, remove them: {stale}"


def test_the_scan_catches_each_kind_of_decision():
    """The rules fire on every shape the test is meant to catch, and stay quiet on the ordinary words."""
    known = names()
    caught = """
if cfg.privacy.mechanism == "step": pass
if pc.trust in ("central", "secagg"): pass
x = {"mechanism": "none"}
f(trust="local")
def g(mechanism="update"): pass
y = p.get("mechanism", "none")
z = TABLE_BY_MECH["adaptive"]
w = {"step": 1, "update": 2}
for k, d in (("trust", "local"),): pass
match pc.mechanism:
    case "signds": pass
"""
    rules = sorted(r for _, _, r in findings(ast.parse(caught), known))
    assert rules == sorted(["compare", "compare", "compare", "value", "keyword", "default", "fallback",
                            "subscript", "table", "table", "pair", "match"])
    quiet = """
ray.init(address="local")
dict(label="a", method="update")
F.cross_entropy(x, y, reduction="none")
if pc.aggregation == "secagg": pass
if sampling == "none": pass
stats = {"step": 1.0, "mask": 2.0}
"""
    assert findings(ast.parse(quiet), known) == []


def test_a_mutation_is_caught(tmp_path):
    """A copy of fedevo/fl/cost.py with the old name test put back fails the scan."""
    src = (ROOT / "fl" / "cost.py").read_text(encoding="utf-8")
    mutated = src + '\n\ndef _old(config):\n    return config.privacy.mechanism == "step"\n'
    (tmp_path / "fl").mkdir()
    (tmp_path / "fl" / "cost.py").write_text(mutated, encoding="utf-8")
    assert scan(tmp_path) == {("fl/cost.py", "step", "compare"): [mutated.count("\n")]}


def test_shared_keys_are_privacy_configs_fields():
    from dataclasses import fields

    from fedevo.config import PrivacyConfig

    assert tuple(f.name for f in fields(PrivacyConfig)) == registry.SHARED_KEYS + ("params",)
