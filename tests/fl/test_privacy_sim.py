"""Privacy through the whole simulator: both ε values, monotonicity, target-ε mode, presets, bad input."""

import math

import pytest

from fedevo.config import DataConfig, PrivacyConfig, SimConfig
from fedevo.errors import FedevoError
from fedevo.fl.simulate import simulate


def cfg(rounds=4, **priv):
    p = dict(mechanism="update", sigma=1.0, clip=1.0, delta=1e-4)
    p.update(priv)
    return SimConfig(data=DataConfig(dataset="synthetic", clients=5), rounds=rounds, epochs=1, batch_size=32,
                     participation=1.0, upload_loss=0.0, lr=0.1, privacy=PrivacyConfig(**p))


def test_both_eps_reported_and_monotone():
    a = simulate(cfg(rounds=3), seed=0)
    b = simulate(cfg(rounds=6), seed=0)
    c = simulate(cfg(rounds=3, sigma=2.0), seed=0)
    for r in (a, b, c):
        assert r.status == "ok" and math.isfinite(r.eps) and math.isfinite(r.eps_paper)
    assert b.eps > a.eps and c.eps < a.eps  # more rounds or less noise ⇒ larger ε
    assert b.eps_paper > a.eps_paper and c.eps_paper < a.eps_paper
    s3 = simulate(cfg(rounds=3, mechanism="step", sigma=0.05), seed=0)
    s6 = simulate(cfg(rounds=6, mechanism="step", sigma=0.05), seed=0)
    assert s6.eps > s3.eps and s3.privacy["level"].startswith("record")


def test_no_privacy_is_infinite_eps_and_has_no_paper_eps():
    r = simulate(cfg(mechanism="none"), seed=0)
    assert math.isinf(r.eps) and math.isnan(r.eps_paper)  # ε = ∞; no paper formula (NaN, as under central trust)


@pytest.mark.parametrize("mech, extra", [("update", {}), ("step", {"clip": 0.5})])
def test_target_eps_within_one_percent(mech, extra):
    # every client joins every round (C = 1, no loss): the worst case the calibration assumes is what happens
    r = simulate(cfg(rounds=4, mechanism=mech, target_eps=5.0, **extra), seed=0)
    assert abs(r.eps / 5.0 - 1) < 0.01


def test_ledger_spends_at_most_budget():
    r = simulate(cfg(rounds=4, eps_budget=3.0, max_participations=4), seed=0)
    b = r.privacy["budget"]
    assert b["spent_max"] <= 3.0 + 1e-9 and b["remaining_min"] >= -1e-9


@pytest.mark.parametrize("priv, msg", [
    ({"sigma": 0.0}, "sigma must be > 0"),
    ({"sigma": -1.0}, "sigma must be > 0"),
    ({"delta": 0.0}, "delta must be in"),
    ({"delta": 1.0}, "delta must be in"),
    ({"tau": 1.5}, "tau must be in"),
    ({"tau": -0.5, "similarity": "sign"}, "tau must be in"),
    ({"beta": -0.1}, "beta must be >= 0"),
    ({"mechanism": "laplace"}, "unknown mechanism"),
])
def test_bad_privacy_input(priv, msg):
    with pytest.raises(FedevoError, match=msg):
        cfg(**priv)


def test_r_greater_than_t():
    with pytest.raises(FedevoError, match="exceeds rounds"):
        cfg(rounds=3, max_participations=5)


def test_max_participations_is_respected():
    r = simulate(SimConfig(data=DataConfig(dataset="synthetic", clients=4), rounds=6, epochs=1, batch_size=32,
                           participation=0.5, upload_loss=0.0,
                           privacy=PrivacyConfig(mechanism="update", sigma=1.0, clip=1.0, max_participations=3)),
                 seed=1)
    assert r.privacy["participations_max"] <= 3
