"""Raising a finished search's budgets: `fedevo resume DIR --budget N` (also --gen, --time-budget, --patience)
goes on from the newest checkpoint as if the search had been started with the new budgets; budgets.json keeps
them (run.json never changes) and every reader reads them; a budget still reached, a lowered one, an exhausted
optimiser or a bad value is one line and changes nothing."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.searching.budgets import BUDGETS_FILE, OPEN_GEN, raised
from fedevo.searching.rundata import load_run
from fedevo.searching.run import SearchRun, run_finished
from fedevo.searching.settings import SearchSettings

from .search_fakes import Killed, fake_evaluate, let_kills_through
from tests.helpers import cli

from .search_helpers import FAKE, REPO, cli_cmd, env, read_csv, toy_problem_file, without

KILLER = "tests.searching.search_fakes:fake_kill_after"


def _rows(run_dir):
    return sorted(without(read_csv(run_dir / "evaluations.csv"), "wall_s", "chain"), key=lambda r: int(r["id"]))


def _search(tmp_path, name, **kw):
    return fedevo.search(str(toy_problem_file(tmp_path)), seed=3, workers=0, out=tmp_path / name, evaluator=FAKE,
                         page=False, **kw)


@pytest.mark.parametrize("optimizer,pop,first,then", [
    ("nsga3", 4, {"gen": 2}, {"gen": 4}),
    ("nsga3", 4, {"budget": 8}, {"budget": 16}),
    ("random", 3, {"budget": 6}, {"budget": 12}),
    ("tpe", 1, {"budget": 5}, {"budget": 9}),
    ("gp", 1, {"budget": 4}, {"budget": 7}),
])
def test_a_raised_budget_goes_on_as_if_the_search_had_been_started_with_it(tmp_path, optimizer, pop, first, then):
    short = _search(tmp_path, "R", optimizer=optimizer, pop=pop, **first)
    assert short.summary.complete and (short.path / "stop.json").exists()
    longer = fedevo.resume(short.path, workers=0, page=False, **then)
    straight = _search(tmp_path, "W", optimizer=optimizer, pop=pop, **then)
    assert _rows(longer.path) == _rows(straight.path)
    assert longer.summary.evaluations == straight.summary.evaluations and longer.summary.stop == straight.summary.stop
    stop = json.loads((longer.path / "stop.json").read_text())
    assert stop["evaluations"] == straight.summary.evaluations
    for key, value in then.items():
        assert stop["budgets"][key] == value
    record = json.loads((longer.path / BUDGETS_FILE).read_text())
    (change,) = record["raised"]
    assert change["evaluations"] == short.summary.evaluations and change["to"] == record["budgets"]
    assert read_csv(longer.path / "hypervolume.csv") == read_csv(straight.path / "hypervolume.csv")


def test_a_budget_raised_past_a_cut_batch_runs_to_it(tmp_path):
    run = _search(tmp_path, "R", optimizer="random", pop=4, budget=10)  # 4 + 4 + 2
    run = fedevo.resume(run.path, workers=0, page=False, budget=20)
    assert [r["generation"] for r in read_csv(run.path / "evaluations.csv")].count("6") == 2  # then 4 + 4 + 2
    assert run.summary.evaluations == 20 and run.summary.stop == "budget"
    with pytest.raises(FedevoError, match=r"\(budget= evaluations reached\).*`fedevo\.resume\('.*', budget=N\)`"):
        fedevo.resume(run.path, workers=0, page=False)


def test_readers_read_the_budgets_in_force(tmp_path, monkeypatch):
    let_kills_through(monkeypatch)
    run = _search(tmp_path, "R", optimizer="random", pop=3, budget=6)
    sr = SearchRun.open(run.path)
    assert sr.raise_budgets(budget=9) == "budget=6 → 9"  # as fedevo.resume names them (not the derived gen)
    assert not (run.path / BUDGETS_FILE).exists()  # checked, not yet in force: `run` puts it there

    def killed(problem, params, **kw):
        raise Killed

    with pytest.raises(Killed):  # in force from the moment the resumed search holds the run
        fedevo.resume(run.path, workers=0, page=False, budget=9, evaluator=killed)
    assert not (run.path / "stop.json").exists()  # the stop it lifted
    data = load_run(run.path)
    assert data.settings.budget == 9 and data.settings.expected_evaluations == 9
    assert not run_finished(run.path, data.settings)
    from fedevo.viz.front import is_complete

    assert not is_complete(data)
    (run.path / BUDGETS_FILE).write_text('{"budgets": {"gen": 3}}')
    with pytest.raises(FedevoError, match=r"budgets.json is corrupt.*delete it to go back to run.json's budgets"):
        load_run(run.path)


def test_what_cannot_be_raised_is_one_line_and_changes_nothing(tmp_path):
    run = _search(tmp_path, "R", optimizer="random", pop=3, budget=6, time_budget=1e-9)  # time ends it first
    before = sorted(p.name for p in run.path.iterdir())
    for kw, says in [({"budget": 12}, r"time_budget=1e-09 is reached already \(3 evaluations, 1 batches"),
                     ({"budget": 2, "time_budget": 60.0}, r"budget=2 is reached already"),
                     ({"gen": 1, "time_budget": 60.0}, r"gen=1 is reached already"),
                     ({"budget": 0}, r"budget= must be a whole number of evaluations >= 1, got 0"),
                     ({"patience": -1}, r"patience= must be"),
                     ({"gen": 0}, r"gen= must be a whole number of batches >= 1, got 0"),
                     # what read_run_json's settings check refuses: it would leave a run no reader can open
                     ({"gen": 10**9, "budget": 12, "time_budget": 60.0},
                      r"pop=3 × gen=1000000000 = 3000000000 evaluations is too many")]:
        with pytest.raises(FedevoError, match=says):
            fedevo.resume(run.path, workers=0, page=False, **kw)
    assert sorted(p.name for p in run.path.iterdir()) == before  # no budgets.json; stop.json kept
    with pytest.raises(FedevoError, match="budget must be an int"):
        fedevo.resume(run.path, workers=0, page=False, budget="12")


OWN = """
name = "own"
evaluator = "python:ev.py:evaluate"
[genes]
x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }
"""
EV = """
def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    return {"error": 0.2 + 0.5 * params["x"], "comm": 1.0 + params["x"], "eps": None}
"""


@pytest.mark.parametrize("why", ["in use", "changed", "batch option"])
def test_a_resume_refused_after_the_budget_check_changes_nothing(tmp_path, why):
    """A resume refused for another reason than its budgets (the run directory in use; its evaluator's file changed
    since the search; --batch-generation for an evaluator it cannot batch) leaves the run as it was: the raised
    budgets are put in force only once the search holds the run and has checked its inputs and options (they were
    written first, and stayed; the batch option was checked after them)."""
    from fedevo.dirlock import hold

    (tmp_path / "ev.py").write_text(EV)
    (tmp_path / "own.toml").write_text(OWN)
    run = fedevo.search(str(tmp_path / "own.toml"), optimizer="random", pop=3, budget=6, seed=1, workers=0,
                        out=tmp_path / "R", page=False)
    if why == "changed":
        (tmp_path / "ev.py").write_text(EV + "# edited\n")
        with pytest.raises(FedevoError, match="ev.py"):
            fedevo.resume(run.path, workers=0, page=False, budget=12)
    elif why == "batch option":
        with pytest.raises(FedevoError, match="batch_generation=True batches fedevo's simulator only"):
            fedevo.resume(run.path, workers=0, page=False, budget=12, batch_generation=True)
    else:
        with contextlib.closing(hold(run.path, FedevoError("in use"))):
            with pytest.raises(FedevoError, match="in use"):
                fedevo.resume(run.path, workers=0, page=False, budget=12)
    assert not (run.path / BUDGETS_FILE).exists() and (run.path / "stop.json").exists()


def test_an_exhausted_optimiser_is_not_raised():
    s = SearchSettings(pop=4, gen=4, budget=8)
    with pytest.raises(FedevoError, match="the optimiser proposed no new candidates: a larger budget"):
        raised(s, {"generation": 2, "next_id": 8, "stopped_early": True, "stop": "exhausted"}, {"budget": 20})


TINY = """
name = "tiny"
evaluator = "python:ev.py:evaluate"
[genes]
k = { type = "int", low = 0, high = 2, default = 1 }
"""


def test_a_search_its_optimiser_ended_is_not_told_to_raise_a_budget(tmp_path):
    """NSGA-III over three configurations runs out of new offspring: the refusal to resume it named
    `fedevo resume RUN --budget N` as the way on, which is then refused too (a larger budget would not change it)."""
    (tmp_path / "ev.py").write_text(EV.replace('params["x"]', 'params["k"]'))
    (tmp_path / "tiny.toml").write_text(TINY)
    run = fedevo.search(str(tmp_path / "tiny.toml"), pop=4, gen=20, seed=0, workers=0, out=tmp_path / "R",
                        page=False)
    assert run.summary.stop == "exhausted"
    with pytest.raises(FedevoError, match=r"holds a finished search \(the optimiser proposed no new candidates\)") as e:
        fedevo.resume(run.path, workers=0, page=False)
    assert "--budget" not in str(e.value)
    with pytest.raises(FedevoError, match="a larger budget would not change that"):
        fedevo.resume(run.path, workers=0, page=False, budget=100)


def test_gen_unless_given_no_longer_ends_the_search():
    s = SearchSettings(pop=4, gen=3, budget=10)
    state = {"generation": 3, "next_id": 10}
    assert raised(s, state, {"budget": 20}).gen == 3 + 3  # enough batches for the 10 left
    assert raised(s, state, {"gen": 5, "budget": 30}).gen == 5  # given: kept as given
    t = SearchSettings(pop=4, gen=2, time_budget=5.0)
    assert raised(t, {"generation": 2, "next_id": 8, "search_s": 6.0}, {"time_budget": 60.0}).gen == 2 + OPEN_GEN


def test_the_command_line_raises_and_a_kill_keeps_the_raised_budgets(tmp_path):
    prob = toy_problem_file(tmp_path)
    args = ["--problem", prob, "--pop", 4, "--seed", 2, "--workers", 0, "--quiet", "--optimizer", "random"]
    r = cli("search", *args, "--budget", 8, "--evaluator", KILLER, "--out", tmp_path / "X")  # kills on demand
    assert r.returncode == 0, r.stderr
    r = cli("resume", tmp_path / "X", "--workers", 0, "--quiet")
    assert r.returncode == 2 and "to search on, raise the budget that ended it: `fedevo resume" in r.stderr
    p = subprocess.run(cli_cmd("resume", tmp_path / "X", "--workers", 0, "--quiet", "--budget", 16), cwd=REPO,
                       env=env(FAKE_SIGKILL_AFTER=3), capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    # not the --gen the search derived from --budget 8 (review16 F7: '--gen 2 → 4' for a --gen never given)
    assert "fedevo: budgets raised: --budget 8 → 16 (kept in" in p.stderr, p.stderr
    r = cli("resume", tmp_path / "X", "--workers", 0, "--quiet")  # no budget given: the raised ones hold
    assert r.returncode == 0, r.stderr
    assert "search finished (--budget evaluations reached): 4/4 generations, 16 evaluations" in r.stdout
    r = cli("search", *args, "--budget", 16, "--evaluator", KILLER, "--out", tmp_path / "W")
    assert r.returncode == 0, r.stderr
    assert _rows(tmp_path / "X") == _rows(tmp_path / "W")


def test_a_kill_between_budgets_json_and_removing_stop_json(tmp_path, monkeypatch):
    """`_put_raised` writes budgets.json, then removes stop.json: a kill between the two left the old stop.json,
    so the raised search read as ended (pages, `front`, resume's refusal) until it ended again. A stop written
    under other budgets than those in force is not the search's stop."""
    from fedevo.searching import run as run_module
    from fedevo.searching.budgets import read_stop

    run = _search(tmp_path, "R", optimizer="random", pop=3, budget=6)
    assert read_stop(run.path)["reason"] == "budget"

    def no_unlink(*a, **kw):
        raise Killed

    let_kills_through(monkeypatch)
    monkeypatch.setattr(run_module.Path, "unlink", no_unlink)
    with pytest.raises(Killed):
        fedevo.resume(run.path, workers=0, page=False, budget=9)
    monkeypatch.undo()
    assert (run.path / "stop.json").exists() and (run.path / BUDGETS_FILE).exists()  # the window, as a kill leaves it
    assert read_stop(run.path) is None and load_run(run.path).stop() is None
    assert not run_finished(run.path, load_run(run.path).settings)
    done = fedevo.resume(run.path, workers=0, page=False)  # goes on to the raised budget, without repeating it
    assert done.summary.evaluations == 9 and read_stop(done.path)["budgets"]["budget"] == 9


def flat(problem, params, *, seed, rounds=None, data_dir=None):
    """The same objectives every time (no hypervolume growth: --patience ends the search), 2 ms an evaluation."""
    import time

    time.sleep(0.002)
    return {"error": 0.5, "comm": 10.0, "eps": 1.0}


@pytest.mark.parametrize("budget, flag", [({"time_budget": 0.001}, "time_budget=S)` (S above 0.001 seconds)"),
                                          ({"patience": 1}, "patience=K)` (K above 1 batches)")])
def test_a_finished_search_names_the_budget_that_ended_it_and_that_one_goes_on(tmp_path, budget, flag):
    """The way on after a search that --time-budget or --patience ended: it said `--budget N`, which resume then
    refused (the time budget or the patience, kept, reached already)."""
    kw = dict(optimizer="random", pop=2, seed=0, workers=0, out=tmp_path / "R", evaluator=flat, page=False)
    fedevo.search(str(toy_problem_file(tmp_path)), **kw, **budget)
    with pytest.raises(FedevoError, match=r"to search on, raise the budget that ended it: `fedevo\.resume\('.*" +
                       re.escape(flag)):
        fedevo.search(str(toy_problem_file(tmp_path)), **kw, **budget)  # the same search again: already there
    with pytest.raises(FedevoError, match=re.escape(flag)):
        fedevo.resume(tmp_path / "R", workers=0, evaluator=flat)
    with pytest.raises(FedevoError, match="is reached already"):  # what it said before: refused
        fedevo.resume(tmp_path / "R", budget=1000, workers=0, evaluator=flat)
    key, value = next(iter(budget.items()))
    run = fedevo.resume(tmp_path / "R", workers=0, evaluator=flat, budget=12, **{key: value * 1000})
    assert len(run.evaluations) > 2  # the named budget raised: it searched on


_CALLS = []


def killing_after_7(problem, params, **kw):
    """fake_evaluate, killed (Killed) at its 8th call."""
    _CALLS.append(1)
    if len(_CALLS) > 7:
        raise Killed
    return fake_evaluate(problem, params, **kw)


def _killed_mid_batch(tmp_path, monkeypatch, **kw):
    """A search of --pop 4, --budget 12 killed after 7 evaluations (rows 0..6 logged; the checkpoint at 4)."""
    let_kills_through(monkeypatch)
    _CALLS.clear()
    with pytest.raises(Killed):
        fedevo.search(str(toy_problem_file(tmp_path)), seed=3, workers=0, out=tmp_path / "K",
                      evaluator=killing_after_7, page=False, optimizer="nsga3", pop=4, budget=12, **kw)
    return tmp_path / "K"


def test_a_budget_below_the_rows_a_killed_batch_logged_is_refused_and_changes_nothing(tmp_path, monkeypatch, capsys):
    """F5: killed mid-batch (rows 0..6 logged, the checkpoint at 4), `resume --budget 5` (above the checkpoint's 4,
    below the 7 logged) finished leaving rows 5, 6 that the optimiser never saw in `fedevo front`, and a later
    raise was refused as inconsistent after budgets.json was written: now refused in one line, nothing written."""
    out = _killed_mid_batch(tmp_path, monkeypatch)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(FedevoError, match=r"^budget=5 is below the 7 evaluations this run has logged .*"
                                          r"give budget=7 or more \(nothing was changed\)$"):
        fedevo.resume(out, workers=0, page=False, budget=5, evaluator=fake_evaluate)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # as a kill -9 in evaluation 7 leaves it (searching.inflight): with --budget 7 it is not evaluated again
    (out / ".evaluating").write_text(json.dumps({"label": "evaluation 7 (generation 2, seed 1)", "pid": 1}))
    capsys.readouterr()
    run = fedevo.resume(out, workers=0, page=False, budget=7, evaluator=fake_evaluate)  # the killed batch's rows
    assert run.summary.evaluations == 7 and run.summary.stop == "budget" and run.summary.reused == 3
    err = capsys.readouterr().err
    assert "ended during evaluation 7 (generation 2, seed 1)" in err and "it lies beyond budget=7 and is not " \
        "evaluated again" in err and "evaluated again now" not in err
    straight = _search(tmp_path, "W", optimizer="nsga3", pop=4, budget=7)  # as if started with --budget 7
    assert _rows(out) == _rows(straight.path)
    run = fedevo.resume(out, workers=0, page=False, budget=12, evaluator=fake_evaluate)  # raised again: resumable
    straight = fedevo.resume(straight.path, workers=0, page=False, budget=12)
    assert run.summary.evaluations == 12 and _rows(run.path) == _rows(straight.path)
