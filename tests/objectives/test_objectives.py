"""The objective registry and the objective-vector rule (fedevo.objectives)."""

import math
import types

import numpy as np
import pytest

from fedevo.errors import FedevoError
from fedevo.objectives import Objective, ObjectiveError, ObjectiveSet, get, register, unregister
from fedevo.result import EvaluationResult


def _result(**kw):
    base = dict(error=0.2, comm=500.0, eps=2.0, eps_paper=3.0, accuracy_global=0.8, omega=1000)
    base.update(kw)
    return EvaluationResult(**base)


# the rule the search used before the objectives list (searching/objectives.py, front_math.search_eps), written out
@pytest.mark.parametrize("eps, want", [(None, 9.0), (math.nan, 9.0), (math.inf, 9.0), (0.0, -3.0), (1e-5, -3.0),
                                       (1e-3, -3.0), (0.5, math.log10(0.5)), (7.0, math.log10(7.0)), (1e8, 8.0),
                                       (1e9, 9.0), (5e12, 9.0)])
def test_eps_search_value_is_the_old_rule(eps, want):
    assert get("eps").search_value(eps) == pytest.approx(want, abs=1e-15)


@pytest.mark.parametrize("vals, want", [((0.2, 500.0, 2.0), (0.2, 500.0, 2.0)),
                                        ((None, math.inf, math.nan), (1.0, 1e9, 1e9)),
                                        ((1.5, 2e9, -1.0), (1.0, 1e9, -1.0))])
def test_sanitized_is_the_old_rule(vals, want):
    s = ObjectiveSet.of(["error", "comm", "eps"])
    got = s.sanitized(dict(zip(s.names, vals)))
    np.testing.assert_array_equal(got, want)


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
    mine = register(Objective(name="acc_twice", label="a", read=lambda r: 0.0, worst=1.0))
    try:
        with pytest.raises(ObjectiveError, match="registered already"):
            register(Objective(name="acc_twice", label="a", read=lambda r: 0.5, worst=1.0))
        assert register(mine) is mine  # the same one again: nothing to refuse
        other = Objective(name="acc_twice", label="a", read=lambda r: 0.5, worst=1.0)
        assert register(other, replace=True) is other and get("acc_twice") is other
    finally:
        unregister("acc_twice")
    with pytest.raises(KeyError, match="known: .*comm"):
        get("no_such_objective")


def test_a_built_in_objective_is_neither_replaced_nor_removed():
    """replace=True used to swap the registry's entry while searches kept the built-in column: silently nothing."""
    for replace in (False, True):
        with pytest.raises(ObjectiveError, match="'error' is a built-in objective and cannot be replaced"):
            register(Objective(name="error", label="e", read=lambda r: 0.0, worst=1.0), replace=replace)
    with pytest.raises(ObjectiveError, match="cannot be removed"):
        unregister("eps")
    assert get("error").read(types.SimpleNamespace(error=0.25)) == 0.25


@pytest.mark.parametrize("kw, msg", [
    ({"name": "a b"}, "identifier"), ({"direction": "down"}, "direction"), ({"worst": math.inf}, "finite"),
    ({"log": True, "floor": 0.0}, "floor"), ({"lower": 1.0, "upper": 0.0}, "lower = 1 is above upper = 0"),
    ({"upper": math.nan}, "upper must be a finite number"),
    # the worst value on the good side: every value capped to it, a failure tied with the best (the 2026-11-27 audit)
    ({"direction": "maximize", "worst": 1.0, "lower": 0.0, "upper": 1.0}, "worst = 1 is better than lower = 0"),
    ({"worst": 0.5, "lower": 0.0, "upper": 1.0}, "worst = 0.5 is better than upper = 1"),
    ({"worst": -1.0, "lower": 0.0}, "worst = -1 is better than lower = 0"),
])
def test_bad_objective_definitions(kw, msg):
    base = dict(name="x", label="x", read=lambda r: 0.0, worst=1.0)
    with pytest.raises(ObjectiveError, match=msg) as e:
        Objective(**{**base, **kw})
    assert isinstance(e.value, FedevoError) and isinstance(e.value, ValueError)  # one line from the CLI; as before


def test_a_value_is_a_number_or_none():
    obj = Objective(name="x", label="x", read=lambda r: r, worst=1.0, lower=0.0, upper=1.0)
    assert obj.value(0.3) == 0.3 and obj.value(None) is None and obj.value(np.float32(0.5)) == 0.5
    for v in ("0.3", b"1", True):
        with pytest.raises(TypeError, match="expected a number or None"):
            obj.value(v)
    assert obj.outside(1.5) == "1.5 is outside its range [0, 1]" and obj.outside(-0.0) is None
    assert obj.outside(math.nan) is None and obj.outside(None) is None  # the worst value's to stand in for


def test_a_set_has_two_to_five_distinct_objectives():
    with pytest.raises(ValueError, match="2 to 5"):
        ObjectiveSet.of(["error"])
    with pytest.raises(ValueError, match="2 to 5"):
        ObjectiveSet.of(["error", "comm", "eps", "eps_paper", "model_size", "train_macs"])
    with pytest.raises(ValueError, match="twice"):
        ObjectiveSet.of(["error", "comm", "error"])


def test_constraints_bound_the_raw_value_and_a_maximised_one_from_below():
    acc = Objective(name="acc_c", label="accuracy", read=lambda r: r.accuracy_global, worst=0.0,
                    direction="maximize")
    s = ObjectiveSet.of(["error", "eps", acc])
    cons = {"eps": 8.0, "acc_c": 0.5}
    assert s.feasible({"error": 0.1, "eps": 8.0, "acc_c": 0.5}, cons)
    assert not s.feasible({"error": 0.1, "eps": 8.1, "acc_c": 0.9}, cons)
    assert not s.feasible({"error": 0.1, "eps": 1.0, "acc_c": 0.4}, cons)
    assert not s.feasible({"error": 0.1, "eps": 1.0, "acc_c": None}, cons)  # missing: its worst value
    # on the optimiser's scale: G = f - bound <= 0 gives the same feasible set
    from fedevo.searching.problem import SearchProblem
    from fedevo.searching.space import SearchSpace
    from fedevo.problem import load_problem

    p = SearchProblem(SearchSpace.from_problem(load_problem("digits_mlp")), constraints=cons, objectives=s)
    for row, ok in (({"eps": 8.0, "acc_c": 0.5}, True), ({"eps": 8.1, "acc_c": 0.9}, False),
                    ({"eps": 1.0, "acc_c": 0.4}, False), ({"eps": math.inf, "acc_c": 0.9}, False)):
        row = {"error": 0.1, "status": "ok", **row}
        assert bool(np.all(p.constraints_of(p.objectives_of(row)) <= 0)) == ok == s.feasible(row, cons), row
    # a bound on eps binds eps_paper when that is the set's ε (problem files before the objectives list)
    assert ObjectiveSet.of(["error", "comm", "eps_paper"]).constraint_items({"eps": 8}) == ((2, 8.0),)
    # said with their direction (fedevo front's "none meets the constraints (eps <= 8, acc_c >= 0.5)" said <= both)
    assert s.constraint_terms(cons) == [("eps", False, 8.0), ("acc_c", True, 0.5)]


def test_fedevo_front_says_a_maximised_objectives_bound_as_a_floor():
    from types import SimpleNamespace

    from fedevo.cli.plot import _why_no_front

    acc = Objective(name="acc_f", label="accuracy", read=lambda r: r.accuracy_global, worst=0.0,
                    direction="maximize")
    rows = [{"id": 0, "status": "ok", "error": 0.2, "eps": 9.0, "acc_f": 0.8}]
    data = SimpleNamespace(rows=rows, constraints={"eps": 8.0, "acc_f": 0.9},
                           objectives=ObjectiveSet.of(["error", "eps", acc]))
    assert _why_no_front(data).endswith("meets the problem's constraints (eps <= 8, acc_f >= 0.9)")


def test_a_checkpointed_problem_keeps_its_objectives_without_their_code():
    """The problem pickles (checkpoints) with a lambda objective: its record travels, the registry reads."""
    import pickle

    from fedevo.problem import load_problem
    from fedevo.searching.problem import SearchProblem
    from fedevo.searching.space import SearchSpace

    obj = register(Objective(name="acc_p", label="accuracy", read=lambda r: r.accuracy_global, worst=0.0,
                             direction="maximize"))
    try:
        p = SearchProblem(SearchSpace.from_problem(load_problem("digits_mlp")),
                          objectives=ObjectiveSet.of(["error", "eps", obj]))
        p.objectives_of({"error": 0.1, "eps": 10.0, "acc_p": 0.8})  # fills the cache that must not be pickled
        q = pickle.loads(pickle.dumps(p))
        assert q.n_obj == 3 and q.objectives.names == ("error", "eps", "acc_p")
        assert q.objectives_of(_result(accuracy_global=0.75)).tolist() == [0.2, math.log10(2.0), -0.75]
        assert q.objectives_of({"error": 0.1, "eps": 10.0, "acc_p": 0.8, "status": "failed"}).tolist() == \
            [1.0, 9.0, -0.0]
    finally:
        unregister("acc_p")


def test_worst_client_error_is_the_mean_of_the_worst_tenth():
    from fedevo.fl.simulate import worst_client_error

    acc = np.array([0.9] * 18 + [0.5, 0.3, np.nan])  # 20 clients with a test split: the worst 2
    assert worst_client_error(acc) == pytest.approx((0.5 + 0.7) / 2)
    assert worst_client_error(np.array([0.8, 0.6])) == pytest.approx(0.4)  # at least one client
    assert worst_client_error(np.array([np.nan])) is None


def test_train_macs_counts_the_active_weights_by_hand():
    """digits_mlp at its defaults: 64-64-10, α = 8: SET densities 8·128/4096 = 0.25 and 8·74/640 = 0.925, so
    1024 + 592 = 1616 multiply-adds per example forward; 1437 training examples over 20 clients; 2 epochs."""
    from fedevo.fl.cost import train_macs
    from fedevo.problem import load_problem

    cfg = load_problem("digits_mlp").sim_config()
    assert train_macs(cfg, 1437 / 20) == pytest.approx(3 * 1616 * (1437 / 20) * 2)


def test_a_user_models_train_macs_counts_its_active_weights_as_the_built_in_models_do():
    """The same 64-200-200-10 network as a user model (examples/models.py's make_mlp) and as fedevo's MLP: equal
    train_macs at every α. A user model's was its dense forward pass at any α (16,440,000 at α = 1 and 32), so
    the objective could not respond to the density it is searched against."""
    from fedevo.fl.cost import train_macs
    from fedevo.problem import parse_problem

    def macs(model, alpha, **kw):
        d = {"model": model, "dataset": "digits", "train": {"rounds": 2, "epochs": 1, **kw},
             "genes": {"alpha": {"type": "real", "low": 1, "high": 32, "default": 8}}}
        if model != "mlp":
            d["model_args"] = {"hidden": 200, "depth": 2}
        return train_macs(parse_problem(d, name="m").sim_config({"alpha": alpha}), 100.0)

    for alpha in (1.0, 8.0, 32.0):
        assert macs("fedevo.examples.models:make_mlp", alpha) == pytest.approx(macs("mlp", alpha, layers=2,
                                                                                         units=200))
    assert macs("fedevo.examples.models:make_mlp", 1.0) < macs("fedevo.examples.models:make_mlp", 32.0)


def test_the_log_reads_old_files_and_writes_a_column_per_new_objective(tmp_path):
    from fedevo.problem import load_problem
    from fedevo.searching.log import RESULT_COLUMNS, EvalLog
    from fedevo.searching.runner import Task

    genes = load_problem("digits_mlp").genes
    three = EvalLog(tmp_path / "a.csv", genes, objectives=ObjectiveSet.of(["error", "comm", "eps"]))
    assert three.columns == EvalLog(tmp_path / "a.csv", genes).columns  # a run before the objectives list
    boom = Objective(name="boom", label="b", read=lambda r: 1 / 0, worst=5.0)
    log = EvalLog(tmp_path / "b.csv", genes, objectives=ObjectiveSet.of(["error", "worst_client_error", boom]))
    assert log.columns[-2:] == ["worst_client_error", "boom"] and "boom" not in RESULT_COLUMNS
    log.open()
    params = {g.name: g.default for g in genes}
    row = log.append(Task(0, 1, 0, params, 7), _result(worst_client_error=0.35))
    log.close()
    assert row["worst_client_error"] == 0.35 and row["boom"] is None
    assert "objective boom: ZeroDivisionError" in row["message"]
    back = EvalLog(tmp_path / "b.csv", genes, objectives=log.objectives).open()
    assert back[0]["worst_client_error"] == 0.35 and back[0]["boom"] is None


def test_highest_and_lowest_of_any_objective():
    from fedevo.picking import pick

    acc = register(Objective(name="acc_h", label="accuracy", read=lambda r: None, worst=0.0, direction="maximize"))
    try:
        s = ObjectiveSet.of(["error", "comm", acc])
        rows = [{"id": i, "status": "ok", "error": e, "comm": c, "eps": 1.0, "eps_paper": 1.0, "accuracy_global": 0.5,
                 "acc_h": a} for i, (e, c, a) in enumerate([(0.1, 900.0, 0.6), (0.2, 100.0, 0.9), (0.3, 50.0, None)])]
        assert [p.id for p in pick("highest-acc_h", rows, rows, objectives=s)] == [1]
        assert [p.id for p in pick("lowest-acc_h:3", rows, rows, objectives=s)] == [0, 1, 2]  # None last
        assert [p.id for p in pick("acc_h>=0.7", rows, rows, objectives=s)] == [1]
        assert [p.id for p in pick("knee:acc_h>=0.7", rows, rows, objectives=s)] == [1]
    finally:
        unregister("acc_h")
