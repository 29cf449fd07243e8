"""The two statistics against hand-computed numbers and independent implementations."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from fedevo.auditing import estimate as E


def test_p_value_hand_computed():
    # δ = 0: P[Binomial(r, q) ≥ v]; all r right: q^r with q = e^ε / (1 + e^ε)
    q = math.e / (1 + math.e)
    assert E.p_value_dp(m=1000, r=100, v=100, eps=1.0, delta=0.0) == pytest.approx(q ** 100, rel=1e-9)
    assert E.p_value_dp(m=10, r=4, v=3, eps=0.0, delta=0.0) == pytest.approx(5 / 16)  # (4 + 1) / 2^4
    # δ > 0, by hand: m = 10, r = v = 2, ε = 0: q = ½, β = P[B ≥ 2] = ¼; α = max(P[B=1]/1, (P[B=1]+P[B=0])/2)
    # = max(½, ⅜) = ½; p = ¼ + ½·δ·2·m = ¼ + ½·0.01·20 = 0.35
    assert E.p_value_dp(m=10, r=2, v=2, eps=0.0, delta=0.01) == pytest.approx(0.35)
    with pytest.raises(ValueError):
        E.p_value_dp(m=5, r=6, v=1, eps=1.0, delta=0.0)


def _p_value_reference(m, r, v, eps, delta):
    """Steinke, Nasr & Jagielski's published loop, written out independently."""
    q = 1 / (1 + math.exp(-eps))
    beta = stats.binom.sf(v - 1, r, q)
    alpha, acc = 0.0, 0.0
    for i in range(1, v + 1):
        acc += stats.binom.pmf(v - i, r, q)
        if acc > i * alpha:
            alpha = acc / i
    return min(beta + alpha * delta * 2 * m, 1.0)


@pytest.mark.parametrize("m,r,v,eps,delta", [(100, 40, 35, 0.7, 1e-5), (1000, 200, 150, 1.3, 1e-4),
                                             (50, 50, 50, 3.0, 1e-3), (20, 10, 2, 0.1, 0.0)])
def test_p_value_matches_published_loop(m, r, v, eps, delta):
    assert E.p_value_dp(m=m, r=r, v=v, eps=eps, delta=delta) == pytest.approx(
        _p_value_reference(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_eps_lower_all_right_closed_form():
    # δ = 0, v = r: the bound solves q^r = level: ε = log(p / (1 − p)) with p = level^(1/r)
    p = 0.05 ** (1 / 10)
    assert E.eps_lower_from_guesses(m=100, r=10, v=10, delta=0.0, level=0.05) == pytest.approx(
        math.log(p / (1 - p)), rel=1e-9)
    # 4 guesses all right cannot reject ε = 0 at 5% (½^4 = 6.25%)
    assert E.eps_lower_from_guesses(m=100, r=4, v=4, delta=0.0, level=0.05) == 0.0
    assert E.eps_lower_from_guesses(m=100, r=5, v=5, delta=0.0, level=0.05) > 0.0


def test_guesses_and_one_run_bound():
    s = np.array([5.0, -4.0, 0.1, -0.2, 3.0, 0.0])
    assert E.guesses(s, "in", 2).tolist() == [1, 0, 0, 0, 1, 0]
    assert E.guesses(s, "sign", 3).tolist() == [1, -1, 0, 0, 1, 0]
    rng = np.random.default_rng(0)
    inc = rng.random(400) < 0.5
    perfect = np.where(inc, 1.0, -1.0) * (1 + rng.random(400))
    b = E.eps_lower_one_run(scores=perfect, included=inc, delta=1e-6, confidence=0.95)
    assert b.correct == b.guesses == 400 and b.strategy == "sign"
    assert b.eps_lower == pytest.approx(E.max_attainable(m=400, delta=1e-6, confidence=0.95))
    assert b.tests == len(E.guess_plan(400)) and b.level == pytest.approx(0.05 / b.tests)
    # scores independent of the truth: no evidence of leakage
    noise = E.eps_lower_one_run(scores=rng.normal(size=400), included=inc, delta=1e-6, confidence=0.95)
    assert noise.eps_lower < 0.3


def test_delta_gaussians_closed_form_and_integral():
    norm = stats.norm
    for mu, eps in ((1.0, 1.0), (0.5, 0.2), (3.0, 4.0)):
        want = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert E.delta_gaussians(eps=eps, mu1=mu, s1=1, mu0=0, s0=1) == pytest.approx(want, rel=1e-9, abs=1e-15)
    # different variances: the exact intervals against a numerical integral of (p1 − e^ε p0)+
    a, sa, b, sb, eps = 0.7, 1.3, 0.0, 1.0, 0.5
    f = lambda x: max(0.0, norm.pdf(x, a, sa) - math.exp(eps) * norm.pdf(x, b, sb))  # noqa: E731
    num = integrate.quad(f, -40, 40, limit=400, points=[-5, 0, 5])[0]
    assert E.delta_gaussians(eps=eps, mu1=a, s1=sa, mu0=b, s0=sb) == pytest.approx(num, rel=1e-6)


def test_eps_gaussians_matches_dp_accounting():
    import dp_accounting as dpa

    for z, delta in ((1.0, 1e-5), (2.0, 1e-6), (0.5, 1e-4)):
        acc = dpa.pld.PLDAccountant().compose(dpa.GaussianDpEvent(z))
        want = acc.get_epsilon(delta)
        assert E.eps_gaussians(mu1=1 / z, s1=1, mu0=0, s0=1, delta=delta) == pytest.approx(want, rel=2e-3)


def test_gaussian_fit_hand_computed():
    # means 2 and 0, sample stds √2 and √2 → pooled √2, separation √2
    f = E.eps_estimate_gaussian(stat_in=[1.0, 3.0], stat_out=[-1.0, 1.0], delta=1e-5)
    assert (f.mean_in, f.mean_out) == (2.0, 0.0)
    assert f.std_in == pytest.approx(math.sqrt(2)) and f.separation == pytest.approx(math.sqrt(2))
    assert f.eps_estimate == pytest.approx(E.eps_gaussians(mu1=math.sqrt(2), s1=1, mu0=0, s0=1, delta=1e-5))
    same = E.eps_estimate_gaussian(stat_in=[0.0, 1.0, 2.0], stat_out=[0.0, 1.0, 2.0], delta=1e-5)
    assert same.eps_estimate == 0.0


def test_gaussian_fit_and_its_interval_are_scale_free_up_to_the_largest_floats():
    """Statistics of ~1e200 (an audit of σ = 1e-200): their squares overflowed in the stds (RuntimeWarnings), the
    pooled std became ∞ and the separation 0, so near-noiseless uploads read as ε estimate 0; the fit is
    scale-free (its separation and ε those of the same numbers at scale 1) and nothing warns."""
    import warnings

    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.normal(3.0, 1.0, 40), rng.normal(0.0, 1.0, 40)
    small = E.eps_estimate_gaussian(stat_in=a, stat_out=b, delta=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        big = E.eps_estimate_gaussian(stat_in=a * 1e200, stat_out=b * 1e200, delta=1e-5)
        interval = E.estimate_interval(stat_in=a * 1e200, stat_out=b * 1e200, delta=1e-5, confidence=0.95, seed=1)
    assert big.separation == pytest.approx(small.separation, rel=1e-12)
    assert big.eps_estimate == pytest.approx(small.eps_estimate, rel=1e-9)
    assert big.std_in == pytest.approx(small.std_in * 1e200, rel=1e-12)
    assert interval == pytest.approx(E.estimate_interval(stat_in=a, stat_out=b, delta=1e-5, confidence=0.95, seed=1),
                                     rel=1e-9)


# ---------------------------------------------------------------------------- verdicts and the estimate's interval
def test_verdicts_from_hand_made_numbers():
    from fedevo.auditing.run import verdict

    assert verdict(eps_lower=0.0, eps_upper=0.01, guesses=0, attainable=5.0) == "inconclusive"  # "0 of 0 guesses"
    assert verdict(eps_lower=1.0, eps_upper=61.4, guesses=40, attainable=5.5) == "inconclusive"  # no power
    assert verdict(eps_lower=0.4, eps_upper=1.9, guesses=135, attainable=5.5) == "consistent"
    assert verdict(eps_lower=2.5, eps_upper=1.9, guesses=135, attainable=5.5) == "VIOLATION"
    assert verdict(eps_lower=2.5, eps_upper=1.9, guesses=135, attainable=1.0) == "VIOLATION"  # evidence wins


def test_estimate_interval_is_seeded_and_covers_the_estimate():
    import numpy as np

    from fedevo.auditing.estimate import eps_estimate_gaussian, estimate_interval

    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 300), rng.normal(0.0, 1.0, 300)
    lo, hi = estimate_interval(stat_in=a, stat_out=b, delta=1e-5, confidence=0.95, seed=3)
    assert (lo, hi) == estimate_interval(stat_in=a, stat_out=b, delta=1e-5, confidence=0.95, seed=3)
    assert (lo, hi) != estimate_interval(stat_in=a, stat_out=b, delta=1e-5, confidence=0.95, seed=4)
    est = eps_estimate_gaussian(stat_in=a, stat_out=b, delta=1e-5).eps_estimate
    assert lo < est < hi and hi - lo < est  # a real spread, not a point
    wide = estimate_interval(stat_in=a[:30], stat_out=b[:30], delta=1e-5, confidence=0.95, seed=3)
    assert wide[1] - wide[0] > hi - lo  # fewer canaries: a wider interval


def test_estimate_interval_reaches_zero_without_leakage():
    # inserted and held-out canaries from one distribution (no leakage, true ε 0): the interval must be able to
    # hold 0. A bootstrap of ε itself (a function of |μ|) never does, so its whole interval lay above any small
    # accountant's ε (an audit of ε 0.0034 said "the whole interval lies above the accountant's ε" 19 times in 20)
    from fedevo.auditing.estimate import estimate_interval

    rng = np.random.default_rng(0)
    x = rng.normal(size=500)
    assert estimate_interval(stat_in=x, stat_out=x, delta=1e-6, confidence=0.95, seed=1)[0] == 0.0
    above = sum(estimate_interval(stat_in=rng.normal(size=500), stat_out=rng.normal(size=500), delta=1e-6,
                                  confidence=0.95, seed=s)[0] > 0.0034 for s in range(20))
    assert above <= 3  # about 5 % of null draws, at 0.95
