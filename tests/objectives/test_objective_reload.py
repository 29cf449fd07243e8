"""A problem file's own objective (`[objective.NAME] read = "python:obj.py:FUNC"`) whose file takes a value from a
module beside it, which a notebook edits and `importlib.reload`s (plugins takes the reload): the next search
computes the objective with the reloaded value, as its run.json's `inputs` records it, also for a Problem made
before the reload."""

from __future__ import annotations

import csv
import hashlib
import importlib
import json
import os
import sys

import fedevo

EVALUATOR = ("def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
             "    return {'error': 0.1 + params['width'] * 1e-3, 'comm': 1.0, 'eps': 1.0}\n")
PROBLEM = """
name = "objreload"
evaluator = "python:ev.py:evaluate"
objectives = ["error", "lat"]
[objective.lat]
read = "python:obj.py:lat"
worst = 1e4
[genes]
width = { type = "int", low = 1, high = 16, default = 4 }
"""


def _project(tmp_path, obj: str, helpers: dict) -> str:
    (tmp_path / "ev.py").write_text(EVALUATOR)
    (tmp_path / "obj.py").write_text(obj)
    for name, text in helpers.items():
        (tmp_path / f"{name}.py").write_text(text)
    (tmp_path / "p.toml").write_text(PROBLEM)
    return str(tmp_path / "p.toml")


def _lat(problem, out) -> set:
    fedevo.search(problem, optimizer="random", pop=2, gen=1, workers=0, out=out, page=False, progress=False)
    return {float(r["lat"]) for r in csv.DictReader((out / "evaluations.csv").open())}


def _recorded(out, name: str) -> str:
    (entry,) = [e for e in json.loads((out / "run.json").read_text())["inputs"] if e["path"].endswith(f"{name}.py")]
    return entry["sha256"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_problem_made_before_the_reload_reads_its_objective_with_the_reloaded_module(tmp_path, monkeypatch):
    """The objective's function was kept by the Problem (its FunctionRead) past the reload: the search of that
    Problem computed lat = 1.0 with the old module while its run.json recorded the text giving 2.0 (review17 F2)."""
    helper = f"lathelp_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    p = _project(tmp_path, f"from {helper} import K\n\ndef lat(result):\n    return K\n", {helper: "K = 1.0\n"})
    monkeypatch.syspath_prepend(str(tmp_path))  # the notebook's folder, where the reload finds the module
    try:
        problem = fedevo.Problem.from_file(p)
        assert _lat(problem, tmp_path / "A") == {1.0}
        (tmp_path / f"{helper}.py").write_text("K = 2.0\n")
        importlib.reload(sys.modules[helper])
        assert _lat(problem, tmp_path / "B") == {2.0}
        assert _recorded(tmp_path / "B", helper) == _sha("K = 2.0\n")
    finally:
        sys.modules.pop(helper, None)
