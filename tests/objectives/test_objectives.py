"""The objective registry and the objective-vector rule (fedevo.objectives)."""

import math

import numpy as np
import pytest

from fedevo.objectives import Objective, ObjectiveSet, get, register, unregister
from fedevo.result import EvaluationResult
from fedevo.searching.front_math import search_eps
from fedevo.searching.objectives import sanitize


def _result(**kw):
    base = dict(error=0.2, comm=500.0, eps=2.0, eps_paper=3.0, accuracy_global=0.8, omega=1000)
    base.update(kw)
    return EvaluationResult(**base)


@pytest.mark.parametrize("eps", [None, math.nan, math.inf, 0.0, 1e-5, 1e-3, 0.5, 7.0, 1e8, 1e9, 5e12])
def test_eps_search_value_is_the_old_rule(eps):
    assert get("eps").search_value(eps) == pytest.approx(search_eps(eps), abs=0, rel=1e-15)


@pytest.mark.parametrize("vals", [(0.2, 500.0, 2.0), (None, math.inf, math.nan), (1.5, 2e9, -1.0)])
def test_sanitized_is_the_old_rule(vals):
    s = ObjectiveSet.of(["error", "comm", "eps"])
    got = s.sanitized(dict(zip(s.names, vals)))
    np.testing.assert_array_equal(got, sanitize(vals))


def test_vector_of_a_result_and_worst_for_failed():
    s = ObjectiveSet.of(["error", "comm", "eps"])
    raw = s.raw(_result())
    assert raw == {"error": 0.2, "comm": 500.0, "eps": 2.0}
    np.testing.assert_allclose(s.search_vector(raw), [0.2, 500.0, math.log10(2.0)])
    np.testing.assert_allclose(s.search_vector(raw, "failed"), [1.0, 1e9, 9.0])
    M = s.search_matrix([{**raw, "status": "ok"}, {**raw, "status": "diverged"}])
    assert M.shape == (2, 3) and M[1].tolist() == [1.0, 1e9, 9.0]


def test_a_maximised_objective_is_negated_and_capped_below():
    acc = Objective(name="acc_test", label="accuracy", read=lambda r: r.accuracy_global, worst=0.0,
                    direction="maximize")
    register(acc)
    try:
        s = ObjectiveSet.of(["error", "acc_test"])
        assert s.search_vector({"error": 0.1, "acc_test": 0.9}).tolist() == [0.1, -0.9]
        assert s.search_vector({"error": 0.1, "acc_test": None}).tolist() == [0.1, -0.0]
        assert acc.sanitize(-3.0) == 0.0
    finally:
        unregister("acc_test")


def test_registry_refuses_a_second_objective_of_one_name_and_names_the_known_ones():
    with pytest.raises(ValueError, match="registered already"):
        register(Objective(name="error", label="e", read=lambda r: 0.0, worst=1.0))
    with pytest.raises(KeyError, match="known: .*comm"):
        get("no_such_objective")


@pytest.mark.parametrize("kw, msg", [({"name": "a b"}, "identifier"), ({"direction": "down"}, "direction"),
                                      ({"worst": math.inf}, "finite"), ({"log": True, "floor": 0.0}, "floor")])
def test_bad_objective_definitions(kw, msg):
    base = dict(name="x", label="x", read=lambda r: 0.0, worst=1.0)
    with pytest.raises(ValueError, match=msg):
        Objective(**{**base, **kw})
