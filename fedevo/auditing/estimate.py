"""The two statistics of an audit, as pure functions of canary scores.

- `eps_lower_one_run`: Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training Run" (NeurIPS 2023).
  m canaries, each included independently with probability ½; an auditor makes at most r guesses (included or
  not) and abstains on the rest. Under (ε, δ)-DP the number of right guesses is dominated by
  Binomial(r, e^ε/(1+e^ε)) up to a δ term; `p_value_dp` is the p-value computation given in the paper (the
  binomial tail plus 2·m·δ·α), and the lower bound is the largest ε that a test at level 1 − confidence
  rejects. Several guess rules are tried (`guess_plan`), each at level (1 − confidence)/(number of rules)
  (Bonferroni), so the reported bound holds at `confidence` overall.
- `eps_estimate_gaussian`: Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar, "One-shot Empirical Privacy
  Estimation for Federated Learning" (ICLR 2024): fit a Gaussian to the statistic of the inserted canaries and one
  to the held-out canaries, and report the ε at δ of the pair of Gaussians (the privacy of distinguishing them
  from one sample). An estimate, not a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import special, stats


# ============================================================================================ Steinke et al.
def p_value_dp(*, m: int, r: int, v: int, eps: float, delta: float) -> float:
    """P[≥ v correct of r guesses] for an (ε, δ)-DP mechanism with m canaries (Steinke et al. 2023, Alg. in
    their appendix): β = P[Binomial(r, q) ≥ v], q = e^ε/(1+e^ε), plus α·2·m·δ with
    α = max_i P[v > Binomial(r, q) ≥ v − i] / i."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    if eps < 0 or not 0 <= delta <= 1:
        raise ValueError(f"need eps >= 0 and delta in [0, 1], got {eps}, {delta}")
    q = 1.0 / (1.0 + math.exp(-eps))
    # scipy.special rather than scipy.stats.binom: the same numbers without the distribution objects' overhead
    # (the bisection calls this hundreds of times per audit)
    beta = 1.0 if v == 0 else float(special.bdtrc(v - 1, r, q))  # P[B ≥ v]
    alpha = 0.0
    if delta > 0 and v > 0:
        k = np.arange(v - 1, -1, -1, dtype=float)  # P[B = v−1], P[B = v−2], ..., P[B = 0]
        pmf = np.exp(special.gammaln(r + 1) - special.gammaln(k + 1) - special.gammaln(r - k + 1)
                     + special.xlogy(k, q) + special.xlog1py(r - k, -q))
        alpha = float(np.max(np.cumsum(pmf) / np.arange(1, v + 1)))  # max_i P[v > B ≥ v − i] / i
    return min(1.0, beta + alpha * delta * 2 * m)


def eps_lower_from_guesses(*, m: int, r: int, v: int, delta: float, level: float, eps_max: float = 100.0) -> float:
    """The largest ε whose p-value for v correct out of r stays below `level` (0 when even ε = 0 is not
    rejected): the one-run lower bound of one guess count, by bisection (the p-value grows with ε)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if r == 0 or p_value_dp(m=m, r=r, v=v, eps=0.0, delta=delta) >= level:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value_dp(m=m, r=r, v=v, eps=hi, delta=delta) < level:
        lo, hi = hi, hi * 2.0
        if hi > eps_max:
            return eps_max
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if p_value_dp(m=m, r=r, v=v, eps=mid, delta=delta) < level:
            lo = mid
        else:
            hi = mid
    return lo


GUESS_FRACTIONS = (0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0)  # r / m
STRATEGIES = ("in", "sign")


def guess_plan(m: int) -> list[tuple[str, int]]:
    """The (strategy, r) guess rules tried, for each r in `GUESS_FRACTIONS`·m: "in" guesses *included* for the r
    highest scores (an attack that only recognises presence, e.g. under secret sampling); "sign" guesses the sign
    of the score (included if > 0) for the r scores of largest magnitude (the most confident r guesses of a
    log-likelihood-ratio score). Both make at most r guesses, a number fixed in advance, as the theorem needs;
    which canaries are guessed may depend on the output."""
    plan: list[tuple[str, int]] = []
    for f in GUESS_FRACTIONS:
        r = min(m, max(1, int(round(f * m))))
        for kind in STRATEGIES:
            if (kind, r) not in plan:
                plan.append((kind, r))
    return plan


def guesses(scores: np.ndarray, kind: str, r: int) -> np.ndarray:
    """+1 (included), −1 (not included), 0 (abstain) per canary; ties broken by canary index."""
    s = np.nan_to_num(np.asarray(scores, dtype=float), nan=0.0)
    g = np.zeros(len(s), dtype=np.int8)
    if kind == "in":
        g[np.argsort(-s, kind="stable")[:r]] = 1
    elif kind == "sign":
        pick = np.argsort(-np.abs(s), kind="stable")[:r]
        g[pick] = np.where(s[pick] > 0, 1, -1)
    else:
        raise ValueError(f"unknown guess strategy {kind!r}")
    return g


@dataclass(frozen=True)
class OneRunBound:
    eps_lower: float
    guesses: int  # r of the best guess rule
    correct: int  # v of the best guess rule
    k_in: int  # guesses "included" of the best rule
    k_out: int  # guesses "not included"
    strategy: str
    tests: int  # guess rules tried (the Bonferroni factor)
    level: float  # per-test level


def eps_lower_one_run(*, scores: Sequence[float], included: Sequence[bool], delta: float, confidence: float,
                      plan: Sequence[tuple[str, int]] | None = None) -> OneRunBound:
    """Steinke et al.'s ε lower bound at `confidence` from canary scores (higher = more likely included) and the
    canaries' true inclusion: the best of the `plan`'s guess rules, each tested at (1 − confidence)/len(plan)."""
    s = np.asarray(scores, dtype=float)
    inc = np.asarray(included, dtype=bool)
    m = len(s)
    if m == 0 or len(inc) != m:
        raise ValueError("need one inclusion flag per score and at least one canary")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    plan = guess_plan(m) if plan is None else list(plan)
    level = (1.0 - confidence) / len(plan)
    truth = np.where(inc, 1, -1)
    best = OneRunBound(0.0, 0, 0, 0, 0, "", len(plan), level)
    for kind, r in plan:
        g = guesses(s, kind, r)
        right = int((g == truth).sum())
        eps = eps_lower_from_guesses(m=m, r=r, v=right, delta=delta, level=level)
        if eps > best.eps_lower:
            best = OneRunBound(eps, r, right, int((g > 0).sum()), int((g < 0).sum()), kind, len(plan), level)
    return best


def max_attainable(*, m: int, delta: float, confidence: float) -> float:
    """The lower bound a perfect attack (every guess right, all m guessed) would give: the most m canaries can
    ever show at this confidence."""
    level = (1.0 - confidence) / len(guess_plan(m))
    return eps_lower_from_guesses(m=m, r=m, v=m, delta=delta, level=level)


# ============================================================================================ Andrew et al.
def delta_gaussians(*, eps: float, mu1: float, s1: float, mu0: float, s0: float) -> float:
    """δ(ε) = ∫ (p₁ − e^ε p₀)₊ for p₁ = N(mu1, s1²), p₀ = N(mu0, s0²): exact, over the set where the log
    density ratio exceeds ε (an interval or two half-lines: the ratio's log is quadratic)."""
    if s1 <= 0 or s0 <= 0:
        raise ValueError("standard deviations must be > 0")
    A = 1.0 / (2 * s0 * s0) - 1.0 / (2 * s1 * s1)
    B = mu1 / (s1 * s1) - mu0 / (s0 * s0)
    C = mu0 * mu0 / (2 * s0 * s0) - mu1 * mu1 / (2 * s1 * s1) + math.log(s0 / s1) - eps
    # {x: A x² + B x + C > 0} as a union of intervals
    if abs(A) < 1e-12 * max(abs(B), 1e-300) or A == 0.0:
        if B == 0:
            return 0.0 if C <= 0 else max(0.0, 1.0 - math.exp(eps))
        x = -C / B
        intervals = [(x, math.inf)] if B > 0 else [(-math.inf, x)]
    else:
        disc = B * B - 4 * A * C
        if disc <= 0:
            intervals = [(-math.inf, math.inf)] if A > 0 else []
        else:
            r1, r2 = sorted(((-B - math.sqrt(disc)) / (2 * A), (-B + math.sqrt(disc)) / (2 * A)))
            intervals = [(-math.inf, r1), (r2, math.inf)] if A > 0 else [(r1, r2)]

    def logmass(mu, s, a, b):  # log P[a < X < b], X ~ N(mu, s²), accurate in either tail
        if b <= a:
            return -math.inf
        za, zb = (a - mu) / s, (b - mu) / s
        if za > 0:  # both in the upper tail: difference of survival functions
            hi, lo = stats.norm.logsf(za), stats.norm.logsf(zb)
        else:
            hi, lo = stats.norm.logcdf(zb), stats.norm.logcdf(za)
        if hi == -math.inf:
            return -math.inf
        return float(hi + np.log1p(-math.exp(min(lo - hi, 0.0))))

    # on these intervals p1 > e^ε·p0 pointwise, so e^ε·P0 ≤ P1 ≤ 1: no overflow in log space
    d = sum(math.exp(logmass(mu1, s1, a, b)) - math.exp(min(eps + logmass(mu0, s0, a, b), 0.0))
            for a, b in intervals)
    return max(0.0, d)


def eps_gaussians(*, mu1: float, s1: float, mu0: float, s0: float, delta: float, eps_max: float = 1e7) -> float:
    """The smallest ε with δ(ε) ≤ delta in both directions (p₁ vs p₀ and p₀ vs p₁)."""
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")

    def one(a, sa, b, sb):
        if delta_gaussians(eps=0.0, mu1=a, s1=sa, mu0=b, s0=sb) <= delta:
            return 0.0
        lo, hi = 0.0, 1.0
        while delta_gaussians(eps=hi, mu1=a, s1=sa, mu0=b, s0=sb) > delta:
            lo, hi = hi, hi * 2
            if hi > eps_max:
                return math.inf
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if delta_gaussians(eps=mid, mu1=a, s1=sa, mu0=b, s0=sb) > delta:
                lo = mid
            else:
                hi = mid
        return hi

    return max(one(mu1, s1, mu0, s0), one(mu0, s0, mu1, s1))


@dataclass(frozen=True)
class GaussianFit:
    eps_estimate: float
    mean_in: float
    std_in: float
    mean_out: float
    std_out: float
    separation: float  # (mean_in − mean_out) / pooled std: the fitted Gaussian mechanism's μ


def eps_estimate_gaussian(*, stat_in: Sequence[float], stat_out: Sequence[float], delta: float) -> GaussianFit:
    """Andrew et al.'s one-shot estimate: Gaussians fitted to the inserted and the held-out canaries'
    statistics, and the ε at `delta` that separates them. The two fits share their (pooled) std: the ε is then
    the Gaussian mechanism's with μ = |mean_in − mean_out| / std. (With a std per group, a few percent of
    sampling error in a fitted std alone gives ε of several at δ = 1e-6, since the log density ratio of two
    Gaussians with different variances is unbounded; `eps_gaussians` computes that case too.)"""
    a, b = _groups(stat_in, stat_out)
    x, y, scale = _scaled(a, b)
    ma, sa, mb, sb = (scale * float(v) for v in (x.mean(), x.std(ddof=1), y.mean(), y.std(ddof=1)))
    mu = abs(_signed_separation(a, b))
    return GaussianFit(_eps_of_separation(mu, delta), ma, sa, mb, sb, mu)


def _groups(stat_in: Sequence[float], stat_out: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(stat_in, dtype=float), np.asarray(stat_out, dtype=float)
    if len(a) < 2 or len(b) < 2:
        raise ValueError("need at least two inserted and two held-out canaries")
    return a, b


def _scaled(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(a/s, b/s, s), s the power of 2 just above the largest finite |statistic|: the fit is scale-free, and
    near-noiseless uploads give statistics (~1e200) whose squares are beyond the floats. A power of 2 scales
    exactly: every number at ordinary scales is the one computed without it."""
    big = np.abs(np.concatenate([a, b]))
    big = big[np.isfinite(big)]
    s = math.ldexp(1.0, min(math.frexp(float(big.max()))[1], 1023)) if big.size and big.max() > 0 else 1.0
    return a / s, b / s, s


def _signed_separation(a: np.ndarray, b: np.ndarray) -> float:
    """(mean_in − mean_out) / pooled std: the fitted Gaussian mechanism's μ, with its sign (scale-free)."""
    a, b, _ = _scaled(a, b)
    sa, sb = float(a.std(ddof=1)), float(b.std(ddof=1))
    pooled = math.sqrt(((len(a) - 1) * sa * sa + (len(b) - 1) * sb * sb) / (len(a) + len(b) - 2))
    return (float(a.mean()) - float(b.mean())) / max(pooled, 1e-300)


def _eps_of_separation(mu: float, delta: float) -> float:
    """The ε at `delta` of the Gaussian mechanism with separation |mu|."""
    mu = abs(mu)
    return eps_gaussians(mu1=mu, s1=1.0, mu0=0.0, s0=1.0, delta=delta) if math.isfinite(mu) else math.inf


def estimate_interval(*, stat_in: Sequence[float], stat_out: Sequence[float], delta: float, confidence: float,
                      seed: int = 0, resamples: int = 200) -> tuple[float, float]:
    """An interval (at `confidence`) of `eps_estimate_gaussian`: a percentile bootstrap of the *signed* separation
    μ = (mean_in − mean_out) / pooled std — the inserted and the held-out canaries resampled with replacement, each
    group on its own, `resamples` times from a generator seeded with `seed` (the same inputs give the same
    interval) — mapped to ε through |μ|: from 0 when the interval of μ holds 0 (the canaries show no separation),
    else from the ε of its end nearer 0. (Bootstrapping ε itself, a function of |μ|, never reaches 0: with no
    leakage at all its interval would lie above any small enough accountant's ε.)"""
    a, b = _groups(stat_in, stat_out)
    rng = np.random.default_rng(seed)
    mus = np.array([_signed_separation(rng.choice(a, len(a)), rng.choice(b, len(b))) for _ in range(resamples)])
    tail = (1.0 - confidence) / 2
    lo, hi = float(np.quantile(mus, tail)), float(np.quantile(mus, 1.0 - tail))
    near = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
    return _eps_of_separation(near, delta), _eps_of_separation(max(abs(lo), abs(hi)), delta)


__all__ = ["GaussianFit", "estimate_interval", "OneRunBound", "delta_gaussians", "eps_estimate_gaussian", "eps_gaussians",
           "eps_lower_from_guesses", "eps_lower_one_run", "guess_plan", "guesses", "max_attainable", "p_value_dp"]
