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


def test_a_registered_objective_defined_otherwise_is_refused_by_resume(tmp_path):
    """An objective registered from Python is the run's as run.json records it: a resume in a process that
    registered it with another direction (or worst, log, bounds) went on with the recorded one, the new definition
    silently ignored; now one line, nothing evaluated, and the definition as it was goes on."""
    import pytest

    from fedevo.errors import FedevoError
    from fedevo.objectives import Objective, register, unregister
    from fedevo.problem import problems_dir
    from fedevo.searching import SearchCallback

    class Stop(SearchCallback):
        def on_evaluation(self, row):
            if row.id == 5:
                raise KeyboardInterrupt

    def gap(direction="minimize", worst=1.0):
        return Objective(name="acc_gap_t", label="gap", worst=worst, direction=direction,
                         read=lambda r: abs(r.error - (1.0 - r.accuracy_global)))

    prob = tmp_path / "gap.toml"
    prob.write_text('objectives = ["error", "eps", "acc_gap_t"]\n' + (problems_dir() / "digits_mlp.toml").read_text())
    register(gap(), replace=True)
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            fedevo.search(str(prob), pop=4, gen=2, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False,
                          callbacks=[Stop()])
        run_dir = stopped.value.run_dir
        rows = (run_dir / "evaluations.csv").read_bytes()
        for other, says in ((gap("maximize"), "direction='maximize', but the run was searched with "
                                              "direction='minimize'"),
                            (gap(worst=2.0), "worst=2.0, but the run was searched with worst=1.0")):
            register(other, replace=True)
            with pytest.raises(FedevoError, match=f"objective 'acc_gap_t' is registered in this process with {says}"):
                fedevo.resume(run_dir, workers=0, page=False)
            assert (run_dir / "evaluations.csv").read_bytes() == rows
        register(gap(), replace=True)
        assert len(fedevo.resume(run_dir, workers=0, page=False).evaluations) == 8
    finally:
        unregister("acc_gap_t")


def test_a_registered_objective_whose_code_changed_is_warned_of_by_resume(tmp_path, capfd):
    """A notebook that fixed its registered objective's lambda and resumed got rows of two functions under one
    column without a word (a python: file's change is refused: its file is fingerprinted; a lambda has none).
    run.json records the function's code digest; a resume with another body says so in one line, the same body
    (the cell run again) resumes quietly."""
    import shutil

    import pytest

    from fedevo.objectives import Objective, register, unregister
    from fedevo.problem import problems_dir
    from fedevo.searching import SearchCallback

    class Stop(SearchCallback):
        def on_evaluation(self, row):
            if row.id == 5:
                raise KeyboardInterrupt

    def gap(read):
        return Objective(name="acc_gap_c", label="gap", worst=1.0, read=read)

    prob = tmp_path / "gap.toml"
    prob.write_text('objectives = ["error", "eps", "acc_gap_c"]\n' + (problems_dir() / "digits_mlp.toml").read_text())
    register(gap(lambda r: abs(r.error - (1.0 - r.accuracy_global))), replace=True)
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            fedevo.search(str(prob), pop=4, gen=2, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False,
                          callbacks=[Stop()])
        run_dir = stopped.value.run_dir
        assert list(json.loads((run_dir / "run.json").read_text())["code"]) == ["objective acc_gap_c"]
        shutil.copytree(run_dir, tmp_path / "other")
        capfd.readouterr()
        register(gap(lambda r: abs(r.error - (1.0 - r.accuracy_global))), replace=True)  # the cell run again
        assert len(fedevo.resume(run_dir, workers=0, page=False).evaluations) == 8
        assert "warning" not in capfd.readouterr().err
        register(gap(lambda r: 2 * abs(r.error - (1.0 - r.accuracy_global))), replace=True)  # fixed, then resumed
        assert len(fedevo.resume(tmp_path / "other", workers=0, page=False).evaluations) == 8
        err = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
        assert err == [f"fedevo: warning: the objective acc_gap_c's function is not the code run {tmp_path / 'other'} "
                       "was searched with (its code differs): the resumed evaluations call it as it is now, beside "
                       "rows the earlier code gave"]
    finally:
        unregister("acc_gap_c")
