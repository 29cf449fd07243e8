"""The search sees ε on a log scale (fedevo.searching.front_math); files report ε itself; hypervolume in log-ε space."""

from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest

from fedevo.problem import load_problem
from fedevo.searching.front_math import EPS_FLOOR, hypervolume_table, search_eps, to_search_space
from fedevo.searching.problem import SearchProblem
from fedevo.searching.checkpoint import latest_checkpoint, load_checkpoint
from fedevo.searching.space import SearchSpace

from .search_helpers import read_csv
from .test_search_run import run_fake


def test_search_eps_values():
    assert search_eps(10.0) == pytest.approx(1.0)
    assert search_eps(0.0) == pytest.approx(math.log10(EPS_FLOOR)) == pytest.approx(-3.0)
    assert search_eps(1e-7) == pytest.approx(-3.0)
    assert search_eps(math.inf) == search_eps(None) == search_eps(math.nan) == pytest.approx(9.0)
    assert search_eps(1e12) == pytest.approx(9.0)  # beyond the worst value: clipped to it
    F = to_search_space(np.array([[0.1, 500.0, 100.0], [0.2, 10.0, math.inf]]))
    assert F.tolist() == [[0.1, 500.0, 2.0], [0.2, 10.0, 9.0]]
    assert to_search_space(np.array([0.1, 5.0, 1000.0])).tolist() == [0.1, 5.0, 3.0]


class _R:
    def __init__(self, eps, status="ok"):
        self.status = status
        self.error, self.comm, self.eps = 0.2, 300.0, eps


def test_problem_objectives_and_constraints_on_log_eps():
    space = SearchSpace.from_problem(load_problem("digits_mlp"))
    p = SearchProblem(space, constraints={"eps": 8})
    assert p.eps_scale == "log10"
    assert p.objectives_of(_R(100.0)).tolist() == [0.2, 300.0, 2.0]
    assert p.objectives_of(_R(math.inf))[2] == pytest.approx(9.0)
    assert p.objectives_of(_R(1.0, status="failed")).tolist() == [1.0, 1e9, 9.0]
    # the constraint eps <= 8 has the same feasible set on the log scale
    for eps, feasible in ((7.9, True), (8.0, True), (8.1, False), (math.inf, False), (0.0, True)):
        g = p.constraints_of(p.objectives_of(_R(eps)))
        assert (g[0] <= 0) == feasible, (eps, g)
    # a checkpoint of a run made before log ε (no attribute) keeps the linear scale
    del p.eps_scale
    assert p.objectives_of(_R(100.0)).tolist() == [0.2, 300.0, 100.0]
    assert p.constraints_of(p.objectives_of(_R(7.0)))[0] == pytest.approx(-1.0)


def test_run_records_the_scale_and_the_algorithm_sees_log_eps(tmp_path):
    out = tmp_path / "run"
    run_fake(out, pop=8, gen=2)
    meta = json.loads((out / "run.json").read_text())
    assert meta["search_objectives"]["eps_scale"] == "log10"
    assert "log10" in meta["search_objectives"]["eps"] and "log10" in meta["hypervolume"]["space"]
    rows = {int(r["id"]): r for r in read_csv(out / "evaluations.csv")}
    state = load_checkpoint(latest_checkpoint(out))
    pop = pickle.loads(state["algorithm"]).pop  # the optimiser's state, pickled apart
    # the population's F holds log10 ε; the CSV holds ε
    for ind in pop:
        F = ind.get("F")
        match = [r for r in rows.values() if r["status"] == "ok" and float(r["error"]) == F[0]
                 and float(r["comm"]) == F[1]]
        assert match, F
        assert F[2] == pytest.approx(search_eps(float(match[0]["eps"]) if match[0]["eps"] else math.inf))
    assert any(abs(search_eps(float(r["eps"])) - float(r["eps"])) > 0.1 for r in rows.values() if r["eps"])


def _row(i, g, error, comm, eps):
    return {"id": i, "generation": g, "status": "ok", "error": error, "comm": comm, "eps": eps}


def test_hypervolume_responds_to_an_improvement_at_small_eps():
    """ε from 1 to 10⁴ on one front: a new point at ε = 0.1 (ten times more private than any) is a real
    improvement. Normalised linearly on ε it would add < 0.1 % of the range; on log10 ε it adds a visible step."""
    gen1 = [_row(0, 1, 0.10, 1000.0, 1e4), _row(1, 1, 0.20, 500.0, 100.0), _row(2, 1, 0.30, 300.0, 1.0),
            _row(3, 1, 0.35, 900.0, 5e3)]
    gen2 = gen1 + [_row(4, 2, 0.30, 300.0, 0.1)]
    hv = hypervolume_table(gen2, 2, "eps", {})
    a, b = hv[0]["hypervolume"], hv[1]["hypervolume"]
    assert a > 0 and b > a * 1.05, (a, b)
    assert hv[0]["lo_eps"] == pytest.approx(0.0) and hv[0]["scale_eps"] == pytest.approx(4.0)  # log10: 1 .. 1e4
    # a no-privacy point adds nothing (it lies beyond the reference point in ε)
    gen2_inf = gen1 + [_row(4, 2, 0.01, 100.0, math.inf)]
    assert hypervolume_table(gen2_inf, 2, "eps", {})[1]["hypervolume"] == pytest.approx(a)


def test_batches_of_one_are_normalised_by_enough_points():
    """A model-based optimiser's batches of one: generation 1 is one point, whose magnitude stood for every
    range ('HV 1.33 → 50.5', the 2026-11-27 audit). The normalisation takes the first generations until they hold
    more points than objectives (4 for 3); an NSGA-III generation 1 (here 4 points) is unchanged."""
    rows = [_row(i, i + 1, 0.5 - 0.05 * i, 1000.0 - 100 * i, 10.0 ** (2 - i)) for i in range(7)]
    hv = hypervolume_table(rows, 7, "eps", {})
    assert hv[0]["lo_error"] == pytest.approx(0.35) and hv[0]["scale_error"] == pytest.approx(0.15)  # rows 0-3
    assert hv[0]["lo_eps"] == pytest.approx(-1.0) and hv[0]["scale_eps"] == pytest.approx(3.0)
    assert all(h["lo_error"] == hv[0]["lo_error"] for h in hv)  # fixed for the run
    gen1 = [_row(i, 1, 0.1 * (i + 1), 100.0 * (4 - i), 10.0 ** i) for i in range(4)]
    assert hypervolume_table(gen1 + [_row(9, 2, 0.01, 1.0, 1e-3)], 2, "eps", {})[0]["lo_error"] == pytest.approx(0.1)


def test_an_objective_with_one_value_in_the_first_generation_keeps_a_usable_scale():
    """Generation 1 with ε = 1 everywhere (log10 ε = 0: zero range and zero magnitude): its scale was 1e-12, so a
    later ε = 0.5 stood at -3e11 and hypervolume.csv said 1.4e11. The scale is then ε's own range (log10 1e-3 to
    log10 1e9: 12); an objective with one nonzero value keeps its magnitude (comm 100: 100)."""
    gen1 = [_row(0, 1, 0.2, 100.0, 1.0), _row(1, 1, 0.3, 50.0, 1.0), _row(2, 1, 0.1, 200.0, 1.0),
            _row(3, 1, 0.25, 80.0, 1.0)]
    hv = hypervolume_table(gen1 + [_row(4, 2, 0.2, 100.0, 0.5), _row(5, 2, 0.1, 200.0, 2.0)], 2, "eps", {})
    assert hv[0]["scale_eps"] == pytest.approx(12.0) and hv[0]["lo_eps"] == 0.0
    assert 0 < hv[0]["hypervolume"] < hv[1]["hypervolume"] <= 1.1 ** 3
    same_comm = [_row(i, 1, 0.1 * (i + 1), 100.0, 10.0 ** i) for i in range(4)]
    assert hypervolume_table(same_comm, 1, "eps", {})[0]["scale_comm"] == pytest.approx(100.0)
