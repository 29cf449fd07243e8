"""A problem file's own evaluator (issue 26 item 3): free-form genes and [settings] reach the user's function, its
dict / tuple / EvaluationResult is read, a wrong return is a failed evaluation (the search goes on), a bad spec is
one line before anything is written; search, resume and Ray work as with the simulator."""

from __future__ import annotations


import re

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.problem import load_problem

from tests.helpers import cli

from .search_helpers import without


def rows_of(run) -> list:
    """A run's evaluations without wall times, NaN written as a string (NaN != NaN)."""
    nan = lambda v: "nan" if isinstance(v, float) and v != v else v  # noqa: E731
    return [{k: nan(v) for k, v in r.items()} for r in without(sorted(run.evaluations, key=lambda r: r["id"]),
                                                                "wall_s")]

EVALUATOR = '''
import os

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    stop = os.environ.get("OWN_EVAL_INTERRUPT_AT")
    calls = os.environ.get("OWN_EVAL_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(f"{seed}\\n")
    if stop and os.path.exists(stop):
        n = int(open(stop).read() or 0)
        if n == 0:
            os.remove(stop)
            import signal
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C (a KeyboardInterrupt raised here only fails this one)
        open(stop, "w").write(str(n - 1))
    width, depth, mode = params["width"], params["depth"], params["mode"]
    error = 1.0 / (1.0 + width * depth) + (0.05 if mode == "fast" else 0.0) + (seed % 7) * 1e-4
    comm = width * depth * params["scale"]
    eps = 10.0 / width
    if params["shape"] == "tuple":
        return error, comm, eps
    return {"error": error, "comm": comm, "eps": eps, "privacy": {"note": "own"}}

def genes_only(problem, params, *, seed, rounds=None, data_dir=None):  # as a search's own evaluator= sees them
    return 1.0 / (1.0 + params["width"] * params["depth"]) + (seed % 7) * 1e-4, float(params["width"]), 1.0

def wrong(problem, params, *, seed, rounds=None, data_dir=None):
    return "oops" if params["width"] > 8 else (0.5, 1.0, 1.0)

def nosig(problem, params):  # no seed, rounds, data_dir: refused when it loads
    return 0.5, 1.0, 1.0

def extra(problem, params, *, seed, rounds=None, data_dir=None, budget):  # a keyword fedevo never passes
    return 0.5, 1.0, 1.0

def takes_kwargs(problem, params, **kwargs):
    return [0.5, float(params["width"]), 1.0 + kwargs["seed"] % 2]  # a list: read as the tuple
'''

TOML = '''
name = "own"
evaluator = "python:ev.py:{fn}"
[settings]
scale = 3.0
shape = "{shape}"
[genes]
width = {{ type = "int", low = 1, high = 16, default = 4 }}
depth = {{ type = "real", low = 0.5, high = 4.0, default = 1.0, log = true }}
mode = {{ type = "choice", choices = ["fast", "slow"], default = "slow" }}
'''


@pytest.fixture
def own(tmp_path):
    (tmp_path / "ev.py").write_text(EVALUATOR)

    def write(fn="evaluate", shape="dict", name="own.toml"):
        p = tmp_path / name
        p.write_text(TOML.format(fn=fn, shape=shape))
        return p
    return write


def test_settings_and_genes_reach_the_evaluator(own):
    prob = load_problem(str(own()))
    assert not prob.simulated and prob.gene_names == ("width", "depth", "mode")
    r = fedevo.evaluate(prob, {"width": 8, "mode": "fast"}, seed=3)
    assert r.status == "ok" and r.comm == pytest.approx(8 * 1.0 * 3.0) and r.eps == pytest.approx(10 / 8)
    assert r.error == pytest.approx(1 / 9 + 0.05 + 3e-4) and r.privacy == {"note": "own"}
    with pytest.raises(FedevoError, match="unknown parameter"):
        fedevo.evaluate(prob, {"lr": 0.1})


def test_search_resume_and_tuple_results(own, tmp_path, monkeypatch):
    p = own(shape="tuple")
    full = fedevo.search(str(p), pop=6, gen=3, workers=0, seed=4, out=tmp_path / "full", page=False)
    rows = full.evaluations
    assert len(rows) == 18 and all(r["status"] == "ok" for r in rows)
    assert {"width", "depth", "mode"} <= set(rows[0]) and full.front
    # interrupted in generation 2 (the 9th evaluation), then resumed: the same evaluations
    marker = tmp_path / "stop"
    marker.write_text("8")
    monkeypatch.setenv("OWN_EVAL_INTERRUPT_AT", str(marker))
    with pytest.raises(KeyboardInterrupt):
        fedevo.search(str(p), pop=6, gen=3, workers=0, seed=4, out=tmp_path / "cut", page=False)
    assert len(fedevo.open_run(tmp_path / "cut").evaluations) == 8
    resumed = fedevo.resume(tmp_path / "cut", workers=0, page=False)
    assert rows_of(resumed) == rows_of(full)


def test_retrain_uses_the_evaluator_and_the_problems_standard(own, tmp_path):
    p = own()
    p.write_text(p.read_text() + "[standard]\nwidth = 16\nscale = 1.0\n")
    run = fedevo.search(str(p), pop=4, gen=1, workers=0, seed=5, out=tmp_path / "r", page=False)
    report = fedevo.retrain(run, "lowest-error", rounds=3, workers=0)
    std = report.results["standard"]
    assert std.status == "ok" and std.comm == pytest.approx(16 * 1.0 * 1.0) and std.eps == pytest.approx(10 / 16)
    best = run.pick("lowest-error")[0]
    again = report.results["1"]
    assert again.comm == pytest.approx(best["comm"]) and again.eps == pytest.approx(best["eps"])
    md = (report.out_dir / "report.md").read_text()
    assert "standard (the problem's [standard] settings)" in md and "dense" not in md


def test_a_wrong_return_fails_that_evaluation_only(own, tmp_path):
    run = fedevo.search(str(own(fn="wrong")), pop=6, gen=2, workers=0, seed=1, out=tmp_path / "r", page=False)
    rows = run.evaluations
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and len(failed) < len(rows)
    assert all(r["width"] > 8 for r in failed) and all(r["width"] <= 8 for r in rows if r["status"] == "ok")
    assert "evaluator returned str" in failed[0]["message"]
    assert failed[0]["message"].startswith("TypeError: evaluator returned str") and "Traceback" not in \
        failed[0]["message"]  # what was returned, not where in fedevo it was found out


def test_numbers_of_any_scalar_kind_are_numbers_and_metrics_are_held_to_them():
    # numpy float32 / int64, 0-d arrays and tensors are numbers (np.float32 and np.int64 were refused while
    # np.float64, a float, was taken); a metric that is not a number fails the evaluation (it was kept)
    import math

    import numpy as np
    import torch

    from fedevo.result import coerce_result

    r = coerce_result({"error": np.float32(0.25), "comm": np.array(10.0), "eps": torch.tensor(2.0),
                       "omega": np.int64(5), "metrics": {"loss": torch.tensor(0.5), "n": np.int32(3)}})
    assert (r.error, r.comm, r.eps, r.omega, r.metrics) == (0.25, 10.0, 2.0, 5, {"loss": 0.5, "n": 3.0})
    assert all(type(v) is float for v in (r.error, r.comm, r.eps, *r.metrics.values())) and type(r.omega) is int
    for bad, says in [({"error": True, "comm": 1, "eps": 1}, "error must be a number, got True"),
                      ({"error": 0.1, "comm": np.ones(2), "eps": 1}, "comm must be a number"),
                      ({"error": 0.1, "comm": 1, "eps": 1, "metrics": {"x": "high"}},
                       "metrics['x'] must be a number, got 'high'"),
                      ({"error": 0.1, "comm": 1, "eps": 1, "omega": 2.5}, "omega must be an integer")]:
        with pytest.raises(TypeError, match=re.escape(says)):
            coerce_result(bad)
    assert math.isnan(coerce_result({"error": 0.1, "comm": 1, "eps": None, "metrics": {}}).eps_paper)
    # an EvaluationResult the user built is held to the same rule (a tensor error was refused there, a str metric
    # kept): one rule for both
    from fedevo.result import EvaluationResult

    built = EvaluationResult(error=torch.tensor(0.25), comm=1.0, eps=1.0, eps_paper=math.nan, accuracy_global=0.5,
                             omega=np.int64(3), metrics={"loss": np.float32(0.5)})
    r = coerce_result(built)
    assert (r.error, r.omega, r.metrics) == (0.25, 3, {"loss": 0.5}) and type(r.error) is float
    with pytest.raises(TypeError, match=re.escape("metrics['x'] must be a number, got 'high'")):
        coerce_result(EvaluationResult(error=0.1, comm=1.0, eps=1.0, eps_paper=math.nan, accuracy_global=0.5,
                                       omega=1, metrics={"x": "high"}))
    fine = EvaluationResult(error=0.1, comm=1.0, eps=1.0, eps_paper=math.nan, accuracy_global=0.5, omega=1)
    assert coerce_result(fine) is fine  # fedevo's own results pass as they are


@pytest.mark.parametrize("spec, says", [
    ('"python:missing.py:evaluate"', "does not exist"),
    ('"python:ev.py:nothere"', "has no function 'nothere'"),
    ('"no_such_module_xyz:evaluate"', "cannot be imported"),
    ('"evaluate"', "expected 'package.module:function'"),
    # (No module named 'ev', or, once a python: file of that folder put it on the import path, 'ev.py': not a
    # package; the hint either way)
    ('"ev.py:evaluate"', r"cannot be imported: ModuleNotFoundError: No module named 'ev.*\(a file is named "
                         r"python:ev.py:evaluate\)"),
    ('"python:ev.py:nosig"', "cannot take fedevo's call evaluator.* unexpected keyword argument 'seed'"),
    ('"python:ev.py:extra"', "cannot take fedevo's call evaluator.*missing a required argument: 'budget'.*defaults"),
])
def test_bad_evaluator_specs_are_one_line_and_write_nothing(own, tmp_path, spec, says):
    p = own()
    p.write_text(p.read_text().replace('"python:ev.py:evaluate"', spec))
    with pytest.raises(FedevoError, match=says):
        load_problem(str(p))
    out = tmp_path / "never"
    r = cli("search", "--problem", p, "--pop", 4, "--gen", 1, "--workers", 0, "--out", out)
    assert r.returncode == 2 and not out.exists()
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fedevo: error:") and re.search(says, err[0]), r.stderr


def test_a_module_named_like_a_file_says_how_a_file_is_named(own):
    p = own()
    p.write_text(p.read_text().replace('"python:ev.py:evaluate"', '"ev.py:evaluate"'))
    with pytest.raises(FedevoError, match=re.escape("(a file is named python:ev.py:evaluate)")):
        load_problem(str(p))


def test_an_evaluator_that_cannot_take_the_call_is_refused_by_every_entry(own, tmp_path):
    """The problem file's own, a search's evaluator= spec and a function given to fedevo.search: each refused in
    one line before a run directory exists (each of its evaluations failed with a TypeError); **kwargs takes the
    keywords, and a list is read as the tuple (error, comm, eps)."""
    p = own()
    says = "evaluator nosig(problem, params) cannot take fedevo's call"
    with pytest.raises(FedevoError) as e:
        load_problem(str(own(fn="nosig", name="nosig.toml")))
    assert str(e.value) == ("problem 'nosig': evaluator nosig(problem, params) cannot take fedevo's call "
                            "evaluator(problem, params, *, seed, rounds, data_dir) (got an unexpected keyword argument "
                            "'seed'); give it those parameters, or **kwargs")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ev_for_signature", tmp_path / "ev.py")
    ev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ev)
    for evaluator in (f"python:{tmp_path / 'ev.py'}:nosig", ev.nosig):
        with pytest.raises(FedevoError, match=re.escape(says)):
            fedevo.search(str(p), pop=4, gen=1, workers=0, out=tmp_path / "never", page=False, evaluator=evaluator)
        assert not (tmp_path / "never").exists()
    run = fedevo.search(str(own(fn="takes_kwargs", name="kw.toml")), pop=4, gen=1, workers=0, out=tmp_path / "kw",
                        page=False)
    assert all(r["status"] == "ok" for r in run.evaluations) and {r["error"] for r in run.evaluations} == {0.5}


def test_ray_workers_get_the_users_function(own, tmp_path):
    p = own()
    serial = fedevo.search(str(p), pop=4, gen=1, workers=0, seed=2, out=tmp_path / "s", page=False)
    ray_run = fedevo.search(str(p), pop=4, gen=1, workers=2, seed=2, out=tmp_path / "r", page=False)
    assert rows_of(ray_run) == rows_of(serial)
    # a search's own --evaluator python:FILE:fn travels to Ray's workers by value: it failed every evaluation
    # ("No module named 'fedevo_user_evaluator_...'": registered with cloudpickle, not Ray's; the 2026-11-27 audit)
    spec = f"python:{tmp_path / 'ev.py'}:genes_only"
    alone = fedevo.search(str(p), pop=4, gen=1, workers=0, seed=2, out=tmp_path / "e0", page=False, evaluator=spec)
    given = fedevo.search(str(p), pop=4, gen=1, workers=2, seed=2, out=tmp_path / "e", page=False, evaluator=spec)
    assert all(r["status"] == "ok" for r in given.evaluations) and rows_of(given) == rows_of(alone)


def test_an_empty_front_is_said_in_words_without_a_table_or_its_footers(own, tmp_path):
    """No Pareto solution (every evaluation failed, or none meets the constraints): `fedevo front` says so and why,
    with no empty table, caption or 'every ε above' line about rows that are not there; of a search that has ended,
    without 'yet' or 'so far' (it said 'none yet — none of the 4 evaluations so far finished' of a finished run)."""
    p = own()
    p.write_text(p.read_text() + "\n[constraints]\neps = 0.01\n")  # ε = 10 / width >= 0.625: none meets it
    run = fedevo.search(str(p), pop=4, gen=1, workers=0, seed=6, out=tmp_path / "c", page=False)
    assert run.evaluations and not run.front
    r = cli("front", run.path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == [
        "Pareto set of own: none — none of the 4 ok evaluations (of 4) meets the problem's constraints "
        "(eps <= 0.01)"]
    (tmp_path / "boom.py").write_text("def boom(problem, params, *, seed, rounds=None, data_dir=None):\n"
                                      "    raise RuntimeError('boom')\n")
    with pytest.raises(FedevoError, match="every evaluation failed"):
        fedevo.search(str(own()), pop=4, gen=1, workers=0, seed=6, out=tmp_path / "f", page=False,
                      evaluator=f"python:{tmp_path / 'boom.py'}:boom")
    r = cli("front", tmp_path / "f")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines() == [
        "Pareto set of own: none — none of the 4 evaluations finished with status ok (failed or "
        "diverged)", "4 evaluation(s) not ok (failed/diverged): ids 0, 1, 2, 3"]


def test_front_and_page_do_not_claim_a_trust_model(own, tmp_path):
    run = fedevo.search(str(own()), pop=4, gen=1, workers=0, seed=6, out=tmp_path / "r")
    r = cli("front", run.path)
    assert r.returncode == 0, r.stderr
    assert "holds under" not in r.stdout and "own evaluator" in r.stdout
    page = (run.path / "front.html").read_text()
    assert "own evaluator" in page and "trust <b>" not in page and "(, )" not in page
    assert "privacy settings that are genes" not in page and "settings passed to the evaluator" in page


TIMED = '''
import time

def returns_tuple(problem, params, *, seed, rounds=None, data_dir=None):
    time.sleep(0.01)
    return 1.0 / (1.0 + params["width"]), float(params["width"]), 1.0

def returns_dict(problem, params, *, seed, rounds=None, data_dir=None):
    return dict(zip(("error", "comm", "eps"), returns_tuple(problem, params, seed=seed)))
'''


@pytest.mark.parametrize("entry", ["problem file", "evaluator="])
@pytest.mark.parametrize("shape", ["dict", "tuple"])
def test_a_dict_or_a_tuple_gets_its_time_and_rounds_from_either_entry(own, tmp_path, entry, shape):
    """A dict or a tuple carries no time and no rounds: its row has the seconds fedevo measured around the call
    and the rounds asked for, whether the problem file names the evaluator (ProblemEvaluator) or the search is
    given it (the runner's own call): both read it with fedevo.result.measured."""
    (tmp_path / "timed.py").write_text(TIMED)
    spec = f"python:{tmp_path / 'timed.py'}:returns_{shape}"
    p = own()
    p.write_text(p.read_text().replace('evaluator = "python:ev.py:evaluate"', f'evaluator = "{spec}"'))
    run = fedevo.search(str(p), pop=4, gen=1, workers=0, rounds=3, out=tmp_path / "r", page=False,
                        evaluator=spec if entry == "evaluator=" else None)
    rows = run.evaluations
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert all(r["wall_s"] >= 0.01 for r in rows) and all(r["rounds_trained"] == 3 for r in rows)


def test_a_function_of_the_script_that_searched_says_how_to_resume():
    """fedevo.search(evaluator=fn) from a script records '__main__:fn'; `fedevo resume` cannot load it, and says
    where it can be continued (it said only that __main__ has no function fn)."""
    from fedevo.errors import FedevoError
    from fedevo.searching.evaluator import load_evaluator

    with pytest.raises(FedevoError, match=r"continue from that script with fedevo\.resume\(RUN, evaluator=my_eval\)"):
        load_evaluator("__main__:my_eval")


EDITS_ITSELF = '''
import math
_N = [0]

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    _N[0] += 1
    if _N[0] == 2:  # the user saves the file while the search runs (here: a comment added)
        with open(__file__, "a") as f:
            f.write("# edited\\n")
    return {"error": 0.1 + params["width"] / 100, "comm": 10.0 * params["width"], "eps": params["depth"]}
'''


def test_an_evaluator_file_saved_while_the_search_runs(own, tmp_path):
    """review16 F5: the evaluator was loaded, and its file checked, at every evaluation: one saved while the search
    ran failed every later evaluation ('changed since this process imported it'), rows a resume keeps. The search
    goes on with the code run.json recorded; a new search in this process is refused at its start."""
    (tmp_path / "ev.py").write_text(EDITS_ITSELF)
    p = own()
    run = fedevo.search(str(p), pop=4, gen=2, workers=0, seed=1, out=tmp_path / "R", page=False, progress=False)
    assert len(run.evaluations) == 8 and {r["status"] for r in run.evaluations} == {"ok"}
    assert (tmp_path / "ev.py").read_text().endswith("# edited\n")
    with pytest.raises(FedevoError, match=r"ev\.py \(evaluator file\) changed since this process imported it"):
        fedevo.search(str(p), pop=4, gen=1, workers=0, seed=1, out=tmp_path / "R2", page=False, progress=False)


def test_an_evaluator_whose_helper_module_is_reloaded_after_its_edit_evaluates_with_it(own, tmp_path, monkeypatch):
    """The evaluator is imported once per process (089f843); a module beside its file that the notebook edits and
    reloads is taken (plugins), and the evaluator function this process holds is the file's imported anew: a new
    search evaluates with the reloaded module, not the function imported before it."""
    import importlib
    import os
    import sys

    helper = f"offset_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{helper}.py").write_text("OFFSET = 0.0\n")
    (tmp_path / "ev.py").write_text(f"from {helper} import OFFSET\n\n"
                                    "def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
                                    "    return 0.1 + OFFSET, float(params['width']), 1.0\n")
    p = own()
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        a = fedevo.search(str(p), optimizer="random", pop=2, gen=1, workers=0, seed=1, out=tmp_path / "A", page=False,
                          progress=False)
        assert {r["error"] for r in a.evaluations} == {0.1}
        (tmp_path / f"{helper}.py").write_text("OFFSET = 0.25\n")
        importlib.reload(sys.modules[helper])
        b = fedevo.search(str(p), optimizer="random", pop=2, gen=1, workers=0, seed=1, out=tmp_path / "B", page=False,
                          progress=False)
        assert {r["error"] for r in b.evaluations} == {0.35}
    finally:
        sys.modules.pop(helper, None)



def test_a_module_evaluator_reloaded_is_the_one_that_runs(tmp_path, monkeypatch):
    """review17 F1: a problem's `evaluator = "module:function"` was kept per process since the evaluator was
    imported once (a python: file's rule), so a notebook's importlib.reload(module) after an edit was not run:
    fedevo.evaluate gave the old function's error while the module gave the new one."""
    import importlib
    import sys

    name = "own_ev_reloaded_" + tmp_path.name.replace("-", "_")
    (tmp_path / f"{name}.py").write_text(
        'def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n'
        '    return {"error": 0.10, "comm": 1.0, "eps": 1.0}\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    p = tmp_path / "m.toml"
    p.write_text(f'name = "m"\nevaluator = "{name}:evaluate"\n[genes]\n'
                 'width = { type = "int", low = 1, high = 16, default = 4 }\n')
    try:
        assert fedevo.evaluate(str(p), {"width": 3}).error == pytest.approx(0.10)
        (tmp_path / f"{name}.py").write_text(
            'def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n'
            '    return {"error": 0.35, "comm": 1.0, "eps": 1.0}  # another size: no stale bytecode\n')
        importlib.reload(sys.modules[name])
        assert fedevo.evaluate(str(p), {"width": 3}).error == pytest.approx(0.35)
    finally:
        sys.modules.pop(name, None)
