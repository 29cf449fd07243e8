"""Multi-fidelity search with fedevo's simulator: a promoted individual's full-fidelity row equals training it for T
rounds in one go with the same seed; a lower rung's row holds the values after its own rounds (ε spent so far),
never the full-T ones; the ranking's planned ε is the full-T row's ε."""

from __future__ import annotations

import pytest

from fedevo.searching import Runtime, SearchSettings, load_run, search
from fedevo.searching.evaluator import SIMULATOR

pytestmark = pytest.mark.skipif(not getattr(SIMULATOR, "continues", False),
                                reason="fedevo's simulator does not continue a training yet (evaluate(until=, "
                                       "resume_from=))")

FIELDS = ("error", "comm", "eps", "eps_paper", "accuracy_global", "omega", "status")


def _vals(get) -> dict:
    """The fields, NaN written as 'nan' (central trust has no paper ε: NaN, which equals nothing)."""
    return {k: ("nan" if isinstance(v, float) and v != v else v) for k in FIELDS for v in [get(k)]}


def test_promoted_full_row_equals_one_run_of_T_rounds(tmp_path):
    from fedevo.evaluation import evaluate, planned_objectives

    out = tmp_path / "run"
    search(SearchSettings(problem="digits_mlp", pop=4, gen=1, seed=2, rounds=3, fidelity=(1 / 3, 1.0)), out,
           Runtime(workers=0))
    data = load_run(out)
    assert len(data.lower_rows) == 4 and len(data.full_rows) == 2  # 4 at 1 round, ⌈4/3⌉ = 2 continued to 3
    for r in data.full_rows:
        params = data.params(r)
        one = evaluate(data.problem, params, seed=r["seed"], rounds=3)
        assert _vals(lambda k: getattr(one, k)) == _vals(r.get), r["id"]
        assert planned_objectives(data.problem, params, rounds=3).get("eps", r["eps"]) == r["eps"]
        low = next(x for x in data.rows if x["id"] == r["id"] and x["rung"] == 0)
        part = evaluate(data.problem, params, seed=r["seed"], rounds=3, until=1)
        assert low["rounds_trained"] == part.rounds == 1
        assert _vals(lambda k: getattr(part, k)) == _vals(low.get)
        assert low["eps"] < r["eps"]  # ε spent after 1 of 3 rounds, not the full-T ε
