"""User code runs contained (issue #35, fedevo/searching/containment.py, fedevo/usercode.py): what an evaluator or a
model does ends as that evaluation's result (failed / diverged, with its message), never as the search's end, its
output never reaches fedevo's stdout, and an evaluation that runs too long is stopped."""

from __future__ import annotations

import json
import math
import time

import pytest

import fedevo
from fedevo.result import EvaluationResult
from fedevo.searching.containment import out_of_range
from tests.helpers import read_csv, run_cli

OWN = """
name = "own"
evaluator = "python:ev.py:evaluate"
{extra}
[settings]
mode = "{mode}"
[genes]
x = {{ type = "real", low = 0.0, high = 1.0, default = 0.5 }}
"""

EVALUATOR = '''
import os, sys, time

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    mode = params["mode"]
    print("printed by", mode, seed)
    os.write(1, b"written to fd 1\\n")
    if mode == "raise":
        raise ValueError("boom")
    if mode == "type":
        return "not a result"
    if mode == "exit0":
        sys.exit(0)
    if mode == "exit3":
        sys.exit(3)
    if mode == "interrupt":
        raise KeyboardInterrupt("raised, not pressed")
    if mode == "inf":
        return (float("inf"), 1.0, 1.0)
    if mode == "negative":
        return {"error": 0.5, "comm": -1.0, "eps": 1.0}
    if mode == "sleep" and params["x"] > 0.5:
        time.sleep(1e9)
    if mode == "spin" and params["x"] > 0.5:
        while True:
            pass
    return {"error": 0.2 + 0.5 * params["x"], "comm": 1.0 + params["x"], "eps": None}
'''


def own_problem(tmp_path, mode: str, extra: str = ""):
    (tmp_path / "ev.py").write_text(EVALUATOR)
    p = tmp_path / f"own_{mode}.toml"
    p.write_text(OWN.format(mode=mode, extra=extra))
    return p


# ------------------------------------------------------------------------------------------------ results' ranges
def _res(**kw):
    base = dict(error=0.3, comm=10.0, eps=1.0, eps_paper=math.nan, accuracy_global=0.7, omega=1)
    return EvaluationResult(**{**base, **kw})


@pytest.mark.parametrize("kw, bad", [
    ({}, None), ({"eps": math.inf}, None), ({"eps": None}, None), ({"error": 0.0, "comm": 0.0, "eps": 0.0}, None),
    ({"error": 1.5}, "error = 1.5 is out of range; error must lie in [0, 1]"),
    ({"error": -0.1}, "error = -0.1 is out of range"),
    ({"error": math.inf}, "error is infinite"),
    ({"error": math.nan}, "error is undefined"),
    ({"comm": -1.0}, "comm = -1.0 is out of range; comm must be >= 0"),
    ({"comm": math.inf}, "the evaluation's comm is infinite; comm must be a finite number >= 0, got inf"),
    ({"error": math.inf}, "the evaluation's error is infinite; error must lie in [0, 1], got inf"),
    ({"eps": -2.0}, "eps = -2.0 is out of range; eps must be >= 0"),
    ({"eps_paper": -1.0}, "eps_paper = -1.0 is out of range"),
])
def test_results_are_held_to_the_objectives_ranges(kw, bad):
    got = out_of_range(_res(**kw))
    assert (got is None) if bad is None else (bad in got), got


# ------------------------------------------------------------------------------------------------ a search goes on
@pytest.mark.parametrize("mode, message", [
    ("raise", "ValueError: boom"),
    ("type", "TypeError: evaluator returned str"),
    ("exit0", "sys.exit(0) called by the evaluation's code"),
    ("exit3", "sys.exit(3) called by the evaluation's code"),
    ("interrupt", "KeyboardInterrupt raised by the evaluation's code: raised, not pressed"),
    ("inf", "the evaluation's error is infinite"),
    ("negative", "the evaluation's comm = -1.0 is out of range"),
])
def test_failing_user_code_fails_its_evaluation_and_the_search_says_one_line(tmp_path, capfd, mode, message):
    """Every evaluation fails the same way: the search runs to its end, logs them all, and says so in one line
    (SearchFailedError, a FedevoError); stdout stays empty, what the evaluator printed is in RUN/user.log."""
    out = tmp_path / "R"
    with pytest.raises(fedevo.FedevoError, match="every evaluation failed") as e:
        fedevo.search(str(own_problem(tmp_path, mode)), pop=4, gen=2, workers=0, out=out, page=False)
    assert "\n" not in str(e.value) and message in str(e.value)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"failed"}
    assert all(message in r["message"] for r in rows)
    captured = capfd.readouterr()
    assert "printed by" not in captured.out and "written to fd 1" not in captured.out
    log = (out / "user.log").read_text()
    assert log.count("printed by") == 8 and "--- evaluation 7 (generation 2" in log


def ctrl_c(problem, params, *, seed, rounds=None, data_dir=None):
    """An evaluation during which the user presses Ctrl-C (SIGINT to this process)."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
    return (0.5, 1.0, 1.0)


def test_a_real_ctrl_c_still_stops_the_search(tmp_path):
    """The SIGINT handler's flag tells a pressed Ctrl-C from a raised KeyboardInterrupt (tests/searching/
    test_own_evaluator.py and test_signals.py check the resume)."""
    prob = own_problem(tmp_path, "ok")
    with pytest.raises(KeyboardInterrupt):
        fedevo.search(str(prob), pop=4, gen=1, workers=0, out=tmp_path / "R", page=False, evaluator=ctrl_c)
    assert read_csv(tmp_path / "R" / "evaluations.csv") == []


def test_own_evaluator_rows_record_their_real_time(tmp_path):
    run = fedevo.search(str(own_problem(tmp_path, "ok")), pop=4, gen=1, workers=0, out=tmp_path / "R", page=False)
    assert all(r["wall_s"] > 0 for r in run.evaluations)
    assert all(r["eps"] is None for r in run.evaluations)  # eps None: no ε, accepted


# ------------------------------------------------------------------------------------------------ time limits
@pytest.mark.parametrize("mode", ["sleep", "spin"])
def test_an_evaluation_past_its_time_limit_is_stopped_and_the_search_goes_on(tmp_path, mode):
    """In-process (workers 0) the evaluations run in a child process that is killed when one overruns: a
    time.sleep(1e9) and a busy loop alike (no thread could stop either)."""
    t0 = time.monotonic()
    # the child process's start (imports) never counts against the limit (it answers "ready" first): 3 s leaves a
    # fast evaluation room on a loaded 2-core machine. Seed 0's first evaluation overruns (x 0.64), the five after it
    # (two generations) do not: one kill, each further kill only waited out the same 3 s and a new child's imports
    run = fedevo.search(str(own_problem(tmp_path, mode, "eval_timeout = 3")), pop=3, gen=2, workers=0, seed=0,
                        out=tmp_path / "R", page=False)
    rows = run.evaluations
    slow = [r for r in rows if r["x"] > 0.5]
    assert slow and len(slow) < len(rows)
    assert all(r["status"] == "failed" and "time limit of 3 s" in r["message"] for r in slow)
    assert all(r["status"] == "ok" for r in rows if r["x"] <= 0.5)
    assert any(r["status"] == "ok" for r in rows[rows.index(slow[0]) + 1:])  # the search went on after a kill
    assert time.monotonic() - t0 < 120


def test_output_below_python_goes_to_user_log_under_a_time_limit_too(tmp_path, capfd):
    """With a time limit each evaluation runs in a child process whose fd 1 is fedevo's stderr: what the code
    wrote there (C code, os.write(1, ...)) went to the terminal, among the progress lines, instead of user.log.
    It now reaches user.log under the evaluation's header, that of an evaluation stopped at its limit too."""
    run = fedevo.search(str(own_problem(tmp_path, "sleep", "eval_timeout = 3")), pop=4, gen=1, workers=0, seed=3,
                        out=tmp_path / "R", page=False)
    cap = capfd.readouterr()
    assert "written to fd 1" not in cap.err + cap.out
    slow = [r for r in run.evaluations if r["status"] == "failed"]
    assert slow and all(r["x"] > 0.5 for r in slow)
    log = (tmp_path / "R" / "user.log").read_text()
    for r in run.evaluations:
        header = f"--- evaluation {r.id} (generation 1, seed {r.seed}) ---\n"
        assert header + "written to fd 1\n" in log, log


def test_a_ray_tasks_output_below_python_comes_back_with_it(tmp_path, capfd):
    """On a Ray worker fd 1 is Ray's worker log on the node: what the code wrote there never reached the run's
    user.log. The task (`_ray_task`, run here as a worker runs it) now returns it with the evaluation's output."""
    from fedevo.problem import load_problem
    from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem
    from fedevo.searching.runner import _ray_task

    problem = load_problem(str(own_problem(tmp_path, "ok")))
    kind, value, out = _ray_task(problem, for_problem(DEFAULT_EVALUATOR, problem), {"x": 0.3}, 5, {}, 1)
    assert (kind, value.status) == ("ok", "ok")
    assert out == "written to fd 1\nprinted by ok 5\n", out
    assert "written to fd 1" not in capfd.readouterr().out


def test_no_writable_temporary_folder_leaves_evaluations_as_they_were(tmp_path, monkeypatch):
    """The file that takes an evaluation's output below Python is a convenience: where none can be made (a node's
    read-only /tmp) the evaluation runs all the same, that output going where fd 1 goes, as before."""
    import tempfile

    from fedevo.problem import load_problem
    from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem
    from fedevo.searching.runner import _ray_task, run_one

    problem = load_problem(str(own_problem(tmp_path, "ok")))
    evaluator = for_problem(DEFAULT_EVALUATOR, problem)

    def no_temp(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(tempfile, "mkstemp", no_temp)
    kind, value, out = _ray_task(problem, evaluator, {"x": 0.3}, 5, {}, 1)
    assert (kind, value.status, out) == ("ok", "ok", "printed by ok 5\n")
    kind, value, out = run_one(evaluator, problem, {"x": 0.3}, 5, {}, timeout=60)
    assert (kind, value.status, out) == ("ok", "ok", "printed by ok 5\n")


def test_eval_timeout_from_the_command_line_and_on_ray(tmp_path):
    """--eval-timeout overrides the problem file's; on Ray each worker stops its own evaluation the same way."""
    out = tmp_path / "R"
    r = run_cli_sub("search", "--problem", own_problem(tmp_path, "sleep", "eval_timeout = 1000"), "--pop", 4,
                    "--gen", 1, "--workers", 2, "--seed", 3, "--quiet", "--out", out, "--eval-timeout", 2)
    assert r.returncode == 0, r.stderr
    rows = read_csv(out / "evaluations.csv")
    assert {row["status"] for row in rows if float(row["x"]) > 0.5} == {"failed"}
    assert all("time limit of 2 s" in row["message"] for row in rows if float(row["x"]) > 0.5)
    assert r.stdout.splitlines()[0].startswith("search finished: 1/1 generations")


def run_cli_sub(*args):
    from tests.searching.search_helpers import run_cli as sub

    return sub(*args, timeout=300)


@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "5", True])
def test_bad_time_limits_are_one_line(tmp_path, value):
    with pytest.raises(fedevo.FedevoError, match="eval.timeout"):
        fedevo.search(str(own_problem(tmp_path, "ok")), pop=4, gen=1, workers=0, out=tmp_path / "R",
                      eval_timeout=value)
    assert not (tmp_path / "R").exists()
    extra = f"eval_timeout = {json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else value}"
    if isinstance(value, bool):
        extra = "eval_timeout = true"
    elif isinstance(value, float) and not math.isfinite(value):
        extra = f"eval_timeout = {'nan' if math.isnan(value) else 'inf'}"
    with pytest.raises(fedevo.FedevoError, match="eval_timeout"):
        fedevo.Problem.from_file(own_problem(tmp_path, "ok", extra))


# ------------------------------------------------------------------------------------------------ fedevo evaluate
@pytest.mark.parametrize("mode", ["raise", "type", "exit0", "interrupt", "negative"])
def test_evaluate_of_failing_user_code_is_one_line(tmp_path, capfd, mode):
    code, out, err = run_cli(["evaluate", "--problem", own_problem(tmp_path, mode), "--json"], capfd)
    assert code == 2 and out == ""
    lines = [ln for ln in err.splitlines() if ln.startswith("fedevo:")]
    assert len(lines) == 1 and lines[0].startswith("fedevo: error: problem 'own': the evaluation failed: ")
    assert "Traceback" not in err


def test_evaluate_json_stdout_is_one_object_whatever_the_code_prints(tmp_path, capfd):
    code, out, err = run_cli(["evaluate", "--problem", own_problem(tmp_path, "ok"), "--json"], capfd)
    assert code in (0, None), err
    assert json.loads(out)["status"] == "ok"
    assert "printed by ok" in err and "written to fd 1" in err


# ------------------------------------------------------------------------------------------------ user models
MODELS = '''
import math, random, sys
import torch
from torch import nn

class NaNOut(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def forward(self, x):  # NaN on the data (finite on the load check's zero batch)
        x = x.flatten(1)
        return self.fc(x) + torch.where(x.abs().sum(1, keepdim=True) > 0, float("nan"), 0.0)

def nan_model(input_shape, num_classes):
    return NaNOut(math.prod(input_shape), num_classes)

def huge(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 20000), nn.ReLU(),
                         nn.Linear(20000, 15000), nn.ReLU(), nn.Linear(15000, num_classes))

def random_width(input_shape, num_classes):
    w = random.randint(8, 4096)
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), w), nn.ReLU(), nn.Linear(w, num_classes))

def exits(input_shape, num_classes):
    sys.exit(0)

def chatty(input_shape, num_classes):
    print("building a model")
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))
'''

USER_PROBLEM = """
name = "um"
dataset = "digits"
model = "python:models.py:{fn}"
[data]
clients = 4
[train]
rounds = {rounds}
epochs = 1
upload_loss = {loss}
[genes]
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
"""


def user_problem(tmp_path, fn: str, rounds: int = 2, loss: float = 0.3):
    (tmp_path / "models.py").write_text(MODELS)
    p = tmp_path / f"um_{fn}.toml"
    p.write_text(USER_PROBLEM.format(fn=fn, rounds=rounds, loss=loss))
    return p


@pytest.mark.parametrize("loss", [0.3, 0.999])
def test_nan_output_is_diverged_even_when_every_upload_was_lost(tmp_path, loss):
    """upload_loss 0.999: nothing arrives, the model stays as initialised and its output is NaN: diverged with the
    worst objectives, never an `ok` row with an accuracy that argmax(NaN) made up."""
    res = fedevo.evaluate(str(user_problem(tmp_path, "nan_model", rounds=1, loss=loss)))
    assert res.status == "diverged" and "not finite" in res.message + " not finite"
    assert res.error == 1.0


def test_a_model_too_large_is_refused_before_it_is_built(tmp_path, monkeypatch):
    """3·10⁸ parameters: sized on torch's meta device (no memory) and refused in one line at load."""
    import resource

    from fedevo import guards

    monkeypatch.setattr(guards, "available_memory", lambda: 4 * 1024**3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(fedevo.FedevoError, match=r"model factory 'huge' .* builds 30\d,\d{3},\d{3} parameters"):
        fedevo.Problem.from_file(user_problem(tmp_path, "huge"))
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 500  # 3e8 float32 parameters would be 1,144 MiB


def test_a_factory_whose_architecture_changes_is_one_line(tmp_path):
    with pytest.raises(fedevo.FedevoError, match="built a different architecture on another call"):
        fedevo.Problem.from_file(user_problem(tmp_path, "random_width"))


def test_sys_exit_in_a_factory_is_one_line(tmp_path):
    with pytest.raises(fedevo.FedevoError, match=r"model factory 'exits' raised UserExit: sys.exit\(0\)"):
        fedevo.Problem.from_file(user_problem(tmp_path, "exits"))


def test_a_factorys_output_goes_to_stderr(tmp_path, capfd):
    code, out, err = run_cli(["evaluate", "--problem", user_problem(tmp_path, "chatty", rounds=1), "--json"], capfd)
    assert code in (0, None), err
    assert json.loads(out)["status"] == "ok" and "building a model" in err


def test_quiet_user_code_leaves_no_user_log(tmp_path):
    PLAIN = "def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n    return (0.5, 1.0, 1.0)\n"
    (tmp_path / "quiet.py").write_text(PLAIN)
    prob = tmp_path / "q.toml"
    prob.write_text(OWN.format(mode="ok", extra="").replace("ev.py", "quiet.py"))
    run = fedevo.search(str(prob), pop=4, gen=1, workers=0, out=tmp_path / "R", page=False)
    assert len(run.evaluations) == 4 and not (run.path / "user.log").exists()


def test_a_lost_ray_cluster_stops_the_search_instead_of_failing_its_evaluations(tmp_path):
    """The 2026-11-27 audit: `ray stop` mid-search logged the running evaluations as failed
    (LocalRayletDiedError), and the resumed search then differed from an uninterrupted one. Losing the cluster is
    now an abort (the search stops, resumable); a task's own failure is still that evaluation's, its message
    without terminal colour codes."""
    import ray.exceptions as rex

    from fedevo.searching.containment import UserLog
    from fedevo.searching.runner import RayRunner, RunnerStats, Task, _Abort

    class FakeRay:
        exceptions = rex

        def __init__(self, error):
            self.error = error

        def wait(self, pending, num_returns=1, timeout=None):
            return pending[:1], pending[1:]

        def get(self, ref):
            raise self.error

    def runner(error):
        r = object.__new__(RayRunner)
        r._ray, r.stats, r.slots, r._owns_ray = FakeRay(error), RunnerStats(), 1, True
        r.user_log = UserLog(tmp_path)
        return r

    task = Task(0, 1, 0, {}, 7)
    done = []
    with pytest.raises(_Abort, match=r"the Ray cluster went away under the search \(LocalRayletDiedError"):
        runner(rex.LocalRayletDiedError()).drain({"ref": [task]}, lambda t, r: done.append(r))
    assert done == []  # nothing logged as failed
    class TaskError(rex.RayError):  # as Ray's task errors print: coloured
        pass

    runner(TaskError("\x1b[36mray::_ray_task()\x1b[39m died")).drain({"ref": [task]}, lambda t, r: done.append(r))
    assert len(done) == 1 and done[0].status == "failed"
    assert done[0].message == "TaskError: ray::_ray_task() died"
