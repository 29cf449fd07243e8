"""A problem file's own objective (`[objective.NAME] read = "python:obj.py:FUNC"`) whose file takes a value from a
module beside it, which a notebook edits and `importlib.reload`s (plugins takes the reload): the next search
computes the objective with the reloaded value, as its run.json's `inputs` records it — for a Problem made before
the reload, and where the value comes through another module beside the file."""

from __future__ import annotations

import csv
import hashlib
import importlib
import json
import os
import sys

import pytest

import fedevo
from fedevo.errors import FedevoError

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


def test_a_module_reloaded_that_the_objective_file_imports_through_another_is_what_runs(tmp_path, monkeypatch):
    """obj.py takes `get` from amod, amod takes K from bmod; bmod is edited and reloaded. amod, still in sys.modules,
    kept the old K: the new search computed lat = 1.0 while run.json recorded bmod's text giving 2.0 (review17 F3).
    amod is now run again, in place, when obj.py is imported anew: the notebook's amod sees the new K too, and a
    later edit of amod is refused until reloaded, as any edit, and then taken."""
    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    amod, bmod = f"amod_{tag}", f"bmod_{tag}"
    p = _project(tmp_path, f"from {amod} import get\n\ndef lat(result):\n    return get()\n",
                 {amod: f"from {bmod} import K\n\ndef get():\n    return K\n", bmod: "K = 1.0\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert _lat(p, tmp_path / "A") == {1.0}
        notebooks_amod = importlib.import_module(amod)
        (tmp_path / f"{bmod}.py").write_text("K = 2.0\n")
        importlib.reload(sys.modules[bmod])
        assert _lat(fedevo.Problem.from_file(p), tmp_path / "C") == {2.0}
        assert _recorded(tmp_path / "C", bmod) == _sha("K = 2.0\n")
        assert sys.modules[amod] is notebooks_amod and notebooks_amod.get() == 2.0  # run again in place

        (tmp_path / f"{amod}.py").write_text(f"from {bmod} import K\n\ndef get():\n    return 10 * K\n")
        stale = (rf"{amod}\.py \(imported by \[objective\.lat\] read file .*obj\.py'\) changed since this process "
                 rf"imported it: .*importlib\.reload\({amod}\) it")
        with pytest.raises(FedevoError, match=stale):
            _lat(fedevo.Problem.from_file(p), tmp_path / "D")
        importlib.reload(notebooks_amod)  # (still the module in sys.modules: the reload works)
        assert _lat(fedevo.Problem.from_file(p), tmp_path / "E") == {20.0}
    finally:
        for name in (amod, bmod):
            sys.modules.pop(name, None)


def test_a_module_beside_the_file_that_does_not_import_the_reloaded_one_is_not_run_again(tmp_path, monkeypatch):
    """review18 F3: every module beside the file ran again after any reload: a module that does not import the
    reloaded one repeated its import-time work, lost what the notebook had set in it, and one that registers an
    objective at import failed every later search ('registered already'). Only the reloaded module's importers
    run again."""
    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    side, bmod = f"side_{tag}", f"bmod_{tag}"
    runs = tmp_path / "side_runs.log"
    p = _project(tmp_path, f"import {side}\nimport {bmod}\n\ndef lat(result):\n    return {bmod}.K\n",
                 {side: f"with open({str(runs)!r}, 'a') as f:\n    f.write('ran\\n')\nSTATE = {{}}\n",
                  bmod: "K = 1.0\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert _lat(p, tmp_path / "A") == {1.0}
        importlib.import_module(side).STATE["mine"] = "set by the notebook"
        (tmp_path / f"{bmod}.py").write_text("K = 2.0\n")
        importlib.reload(sys.modules[bmod])
        assert _lat(p, tmp_path / "B") == {2.0}
        assert runs.read_text().count("ran") == 1 and sys.modules[side].STATE == {"mine": "set by the notebook"}
    finally:
        sys.modules.pop(side, None)
        sys.modules.pop(bmod, None)


def test_a_module_named_read_or_model_reloaded_is_what_runs(tmp_path, monkeypatch):
    """review18 F1: an objective's read and a model factory named `package.module:fn` were kept per process (the
    Problem's FunctionRead, the factory cache) across importlib.reload(module): the search logged lat = 1.0 from the
    old function, and the model trained was the old one, while the module gave the new."""
    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    objmod, modelmod = f"objmod_{tag}", f"modelmod_{tag}"
    (tmp_path / "ev.py").write_text(EVALUATOR)
    (tmp_path / f"{objmod}.py").write_text("def lat(result):\n    return 1.0\n")
    (tmp_path / "p.toml").write_text(PROBLEM.replace('read = "python:obj.py:lat"', f'read = "{objmod}:lat"'))
    factory = ("import math\nimport torch.nn as nn\n\ndef make(*, input_shape, num_classes):\n"
               "    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), {h}), nn.ReLU(), "
               "nn.Linear({h}, num_classes))  # {h}\n")
    (tmp_path / f"{modelmod}.py").write_text(factory.format(h=16))
    model_doc = {"name": "m", "dataset": "digits", "model": f"{modelmod}:make", "data": {"clients": 4},
                 "train": {"rounds": 1, "epochs": 1},
                 "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}}}
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        problem = fedevo.Problem.from_file(str(tmp_path / "p.toml"))
        assert _lat(problem, tmp_path / "A") == {1.0}
        omega = fedevo.evaluate(model_doc).omega
        (tmp_path / f"{objmod}.py").write_text("def lat(result):\n    return 2.0  # edited\n")
        importlib.reload(sys.modules[objmod])
        assert _lat(problem, tmp_path / "B") == {2.0}
        (tmp_path / f"{modelmod}.py").write_text(factory.format(h=128))
        importlib.reload(sys.modules[modelmod])
        assert fedevo.evaluate(model_doc).omega > omega
    finally:
        sys.modules.pop(objmod, None)
        sys.modules.pop(modelmod, None)
