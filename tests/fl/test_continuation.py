"""Training continued from a saved state equals one uninterrupted run (fl/continuation.py): the multi-fidelity
search trains an individual to a low rung, and continues the promoted ones from there."""

import math

import pytest

from fedevo.errors import FedevoError
from fedevo.evaluation import evaluate, planned_objectives
from fedevo.problem import load_problem

T = 3

# every mechanism × trust model the registry allows on the bundled digits problems, recall on and off
GRID = [
    ("digits_mlp", None),  # update, central trust, Poisson sampling
    ("digits_mlp", {"sampling": "fixed"}),
    ("digits_mlp", {"target_eps": 2.0}),  # σ calibrated for the planned T
    ("digits_mlp", {"trust": "secagg"}),  # distributed discrete Gaussian under secure aggregation
    ("digits_mlp", {"mechanism": "none"}),
    ("digits_mlp_local", None),  # update, local trust
    ("digits_mlp_local", {"recall": True, "tau": 0.5}),
    ("digits_mlp_local", {"aggregation": "secagg", "recall": False}),
    ("digits_mlp", {"mechanism": "step", "trust": "local"}),
    ("digits_mlp", {"mechanism": "signds", "trust": "local"}),
    ("digits_mlp", {"mechanism": "adaptive", "trust": "local"}),
]


def _timeless(v):
    """A result's fields without wall-clock timings (secure aggregation reports its seconds)."""
    if isinstance(v, dict):
        return {k: _timeless(x) for k, x in v.items() if not k.endswith("_s")}
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v


def _fields(r):
    d = r.to_dict()
    d.pop("wall_s")
    return _timeless(d)


@pytest.mark.parametrize("name,params", GRID, ids=lambda x: str(x))
def test_continued_training_equals_one_run(name, params):
    p = load_problem(name)
    full = evaluate(p, params, seed=5, rounds=T)
    assert full.status == "ok", full.message
    a = evaluate(p, params, seed=5, rounds=T, until=1)
    b = evaluate(p, params, seed=5, rounds=T, until=2, resume_from=a.state)
    c = evaluate(p, params, seed=5, rounds=T, resume_from=b.state)
    assert (a.rounds, b.rounds, c.rounds) == (1, 2, T)
    assert a.state is not None and b.state is not None and c.state is None
    assert _fields(c) == _fields(full)
    # one jump from round 1 to T is the same too
    assert _fields(evaluate(p, params, seed=5, rounds=T, resume_from=a.state)) == _fields(full)


def test_low_fidelity_row_carries_what_its_rounds_spent():
    """A rung's ε is what its rounds spent (never the planned T's), its error is measured there."""
    p = load_problem("digits_mlp")
    one = evaluate(p, None, seed=2, rounds=T, until=1)
    assert one.eps == evaluate(p, None, seed=2, rounds=1).eps  # fixed σ: the first round of T is a 1-round run
    full = evaluate(p, None, seed=2, rounds=T)
    assert one.eps < full.eps and one.error != full.error
    assert "state" not in one.to_dict()


@pytest.mark.parametrize("change", [{"seed": 6}, {"rounds": T + 1}, {"params": {"lr": 0.2}}])
def test_a_state_continues_only_its_own_evaluation(change):
    p = load_problem("digits_mlp")
    a = evaluate(p, None, seed=5, rounds=T, until=1)
    kw = {"seed": 5, "rounds": T, **change}
    params = kw.pop("params", None)
    with pytest.raises(FedevoError, match="belongs to another evaluation"):
        evaluate(p, params, resume_from=a.state, **kw)


def test_bad_until_and_state():
    p = load_problem("digits_mlp")
    for until in (0, T + 1, 1.5):
        with pytest.raises(FedevoError, match="until"):
            evaluate(p, None, seed=1, rounds=T, until=until)
    with pytest.raises(FedevoError, match="not a readable training state"):
        evaluate(p, None, seed=1, rounds=T, resume_from=b"garbage")
    b = evaluate(p, None, seed=1, rounds=T, until=2)
    with pytest.raises(FedevoError, match="after round 2"):
        evaluate(p, None, seed=1, rounds=T, until=1, resume_from=b.state)


@pytest.mark.parametrize("name,params", [("digits_mlp", None), ("digits_mlp", {"sampling": "fixed"}),
                                         ("digits_mlp", {"target_eps": 2.0}), ("digits_mlp", {"mechanism": "none"})])
def test_planned_eps_is_the_full_runs(name, params):
    p = load_problem(name)
    planned = planned_objectives(p, params, rounds=T)
    assert planned == {"eps": evaluate(p, params, seed=3, rounds=T).eps}


@pytest.mark.parametrize("name,params", [("digits_mlp_local", None), ("digits_mlp", {"trust": "secagg"}),
                                         ("digits_mlp", {"mechanism": "adaptive", "trust": "local"})])
def test_planned_leaves_out_what_training_decides(name, params):
    assert planned_objectives(load_problem(name), params, rounds=T) == {}
