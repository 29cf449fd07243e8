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
    # the state the loop and the mechanisms carry from round to round
    ("digits_mlp", {"sampling": "none"}),
    ("digits_mlp_local", {"eps_budget": 400.0}),  # the per-user budget ledger
    ("digits_mlp_local", {"recall": False, "max_participations": 2}),  # the participation cap's counts
    ("digits_mlp_local", {"recall": False, "target_eps": 50.0}),
    ("digits_mlp_local", {"aggregation": "secagg", "recall": False, "secagg_neighbours": "auto"}),  # SecAgg+
    ("digits_mlp", {"mechanism": "signds", "trust": "local", "aggregation": "secagg"}),
    ("digits_mlp", {"mechanism": "step", "trust": "local", "target_eps": 5.0}),
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


def test_a_rung_below_the_participation_cap_is_accounted_for_its_rounds():
    """A run with cap r = 2 stopped after 1 round is accounted as the 1-round run it is (no client joined twice):
    the same ε as a 1-round run with r = 1, not a refused configuration (r > T)."""
    p = load_problem("digits_mlp_local")
    params = {"recall": False, "max_participations": 2}
    one = evaluate(p, params, seed=4, rounds=T, until=1)
    assert one.status == "ok", one.message
    assert one.eps == evaluate(p, {**params, "max_participations": 1}, seed=4, rounds=1).eps


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


# (problem, params, the objectives known before training); every bundled problem loses 30 % of its uploads
PLANNED = [
    ("digits_mlp", None, {"eps", "comm"}),  # central trust: ε from σ, q, T, δ; comm from Ω
    ("digits_mlp", {"sampling": "fixed"}, {"eps", "comm"}),
    ("digits_mlp", {"target_eps": 2.0}, {"eps", "comm"}),
    ("digits_mlp", {"mechanism": "none"}, {"eps", "comm"}),
    ("digits_mlp", {"mechanism": "none", "alpha": 1.0, "layers": 2}, {"eps", "comm"}),  # sparser, deeper
    ("digits_mlp", {"mechanism": "none", "alpha": 32.0, "units": 16}, {"eps", "comm"}),  # layers dense (density 1)
    ("digits_mlp_local", {"recall": False}, {"comm"}),  # local ε depends on arrivals
    ("digits_mlp", {"mechanism": "step", "trust": "local"}, {"comm"}),
    ("digits_mlp", {"mechanism": "signds", "trust": "local"}, {"comm"}),  # h indices + the sign per upload
    ("digits_mlp_local", None, set()),  # recall: recalled uploads cost an index
    ("digits_mlp_local", {"aggregation": "secagg", "recall": False}, set()),  # the protocol's words
    ("digits_mlp", {"trust": "secagg"}, set()),
    ("digits_mlp", {"mechanism": "adaptive", "trust": "local"}, set()),  # level reports, the filter's metadata
    ("digits_mlp_local", {"recall": False, "max_participations": 1}, set()),  # fewer clients once capped
]


@pytest.mark.parametrize("name,params,known", PLANNED, ids=lambda x: str(sorted(x) if isinstance(x, set) else x))
def test_planned_objectives_are_the_full_runs(name, params, known):
    """What planned_objectives says before training is what training T rounds measures (not an estimate), and it
    says nothing where training decides."""
    p = load_problem(name)
    planned = planned_objectives(p, params, rounds=T)
    assert set(planned) == known
    full = evaluate(p, params, seed=3, rounds=T)
    assert full.status == "ok", full.message
    for key, value in planned.items():
        assert value == pytest.approx(getattr(full, key), rel=1e-12, abs=0), key
