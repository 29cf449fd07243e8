"""fedevo.picking on hand-made evaluation rows."""

import math

import numpy as np
import pytest

from fedevo.errors import FedevoError
from fedevo.picking import knee, knee_index, lowest, marks, objective_matrix, parse_spec, pick


def row(i, error, comm, eps, status="ok", **kw):
    return {"id": i, "generation": 1, "error": error, "comm": comm, "eps": eps, "eps_paper": kw.pop("eps_paper", eps),
            "accuracy_global": 1 - error if error is not None else None, "status": status, "lr": 0.1, **kw}


# a convex front with an obvious knee (id 3: near-best in every objective) plus dominated and failed rows
FRONT = [
    row(1, 0.05, 9000.0, 40.0),
    row(2, 0.08, 5000.0, 20.0),
    row(3, 0.12, 900.0, 3.0),  # the knee
    row(4, 0.40, 700.0, 2.5),
    row(5, 0.70, 650.0, 0.5),
    row(6, 0.30, 8000.0, math.inf),  # no privacy
]
OTHERS = [row(7, 0.5, 9500.0, 50.0), row(8, None, None, None, status="failed")]
ROWS = FRONT + OTHERS


def ids(picks):
    return [p.id for p in picks]


def test_lowest_error_and_order_kept():
    assert ids(pick("lowest-error:2", ROWS, FRONT)) == [1, 2]
    assert ids(pick("lowest-error", ROWS, FRONT)) == [1]
    assert ids(pick("lowest-comm:2", ROWS, FRONT)) == [5, 4]
    assert ids(pick("lowest-eps:1", ROWS, FRONT)) == [5]
    # order of the terms is the order of the result
    assert ids(pick("4, lowest-error:2", ROWS, FRONT)) == [4, 1, 2]


def test_knee_is_the_obvious_trade_off():
    r, how = knee(FRONT[:5])
    assert r["id"] == 3, how
    assert ids(pick("knee", ROWS, FRONT[:5])) == [3]


def test_duplicates_removed_reasons_merged():
    picks = pick("knee,lowest-error:3,3,id:1", ROWS, FRONT[:5])
    assert ids(picks) == [3, 1, 2]
    assert picks[0].reasons == ("knee", "lowest-error #3", "id 3")
    assert picks[1].label == "lowest-error #1 + id 1"


def test_filters_restrict_the_front():
    assert ids(pick("eps<=10,lowest-error:2", ROWS, FRONT)) == [3, 4]
    assert ids(pick("lowest-error:2,comm<=1000", ROWS, FRONT)) == [3, 4]  # filters apply wherever written
    assert ids(pick("eps<=10", ROWS, FRONT)) == [3, 4, 5]  # filters only: the whole filtered front
    assert ids(pick("error<=0.1,comm<=6000", ROWS, FRONT)) == [2]
    # ε = inf is above every bound, but not above inf
    assert 6 not in ids(pick("eps<=1e9", ROWS, FRONT))
    assert 6 in ids(pick("eps<=inf", ROWS, FRONT))
    # the knee of the filtered set
    assert ids(pick("knee,eps<=2.8", ROWS, FRONT)) in ([4], [5])
    # ids are explicit: filters don't apply to them
    assert ids(pick("7,eps<=10", ROWS, FRONT)) == [7]


def test_bounds_are_read_as_tables_and_pages_write_numbers():
    """`fedevo front` prints 1234 as "1.23k" and the page's caps read "1k": a pick's filter or cap copied from either
    is the same number (it was "is not a number")."""
    assert ids(pick("comm<=1k", ROWS, FRONT)) == ids(pick("comm<=1000", ROWS, FRONT)) == [3, 4, 5]
    assert ids(pick("comm<=5k,lowest-error", ROWS, FRONT)) == [2]
    assert ids(pick("knee:comm<=0.9k", ROWS, FRONT)) == ids(pick("knee:comm<=900", ROWS, FRONT))
    assert 6 in ids(pick("eps<=∞", ROWS, FRONT))
    assert ids(pick("comm<=0.0007M", ROWS, FRONT)) == ids(pick("COMM <= 700", ROWS, FRONT)) == [4, 5]
    assert ids(pick("knee:comm<=0.0007M", ROWS, FRONT)) == ids(pick("knee:comm<=700", ROWS, FRONT))
    assert ids(pick("eps<=1B", ROWS, FRONT)) == ids(pick("eps<=1G", ROWS, FRONT)) == ids(pick("eps<=1e9", ROWS, FRONT))
    assert ids(pick("eps<=0.001T", ROWS, FRONT)) == ids(pick("eps<=1e9", ROWS, FRONT))
    # the minus sign the tables print for -inf ("−∞"), and before a number
    assert ids(pick("eps>=−∞", ROWS, FRONT)) == ids(pick("eps>=-inf", ROWS, FRONT)) != []
    assert ids(pick("error>=−1", ROWS, FRONT)) == ids(pick("error>=-1", ROWS, FRONT)) != []
    for spec in ("comm<=1e3k", "comm<=1kk", "comm<=k", "comm<=2.5m"):  # m: not a suffix fedevo writes
        with pytest.raises(FedevoError, match="not a number|cannot understand"):
            pick(spec, ROWS, FRONT)


def test_ids_may_be_dominated_or_failed():
    assert ids(pick("7", ROWS, FRONT)) == [7]
    assert ids(pick("#8", ROWS, FRONT)) == [8]


@pytest.mark.parametrize("spec, msg", [
    ("99", "no evaluation with id 99"),
    ("eps<=0.1", "no Pareto solution satisfies eps<=0.1"),
    ("knee,comm<=10,error<=0.01", "no Pareto solution satisfies comm<=10, error<=0.01"),
    ("", "empty pick"),
    ("knee,,2", "empty term"),
    ("kneee", "cannot understand pick term 'kneee'"),
    ("lowest-error:0", "N must be >= 1"),
    ("lowest-error:-1", "N must be >= 1"),
    ("lowest-accuracy:2", "cannot understand"),
    ("eps=<3", "cannot understand"),
])
def test_bad_picks(spec, msg):
    with pytest.raises(FedevoError, match=None) as e:
        pick(spec, ROWS, FRONT)
    assert msg in str(e.value)


def test_empty_front_needs_ids():
    with pytest.raises(FedevoError, match="no Pareto solution"):
        pick("knee", OTHERS, [])
    assert ids(pick("7", OTHERS, [])) == [7]


def test_lowest_more_than_available_takes_all():
    assert ids(pick("lowest-error:50", ROWS, FRONT[:3])) == [1, 2, 3]


def test_knee_fallback_and_small_sets():
    assert knee_index(np.array([[1.0, 2.0, 3.0]])) == (0, "the only solution")
    i, how = knee_index(np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]))
    assert "fallback" in how and i in (0, 1)
    # a straight line (no trade-off outlier): the point closest to the ideal on normalised objectives
    line = np.array([[t, 1 - t, 0.5] for t in np.linspace(0, 1, 9)])
    i, how = knee_index(line)
    assert i == 4 and "fallback" in how
    # duplicates do not crash pymoo's neighbour search
    i, _ = knee_index(np.array([[0.1, 0.2, 0.3]] * 4))
    assert i == 0


def test_lowest_ties_broken_by_other_objectives_then_id():
    rows = [row(10, 0.1, 500.0, 2.0), row(11, 0.1, 400.0, 2.0), row(12, 0.1, 400.0, 2.0)]
    assert [r["id"] for r in lowest(rows, "error", 3)] == [11, 12, 10]


def test_marks_and_parse():
    m = marks(FRONT[:5])
    assert m[1] == ["lowest-error #1"] and m[2] == ["lowest-error #2"] and m[3] == ["knee"]
    t = parse_spec(" Knee , lowest-error:2, eps_paper < 3.5, 12 ")
    assert [x.kind for x in t] == ["knee", "lowest", "filter", "id"]
    assert t[2].key == "eps_paper" and t[2].op == "<" and t[2].value == 3.5


def test_eps_paper_key_for_problems_searching_the_paper_formula():
    rows = [row(1, 0.1, 100.0, 50.0, eps_paper=1.0), row(2, 0.2, 100.0, 1.0, eps_paper=9.0)]
    assert ids(pick("lowest-eps_paper", rows, rows, eps_key="eps_paper")) == [1]
    assert [r["id"] for r in lowest(rows, "error", 1, eps_key="eps_paper")] == [1]


def test_knee_compares_objectives_spanning_decades_on_a_log_scale():
    rng = np.random.default_rng(0)
    err = np.sort(rng.uniform(0.02, 0.9, 15))
    F = np.c_[err, rng.uniform(100, 2000, 15), 2 * 10 ** (4 * (1 - err))]  # ε from ~2 to ~2e4
    assert knee_index(F)[0] == knee_index(np.c_[F[:, :2], np.log10(F[:, 2])])[0]


# ============================================================================================ chance level
# a front whose unconstrained knee is at chance: the low-ε end is bought with a useless model
CHANCE_FRONT = [
    row(1, 0.05, 9000.0, 5000.0),
    row(2, 0.10, 8000.0, 2000.0),
    row(3, 0.942, 100.0, 0.5),  # error 0.942 on 10 classes: worse than guessing
    row(4, 0.90, 200.0, 1.0),  # exactly chance (1 - 1/10): not better than chance either
    row(5, 0.30, 6000.0, 3000.0),
]


def test_knee_never_at_or_below_chance():
    from fedevo.picking import chance_error, knee_candidates

    chance = chance_error(10)
    assert chance == pytest.approx(0.9)
    assert knee(CHANCE_FRONT)[0]["error"] >= chance  # without the rule, this front's knee is a useless model
    assert [r["id"] for r in knee_candidates(CHANCE_FRONT, chance)] == [1, 2, 5]
    r, _ = knee(CHANCE_FRONT, chance=chance)
    assert r["error"] < chance
    assert ids(pick("knee", CHANCE_FRONT, CHANCE_FRONT, chance=chance)) == [r["id"]]
    m = marks(CHANCE_FRONT, chance=chance)
    assert [i for i, ms in m.items() if "knee" in ms] == [r["id"]]
    # diverged / failed rows are never candidates, whatever their numbers
    bad = [row(9, 0.01, 10.0, 0.1, status="diverged")] + CHANCE_FRONT
    assert 9 not in [r["id"] for r in knee_candidates(bad, chance)]
    assert chance_error(None) is None and chance_error(1) is None


def test_no_knee_when_nothing_beats_chance():
    only_bad = [row(3, 0.942, 100.0, 0.5), row(4, 0.91, 50.0, 2.0)]
    with pytest.raises(FedevoError, match="better than chance"):
        pick("knee", only_bad, only_bad, chance=0.9)
    assert all("knee" not in ms for ms in marks(only_bad, chance=0.9).values())
    assert ids(pick("lowest-error", only_bad, only_bad, chance=0.9)) == [4]  # other selectors still work


# ---------------------------------------------------------------------------- the knee's margin and caps
def test_knee_bar_is_chance_minus_the_binomial_margin():
    from fedevo.picking import KNEE_Z, knee_bar

    assert knee_bar(0.9, 10000) == pytest.approx(0.9 - KNEE_Z * math.sqrt(0.9 * 0.1 / 10000))  # 0.89302
    assert knee_bar(0.9, 360) == pytest.approx(0.8632, abs=1e-4)  # digits' 360 test images: a wider margin
    assert knee_bar(0.9, None) == 0.9 and knee_bar(None, 360) is None


def test_a_knee_at_chance_is_not_a_candidate():
    """The Fashion run of issue #28: its knee had error 0.8997 against chance 0.9 (10 classes, 10,000 tests)."""
    from fedevo.picking import knee_bar

    front = [row(1, 0.8997, 100.0, 0.01), row(2, 0.30, 5000.0, 40.0), row(3, 0.45, 2000.0, 8.0)]
    assert knee(front, chance=0.9)[0]["id"] == 1  # the bare chance line lets it through
    bar = knee_bar(0.9, 10000)
    assert knee(front, chance=bar)[0]["id"] != 1
    assert "knee" not in marks(front, chance=bar).get(1, [])


def test_caps_re_pick_the_knee_within_them():
    assert ids(pick("knee", ROWS, FRONT)) == [3]
    got = pick("knee:eps<=2.5", ROWS, FRONT)
    # the caps remove candidates; the space stays that of the whole front (issue #36)
    F = objective_matrix(FRONT)  # as pick measures it: ε = inf under the worst-value rule, not a NaN column
    assert np.isfinite(F).all()
    i, _ = knee_index(F, allowed=[r["eps"] <= 2.5 for r in FRONT])
    assert FRONT[i]["eps"] <= 2.5
    assert ids(got) == [FRONT[i]["id"]] and got[0].reasons == ("knee:eps<=2.5",)
    both = pick("knee:eps<=25:comm<=6000", ROWS, FRONT)
    assert all(r.row["eps"] <= 25 and r.row["comm"] <= 6000 for r in both)
    assert ids(pick("knee, knee:eps<=2.5", ROWS, FRONT)) == [3, FRONT[i]["id"]]  # each knee its own caps


def test_caps_that_leave_nothing_name_the_closest_solution():
    with pytest.raises(FedevoError, match=r"no knee within eps<=0.1: .* the closest is id 5 \(eps 0.5\)"):
        pick("knee:eps<=0.1", ROWS, FRONT)
    for bad in ("knee:", "knee:eps<<2", "knee:sigma<=2", "knee:eps<=nan"):
        with pytest.raises(FedevoError, match="pick"):
            pick(bad, ROWS, FRONT)


def test_a_cap_the_knee_meets_leaves_it_in_place():
    """Issue #36: caps remove candidates but do not rescale the space the knee is measured in, so any cap the
    uncapped knee meets (on any objective, alone or together) picks the same knee; a cap it does not meet moves it
    to a solution within the cap."""
    knee_row = pick("knee", ROWS, FRONT)[0].row
    for key in ("error", "comm", "eps"):
        vals = sorted({r[key] for r in FRONT})
        for v in vals:
            spec = f"knee:{key}<={v!r}"
            got = pick(spec, ROWS, FRONT)[0].row
            assert got[key] <= v, spec
            if knee_row[key] <= v:
                assert got["id"] == knee_row["id"], spec
    both = f"knee:eps<={knee_row['eps']!r}:comm<={knee_row['comm']!r}"
    assert pick(both, ROWS, FRONT)[0].id == knee_row["id"]


def test_knee_index_allowed_keeps_the_space():
    F = np.array([[0.0, 1.0, 1.0], [0.2, 0.2, 0.2], [1.0, 0.0, 0.0], [0.5, 0.45, 0.5]])
    i, _ = knee_index(F)
    assert knee_index(F, allowed=[True] * 4)[0] == i
    assert knee_index(F, allowed=[k == i or k == 0 for k in range(4)])[0] == i
    j, how = knee_index(F, allowed=[False, False, True, True])
    assert j in (2, 3)
    with pytest.raises(ValueError):
        knee_index(F, allowed=[False] * 4)


def test_a_value_no_pareto_solution_has_neither_ranks_nor_bounds():
    """ε paper under central trust (NaN for every evaluation) or an accuracy the evaluator never reported: a pick by
    it would be the tie-breaks' choice called 'lowest-eps_paper #1' (front.html leaves such a column out); refused
    in one line naming the term. A value some solutions lack still ranks the others (the missing ones last)."""
    front = [{**r, "eps_paper": math.nan, "accuracy_global": None} for r in FRONT]
    for spec in ("lowest-eps_paper", "highest-eps_paper:2", "eps_paper<=5", "knee:eps_paper<=5",
                 "accuracy_global>=0.5,knee"):
        with pytest.raises(FedevoError, match=r"pick term '[^']+': no Pareto solution has a value of "
                                              r"(eps_paper|accuracy_global) \(it is undefined for all 6\)"):
            pick(spec, ROWS, front)
    some = [{**r, "eps_paper": math.nan} if r["id"] != 4 else r for r in FRONT]
    assert ids(pick("lowest-eps_paper", ROWS, some)) == [4]
    assert ids(pick("knee", ROWS, front)) == [3]  # the other terms as before


def test_a_value_infinite_for_every_pareto_solution_does_not_rank():
    """ε = ∞ on every Pareto solution (a run without privacy): 'lowest-eps' was the tie-breaks' choice (the lowest
    error) called 'lowest-eps #1'; refused in one line. A filter on it says the front's ε as ∞, not 'inf–inf'."""
    front = [{**r, "eps": math.inf} for r in FRONT]
    for spec in ("lowest-eps", "highest-eps:2", "knee,lowest-eps"):
        with pytest.raises(FedevoError, match=r"^pick term '[^']+': every Pareto solution has eps = ∞ \(no privacy\), "
                                              r"all 6: it ranks none above another; pick by another objective$"):
            pick(spec, ROWS, front)
    with pytest.raises(FedevoError, match=r"on the front of 6: eps ∞\)$"):
        pick("eps<=1", ROWS, front)
    assert len(ids(pick("knee", ROWS, front))) == 1  # the other terms still pick
    some = [{**r, "eps": math.inf} if r["id"] != 4 else r for r in FRONT]
    assert ids(pick("lowest-eps", ROWS, some)) == [4]


def test_caps_that_leave_nothing_name_the_solution_nearest_them_whatever_their_direction():
    """The closest solution named when no Pareto solution meets knee caps: a bound of 0, a lower bound (> on a
    minimised objective, >= on a maximised one) named the first id (knee:error>0.9 named id 1 at error 0.05, not
    id 5 at 0.7; knee:acc>=0.999 the solution with the lowest accuracy)."""
    from fedevo.objectives import Objective, ObjectiveSet

    for spec, closest in (("knee:comm<=0", r"id 5 \(comm 650\)"), ("knee:error>0.9", r"id 5 \(error 0.7\)"),
                          ("knee:error>0.9:comm<=100", r"id 5 \(error 0.7, comm 650\)")):
        with pytest.raises(FedevoError, match=rf"no knee within .*; the closest is {closest}"):
            pick(spec, ROWS, FRONT)
    acc = Objective(name="acc", label="accuracy", read=lambda r: None, worst=0.0, direction="maximize", lower=0.0,
                    upper=1.0)
    objs = ObjectiveSet.of(["error", "comm", "eps", acc])
    front = [{**r, "acc": a} for r, a in zip(FRONT, (0.5, 0.9, 0.99, 0.2, 0.6, None))]
    with pytest.raises(FedevoError, match=r"the closest is id 3 \(acc 0.99\)"):
        pick("knee:acc>=0.999", front, front, objectives=objs)


def test_a_pick_no_better_than_chance_says_so_in_its_label():
    """`eps<=1,comm<=1000,lowest-error` picked a solution of error 0.922 on a 10-class run (chance 0.9) without a
    word, in front, retrain and audit alike: its label now says so (the knee never picks one)."""
    rows = [dict(id=0, status="ok", error=0.92, comm=10.0, eps=0.5), dict(id=1, status="ok", error=0.3, comm=20.0,
                                                                       eps=5.0)]
    (p,) = pick("lowest-error,eps<=1", rows, rows, chance=0.863)
    assert p.id == 0 and p.label == "lowest-error #1 + not clearly better than chance (error ≥ 0.863)"
    (q,) = pick("lowest-error", rows, rows, chance=0.863)
    assert q.id == 1 and "chance" not in q.label
