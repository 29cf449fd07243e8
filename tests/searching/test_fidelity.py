"""The multi-fidelity ladder and promotion rule (fedevo.searching.fidelity): pure functions on hand-made tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedevo.errors import FedevoError, command_line
from fedevo.searching.fidelity import (expected_per_generation, n_promoted, parse_ladder, promote, rung_rounds,
                                       select_promoted)
from fedevo.searching.front_math import is_full


# ------------------------------------------------------------------------------------------- the ladder
@pytest.mark.parametrize("value, ladder", [
    (0.33, (0.33, 1.0)), ("0.33", (0.33, 1.0)), (1, (1.0,)), ("1", (1.0,)), ("1/3", (1 / 3, 1.0)),
    ("1/9,1/3,1", (1 / 9, 1 / 3, 1.0)), ([0.111, 0.333, 1], (0.111, 0.333, 1.0)), (None, None),
])
def test_parse_ladder(value, ladder):
    assert parse_ladder(value) == ladder


@pytest.mark.parametrize("value, says", [
    (0, "outside (0, 1]"), (-0.2, "outside (0, 1]"), (1.5, "outside (0, 1]"), ("nan", "not a fraction"), (float("nan"), "outside (0, 1]"),
    ("abc", "not a fraction"), (True, "not a fraction"), ([0.5, 0.3, 1], "not strictly increasing"),
    ([0.3, 0.3, 1], "not strictly increasing"), ([0.1, 0.5], "must end at 1"), ([], "empty"),
    ("1/0", "not a fraction"),
])
def test_bad_ladder_is_one_line_naming_the_key(value, says):
    with pytest.raises(FedevoError, match="^fidelity=: .*") as e:  # from Python: the keyword argument
        parse_ladder(value)
    assert says in str(e.value) and "\n" not in str(e.value)
    with command_line(), pytest.raises(FedevoError, match="^--fidelity: .*") as e:  # from the CLI: the option
        parse_ladder(value)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_rung_messages_spell_fidelity_and_rounds_as_the_caller_does():
    with pytest.raises(FedevoError, match=r"^fidelity=: fidelity 0\.04 of 10 rounds .*or more rounds=\)$"):
        rung_rounds((0.04, 1.0), 10)
    with command_line(), pytest.raises(FedevoError, match=r"^--fidelity: rungs .*or more --rounds\)$"):
        rung_rounds((0.1, 0.12, 1.0), 10)


def test_rung_rounds_round_half_up_and_refuse_empty_or_equal_rungs():
    assert rung_rounds((1 / 9, 1 / 3, 1.0), 9) == (1, 3, 9)
    assert rung_rounds((1 / 9, 1 / 3, 1.0), 30) == (3, 10, 30)  # 30/9 = 3.33 -> 3
    assert rung_rounds((0.25, 1.0), 10) == (3, 10)  # 2.5 -> 3 (half up, not Python's half-even 2)
    with pytest.raises(FedevoError, match="fewer than one"):
        rung_rounds((0.04, 1.0), 10)  # 0.4 rounds
    with pytest.raises(FedevoError, match="same rounds"):
        rung_rounds((0.1, 0.12, 1.0), 10)  # 1 and 1


def test_promoted_counts():
    assert [n_promoted(n) for n in (0, 1, 2, 3, 4, 9, 20)] == [0, 1, 1, 1, 2, 3, 7]
    assert expected_per_generation(20, 3) == 20 + 7 + 3
    assert expected_per_generation(8, 1) == 8


def test_is_full():
    assert is_full({"id": 1}) and is_full({"fidelity": 1.0}) and not is_full({"fidelity": 1 / 3})


# ------------------------------------------------------------------------------------------- promotion
def row(i, error, comm=100.0, eps=1.0, status="ok"):
    return {"id": i, "status": status, "error": error, "comm": comm, "eps": eps}


def test_non_dominated_rank_decides_first():
    rows = [row(0, 0.5, 100, 1.0), row(1, 0.2, 100, 1.0), row(2, 0.3, 50, 1.0), row(3, 0.6, 200, 2.0),
            row(4, 0.7, 300, 3.0), row(5, 0.8, 400, 4.0)]
    assert promote(rows, {}, "eps") == [1, 2]  # 6 rows -> 2 slots: the two non-dominated ones


def test_all_dominated_chain_takes_the_best_of_the_chain():
    rows = [row(i, 0.1 * (i + 1), 100 + i, 1.0 + i) for i in (4, 2, 0, 3, 1, 5)]  # i dominates i + 1
    assert promote(rows, {}, "eps") == [0, 1]


def test_ties_fill_by_id():
    rows = [row(i, 0.3) for i in (7, 3, 5, 1, 2, 9)]  # identical objectives: one front, no spread
    assert promote(rows, {}, "eps") == [1, 2]


def test_spread_decides_within_the_last_front():
    # one front on a line error + comm/1000 = 1: extremes first, then the most isolated
    F = np.array([[0.0, 1.0, 0.0], [0.1, 0.9, 0.0], [0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [1.0, 0.0, 0.0]])
    assert select_promoted(F, [0, 1, 2, 3, 4], 3, margin=0) == [0, 2, 4]


def test_planned_full_T_objectives_replace_the_rung_values_and_a_missing_one_falls_back():
    # at the rung, id 0 looks private (eps 0.5) and id 1 not (eps 5); at the full T it is the other way round
    rows = [row(0, 0.30, 100, 0.5), row(1, 0.30, 100, 5.0), row(2, 0.30, 100, 6.0), row(3, 0.5, 100, 9.0)]
    assert promote(rows, {}, "eps") == [0, 1]  # rung values: 0 dominates all, then 1 dominates 2 and 3
    planned = {0: {"eps": 8.0, "comm": 100.0}, 1: {"eps": 0.9, "comm": 100.0}, 2: {"eps": 7.0}, 3: {}}
    assert promote(rows, planned, "eps") == [1, 2]  # full-T eps: 1 dominates everything; 2 (eps 7) beats 0 (8)
    planned[0] = {"comm": 100.0}  # eps of 0 unknown before training: its rung value (0.5) counts again
    assert promote(rows, planned, "eps") == [0, 1]


def test_margin_treats_errors_in_one_box_as_equal():
    F = np.array([[0.108, 100.0, 1.0], [0.101, 100.0, 1.0]])  # 0.7 points apart: seed noise
    assert select_promoted(F, [0, 1], 1) == [0]  # one box: a tie, by id
    assert select_promoted(F, [0, 1], 1, margin=0) == [1]  # no margin: the lower error dominates


def test_fewer_ok_candidates_than_slots_and_failures_never_promoted():
    rows = [row(0, math.nan, status="failed"), row(1, 0.4), row(2, 1.0, status="diverged"),
            row(3, math.nan, status="failed"), row(4, 0.2, status="failed"), row(5, math.nan, status="failed")]
    assert promote(rows, {}, "eps") == [1]  # 2 slots, one ok candidate
    assert promote([row(0, 0.1, status="failed")], {}, "eps") == []
    assert promote([row(3, 0.9)], {}, "eps") == [3]


def test_promotion_is_a_pure_function_of_the_table():
    rng = np.random.default_rng(0)
    rows = [row(i, float(rng.random()), float(rng.random() * 100), float(rng.random() * 10)) for i in range(20)]
    first = promote(rows, {}, "eps")
    assert len(first) == 7
    assert promote(list(reversed(rows)), {}, "eps") == first  # order of the table does not matter


def test_promotion_ranks_feasibility_first():
    """[constraints] eps = 2: an individual whose full-T ε (planned before training) is 5.04 took a full-fidelity
    slot from feasible ones (its full row can never enter the front). Feasible rows take the slots first; slots
    left go to the least violation."""
    rows = [row(0, 0.5, 100, 1.0), row(1, 0.1, 100, 4.7), row(2, 0.3, 50, 1.5), row(3, 0.6, 200, 1.0),
            row(4, 0.7, 300, 3.0), row(5, 0.8, 400, 9.0)]
    planned = {1: {"eps": 5.04}}
    assert 1 in promote(rows, planned, "eps")  # without the constraint: the lowest error
    assert promote(rows, planned, "eps", constraints={"eps": 2.0}) == [0, 2]  # 2 slots, 3 feasible
    few = [row(0, 0.5, 100, 3.0), row(1, 0.1, 100, 5.0), row(2, 0.3, 50, 1.5), row(3, 0.6, 200, 9.0),
           row(4, 0.7, 300, 2.5), row(5, 0.8, 400, 20.0), row(6, 0.9, 400, 30.0)]  # 3 slots, 1 feasible
    assert promote(few, {}, "eps", constraints={"eps": 2.0}) == [0, 2, 4]  # 2, then ε 2.5 and 3: the nearest
    acc = [{**row(i, 0.5, 100, 1.0), "accuracy": a} for i, a in enumerate([0.2, 0.9, 0.5, 0.95, 0.1, 0.3])]
    from fedevo.objectives import Objective, ObjectiveSet

    objs = ObjectiveSet.of(["error", "comm", "eps", Objective(name="accuracy", label="acc", read=lambda r: 0.0,
                                                                  worst=0.0, direction="maximize")])
    assert promote(acc, {}, objs, constraints={"accuracy": 0.6}) == [1, 3]  # >= for a maximised objective


def test_a_constraint_on_the_error_does_not_bar_a_rungs_early_errors():
    """A rung's error (a few rounds in) is far above its full-T value: held to `[constraints] error = 0.2` nearly
    every row broke it, and promotion became 'lowest early error' (three rows at comm 100000, the trade-off lost).
    A constraint bars a row only on a value that tells the full-T one: planned, or an ε (it only grows)."""
    rows = [{"id": i, "status": "ok", "error": e, "comm": c, "eps": 1.0} for i, (e, c) in enumerate(
        [(0.50, 1e5), (0.51, 1e5), (0.52, 1e5), (0.53, 5000), (0.54, 5000), (0.56, 500), (0.60, 200), (0.70, 100),
         (0.8, 50)])]
    planned = {r["id"]: {"comm": r["comm"], "eps": 1.0} for r in rows}
    free = promote(rows, planned, "eps")
    assert promote(rows, planned, "eps", constraints={"error": 0.2}) == free and free != [0, 1, 2]
    got = promote(rows, planned, "eps", constraints={"comm": 1000})  # planned comm tells: the feasible 5..8 only
    assert len(got) == 3 and set(got) <= {5, 6, 7, 8}
