"""SignDS (seed 002): EM-MDS selection probabilities, the threshold ν_th*, ε accounting, the upload transform."""

import itertools
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

from fedevo.config import DataConfig, PrivacyConfig, SimConfig
from fedevo.errors import FedevoError
from fedevo.fl.simulate import simulate
from fedevo.privacy import signds as sd


def brute_expected_nu(d, k, h, eps, th):
    S = set(range(k))
    num = den = 0.0
    for J in itertools.combinations(range(d), h):
        nu = len(S.intersection(J))
        w = math.exp(eps * (nu >= th))
        num, den = num + nu * w, den + w
    return num / den


@pytest.mark.parametrize("d, k, h, eps", [(10, 3, 4, 1.0), (12, 4, 5, 1.3), (9, 2, 6, 3.0), (8, 5, 7, 0.5),
                                          (11, 1, 3, 5.0)])
def test_threshold_matches_brute_force(d, k, h, eps):
    brute = [brute_expected_nu(d, k, h, eps, th) for th in range(1, h + 1)]
    assert np.allclose(sd.expected_nu(d, k, h, eps), brute, rtol=1e-10)
    assert sd.optimal_threshold(d, k, h, eps) == int(np.argmax(brute)) + 1


def test_expected_nu_is_stable_for_huge_d_and_eps():
    e = sd.expected_nu(200_000, 2000, 2000, 100.0)
    assert np.all(np.isfinite(e)) and 0 <= e.max() <= 2000
    assert sd.plan(200_000, 2000, 2000, 1.0).expected_nu >= 2000 * 2000 / 200_000  # ≥ random selection


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_selection_frequencies_match_em_mds(sign):
    """60k draws of J for d=8, k=3, h=3: χ² of the 56 set frequencies against P(J) = e^{ε·1(ν≥ν_th)}/Ω."""
    d, k, h, eps = 8, 3, 3, 1.5
    pl = sd.plan(d, k, h, eps)
    delta = torch.tensor([5.0, -4.0, 3.0, 0.1, -0.2, 0.3, 4.5, -6.0])
    top = set(torch.topk(delta * sign, k).indices.tolist())  # s = +1: the 3 largest; s = −1: the 3 smallest
    assert top == ({0, 6, 2} if sign > 0 else {7, 1, 4})
    n = 60_000
    sel, nu = sd.select((delta * sign).expand(n, d).contiguous(), pl, torch.Generator().manual_seed(0))
    assert torch.all(sel.sum(1) == h) and set(sel.unique().tolist()) <= {0.0, 1.0}
    codes = (sel * (2 ** torch.arange(d))).sum(1).long().numpy()
    sets = list(itertools.combinations(range(d), h))
    index = {sum(2**j for j in J): i for i, J in enumerate(sets)}
    counts = np.bincount([index[c] for c in codes], minlength=len(sets))
    probs = np.array([sd.set_probability(len(top.intersection(J)), d, k, h, eps, pl.nu_th) for J in sets])
    assert probs.sum() == pytest.approx(1.0)
    assert stats.chisquare(counts, n * probs).pvalue > 1e-3
    # realised ν is |S_k ∩ J|
    nu_sel = np.array([len(top.intersection(sets[index[c]])) for c in codes[:1000]])
    assert np.array_equal(nu_sel, nu[:1000])


def test_nu_distribution_by_inverse_cdf():
    d, k, h, eps = 1000, 50, 40, 2.0
    pl = sd.plan(d, k, h, eps)
    u = np.random.default_rng(0).random(100_000)
    nu = sd.sample_nu(u, pl)
    p = np.exp(sd.nu_log_probs(d, k, h, eps, pl.nu_th))
    keep = p * len(u) > 5
    obs = np.bincount(nu, minlength=h + 1)
    assert obs[~keep].sum() < 50
    expected = p[keep] * len(u)
    assert stats.chisquare(obs[keep], expected * obs[keep].sum() / expected.sum()).pvalue > 1e-3


@pytest.mark.parametrize("eps, m", [(1.0, 1), (1.0, 10), (0.5, 50), (2.0, 5), (0.1, 200)])
def test_accountant_matches_closed_form(eps, m):
    got = sd.eps_signds(eps_round=eps, participations=m, delta=1e-4)
    exact = sd.eps_pure_composition_exact(eps_round=eps, participations=m, delta=1e-4)
    assert got == pytest.approx(exact, rel=1e-3, abs=1e-6)
    assert got >= exact - 1e-9 and got <= m * eps + 1e-12  # pessimistic PLD, never above basic composition


# eps_signds at these points as dp-accounting's PLD accountant computed it before the composition was done in closed
# form (2026-11-27: from_privacy_parameters(ε, 0) self-composed m times; the last took 25 s and m = 10⁵ more than 15 GB
# on an AMD EPYC, family 26 model 2): (ε per upload, m, δ, ε). Held to 1e-8: the FFT's grid losses were summed step
# by step (4995.99999727 for the grid point 4996 of the last), the closed form's are exact.
PLD_PINNED = [(1.0, 1, 1e-4, 0.9998632026995586), (1.0, 10, 1e-4, 9.997703974521595), (2.0, 5, 1e-4, 9.999811347902321),
              (30.0, 3, 1e-5, 89.99998999995), (100.0, 9, 1e-6, 900.0), (0.5, 50, 1e-5, 18.933283338361544),
              (0.1, 200, 1e-6, 7.185594457422388), (3.0, 100, 1e-8, 299.9999987113882),
              (1.0, 1000, 1e-5, 577.8332067403398), (0.05, 3000, 1e-7, 17.403826454527408),
              (0.1, 10000, 1e-6, 96.57184026312689), (1.0, 10000, 1e-5, 4995.9999972739315)]


@pytest.mark.parametrize("eps, m, delta, want", PLD_PINNED)
def test_accountant_keeps_the_pld_accountants_numbers(eps, m, delta, want):
    assert sd.eps_signds(eps_round=eps, participations=m, delta=delta) == pytest.approx(want, rel=1e-8)


def test_accountant_at_a_hundred_thousand_uploads():
    """m = 10⁵ (out of reach of the FFT self-composition: > 15 GB): within the exact composition's 10⁻³, never below
    it, and at most basic composition; neither computation overflows (the closed form's e^(ε − loss) did)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sd.eps_signds(eps_round=1.0, participations=100_000, delta=1e-5)
        exact = sd.eps_pure_composition_exact(eps_round=1.0, participations=100_000, delta=1e-5)
    assert exact <= got <= exact * (1 + 1e-3) and got <= 100_000


def test_accounting_edge_cases():
    assert sd.eps_signds(eps_round=1.0, participations=0, delta=1e-4) == 0.0
    with pytest.raises(FedevoError, match="signds_eps"):
        sd.eps_signds(eps_round=0.0, participations=3, delta=1e-4)
    with pytest.raises(FedevoError, match="participations"):
        sd.eps_signds(eps_round=1.0, participations=-1, delta=1e-4)


def test_upload_transform_sends_h_signs_on_active_coordinates():
    P = 400
    active = torch.zeros(P)
    active[::2] = 1.0  # d = 200
    up = sd.SignDSUpload(eps=50.0, k_frac=0.05, h_frac=0.05, lr=0.1, clients=5, active=active, seed=0)
    deltas = torch.randn(4, P) * active
    out, cost = up(deltas.clone(), np.array([0, 1, 2, 4]), 200)
    k, h = up.plan.k, up.plan.h
    assert (k, h) == (10, 10) and np.all(cost == h + 1)
    assert torch.all((out != 0).sum(1) == h) and torch.all(out[:, active == 0] == 0)
    vals = out[out != 0].abs()
    assert torch.allclose(vals, torch.full_like(vals, 0.1))
    # ε = 50: every selected dimension is a sign-consistent top-k one (all k of them since h = k)
    for row, d in zip(out, deltas):
        s = float(torch.sign(row[row != 0][0]))
        assert set(torch.nonzero(row).squeeze(1).tolist()) == set(torch.topk(d * s * active - (1 - active) * 1e9,
                                                                              k).indices.tolist())
    assert up.summary()["participations_max"] == 1 and list(up.joined) == [1, 1, 1, 0, 1]


def sim_cfg(**priv):
    p = dict(mechanism="signds", signds_eps=2.0, signds_k=0.05, signds_h=0.05, signds_lr=0.05, delta=1e-4)
    p.update(priv)
    return SimConfig(data=DataConfig(dataset="synthetic", clients=6), rounds=3, epochs=1, batch_size=32,
                     participation=1.0, upload_loss=0.3, lr=0.2, privacy=PrivacyConfig(**p))


def test_signds_through_the_simulator():
    r = simulate(sim_cfg(), seed=0)
    pv = r.privacy
    assert r.status == "ok" and pv["mechanism"] == "signds"
    m = pv["participations_max"]
    assert r.eps == pytest.approx(sd.eps_signds(eps_round=2.0, participations=m, delta=1e-4))
    assert r.eps_paper == pytest.approx(2.0 * m)
    # comm: h + 1 per upload, lost ones included, over rounds × K (C = 1: every client sampled every round)
    assert pv["uploads"] < 3 * 6  # some were lost
    assert r.comm == pytest.approx(pv["h"] + 1)
    assert pv["mean_nu"] > pv["random_nu"]


@pytest.mark.parametrize("priv, msg", [
    ({"signds_eps": 0.0}, "signds_eps must be > 0"),
    ({"signds_k": 0.0}, "signds_k"),
    ({"signds_k": 1.0}, "signds_k"),
    ({"signds_h": 1.5}, "signds_h"),
    ({"signds_lr": -1.0}, "signds_lr"),
    ({"target_eps": 3.0}, "target_eps is not supported"),
    ({"mechanism": "sign"}, "unknown mechanism"),
])
def test_bad_signds_input(priv, msg):
    with pytest.raises(FedevoError, match=msg):
        sim_cfg(**priv)


def test_dims_validation():
    assert sd.dims(100, 0.01, 0.5) == (1, 50)
    with pytest.raises(FedevoError, match="at least 2"):
        sd.dims(1, 0.1, 0.1)
