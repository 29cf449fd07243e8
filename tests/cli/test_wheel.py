"""Packaging (issue 26): `pip wheel .` gives a wheel holding the bundled problems and the native C sources, and
installed into a fresh place, with no source tree beside it, `fedevo problems` and a tiny `fedevo search` run."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_FILES = ("setup.cfg", "pyproject.toml", "README.md")


def _pip(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built from a copy of the package's sources (the checkout gets no build/ or egg-info)."""
    src = tmp_path_factory.mktemp("src")
    for f in BUILD_FILES:
        shutil.copy2(REPO / f, src / f)
    shutil.copytree(REPO / "fedevo", src / "fedevo", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    out = tmp_path_factory.mktemp("wheel")
    offline = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))
    args = ["wheel", ".", "--no-deps", "-w", str(out)] + (["--no-build-isolation"] if offline else [])
    r = _pip(*args, cwd=src)
    if r.returncode != 0:
        if not offline:  # the isolated build needs setuptools from an index
            pytest.skip(f"cannot build a wheel here: setuptools/wheel are not importable and pip's isolated build "
                        f"failed ({r.stderr.strip().splitlines()[-1:]})")
        pytest.fail(f"pip wheel failed:\n{r.stdout}\n{r.stderr}")
    (whl,) = out.glob("fedevo-*.whl")
    return whl


def test_wheel_holds_the_problems_and_native_sources(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = {f"fedevo/problems/{p.name}" for p in (REPO / "fedevo" / "problems").glob("*.toml")}
    native = {f"fedevo/native/{p.name}" for p in (REPO / "fedevo" / "native").iterdir() if p.suffix in (".c", ".h")}
    assert "fedevo/problems/digits_mlp.toml" in bundled and "fedevo/native/common.h" in native
    assert bundled <= names, sorted(bundled - names)
    assert native <= names, sorted(native - names)
    assert "fedevo/__main__.py" in names and "fedevo/_toml.py" in names
    examples = {f"fedevo/examples/{p.name}" for p in (REPO / "fedevo" / "examples").iterdir()
                if p.suffix in (".py", ".toml", ".md")}
    assert "fedevo/examples/make_clients.py" in examples and examples <= names, sorted(examples - names)
    assert not [n for n in names if n.startswith("fedevo/examples/data/")]  # what make_clients.py wrote here


def test_installed_wheel_runs_problems_and_a_search(wheel, tmp_path):
    target = tmp_path / "site"
    r = _pip("install", "--no-deps", "--no-index", "--target", str(target), str(wheel), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "elsewhere"  # no source tree here or on the path: only the installed copy can be imported
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "FEDEVO_CACHE": str(tmp_path / "cache")}

    def fedevo(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", "import sys; from fedevo.cli import main; main(sys.argv[1:])",
                               *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)

    where = subprocess.run([sys.executable, "-c", "import fedevo; print(fedevo.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, timeout=60)
    assert Path(where.stdout.strip()).resolve().is_relative_to(target.resolve()), where.stdout + where.stderr

    r = fedevo("problems")
    assert r.returncode == 0, r.stderr
    for name in ("digits_mlp", "fashion_mlp", "mnist_cnn"):
        assert name in r.stdout

    r = fedevo("search", "--pop", "4", "--gen", "1", "--workers", "0", "--rounds", "1", "--quiet", "--out", "run")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = (work / "run" / "evaluations.csv").read_text().splitlines()
    assert len(rows) == 1 + 4, rows  # a header and the 4 evaluations of one generation
    assert (work / "run" / "front.csv").is_file()

    r = subprocess.run([sys.executable, "-m", "fedevo", "problems"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "digits_mlp" in r.stdout, r.stderr

    # the examples, out of the installed package, run as examples/README.md says (from the folder holding them)
    r = fedevo("examples")
    assert r.returncode == 0 and (work / "examples" / "digits_clients.toml").is_file(), r.stderr
    r = subprocess.run([sys.executable, "examples/make_clients.py"], cwd=work, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and (work / "examples" / "data" / "digits_clients.npz").is_file(), r.stderr
    r = fedevo("search", "--optimizer", "python:examples/optimizers.py:SMSEMOA", "--pop", "4", "--gen", "2",
               "--workers", "0", "--rounds", "1", "--quiet", "--out", "own")  # examples/README.md §4: your optimiser
    assert r.returncode == 0 and len((work / "own" / "evaluations.csv").read_text().splitlines()) == 1 + 8, r.stderr
    r = fedevo("examples")  # nothing overwritten
    assert r.returncode == 2 and "nothing was written" in r.stderr
