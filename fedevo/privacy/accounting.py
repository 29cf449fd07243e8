"""ε for fedevo's two LDP mechanisms: valid bounds (Opacus RDP) and the papers' closed forms.

Pure keyword-only functions. Valid bounds come from ``opacus.accountants.analysis.rdp`` (RDP of the sampled
Gaussian, Mironov et al. 2019; RDP → (ε, δ) by Balle et al. 2020); nothing here re-derives an accountant.
See docs/privacy.md for the adjacency relations, sensitivities and threat models behind each function.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from opacus.accountants.analysis import rdp as _rdp
from scipy.optimize import brentq

from fedevo.errors import FedevoError

_HIGH = (2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0, 96.0, 128.0, 256.0,
         512.0, 1024.0)
#: RDP orders without sampling (closed form, free): dense near 1, where the optimum lies for large ε.
ORDERS: tuple[float, ...] = (1.001, 1.002, 1.005, 1.01, 1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75) + _HIGH
#: Orders for sample_rate < 1: Opacus evaluates fractional orders by a slow series (~10 ms each), so only
#: 1.5 and 1.75 (a call stays < 50 ms); `eps_gaussian` widens to ORDERS when the optimum is at 1.5.
ORDERS_SAMPLED: tuple[float, ...] = (1.5, 1.75) + _HIGH
ADJACENCIES = ("replace", "zero_out")


# ---------------------------------------------------------------- validation (one-line FedevoError messages)
def _pos(name: str, v: float) -> float:
    if not (isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(v) and v > 0):
        raise FedevoError(f"{name} must be a finite number > 0, got {v!r}")
    return float(v)


def _delta(v: float) -> float:
    if not (isinstance(v, (int, float, np.floating)) and 0 < v < 1):
        raise FedevoError(f"delta must be in (0, 1), got {v!r}")
    return float(v)


def _rate(name: str, v: float) -> float:
    if not (isinstance(v, (int, float, np.floating, np.integer)) and 0 < v <= 1):
        raise FedevoError(f"{name} must be in (0, 1], got {v!r}")
    return float(v)


def _count(name: str, v: int) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
        raise FedevoError(f"{name} must be an integer >= 0, got {v!r}")
    return int(v)


def _clip(clip: float | Sequence[float]) -> float:
    """A fixed S, or the per-round S values of a running median: the max bounds every round's sensitivity."""
    if isinstance(clip, (int, float, np.floating, np.integer)):
        return _pos("clip", clip)
    vals = [float(c) for c in clip]
    if not vals:
        raise FedevoError("clip must be a number or a non-empty sequence, got []")
    for c in vals:
        _pos("clip", c)
    return max(vals)


def _adjacency(adjacency: str) -> str:
    if adjacency not in ADJACENCIES:
        raise FedevoError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
    return adjacency


# ---------------------------------------------------------------- the Opacus primitive
def eps_gaussian(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                 orders: Sequence[float] | None = None) -> float:
    """ε of the Poisson-subsampled Gaussian composed `steps` times: exactly Opacus ``RDPAccountant``'s answer
    for history ``[(noise_multiplier, sample_rate, steps)]`` with ``alphas=orders``. sample_rate=1: plain
    Gaussian composition. Default orders: ORDERS if sample_rate == 1, else ORDERS_SAMPLED, widened to ORDERS
    when the optimum sits at its smallest order (very large ε), so the grid never makes sampling look worse."""
    z, q = _pos("noise_multiplier", noise_multiplier), _rate("sample_rate", sample_rate)
    n, d = _count("steps", steps), _delta(delta)
    if n == 0:
        return 0.0
    if orders is not None:
        return _opacus_eps(q, z, n, d, orders)[0]
    if q == 1.0:
        return _opacus_eps(q, z, n, d, ORDERS)[0]
    eps, best = _opacus_eps(q, z, n, d, ORDERS_SAMPLED)
    return _opacus_eps(q, z, n, d, ORDERS)[0] if best == ORDERS_SAMPLED[0] else eps


def _opacus_eps(q: float, z: float, n: int, d: float, orders: Sequence[float]) -> tuple[float, float]:
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore")  # "optimal order is the smallest/largest alpha" and overflow in exp
        rdp = _rdp.compute_rdp(q=q, noise_multiplier=z, steps=n, orders=list(orders))
        eps, best = _rdp.get_privacy_spent(orders=list(orders), rdp=rdp, delta=d)
    return (float(eps) if np.isfinite(eps) else math.inf), float(best)


# ---------------------------------------------------------------- step mechanism (seed 004 Alg. 3), record level
def step_noise_multiplier(*, sigma: float, lr: float, clip: float | Sequence[float], epochs: int) -> float:
    """Per-round noise multiplier of one record under the step mechanism: σ / (2·lr·S·√E).

    Why: the *batch-mean* gradient is clipped to S, so replacing one record moves one step by ≤ 2·lr·S (no
    1/B factor, no in-batch amplification); the record sits in exactly one batch per epoch, so a round is E
    Gaussian steps of multiplier σ/(2·lr·S), i.e. one Gaussian with multiplier σ/(2·lr·S)/√E. A sequence of
    per-round clips (data-dependent median, not privatised, as in the paper) is bounded by its max."""
    e = _count("epochs", epochs)
    if e == 0:
        raise FedevoError("epochs must be >= 1, got 0")
    return _pos("sigma", sigma) / (2.0 * _pos("lr", lr) * _clip(clip) * math.sqrt(e))


def eps_step(*, sigma: float, lr: float, clip: float | Sequence[float], epochs: int, participation: float,
             rounds: int, delta: float) -> float:
    """Record-level ε (replace-one record) of the step mechanism after `rounds` rounds.

    participation=1: no amplification; pass `rounds` = the rounds in which the record's client's upload
    reached the server (max over clients) — the guarantee against the server, which knows whom it sampled.
    participation=C < 1 with rounds=T: client sampling treated as a secret Poisson sample (the DP-FedAvg
    convention); valid only against an observer who cannot tell which clients took part."""
    z = step_noise_multiplier(sigma=sigma, lr=lr, clip=clip, epochs=epochs)
    return eps_gaussian(noise_multiplier=z, sample_rate=_rate("participation", participation),
                        steps=_count("rounds", rounds), delta=delta)


# ---------------------------------------------------------------- update mechanism (ULDP-FED), user level
def user_noise_multiplier(*, sigma: float, adjacency: str = "replace") -> float:
    """Noise multiplier of one upload Δ̃ = clip(Δ, C_k) + N(0, (σ·C_k)²).

    replace (LDP: any two datasets of the user): sensitivity 2·C_k → σ/2.
    zero_out (user's data swapped for a null contribution Δ=0, the paper's and DP-FedAvg's view): C_k → σ."""
    s = _pos("sigma", sigma)
    return s / 2.0 if _adjacency(adjacency) == "replace" else s


def eps_update(*, sigma: float, participations: int, delta: float, adjacency: str = "replace") -> float:
    """User-level ε of a user whose noisy update was used in `participations` rounds: Gaussian composition,
    no amplification, so valid against the server given the (data-independent) count.

    Lost uploads never reached anyone and cost nothing. Recalled rounds: the paper counts them as free, but the
    recall decision sim(Δ̃ᵗ, Δ̃ᵗ⁻¹) < τ reads a fresh noisy update, so an honest count includes them."""
    z = user_noise_multiplier(sigma=sigma, adjacency=adjacency)
    return eps_gaussian(noise_multiplier=z, sample_rate=1.0, steps=_count("participations", participations),
                        delta=delta)


def eps_update_varying(*, noise_multipliers: Sequence[float], delta: float, adjacency: str = "replace") -> float:
    """As `eps_update` when each participation k had its own multiplier σ_k (noise std / C_k), e.g. from the
    budget ledger: Gaussians compose exactly into one with multiplier (Σ_k σ_k⁻²)^(−1/2)."""
    zs = [user_noise_multiplier(sigma=s, adjacency=adjacency) for s in noise_multipliers]
    if not zs:
        return 0.0
    z = 1.0 / math.sqrt(sum(1.0 / (v * v) for v in zs))
    return eps_gaussian(noise_multiplier=z, sample_rate=1.0, steps=1, delta=delta)


def eps_update_sampled(*, sigma: float, sample_rate: float, rounds: int, delta: float,
                       adjacency: str = "zero_out") -> float:
    """A-priori user-level ε over T rounds with amplification by Poisson user sampling at rate q.

    Valid only if the sample is secret (an observer of the global models), not against the server; defaults to
    the zero-out relation for which the sampled-Gaussian analysis (Opacus) is stated."""
    z = user_noise_multiplier(sigma=sigma, adjacency=adjacency)
    return eps_gaussian(noise_multiplier=z, sample_rate=_rate("sample_rate", sample_rate),
                        steps=_count("rounds", rounds), delta=delta)


# ---------------------------------------------------------------- the papers' closed forms (for their tables)
def eps_paper_step(*, clip: float, min_local_size: int, participation: float, rounds: int, sigma: float,
                   delta: float) -> float:
    """Seed 004 eq. 8 with eq. 9: ε = Δs·√(2·C·T·ln(1/δ))/σ, Δs = 2S/m (m = smallest local dataset).

    As published (reproduces its tables); it omits lr and E and is not a valid bound for the batch-clipped
    mechanism — use `eps_step` for that."""
    m = _count("min_local_size", min_local_size)
    if m == 0:
        raise FedevoError("min_local_size must be >= 1, got 0")
    ds = 2.0 * _pos("clip", clip) / m
    c, t = _rate("participation", participation), _count("rounds", rounds)
    return ds * math.sqrt(2.0 * c * t * math.log(1.0 / _delta(delta))) / _pos("sigma", sigma)


def eps_paper_update(*, sigma: float, sample_rate: float, max_participations: int, delta: float) -> float:
    """Seed 000 Theorem 3 (eq. 35) solved for ε: σ_k = 2q·C_k·√(r·log(1/δ))/ε with noise std σ_k = σ·C_k
    gives ε = 2q·√(r·ln(1/δ))/σ (natural log: the bound comes from δ ≥ exp(α_M(λ) − λε)).

    For a user with fewer than r rounds left, Theorem 3's second case: pass max_participations = T − t."""
    q, r = _rate("sample_rate", sample_rate), _count("max_participations", max_participations)
    return 2.0 * q * math.sqrt(r * math.log(1.0 / _delta(delta))) / _pos("sigma", sigma)


# ---------------------------------------------------------------- target-ε mode
def calibrate_noise_multiplier(*, target_eps: float, sample_rate: float, steps: int, delta: float) -> float:
    """Smallest-noise z with eps_gaussian(z, …) ≤ target_eps, within 0.1 % of the target (log-space Brent)."""
    target = _pos("target_eps", target_eps)
    q, n, d = _rate("sample_rate", sample_rate), _count("steps", steps), _delta(delta)
    if n == 0:
        raise FedevoError("steps must be >= 1 to calibrate, got 0")
    return _solve(lambda z: eps_gaussian(noise_multiplier=z, sample_rate=q, steps=n, delta=d), target)


def calibrate_sigma_step(*, target_eps: float, delta: float, lr: float, clip: float | Sequence[float],
                         epochs: int, participation: float, rounds: int) -> float:
    """σ (parameter-noise std) whose `eps_step` is ≤ target_eps and within 0.1 % of it."""
    unit = step_noise_multiplier(sigma=1.0, lr=lr, clip=clip, epochs=epochs)  # z per unit σ
    z = calibrate_noise_multiplier(target_eps=target_eps, sample_rate=participation, steps=rounds, delta=delta)
    return z / unit


def calibrate_sigma_update(*, target_eps: float, delta: float, participations: int | None = None,
                           sample_rate: float | None = None, rounds: int | None = None,
                           adjacency: str | None = None) -> float:
    """σ (noise multiplier of the update mechanism) meeting target_eps: give `participations` (as
    `eps_update`, default adjacency replace) or `sample_rate` and `rounds` (as `eps_update_sampled`)."""
    if (participations is None) == (sample_rate is None and rounds is None):
        raise FedevoError("give either participations or sample_rate and rounds, not both or neither")
    if participations is not None:
        adj, q, n = adjacency or "replace", 1.0, participations
    else:
        if sample_rate is None or rounds is None:
            raise FedevoError(f"sample_rate and rounds go together, got sample_rate={sample_rate!r}, "
                              f"rounds={rounds!r}")
        adj, q, n = adjacency or "zero_out", sample_rate, rounds
    unit = user_noise_multiplier(sigma=1.0, adjacency=adj)
    return calibrate_noise_multiplier(target_eps=target_eps, sample_rate=q, steps=n, delta=delta) / unit


def _solve(eps_of: Callable[[float], float], target: float) -> float:
    """Root of log ε(z) = log target for decreasing ε(z), returned on the safe side (ε ≤ target)."""
    memo: dict[float, float] = {}

    def g(log_z: float) -> float:
        if log_z in memo:
            return memo[log_z]
        e = eps_of(math.exp(log_z))
        memo[log_z] = (math.log(e) if 0 < e < math.inf else (700.0 if e == math.inf else -700.0)) - math.log(target)
        return memo[log_z]

    lo, hi = math.log(0.5), math.log(2.0)
    while g(hi) > 0:
        lo, hi = hi, hi + math.log(4.0)
        if hi > math.log(1e7):
            raise FedevoError(f"target_eps={target!r} is unreachable (needs noise multiplier > 1e7)")
    while g(lo) <= 0:
        lo -= math.log(4.0)
        if lo < math.log(1e-7):
            raise FedevoError(f"target_eps={target!r} is met by any noise (ε stays below it)")
    root = brentq(g, lo, hi, xtol=2e-4)  # |Δ log z| ≤ 2e-4 ⇒ ε within ~0.05 %
    while g(root) > 0:  # brentq may land a hair on the wrong side
        root += 1e-4
    return math.exp(root)


__all__ = ["ORDERS", "ORDERS_SAMPLED", "ADJACENCIES", "eps_gaussian", "step_noise_multiplier", "eps_step",
           "user_noise_multiplier", "eps_update", "eps_update_varying", "eps_update_sampled", "eps_paper_step",
           "eps_paper_update", "calibrate_noise_multiplier", "calibrate_sigma_step", "calibrate_sigma_update"]
