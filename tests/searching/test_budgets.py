"""Budgets (issue #34): --budget evaluations, --time-budget seconds (across resumes), --patience batches without
hypervolume growth, --gen batches; the first reached ends the search, stop.json and the Summary say which, resume
honours them; bad values are one line. And --workers auto's decision."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

import fedevo
from fedevo.errors import FedevoError, command_line
from fedevo.result import EvaluationResult
from fedevo.searching.budgets import default_gen, stagnant, stop_reason
from fedevo.searching.settings import SearchSettings
from fedevo.searching.workers import decide

from tests.helpers import cli

from .search_helpers import FAKE, REPO, TOY_SETTINGS, cli_cmd, env, read_csv, toy_problem_file, without

KILLER = "tests.searching.search_fakes:fake_kill_after"


def constant(problem, params, *, seed, rounds=None, data_dir=None):
    """Every candidate scores the same: the hypervolume never grows after the first batch."""
    return EvaluationResult(error=0.5, comm=100.0, eps=2.0, eps_paper=4.0, accuracy_global=0.5, omega=100,
                            status="ok", wall_s=0.0, rounds=1, privacy={"mechanism": "fake"}, message="")


def slow(problem, params, *, seed, rounds=None, data_dir=None):
    time.sleep(0.1)
    return constant(problem, params, seed=seed)


@pytest.mark.parametrize("name", ["nsga3", "random"])
def test_budget_cuts_the_last_batch_and_ends_the_search(tmp_path, name):
    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=4, budget=10, seed=1, workers=0, out=tmp_path / "R",
                        evaluator=FAKE, page=False, optimizer=name)
    rows = read_csv(run.path / "evaluations.csv")
    assert len(rows) == 10 and [r["generation"] for r in rows].count("3") == 2  # 4 + 4 + 2
    assert run.summary.stop == "budget" and run.summary.generations == 3
    stop = json.loads((run.path / "stop.json").read_text())
    assert stop["reason"] == "budget" and stop["evaluations"] == 10 and stop["budgets"]["budget"] == 10
    with pytest.raises(FedevoError, match=r"holds a finished search \(budget= evaluations reached\)"):
        fedevo.resume(run.path, workers=0, page=False)


def test_gen_still_bounds_the_batches(tmp_path):
    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=4, gen=2, budget=100, seed=1, workers=0,
                        out=tmp_path / "R", evaluator=FAKE, page=False, optimizer="random")
    assert run.summary.evaluations == 8 and run.summary.stop == "gen"


def test_patience_stops_when_the_hypervolume_stops_growing(tmp_path):
    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=3, gen=20, patience=2, seed=1, workers=0,
                        out=tmp_path / "R", evaluator=constant, page=False, optimizer="random")
    assert run.summary.stop == "patience" and run.summary.generations == 3  # batch 1 sets it, 2 and 3 add nothing
    hv = [float(r["hypervolume"]) for r in read_csv(run.path / "hypervolume.csv")]
    assert len(hv) == 3 and hv[0] == hv[1] == hv[2]


def test_time_budget_ends_after_the_batch_that_reached_it_and_counts_across_resumes(tmp_path):
    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=3, gen=50, time_budget=0.2, seed=1, workers=0,
                        out=tmp_path / "R", evaluator=slow, page=False, optimizer="random")
    assert run.summary.stop == "time_budget" and run.summary.evaluations == 3  # one batch took 0.3 s
    stop = json.loads((run.path / "stop.json").read_text())
    assert stop["search_s"] >= 0.2 and stop["reason"] == "time_budget"
    with pytest.raises(FedevoError, match="finished search"):
        fedevo.resume(run.path, workers=0, page=False)


def test_a_time_budget_shorter_than_the_start_up_still_runs_the_first_batch(tmp_path):
    """The time budget is checked between batches; the first batch runs (it evaluated nothing and recorded no stop:
    a search that looked neither finished nor stopped)."""
    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=3, gen=5, time_budget=1e-9, seed=1, workers=0,
                        out=tmp_path / "R", evaluator=FAKE, page=False, optimizer="random")
    assert run.summary.evaluations == 3 and run.summary.stop == "time_budget" and run.summary.complete
    assert json.loads((run.path / "stop.json").read_text())["reason"] == "time_budget"


def test_kill_9_then_resume_honours_the_budget(tmp_path):
    prob = toy_problem_file(tmp_path)
    args = ["search", "--problem", prob, "--pop", 4, "--budget", 10, "--seed", 2, "--workers", 0, "--quiet",
            "--optimizer", "random", "--evaluator", KILLER]
    p = subprocess.run(cli_cmd(*args, "--out", tmp_path / "K"), cwd=REPO, env=env(FAKE_SIGKILL_AFTER=6),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    # the kill -9 needs its own process; the resume and the uninterrupted search run here (tests.helpers.cli)
    r = cli("resume", tmp_path / "K", "--workers", 0, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "search finished (--budget evaluations reached): 3/3 generations, 10 evaluations" in r.stdout
    r = cli(*args, "--out", tmp_path / "W")
    assert r.returncode == 0, r.stderr
    rows = lambda d: sorted(without(read_csv(d / "evaluations.csv"), "wall_s", "chain"), key=lambda x: int(x["id"]))  # noqa
    assert rows(tmp_path / "K") == rows(tmp_path / "W") and len(rows(tmp_path / "W")) == 10


def test_a_kill_right_after_the_last_checkpoint_leaves_stop_json(tmp_path, monkeypatch):
    """The checkpoint that ends the search is what makes resume refuse the run: stop.json is written before it, so
    no kill after it leaves a finished run without stop.json (it was written at the very end, after the live page)."""
    from fedevo.searching import run as run_mod

    from .search_fakes import Killed

    save = run_mod.save_checkpoint

    def killed_after_the_last(run_dir, state):
        save(run_dir, state)
        if state.get("stop"):
            raise Killed

    monkeypatch.setattr(run_mod, "save_checkpoint", killed_after_the_last)
    with pytest.raises(Killed):
        fedevo.search(str(toy_problem_file(tmp_path)), pop=4, budget=6, seed=1, workers=0, out=tmp_path / "R",
                      evaluator=FAKE, page=False, optimizer="random")
    stop = json.loads((tmp_path / "R" / "stop.json").read_text())
    assert stop["reason"] == "budget" and stop["evaluations"] == 6 and stop["batches"] == 2
    with pytest.raises(FedevoError, match=r"holds a finished search \(budget= evaluations reached\)"):
        fedevo.resume(tmp_path / "R", workers=0, page=False)


def test_stop_rules():
    s = SearchSettings(pop=4, gen=5, budget=12, time_budget=60.0, patience=2)
    assert stop_reason(s, batches=1, asked=4, search_s=1.0) is None
    assert stop_reason(s, batches=3, asked=12, search_s=1.0) == "budget"
    assert stop_reason(s, batches=5, asked=11, search_s=1.0) == "gen"
    assert stop_reason(s, batches=2, asked=8, search_s=60.0) == "time_budget"
    assert stop_reason(s, batches=3, asked=8, search_s=1.0, hypervolumes=[0.5, 0.7, 0.7, 0.7]) == "patience"
    assert not stagnant([0.5, 0.7, 0.7], 2) and stagnant([0.5, 0.5, 0.5], 2) and not stagnant([0.5, 0.5], 2)
    assert default_gen(None, 12, 48, None, None) == 4 and default_gen(None, 16, 50, None, None) == 4
    assert default_gen(None, 12, None, None, None) == 4 and default_gen(7, 12, 48, None, None) == 7
    assert default_gen(None, 12, None, 3600.0, None) == 1000


@pytest.mark.parametrize("kw, says", [
    ({"budget": 0}, "budget= must be a whole number of evaluations >= 1, got 0"),
    ({"budget": 2.5}, "budget must be an int"),
    ({"time_budget": -1.0}, "time_budget= must be a number of seconds > 0, got -1.0"),
    ({"time_budget": float("nan")}, "time_budget= must be a number of seconds > 0"),
    ({"patience": 0}, "patience= must be a whole number of batches >= 1, got 0"),
])
def test_bad_budgets_are_one_line(tmp_path, kw, says):
    """From Python the message names the keyword argument (budget=); the command line its option (below)."""
    with pytest.raises(FedevoError) as e:
        fedevo.search(str(toy_problem_file(tmp_path)), pop=4, gen=2, workers=0, out=tmp_path / "R", evaluator=FAKE,
                      page=False, **kw)
    assert says in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "R").exists()


def test_bad_budget_on_the_command_line(tmp_path):
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--budget", "-3", "--out", tmp_path / "R",
            "--quiet", "--evaluator", FAKE)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        "fedevo: error: --budget must be a whole number of evaluations >= 1, got -3"]


def test_workers_auto_decision():
    w, why = decide("auto", cores=2, pop=12)
    assert w == 0 and "in-process: this machine has 2 cores" in why and "(workers=N forces Ray)" in why
    with command_line():  # the command line's spelling
        assert decide("auto", cores=2, pop=12)[1].endswith("(--workers N forces Ray)")
        with pytest.raises(FedevoError, match="^--workers must be >= 0"):
            decide(-1, cores=4, pop=4)
    w, why = decide(None, cores=16, pop=12)
    assert w == 12 and "local Ray with 12 workers" in why
    assert decide("auto", cores=16, pop=1)[0] == 0
    assert decide("auto", cores=16, pop=40)[0] == 16
    assert decide(3, cores=2, pop=12) == (3, "")  # --workers N still forces Ray
    assert decide("0", cores=16, pop=12) == (0, "")
    assert decide("auto", cores=2, pop=12, address="10.0.0.1:6379")[1] == ""  # a cluster: Ray
    for bad in ("many", "1.5", True):
        with pytest.raises(FedevoError, match="^workers= must be 'auto' or a whole number >= 0"):
            decide(bad, cores=4, pop=4)
    with pytest.raises(FedevoError, match="^workers= must be >= 0"):
        decide(-1, cores=4, pop=4)


def test_workers_auto_says_why_in_one_line(tmp_path):
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--pop", 3, "--gen", 1, "--out", tmp_path / "R",
            "--quiet", "--evaluator", FAKE, "--optimizer", "random")
    assert r.returncode == 0, r.stderr
    from fedevo.searching.runner import cores

    if cores() <= 2:
        assert r.stderr.strip().splitlines() == [
            f"fedevo: --workers auto: in-process: this machine has {cores()} cores, and Ray's start-up and a worker "
            "process per core cost more than they save (--workers N forces Ray)"]
    else:
        assert r.stderr.startswith("fedevo: --workers auto: a local Ray with 3 workers")
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--workers", "lots", "--out", tmp_path / "S",
            "--quiet", "--evaluator", FAKE)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        "fedevo: error: --workers must be 'auto' or a whole number >= 0, got 'lots'"]


def test_the_live_page_is_throttled():
    from fedevo.searching.callbacks import Throttled, SearchCallback

    class Count(SearchCallback):
        def __init__(self):
            self.gens, self.evals = [], 0

        def on_generation(self, generation, run):
            self.gens.append(generation)

        def on_evaluation(self, row):
            self.evals += 1

    now = [0.0]
    inner = Count()
    t = Throttled(inner, seconds=10, clock=lambda: now[0])
    for g, at in enumerate([0.0, 3.0, 9.9, 10.5, 12.0, 30.0], start=1):
        now[0] = at
        t.on_evaluation({})
        t.on_generation(g, None)
    assert inner.gens == [1, 4, 6] and inner.evals == 6


def test_a_live_page_that_takes_long_to_write_is_written_less_often():
    """At thousands of evaluations front.html takes seconds to write: after a write of t seconds the next waits
    `rest` · t after it ended (the page's share of the search at most 1 / (1 + rest)), not only 10 s after it began
    (which, with a write of 8 s, rewrote the page after nearly every generation)."""
    from fedevo.searching.callbacks import Throttled, SearchCallback

    now = [0.0]

    class Slow(SearchCallback):
        def __init__(self):
            self.gens = []

        def on_generation(self, generation, run):
            self.gens.append(generation)
            now[0] += 8.0  # the write itself

    inner = Slow()
    t = Throttled(inner, seconds=10, clock=lambda: now[0], rest=4)
    for g in range(1, 16):
        t.on_generation(g, None)
        now[0] += 3.0  # a generation's evaluations
    # a write at 0 (ends at 8), then not before 8 + 4 · 8 = 40: generation 12 at 41 (ends at 49), then not before 81
    assert inner.gens == [1, 12]
    inner.gens.clear()
    now[0] = 0.0
    t = Throttled(inner, seconds=10, clock=lambda: now[0])  # without rest: 10 s after each write began
    for g in range(1, 16):
        t.on_generation(g, None)
        now[0] += 3.0
    assert inner.gens == list(range(1, 16))  # after every generation: 8 s of every 11 spent on the page


DISCRETE = """
name = "disc"
""" + TOY_SETTINGS + """[genes]
layers = { type = "int", low = 1, high = 3, default = 1 }
similarity = { type = "choice", choices = ["sign", "cosine"], default = "sign" }
partition = { type = "choice", choices = ["iid", "shards", "dirichlet"], default = "iid" }
sigma = { type = "choice", choices = [0.1, 0.5, 1.0, 2.0], default = 0.5 }
"""


def test_budget_without_gen_is_reached_when_a_batch_comes_short(tmp_path):
    """F1: NSGA-III's initial population of these 72 combinations holds a duplicate (11 of 12 asked): the --gen
    derived from --budget 48 (4 batches) ended the search at 47 evaluations, "--gen batches done", a --gen the
    user never gave. --budget ends it now; with --gen given, --gen still does."""
    problem = tmp_path / "disc.toml"
    problem.write_text(DISCRETE)
    run = fedevo.search(str(problem), pop=12, budget=48, seed=1, workers=0, out=tmp_path / "R", evaluator=FAKE,
                        page=False)
    assert [int(b["asked"]) for b in read_csv(run.path / "batches.csv")][0] == 11  # the short batch
    assert run.summary.evaluations == 48 and run.summary.stop == "budget"
    assert run.summary.generations == run.summary.n_gen == 5
    stop = json.loads((run.path / "stop.json").read_text())
    assert stop["reason"] == "budget" and stop["evaluations"] == 48 and stop["budgets"]["gen_derived"] is True
    assert fedevo.open_run(run.path).data.generations_text() == "5/5"
    given = fedevo.search(str(problem), pop=12, gen=4, budget=48, seed=1, workers=0, out=tmp_path / "G",
                          evaluator=FAKE, page=False)
    assert given.summary.evaluations == 47 and given.summary.stop == "gen"


def test_patience_or_time_budget_alone_has_no_batch_cap(tmp_path, monkeypatch):
    """F2: with only --patience (or --time-budget) the search was cut at OPEN_GEN batches and said "finished
    (--gen batches done)"; a raised one got batches + OPEN_GEN. Now the budget given ends it (OPEN_GEN made 2
    here so that the cap, if any, would end it first), and a raised one goes on as a fresh search with it."""
    from fedevo.searching import budgets

    monkeypatch.setattr(budgets, "OPEN_GEN", 2)
    kw = dict(pop=3, seed=1, workers=0, evaluator=constant, page=False, optimizer="random")
    run = fedevo.search(str(toy_problem_file(tmp_path)), patience=3, out=tmp_path / "R", **kw)
    assert run.summary.stop == "patience" and run.summary.generations == 4  # batch 1 sets it, 2..4 add nothing
    assert json.loads((run.path / "stop.json").read_text())["reason"] == "patience"
    assert fedevo.open_run(run.path).data.generations_text() == "4"  # not '4/2': no count was planned
    raised_ = fedevo.resume(run.path, workers=0, page=False, patience=5)
    fresh = fedevo.search(str(toy_problem_file(tmp_path)), patience=5, out=tmp_path / "F", **kw)
    assert raised_.summary.generations == fresh.summary.generations == 6 and raised_.summary.stop == "patience"
    rows = lambda d: sorted(without(read_csv(d / "evaluations.csv"), "wall_s", "chain"), key=lambda x: int(x["id"]))  # noqa
    assert rows(raised_.path) == rows(fresh.path)


def test_the_closing_line_and_stop_json_say_how_far_a_batch_ran_past_the_time_budget(tmp_path):
    """F6: checked between batches, a time budget is overrun by the batch that had started (--time-budget 1 ran
    7 s), and nothing said so. stop.json's over_time_budget_s is search_s - time_budget; the closing line says it."""
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--pop", 3, "--time-budget", 0.05, "--seed", 1,
            "--workers", 0, "--quiet", "--optimizer", "random", "--evaluator", "tests.searching.test_budgets:slow",
            "--out", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    stop = json.loads((tmp_path / "R" / "stop.json").read_text())
    assert stop["reason"] == "time_budget" and stop["over_time_budget_s"] == round(stop["search_s"] - 0.05, 3)
    assert (f"search finished (--time-budget seconds reached; its last batch ran {stop['over_time_budget_s']:.1f} s "
            "past --time-budget 0.05 s): ") in r.stdout, r.stdout


_N = []


def killed_at_8(problem, params, **kw):
    """constant, killed (search_fakes.Killed) at its 8th call."""
    from .search_fakes import Killed

    _N.append(1)
    if len(_N) > 7:
        raise Killed
    return constant(problem, params, **kw)


def test_a_search_only_patience_bounds_is_not_complete_past_its_open_count(tmp_path, monkeypatch):
    """Its OPEN_GEN batches' evaluations are no bound any more: a --patience-only search killed after more rows than
    pop × OPEN_GEN read as complete to the pages and `fedevo front` (rows >= expected_evaluations)."""
    from fedevo.searching import budgets
    from fedevo.viz.front import is_complete

    from .search_fakes import Killed, let_kills_through

    let_kills_through(monkeypatch)
    monkeypatch.setattr(budgets, "OPEN_GEN", 1)
    _N.clear()
    with pytest.raises(Killed):
        fedevo.search(str(toy_problem_file(tmp_path)), pop=3, patience=50, seed=1, workers=0, out=tmp_path / "R",
                      evaluator=killed_at_8, page=False, optimizer="random")
    data = fedevo.open_run(tmp_path / "R").data
    assert len(data.rows) == 7 > data.settings.expected_evaluations == 3
    assert not is_complete(data)
    r = cli("front", tmp_path / "R")
    assert "the search stopped before its end (7 evaluations; " in r.stdout, r.stdout


def test_patience_counts_growth_below_a_millionth_of_the_hypervolume_as_none():
    """A new point in a corner of the front added 6.6e-11 to a hypervolume of 1.2, which counted as growth: a
    --patience 3 search ran 320 batches, and with no batch cap for a search bounded by patience alone it could run
    for ever. Growth counts above HV_GROWTH_TOL of the hypervolume (any growth from 0); both readings agree."""
    from fedevo.searching.budgets import HV_GROWTH_TOL, hv_steps, stagnant_steps

    creeping = [1.2 + k * 6.6e-11 for k in range(10)]
    assert stagnant(creeping, 3) and stagnant_steps(hv_steps(creeping), len(creeping), 3)
    grows = [1.2, 1.2, 1.2, 1.2 * (1 + 2 * HV_GROWTH_TOL)]
    assert not stagnant(grows, 3) and not stagnant_steps(hv_steps(grows), len(grows), 3)
    from_zero = [0.0, 0.0, 0.0, 1e-12]
    assert not stagnant(from_zero, 3) and not stagnant_steps(hv_steps(from_zero), len(from_zero), 3)


def test_a_patience_within_gp_and_tpe_start_up_is_warned_of(tmp_path, capsys):
    """gp and tpe draw their first 10 evaluations at random (Optuna's start-up): `--optimizer gp --patience 3` (in
    batches of one) may end the search before the model proposes anything, a random search of a dozen
    evaluations; docs/search.md said to give a K above 10, nothing at the search said so."""
    toy = toy_problem_file(tmp_path)
    fedevo.search(toy, out=tmp_path / "P3", workers=0, seed=1, evaluator=FAKE, page=False, optimizer="tpe", pop=1,
                  patience=3, budget=2, progress=False)
    err = capsys.readouterr().err
    assert err.count("fedevo: warning: patience=3 with optimizer=tpe in batches of 1: its first 10 evaluations are "
                     "random (Optuna's start-up), so the search may end before its model proposes; give patience=11 "
                     "or more") == 1, err
    fedevo.search(toy, out=tmp_path / "P11", workers=0, seed=1, evaluator=FAKE, page=False, optimizer="tpe", pop=1,
                  patience=11, budget=2, progress=False)
    fedevo.search(toy, out=tmp_path / "P3R", workers=0, seed=1, evaluator=FAKE, page=False, optimizer="random", pop=1,
                  patience=3, budget=2, progress=False)
    assert "start-up" not in capsys.readouterr().err
