"""A problem file's own objective (`[objective.NAME] read = "python:FILE:FUNC"`) is code the run was made with:
run.json's `inputs` records its file, and `fedevo resume` refuses with one line when it changed — else the resumed
rows would hold another function's values under the same column, and the front would mix the two."""

from __future__ import annotations

import json

import fedevo

from tests.helpers import cli

from .latency_problem import latency_problem

OBJECTIVE = "def latency(r):\n    return r.omega / 1000.0 + r.comm / 500.0\n"


def test_a_changed_objective_function_is_refused_by_resume(tmp_path):
    prob = latency_problem(tmp_path, OBJECTIVE)
    run = fedevo.search(str(prob), pop=4, gen=1, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False)
    inputs = json.loads((run.path / "run.json").read_text())["inputs"]
    assert [(e["role"], e["path"]) for e in inputs] == [("[objective.latency] read",
                                                         str((tmp_path / "my_obj.py").resolve()))]

    (tmp_path / "my_obj.py").write_text(OBJECTIVE.replace("500.0", "50.0"))  # another latency
    rows = (run.path / "evaluations.csv").read_bytes()
    r = cli("resume", run.path, "--budget", "8", "--workers", "0", "--quiet")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"fedevo: error: {(tmp_path / 'my_obj.py').resolve()} ([objective.latency] read) "
                               "changed since run")
    assert (run.path / "evaluations.csv").read_bytes() == rows  # nothing evaluated

    (tmp_path / "my_obj.py").write_text(OBJECTIVE)  # restored: it goes on
    r = cli("resume", run.path, "--budget", "8", "--workers", "0", "--quiet")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert len((run.path / "evaluations.csv").read_text().splitlines()) == 1 + 8
