"""Canary directions, inclusion and exposure."""

import warnings

import numpy as np
import pytest
import torch

from fedevo.auditing.canaries import CanarySet, Exposure


def _active(P=300, keep=0.6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(P, generator=g) < keep).float()


def test_directions_orthonormal_on_active_coordinates():
    c = CanarySet(count=40, exposure=Exposure("add/remove", 1.0, 3), seed=1)
    act = _active()
    d = c.directions(act)
    U = torch.stack([CanarySet.embed(d, np.eye(40)[j]) for j in range(40)])
    assert torch.allclose(U @ U.T, torch.eye(40), atol=1e-6)  # unit, pairwise orthogonal (disjoint supports)
    assert float((U.abs().sum(0) * (1 - act)).sum()) == 0.0  # nothing off the active coordinates
    w = np.random.default_rng(0).normal(size=40)
    assert np.allclose(CanarySet.project(d, CanarySet.embed(d, w)), w, atol=1e-5)  # no interference
    rows = CanarySet.rows(d, w, slice(5, 12))
    assert np.allclose(CanarySet.project_rows(d, rows, slice(5, 12)), w[5:12], atol=1e-5)
    with pytest.raises(ValueError):
        CanarySet(count=400, exposure=Exposure("add/remove", 1.0, 3), seed=1).directions(act)


def test_inclusion_signs_and_exposure():
    c = CanarySet(count=4000, exposure=Exposure("add/remove", 0.1, 2), seed=3)
    assert abs(c.included.mean() - 0.5) < 0.03
    joins = c.join(1)
    assert abs(joins.mean() - 0.1) < 0.02 and not c.join(3).any()  # none after the accounted rounds
    s = c.signs(joins)
    assert set(np.unique(s[~joins])) == {0.0}
    assert (s[joins & c.included] == 1).all() and (s[joins & ~c.included] == 0).all()
    r = CanarySet(count=100, exposure=Exposure("replace", 1.0, 5), seed=3)
    assert r.join(5).all() and set(np.unique(r.signs(r.join(1)))) == {-1.0, 1.0}


def test_scores_are_the_likelihood_ratio():
    c = CanarySet(count=3, exposure=Exposure("add/remove", 1.0, 2), seed=0)
    c.record(z=np.array([2.0, 0.0, -1.0]), mu=np.full(3, 2.0), joins=np.ones(3, bool))
    assert np.allclose(c.scores(), [2 * 2 - 2, -2, -2 - 2])  # μz − μ²/2
    q = 0.1
    p = CanarySet(count=2, exposure=Exposure("add/remove", q, 2), seed=0)
    p.record(z=np.array([3.0, 0.0]), mu=np.full(2, 1.0), joins=np.zeros(2, bool))
    assert np.allclose(p.scores(), np.log(1 - q + q * np.exp(np.array([3.0, 0.0]) - 0.5)))
    r = CanarySet(count=1, exposure=Exposure("replace", 1.0, 2), seed=0)
    r.record(z=np.array([0.7]), mu=np.array([2.0]), joins=np.ones(1, bool))
    assert np.allclose(r.scores(), [2 * 2 * 0.7])  # 2μz
    assert np.allclose(r.statistic(), [0.7])


@pytest.mark.parametrize("relation, rate", [("add/remove", 1.0), ("replace", 1.0), ("add/remove", 0.1),
                                            ("replace", 0.1)])
def test_scores_of_near_noiseless_uploads_keep_their_order_without_overflow(relation, rate):
    """μ = 1e200 (σ = 1e-200): μ² overflowed (a RuntimeWarning) and μz − μ²/2 became ∞ − ∞ = NaN, so every score
    was NaN and the one-run bound found nothing; now an included canary scores above a held-out one (±∞ where the
    log-likelihood ratio is beyond the floats), and nothing warns."""
    c = CanarySet(count=2, exposure=Exposure(relation, rate, 2), seed=0)
    sign = -1.0 if relation == "replace" else 0.0
    for _ in range(2):
        c.record(z=np.array([1e200, sign * 1e200]) * (1 + 1e-9), mu=np.full(2, 1e200), joins=np.ones(2, bool))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s = c.scores()
    assert not np.isnan(s).any() and s[0] > s[1], s


def test_zero_out_canaries_are_absent_when_not_included_and_named_as_the_privacy_summary_names_them():
    """Central trust without sampling and secagg count zero-out one user (docs/privacy.md, each result's privacy
    summary); the audit's exposure said add/remove there. The game is the same: a canary not included contributes
    nothing."""
    from fedevo.privacy.central import CentralGaussian
    from fedevo.privacy.distributed import DistributedDiscreteGaussian

    z = CanarySet(count=200, exposure=Exposure("zero-out", 1.0, 2), seed=4)
    s = z.signs(z.join(1))
    assert (s[z.included] == 1).all() and (s[~z.included] == 0).all()
    for cls in (CentralGaussian, DistributedDiscreteGaussian):
        mech = cls.__new__(cls)  # exposure and deployment read the config alone
        mech.cfg = _config("none")
        assert mech.exposure()[0] == "zero-out"
        if cls is CentralGaussian:
            assert mech.deployment()["neighbouring"].startswith("zero-out")


def _config(sampling):
    from fedevo.problem import load_problem

    cfg = load_problem("digits_mlp").sim_config({})
    return cfg.with_(privacy=cfg.privacy.__class__(**{**cfg.privacy.__dict__, "sampling": sampling}))
