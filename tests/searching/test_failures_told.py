"""How the search treats a FAILED (or diverged) evaluation: never feasible under any [constraints], never on a front
or a pick, and told to each optimiser in the way that serves it (docs/search.md "Failed evaluations")."""

from __future__ import annotations

import math

import numpy as np
import pytest

import fedevo
from fedevo.objectives import ObjectiveSet
from fedevo.problem import load_problem
from fedevo.searching import optimizers
from fedevo.searching.run import _search_problem
from fedevo.searching.space import SearchSpace

from .search_helpers import read_csv, toy_problem_file

FLAKY = "tests.searching.search_fakes:fake_flaky"  # seed % 5: 0 raises, 1 diverges, 2 has no ε, else ok
NAN = math.nan


def test_a_failed_evaluation_is_never_feasible_even_under_a_bound_above_its_worst_value(tmp_path):
    """comm's worst value is 1e9: under `[constraints] comm = 2e9` a failure's G was 1e9 - 2e9 < 0 (feasible), and
    a value the worst value stands in for (ε = ∞, comm beyond 1e9) met a bound above it. Now neither does, on
    the optimiser's scale (G > 0) and in `feasible` (the front, picks, the pages) alike."""
    s = ObjectiveSet.of(["error", "comm", "eps"])
    cons = {"comm": 2e9, "eps": 5e9}
    p = _search_problem(load_problem(str(toy_problem_file(tmp_path, "\n[constraints]\ncomm = 2e9\neps = 5e9\n"))),
                        SearchSpace.from_problem(load_problem(str(toy_problem_file(tmp_path)))))
    for status in ("failed", "diverged"):
        row = {"status": status, "error": NAN, "comm": NAN, "eps": NAN}
        assert not s.feasible(row, cons)
        assert np.all(s.violations(row, cons, status) > 0)
        assert np.all(p.constraints_of(p.objectives_of(row), row) > 0), status
    for row, ok in (({"comm": 100.0, "eps": 3.0}, True), ({"comm": 5e9, "eps": 3.0}, False),
                    ({"comm": 100.0, "eps": math.inf}, False), ({"comm": 100.0, "eps": None}, False)):
        row = {"status": "ok", "error": 0.2, **row}
        G = p.constraints_of(p.objectives_of(row), row)
        assert s.feasible(row, cons) == ok == bool(np.all(G <= 0)), row
    # a bound below the worst value: unchanged, F - bound (the violation NSGA-III ranks infeasible rows by)
    row = {"status": "failed", "error": NAN, "comm": NAN, "eps": NAN}
    assert s.violations(row, {"comm": 1000.0}, "failed").tolist() == [1e9 - 1000.0]


def test_the_optimiser_is_told_a_failure_violates_every_constraint(tmp_path, monkeypatch):
    """The run loop hands each evaluation to constraints_of: the G an optimiser is told for a failed or diverged
    one is positive under a bound above the worst value (it was 1e9 - 2e9: feasible)."""
    from fedevo.searching.optimizers.random_sampling import RandomOptimizer

    told = []
    tell = RandomOptimizer.tell

    def spy(self, params, F, G=None):
        told.extend(G)
        tell(self, params, F, G)

    monkeypatch.setattr(RandomOptimizer, "tell", spy)
    prob = toy_problem_file(tmp_path, "\n[constraints]\ncomm = 2e9\n")
    run = fedevo.search(prob, pop=5, gen=2, seed=0, workers=0, out=tmp_path / "R", evaluator=FLAKY, page=False,
                        optimizer="random")
    rows = sorted(read_csv(run.path / "evaluations.csv"), key=lambda r: int(r["id"]))
    assert len(told) == len(rows) == 10 and {r["status"] for r in rows} >= {"ok", "failed", "diverged"}
    for r, g in zip(rows, told):
        assert (g[0] > 0) == (r["status"] != "ok"), (r["status"], g)
    assert {r["id"] for r in read_csv(run.path / "front.csv")} <= {r["id"] for r in rows if r["status"] == "ok"}


def test_promotion_holds_a_capped_value_to_a_bound_above_the_worst_value():
    """Multi-fidelity promotion ranks feasibility first with the same violations: an ε of ∞ (no privacy, planned
    before training) does not meet `[constraints] eps = 5e9`, though both count as the worst value 1e9 on the
    optimiser's scale (the difference said 0: feasible, and took the one slot by its lowest error)."""
    from fedevo.searching.fidelity import promote

    rows = [{"id": i, "status": "ok", "error": e, "comm": 100.0, "eps": eps}
            for i, (e, eps) in enumerate([(0.1, math.inf), (0.3, 2.0), (0.4, 3.0)])]
    planned = {r["id"]: {"eps": r["eps"]} for r in rows}
    assert promote(rows, planned, "eps") == [0]
    assert promote(rows, planned, "eps", constraints={"eps": 5e9}) == [1]


# ---------------------------------------------------------------------------------------------- gp and tpe
CALLS = {"n": 0, "limit": None}


def failing(problem, params, *, seed, rounds=None, data_dir=None):
    """The tests' fake, failing where the model is large (units > 128: about a quarter of the toy's space)."""
    from .search_fakes import fake_evaluate

    if params["units"] > 128:
        raise ValueError(f"fake: {params['units']} units do not fit")
    return fake_evaluate(problem, params, seed=seed, rounds=rounds)


def killing(problem, params, *, seed, rounds=None, data_dir=None):
    """`failing`, killed (search_fakes.Killed: a kill -9) at call CALLS['limit'] + 1."""
    from .search_fakes import Killed

    CALLS["n"] += 1
    if CALLS["limit"] is not None and CALLS["n"] > CALLS["limit"]:
        raise Killed(f"killed at call {CALLS['n']}")
    return failing(problem, params, seed=seed, rounds=rounds)


def _genes(path):
    return [(r["status"], tuple(v for k, v in r.items() if k in ("layers", "units", "lr", "sigma", "partition",
                                                                   "similarity"))) for r in read_csv(path)]


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_gp_and_tpe_are_told_a_failure_by_their_rule_never_as_the_worst_values(name, tmp_path, monkeypatch):
    """A failure's worst values (comm 1e9 among values of 10-1,000) flattened every real value once Optuna
    standardised them. Each GP study now holds a failed evaluation as a completed trial at the worst value observed
    among the completed ones, per objective (a FAIL trial while none has completed); TPE's as a FAIL trial
    (benchmarks/failure_telling.py: what served each best)."""
    from fedevo.searching.optimizers import optuna_samplers

    studies = []
    make_study = optuna_samplers.OptunaOptimizer._study
    monkeypatch.setattr(optuna_samplers.OptunaOptimizer, "_study",
                        lambda self: studies.append(make_study(self)) or studies[-1])
    run = fedevo.search(toy_problem_file(tmp_path), budget=14, seed=1, workers=0, out=tmp_path / "R",
                        evaluator=failing, page=False, optimizer=name)
    rows = sorted(read_csv(run.path / "evaluations.csv"), key=lambda r: int(r["id"]))
    assert len(rows) == 14 and 2 <= sum(r["status"] == "failed" for r in rows) <= 12
    worst = ObjectiveSet.of(["error", "comm", "eps"]).worst_vector().tolist()
    assert len(studies) == 14
    for i, study in enumerate(studies):  # batch i's study (its own ask since: RUNNING)
        trials = [t for t in study.trials if t.state.name != "RUNNING"]
        assert len(trials) == i  # every evaluation told, in order
        done = [list(t.values) for t, r in zip(trials, rows) if r["status"] == "ok"]
        for t, r in zip(trials, rows):
            if r["status"] == "ok":
                assert t.state.name == "COMPLETE"
            elif done and name == "gp":
                assert t.state.name == "COMPLETE" and list(t.values) == np.max(done, axis=0).tolist() != worst
            else:
                assert t.state.name == "FAIL"


@pytest.mark.parametrize("name", ["tpe", "gp"])
def test_a_search_with_failures_killed_and_resumed_equals_the_uninterrupted_one(name, tmp_path, monkeypatch):
    """The state told holds each failure (F None), so a resumed run's study is the uninterrupted run's."""
    from . import search_fakes

    search_fakes.let_kills_through(monkeypatch)
    kw = dict(budget=15, seed=1, workers=0, page=False, optimizer=name)
    whole = fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "W", evaluator=failing, **kw)
    CALLS.update(n=0, limit=13)  # past Optuna's 10 random start-up trials, failures told
    with pytest.raises(search_fakes.Killed):
        fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "K", evaluator=killing, **kw)
    CALLS.update(limit=None)
    fedevo.resume(tmp_path / "K", workers=0, page=False, evaluator=failing)
    got = _genes(tmp_path / "K" / "evaluations.csv")
    assert got == _genes(whole.path / "evaluations.csv") and "failed" in {s for s, _ in got[:13]}


@pytest.mark.parametrize("name", ["gp", "tpe"])
def test_a_checkpoint_that_told_the_worst_values_keeps_its_rule(name, tmp_path, capsys):
    """A checkpoint made before failures were told apart holds them with the worst values. Its run keeps telling
    them so ("worst"), without a word: converted to failures, the resumed search asked other candidates than the
    uninterrupted one, and where the killed batch had logged a row the resume stopped as an inconsistent run
    directory (review18 F6). Its later failures too; and what it asks is what a search telling the worst values
    from the start asks."""
    prob = load_problem(str(toy_problem_file(tmp_path)))
    space = SearchSpace.from_problem(prob)
    sp = _search_problem(prob, space)
    worst = sp.objectives.worst_vector()
    ref = optimizers.make(name, space, sp, pop=2, seed=0)
    ref.failures = "worst"  # the rule of the fedevo before
    opt = optimizers.make(name, space, sp, pop=2, seed=0)
    F = np.array([[0.5, 100.0, 0.3], worst])
    for o in (ref, opt):
        o.tell(o.ask(2), F, failed=[False, True])
    old = {k: v for k, v in ref.state().items() if k != "failures"}  # as that fedevo's checkpoint holds it
    assert [f for _, f, _ in old["told"]] == [[0.5, 100.0, 0.3], worst.tolist()]
    again = optimizers.make(name, space, sp, pop=2, seed=0)
    again.restore(old)
    assert capsys.readouterr().err == "" and again.state()["failures"] == "worst"
    for o in (ref, again):  # a later failure: its worst values kept, as told
        o.tell(o.ask(2), F, failed=[False, True])
    assert again.state() == ref.state() and again.state()["told"][-1][1] == worst.tolist()
    assert again.ask(2) == ref.ask(2)
    again.restore(opt.state())  # a checkpoint of today's rule: its own
    assert again.failures == opt.failures and again.state()["told"][1][1] is None


# ---------------------------------------------------------------------------------------------- nsga3 and random
@pytest.mark.parametrize("name", ["nsga3", "random"])
def test_a_failed_evaluation_is_never_on_the_front_nor_picked(name, tmp_path):
    """NSGA-III and random sampling are told a failure's worst values (NSGA-III ranks: every completed evaluation
    dominates it; random ignores what it is told; measured: benchmarks/failure_telling.py). What reads the front
    (front.csv, fedevo front, picks, the pages' caps) never meets a failure, with or without [constraints]."""
    for extra in ("", "\n[constraints]\ncomm = 2e9\n"):
        out = tmp_path / f"R{len(extra)}"
        run = fedevo.search(toy_problem_file(tmp_path, extra), pop=8, gen=3, seed=2, workers=0, out=out,
                            evaluator=failing, page=False, optimizer=name)
        rows = read_csv(out / "evaluations.csv")
        failed = {r["id"] for r in rows if r["status"] != "ok"}
        assert failed and {r["id"] for r in read_csv(out / "front.csv")}.isdisjoint(failed)
        assert {str(r["id"]) for r in run.front}.isdisjoint(failed)
        picked = fedevo.pick(run, "knee,lowest-error:3,lowest-comm,lowest-eps")
        assert picked and {str(p["id"]) for p in picked}.isdisjoint(failed)


@pytest.mark.parametrize("own", ["Qmc", "Halton"])
def test_your_own_optimiser_is_told_failures_where_its_tell_takes_them(own, tmp_path, monkeypatch):
    """An OptunaOptimizer of yours (contained: user.py) is told which evaluations failed, as gp is (it lost the
    keyword on its way through the containment: its study got the worst values); an optimiser whose tell takes no
    `failed` is called as before."""
    from fedevo.searching.optimizers import optuna_samplers

    from . import user_optimizers

    told = []
    trials_of = optuna_samplers.trials_of
    monkeypatch.setattr(optuna_samplers, "trials_of", lambda t, *a: (told.append(list(t)), trials_of(t, *a))[1])
    run = fedevo.search(toy_problem_file(tmp_path), pop=2, gen=6, seed=1, workers=0, out=tmp_path / "R",
                        evaluator=failing, page=False, optimizer=getattr(user_optimizers, own))
    rows = sorted(read_csv(run.path / "evaluations.csv"), key=lambda r: int(r["id"]))
    assert len(rows) == 12 and any(r["status"] == "failed" for r in rows)
    if own == "Qmc":
        assert [f is None for _, f, _ in told[-1]] == [r["status"] != "ok" for r in rows[:10]]
    else:
        assert told == []


def test_an_imputed_failure_violates_its_constraints_on_the_completed_ones_scale():
    """review18 F4: gp imputed a failure's objectives but told its constraints from the worst values (1e9 - 500
    among values of -311 to 221), which flattened the constraint GP once Optuna standardised it. Told now: the
    completed trials' largest value (at least 0) plus their spread, a violation on their scale."""
    from optuna.distributions import FloatDistribution

    from fedevo.searching.optimizers.optuna_samplers import trials_of

    dists = {"x": FloatDistribution(0.0, 1.0)}
    told = [({"x": 0.1}, [0.2, 10.0], [-311.0]), ({"x": 0.5}, [0.4, 5.0], [221.0]), ({"x": 0.9}, None, [1e9 - 500])]
    trials = trials_of(told, dists, "impute")
    assert trials[2].values == [0.4, 10.0] and trials[2].system_attrs["constraints:c0"] == 221.0 + 532.0
    feasible = [({"x": 0.1}, [0.2, 10.0], [-3.0]), ({"x": 0.5}, [0.4, 5.0], [-1.0]), ({"x": 0.9}, None, [1e9])]
    assert trials_of(feasible, dists, "impute")[2].system_attrs["constraints:c0"] == 0.0 + 2.0  # still violated
    assert trials_of(told, dists, "fail")[2].system_attrs["constraints:c0"] == 1e9 - 500  # FAIL: not modelled
