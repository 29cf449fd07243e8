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
    monkeypatch.setattr(RandomOptimizer, "tell", lambda self, params, F, G=None: (told.extend(G), tell(self, params, F, G))[1])
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
