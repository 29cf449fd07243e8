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


def _strict(threshold, *, scale=1.0):
    """What a notebook writes: a function that makes an objective, its threshold in the read's closure."""
    from fedevo.objectives import Objective

    def read(r):
        return scale * float(r.error > threshold)

    return Objective(name="strict_c", label="over the threshold", worst=1.0, read=read)


def test_a_registered_objectives_closure_values_are_recorded_and_a_resume_with_others_is_warned_of(tmp_path, capfd):
    """run.json's `code` digests an objective's code, not its closure's values: `make_objective(threshold=0.1)`
    searched, then resumed with threshold=0.2, mixed rows of two thresholds under one column without a word. run.json
    records them (`code_values`: simple values by their repr), and a resume with others says which in one line; the
    same values resume quietly; a run made before the record (no `code_values`) is not checked."""
    import shutil

    import pytest

    from fedevo.objectives import register, unregister
    from fedevo.searching import SearchCallback
    from tests.searching.search_helpers import FAKE, TOY_TOML

    class Stop(SearchCallback):
        def on_evaluation(self, row):
            if row.id == 3:
                raise KeyboardInterrupt

    prob = tmp_path / "strict.toml"
    prob.write_text('objectives = ["error", "eps", "strict_c"]\n' + TOY_TOML)
    register(_strict(0.1), replace=True)
    try:
        with pytest.raises(KeyboardInterrupt) as stopped:
            fedevo.search(str(prob), optimizer="random", pop=2, gen=3, seed=0, workers=0, out=tmp_path / "run",
                          page=False, evaluator=FAKE, callbacks=[Stop()], progress=False)
        run_dir = stopped.value.run_dir
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["code_values"]["objective strict_c"] == {"threshold": "0.1", "scale": "1.0"}
        for name in ("other", "old"):
            shutil.copytree(run_dir, tmp_path / name)
        capfd.readouterr()
        register(_strict(0.1), replace=True)  # the cell run again
        assert len(fedevo.resume(run_dir, workers=0, page=False, progress=False).evaluations) == 6
        assert "warning" not in capfd.readouterr().err
        register(_strict(0.2), replace=True)  # the same code, another threshold
        assert len(fedevo.resume(tmp_path / "other", workers=0, page=False, progress=False).evaluations) == 6
        err = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
        assert err == [f"fedevo: warning: the objective strict_c's function reads other values than run "
                       f"{tmp_path / 'other'} was searched with (threshold 0.1 then, 0.2 now): the resumed evaluations "
                       "call it as it is now, beside rows the earlier values gave"]
        run_json = tmp_path / "old" / "run.json"  # made before the record (run.json's bytes start the log's chain:
        old = json.loads(run_json.read_text())  # rewritten, the chain would refuse the resume; checked directly)
        from fedevo.searching.inputs import warn_changed_code
        from fedevo.objectives.registry import registered

        del old["code_values"]
        warn_changed_code(old, [registered("strict_c")], None, tmp_path / "old")
        assert capfd.readouterr().err == ""
    finally:
        unregister("strict_c")


def test_code_values_record_simple_values_by_repr_and_others_by_type():
    """plugins.code_values: closure variables and defaults; a float by its repr, containers of simple values
    element by element, a function by its digest, an object whose repr holds a memory address by its type only (it
    would differ in every process), a long value by its hash; a function without any: {}."""
    import numpy as np

    from fedevo.plugins import code_digest, code_values

    helper = lambda x: x + 1  # noqa: E731
    obj, arr, big = object(), np.zeros(3), list(range(500))

    def make(threshold, names, weights):
        def read(r, k=2, *, mode="mean"):
            return (threshold, names, weights, helper, obj, arr, big, np.float32(0.5), k, mode, read)
        return read

    v = code_values(make(0.1, ("a", "b"), {"x": 1.5}))
    assert v["threshold"] == "0.1" and v["names"] == "('a', 'b')" and v["weights"] == "{'x': 1.5}"
    assert v["helper"] == f"<function {code_digest(helper)}>" and v["obj"] == "<object>" and v["arr"] == "<ndarray>"
    assert v["big"].startswith("<sha256 ") and v["k="] == "2" and v["mode="] == "'mean'"
    assert v["read"] == "<function read>"  # a recursive function's own cell
    assert code_values(make(0.2, ("a", "b"), {"x": 1.5}))["threshold"] == "0.2"
    assert code_values(make(0.1, ("a", "b"), {"x": 1.5})) == code_values(make(0.1, ("a", "b"), {"x": 1.5}))
    assert code_values(lambda r: r.error) == {} and code_values(len) == {}


def test_a_closure_value_that_holds_itself_is_recorded_not_recursed_into():
    """review18 F5: a closure's dict that held itself (cfg["parent"] = cfg) recursed until RecursionError when the
    run was created (code_values), so the search could not start."""
    from fedevo.plugins import code_values

    def make():
        cfg = {"t": 0.1}
        cfg["parent"] = cfg
        same = [1, 2]

        def lat(r):
            return cfg["t"] + len(same + same)
        return lat

    got = code_values(make())
    assert got["cfg"] == "{'t': 0.1, 'parent': <dict cycle>}" and got["same"] == "[1, 2]"
