"""Install: every third-party module fedevo imports is declared in setup.cfg, and CI installs into a fresh venv."""

from __future__ import annotations

import ast
import configparser
import re
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _imported_top_modules() -> set[str]:
    names = set()
    for f in (REPO / "fedevo").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"fedevo"}


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def _install_requires() -> set[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = [ln.strip() for ln in cfg["options"]["install_requires"].splitlines() if ln.strip()]
    return {_norm(re.split(r"[<>=!~;\[ ]", ln, maxsplit=1)[0]) for ln in lines}


def test_every_imported_package_is_an_install_requirement():
    declared = _install_requires()
    dists = metadata.packages_distributions()
    missing = {}
    for mod in sorted(_imported_top_modules()):
        providers = {_norm(d) for d in dists.get(mod, [])}
        assert providers, f"fedevo imports {mod!r}, which no installed distribution provides"
        if not providers & declared:
            missing[mod] = sorted(providers)
    assert not missing, f"imported by fedevo but not in setup.cfg install_requires: {missing}"
    assert "cryptography" in declared  # fedevo/secagg (issue 14: a fresh venv lacked it)


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    cmd = 'pip install -e ".[test]" && python -m pytest'
    assert cmd in readme and cmd in ci
    assert "python3 -m venv" in ci and "system-site-packages" not in ci
    assert ci.index("python3 -m venv") < ci.index(cmd)
