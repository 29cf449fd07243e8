"""fedevo/_toml.py: the standard library's tomllib where there is one, tomli (a requirement there) on Python 3.10."""

from __future__ import annotations

import importlib
import sys

import pytest

from fedevo import _toml


def test_reads_problem_toml_with_tomllib_or_tomli():
    assert _toml.loads('a = 1\n[t]\nb = "x"\n') == {"a": 1, "t": {"b": "x"}}
    with pytest.raises(_toml.TOMLDecodeError):
        _toml.loads("a = = 1")


def test_falls_back_to_tomli_without_tomllib(monkeypatch):
    """Python 3.10 simulated: `import tomllib` fails, so tomli (in the test extra) must serve."""
    pytest.importorskip("tomli", reason="tomli is not installed (pip install -e '.[test]' installs it)")
    monkeypatch.setitem(sys.modules, "tomllib", None)  # import tomllib -> ModuleNotFoundError
    try:
        mod = importlib.reload(_toml)
        assert mod.loads.__module__.startswith("tomli")
        assert mod.loads("x = [1, 2]") == {"x": [1, 2]}
        with pytest.raises(mod.TOMLDecodeError):
            mod.loads("x = [")
    finally:
        monkeypatch.undo()
        importlib.reload(_toml)


def test_only_the_toml_module_imports_tomllib():
    """Python 3.10 has no tomllib: every TOML read goes through fedevo/_toml.py."""
    import ast
    from pathlib import Path

    root = Path(_toml.__file__).resolve().parent
    offenders = []
    for f in root.rglob("*.py"):
        if f.name == "_toml.py":
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(n.split(".")[0] == "tomllib" for n in names):
                offenders.append(str(f.relative_to(root.parent)))
    assert not offenders, f"import fedevo._toml instead of tomllib in: {offenders}"
