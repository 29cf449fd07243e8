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


def _requirement_lines(value: str) -> list[str]:
    return [ln.strip() for ln in value.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _name(line: str) -> str:
    return _norm(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0])


def _install_requires(conditional: bool = True) -> set[str]:
    """install_requires by name; conditional=False: only those without an environment marker."""
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return {_name(ln) for ln in _requirement_lines(cfg["options"]["install_requires"]) if conditional or ";" not in ln}


def _extras() -> dict[str, set[str]]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    return {k: {_name(ln) for ln in _requirement_lines(v)} for k, v in cfg["options.extras_require"].items()}


def test_every_imported_package_is_an_install_requirement():
    """Each third-party module fedevo imports is an install requirement, or an optional extra's (user data:
    pyarrow, datasets; such an extra may be absent: botorch's optuna-integration), or a requirement under an
    environment marker (tomli on Python 3.10) that may be absent."""
    declared = _install_requires()
    extras = _extras()
    optional = set().union(*(v for k, v in extras.items() if k != "test"))
    dists = metadata.packages_distributions()
    missing = {}
    for mod in sorted(_imported_top_modules()):
        providers = {_norm(d) for d in dists.get(mod, [])}
        if not providers and _norm(mod) in declared - _install_requires(conditional=False):
            continue  # e.g. tomli: required where tomllib is not in the standard library
        if not providers and _norm(mod) in optional:
            continue  # an optional extra not installed here (botorch's optuna-integration: examples/optimizers.py)
        assert providers, f"fedevo imports {mod!r}, which no installed distribution provides"
        if not providers & (declared | optional):
            missing[mod] = sorted(providers)
    assert not missing, f"imported by fedevo but not in setup.cfg install_requires or an extra: {missing}"
    assert "cryptography" in declared  # fedevo/secagg (issue 14: a fresh venv lacked it)
    assert "tomli" in declared  # fedevo/_toml.py on Python 3.10
    assert extras["data"] <= extras["test"]  # CI runs the user-data tests


def test_ci_runs_the_readme_test_command_in_a_fresh_venv():
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    cmd = 'pip install -e ".[test]" && python -m pytest'
    assert cmd in readme and cmd in ci
    assert "python3 -m venv" in ci and "system-site-packages" not in ci
    assert ci.index("python3 -m venv") < ci.index(cmd)


def test_torch_is_a_range_the_installed_versions_satisfy():
    """setup.cfg declares the torch / torchvision versions fedevo supports as ranges, never one exact version (which
    would refuse every other PyTorch beside it), and the installed ones, which the suite tests, lie in them."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    reqs = {_name(ln): Requirement(ln) for ln in _requirement_lines(cfg["options"]["install_requires"])}
    for dist in ("torch", "torchvision"):
        spec = reqs[dist].specifier
        assert not any(s.operator in ("==", "===") for s in spec), f"{dist} is pinned: {spec}"
        assert any(s.operator in (">=", ">") for s in spec) and any(s.operator in ("<", "<=") for s in spec), spec
        installed = Version(metadata.version(dist)).release  # 2.14.1+cu130 -> (2, 14, 1)
        assert spec.contains(".".join(map(str, installed))), f"installed {dist} {installed} is outside {spec}"
