"""The hypervolume of a search where one objective is never finite (ε = ∞ in every evaluation: no privacy, or a
user's objective never read): the others are normalised by their evaluations, not by their own ranges."""

from __future__ import annotations

import math

import pytest

from fedevo.searching.budgets import HV_GROWTH_TOL
from fedevo.searching.front_math import (HYPERVOLUME, common_hypervolume, hv_settled, hv_skips_unmeasured,
                                         hypervolume_table)


def _row(i, g, error, comm, eps=math.inf):
    return {"id": i, "generation": g, "status": "ok", "error": error, "comm": comm, "eps": eps}


GEN1 = [_row(0, 1, 0.30, 2200.0), _row(1, 1, 0.55, 900.0), _row(2, 1, 0.75, 545.0), _row(3, 1, 0.90, 400.0),
        _row(4, 1, 0.95, 300.0)]
CHEAPER = GEN1 + [_row(5, 2, 0.90, 250.0)]  # generation 2: the same error as row 3 for 3/8 less comm


def test_a_cheaper_point_grows_the_hypervolume_when_no_eps_is_finite():
    """Every ε infinite: no evaluation had all objectives finite, so error and comm were normalised by their own
    ranges (comm by 10⁹) and the cheaper point grew the hypervolume by ~1e-8: below --patience's tolerance, as if
    nothing was found. Now error and comm are normalised by the evaluations, ε by its own range."""
    hv = hypervolume_table(CHEAPER, 2, "eps", {})
    assert hv[0]["lo_comm"] == pytest.approx(300.0) and hv[0]["scale_comm"] == pytest.approx(1900.0)
    assert hv[0]["lo_error"] == pytest.approx(0.30) and hv[0]["scale_error"] == pytest.approx(0.65)
    assert hv[0]["lo_eps"] == pytest.approx(-3.0) and hv[0]["scale_eps"] == pytest.approx(12.0)  # its own range
    a, b = hv[0]["hypervolume"], hv[1]["hypervolume"]
    assert a > 0 and (b - a) / a > 100 * HV_GROWTH_TOL, (a, b)
    assert hv_settled(GEN1, "eps")  # the progress line shows it from generation 1


def test_a_run_made_before_keeps_its_numbers():
    """run.json of a run made before records no `hypervolume.unmeasured`: its hypervolume.csv is recomputed (resume,
    plot, front) as it was written, every objective's own range."""
    assert hv_skips_unmeasured({"hypervolume": HYPERVOLUME}) and not hv_skips_unmeasured({"hypervolume": {}})
    old = hypervolume_table(CHEAPER, 2, "eps", {}, skip_unmeasured=False)
    assert old[0]["scale_comm"] == pytest.approx(1e9) and old[0]["lo_error"] == 0.0
    assert old[1]["hypervolume"] - old[0]["hypervolume"] < HV_GROWTH_TOL * old[0]["hypervolume"]
    assert not hv_settled(GEN1, "eps", skip_unmeasured=False)


def test_where_some_eps_is_finite_only_those_rows_normalise():
    """Mixed privacy (a mechanism gene): the rows with every objective finite normalise, as before; a no-privacy
    point adds nothing, however low its error and comm."""
    gen1 = [_row(0, 1, 0.2, 1000.0, 10.0), _row(1, 1, 0.3, 500.0, 1.0), _row(2, 1, 0.4, 300.0, 0.5),
            _row(3, 1, 0.5, 200.0, 0.1), _row(4, 1, 0.01, 10.0)]
    hv = hypervolume_table(gen1 + [_row(5, 2, 0.001, 1.0)], 2, "eps", {})
    assert hv[0]["lo_error"] == pytest.approx(0.2) and hv[0]["scale_comm"] == pytest.approx(800.0)
    assert hv[1]["hypervolume"] == hv[0]["hypervolume"]
    assert hv == hypervolume_table(gen1 + [_row(5, 2, 0.001, 1.0)], 2, "eps", {}, skip_unmeasured=False)


def test_runs_without_privacy_compare():
    """compare.html / fedevo.hypervolume of two runs without privacy: one normalisation over both runs' error and
    comm (it was every objective's own range, comm's 10⁹)."""
    other = [_row(10 + r["id"], r["generation"], r["error"] * 0.9, r["comm"]) for r in GEN1]
    (a, b), lo, scale = common_hypervolume([(CHEAPER, {}), (other, {})], "eps")
    assert scale[1] == pytest.approx(2200.0 - 250.0) and lo[0] == pytest.approx(0.27)
    assert b[0]["hypervolume"] > a[0]["hypervolume"] > 0 and a[1]["hypervolume"] > a[0]["hypervolume"]


def test_a_simulated_private_problem_keeps_the_normalisation_that_waits_for_a_finite_eps(tmp_path):
    """review17 F4: 'unmeasured' was decided from the first rows, so a private problem whose gene can pick no
    privacy (mechanism none, the fedavg preset) fixed its normalisation with ε at its own bounds when its first
    evaluations all drew it (gp/tpe in batches of one: 4 rows), and every later ε = ∞ point added hypervolume. Where
    fedevo's simulator evaluates, an ε never finite is left out of the objectives, so the rule is not recorded; a
    user's evaluator, whose ε may be ∞ in all, keeps it."""
    import json

    from fedevo.problem import load_problem
    from fedevo.searching.run import SearchRun
    from fedevo.searching.settings import SearchSettings

    from .search_helpers import FAKE

    prob = load_problem("digits_mlp")
    SearchRun.create(SearchSettings(problem="digits_mlp", pop=4, gen=1, seed=1), tmp_path / "sim", problem=prob)
    sim = hv_skips_unmeasured(json.loads((tmp_path / "sim" / "run.json").read_text()))
    assert sim == frozenset({"error", "comm"})  # ε must be measured; another objective never read may not be
    SearchRun.create(SearchSettings(problem="digits_mlp", pop=4, gen=1, seed=1, evaluator=FAKE), tmp_path / "own",
                     problem=prob)
    assert hv_skips_unmeasured(json.loads((tmp_path / "own" / "run.json").read_text())) is True
    # the reviewer's rows: generations 1-4 one row each, ε = ∞ (a no-privacy gene's choice), then finite ε
    rows = [_row(g, g + 1, 0.5 - 0.02 * g, 1000.0 - 10 * g) for g in range(4)]
    rows += [_row(4 + g, 5 + g, 0.4 - 0.02 * g, 900.0 - 10 * g, eps=0.5 + g) for g in range(5)]
    objs = ("error", "comm", "eps")
    assert not hv_settled(rows[:4], objs, skip_unmeasured=sim)  # waits for finite ε, as before today
    assert hv_settled(rows[:4], objs, skip_unmeasured=True)  # another evaluator's: ε may be ∞ in all
