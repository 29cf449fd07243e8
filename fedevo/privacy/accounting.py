"""ε for fedevo's mechanisms: valid bounds from dp-accounting, and the papers' closed forms.

Pure keyword-only functions; nothing here re-derives an accountant that a library has.
- No sampling (sample_rate = 1): T Gaussians of multiplier z compose exactly into one of multiplier z/√T, whose
  ε is dp-accounting's analytic Gaussian (Balle & Wang 2018): exact, not a bound with slack (below a multiplier
  of 1e-3, where its solver overflows, the RDP bound: 10 % above the exact ε, which is ≥ 5·10⁵ there).
- Poisson sampling: dp-accounting's privacy-loss-distribution (PLD) accountant (pessimistic estimate: a valid
  upper bound), at a discretisation of 1e-3 nats, finer where that is more than 1 % of a small ε (`_refined`;
  within 1 % of a fine PLD, tests/privacy/test_accounting.py).
- Fixed-size (without replacement) sampling, and the distributed discrete Gaussian: dp-accounting's RDP
  accountant (no PLD exists for them there).
See docs/privacy.md for the adjacency relations, sensitivities and threat models behind each function.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import brentq

from fedevo.errors import FedevoError
from fedevo.privacy.offload import offloadable

ADJACENCIES = ("replace", "zero_out")
#: PLD discretisation (nats) for ε up to 10; larger ε gets a proportionally coarser one (see `_pld_interval`).
PLD_INTERVAL = 1e-3


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


# ---------------------------------------------------------------- the dp-accounting primitives
# (`offloadable`: inside offload.in_processes, e.g. while a batched generation is measured, they run in worker
# processes: pure functions, the same numbers)
@offloadable
def eps_gaussian(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """ε of the Gaussian mechanism (multiplier z = noise std / L2 sensitivity) composed `steps` times, each time
    on a Poisson sample at `sample_rate` (1: no sampling). Add/remove neighbours when sampled.

    sample_rate = 1: exact (analytic Gaussian of z/√steps; RDP below z/√steps = 1e-3). sample_rate < 1:
    dp-accounting's PLD accountant (its RDP bound where the PLD has no finite ε: a δ below ~1e-15)."""
    z, q = _pos("noise_multiplier", noise_multiplier), _rate("sample_rate", sample_rate)
    n, d = _count("steps", steps), _delta(delta)
    if n == 0:
        return 0.0
    if q == 1.0:
        return eps_gaussian_exact(noise_multiplier=z / math.sqrt(n), delta=d)
    import dp_accounting as dpa

    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), n)
    # the interval's additive error is ~n·interval: scale it with an RDP bound so large ε stays fast
    interval, full = _pld_interval_of(event, d)
    try:
        eps = _refined(event, interval, _pld_eps(event, interval, d), d)
        if math.isinf(eps):  # the PLD's grid has no ε for so small a δ (≲ 1e-15): the RDP bound still holds
            return full if full is not None else eps_rdp(event=event, delta=d)
        return eps
    except (OverflowError, ZeroDivisionError):  # so little noise that the PLD's grid overflows (ε ≳ 10^5):
        return full if full is not None else eps_rdp(event=event, delta=d)  # the RDP bound is a valid ε there


def _pld_eps(event, interval: float, delta: float) -> float:
    """dp-accounting's PLD ε of `event` at discretisation `interval` (pessimistic: a valid upper bound)."""
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):  # the overflow is caught by the caller
        pld = PLDAccountant(value_discretization_interval=interval).compose(event)
    return _finite(pld.get_epsilon(delta))


#: where the interval exceeds PLD_REFINE_ABOVE·ε (ε < 1 at 1e-3 nats), ε's discretisation error is estimated and
#: brought below PLD_TOLERANCE·ε (`_refined`)
PLD_REFINE_ABOVE = 1e-3
PLD_TOLERANCE = 1e-2
PLD_REFINE_PASSES = 3


def _refined(event, interval: float, eps: float, delta: float) -> float:
    """`eps` (the PLD's ε of `event` at `interval`), computed again at a finer interval where its discretisation
    error is above PLD_TOLERANCE·ε. The pessimistic discretisation adds an error about proportional to the
    interval, so ε at twice the interval less ε estimates ε's own error, and the interval shrinks in proportion
    (at most 100x a pass). Only where the interval is coarse beside ε (> PLD_REFINE_ABOVE·ε): above, ε is left
    as it was. Why: at 1e-3 nats a small ε was dominated by the discretisation (0.0139 for 0.0132 at z = 8,
    q = 0.01, 10 steps; 4x to 57x the ε below 1e-3, e.g. z = 2, q = 1e-4: 0.0020 for 0.00045), a valid but
    loose bound that also made target-ε calibration add too much noise."""
    for _ in range(PLD_REFINE_PASSES):
        if not 0 < eps < math.inf or interval <= PLD_REFINE_ABOVE * eps:
            return eps
        error = _pld_eps(event, 2.0 * interval, delta) - eps
        if error <= PLD_TOLERANCE * eps:
            return eps
        interval *= max(0.25 * PLD_TOLERANCE * eps / error, 0.01)
        eps = min(eps, _pld_eps(event, interval, delta))
    return eps


def _pld_interval(eps_hint: float) -> float:
    return PLD_INTERVAL * max(1.0, eps_hint / PLD_HINT_FREE) if math.isfinite(eps_hint) else 1.0


#: below this RDP ε the PLD keeps PLD_INTERVAL (`_pld_interval`)
PLD_HINT_FREE = 10.0
#: orders of dp-accounting's default RDP list (the integer ones up to 63, a few of them) for a quick upper bound
HINT_ORDERS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12, 16, 20, 24, 32, 40, 48, 56, 63)


def _pld_interval_of(event, delta: float) -> tuple[float, float | None]:
    """(`_pld_interval` of the RDP accountant's ε for `event` (its default orders), that ε where it was computed,
    else None). Cheaply where it can be: the ε of a subset of those orders (HINT_ORDERS) is computed order by order as the full one is, so it is
    ≥ the full ε (a min over fewer of the same candidates); when it is ≤ PLD_HINT_FREE and finite, so is the
    full ε, and the interval is PLD_INTERVAL either way. Otherwise the full ε decides, as before. The same interval,
    hence the same ε, as always computing the full bound (tests/privacy/test_accounting.py), at ~5 ms instead of
    20–75 ms (the fractional orders dominate)."""
    quick = eps_rdp(event=event, delta=delta, orders=_hint_orders())
    if math.isfinite(quick) and quick <= PLD_HINT_FREE:
        return PLD_INTERVAL, None
    full = eps_rdp(event=event, delta=delta)
    return _pld_interval(full), full


@functools.lru_cache(maxsize=1)
def _hint_orders() -> tuple:
    """HINT_ORDERS, checked to be orders of dp-accounting's default list (the quick bound's argument needs it)."""
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    missing = [o for o in HINT_ORDERS if o not in DEFAULT_RDP_ORDERS]
    if missing:  # a dp-accounting whose default orders changed: the quick bound would not bound the full one
        raise RuntimeError(f"fedevo's HINT_ORDERS {missing} are not in dp-accounting's DEFAULT_RDP_ORDERS")
    return HINT_ORDERS


def eps_gaussian_exact(*, noise_multiplier: float, delta: float) -> float:
    """ε of one Gaussian mechanism of multiplier z: dp-accounting's analytic Gaussian (exact)."""
    from dp_accounting import get_epsilon_gaussian

    z, d = _pos("noise_multiplier", noise_multiplier), _delta(delta)
    if z < 1e-3:  # the analytic solver's bracket overflows; the RDP bound stays valid (and is near-tight here)
        import dp_accounting as dpa
        return eps_rdp(event=dpa.GaussianDpEvent(z), delta=d)
    return _finite(get_epsilon_gaussian(z, d))


@offloadable
def eps_rdp(*, event, delta: float, replace_one: bool = False, orders: Sequence[float] | None = None) -> float:
    """ε of a dp-accounting event from its RDP accountant (the fallback where no PLD exists). orders: the RDP
    orders (default: dp-accounting's)."""
    from dp_accounting import NeighboringRelation
    from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant

    rel = NeighboringRelation.REPLACE_ONE if replace_one else NeighboringRelation.ADD_OR_REMOVE_ONE
    acc = RdpAccountant(orders=None if orders is None else list(orders), neighboring_relation=rel)
    absl = logging.getLogger("absl")  # "failed to converge ... excluding this order": the bound stays valid
    with _QUIET:  # one thread at a time saves and restores the level (the population measures in threads)
        level = absl.level
        absl.setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                warnings.simplefilter("ignore")
                try:
                    return _finite(acc.compose(event).get_epsilon(_delta(delta)))
                except (OverflowError, ZeroDivisionError):  # a noise multiplier so small that 1/z² overflows
                    return math.inf
        finally:
            absl.setLevel(level)


_QUIET = threading.RLock()


def _finite(eps: float) -> float:
    eps = float(eps)
    return eps if math.isfinite(eps) else math.inf


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
    try:
        z = 1.0 / math.sqrt(sum(1.0 / (v * v) for v in zs))
    except (ZeroDivisionError, OverflowError):  # a z whose square underflows: (Σ z⁻²)^(−1/2), scaled by the least
        m = min(zs)
        z = m / math.sqrt(sum((m / v) ** 2 for v in zs))
    if not z > 0:  # ∞ where even that underflows: so little noise that no bound is finite
        return math.inf
    return eps_gaussian(noise_multiplier=z, sample_rate=1.0, steps=1, delta=delta)


def eps_update_effective(*, noise_multiplier: float | None, delta: float) -> float:
    """`eps_update_varying` of one user's participations already composed into one Gaussian of multiplier z
    (`UpdateLDP.effective_sigma`): None, no participation: 0; 0, a participation without noise against its clip
    (or Σ z⁻² past the floats): ∞, never 0."""
    if noise_multiplier is None:
        return 0.0
    if not noise_multiplier > 0:
        return math.inf
    return eps_update_varying(noise_multipliers=[noise_multiplier], delta=delta)


def eps_update_sampled(*, sigma: float, sample_rate: float, rounds: int, delta: float,
                       adjacency: str = "zero_out") -> float:
    """A-priori user-level ε over T rounds with amplification by Poisson user sampling at rate q.

    Valid only if the sample is secret (an observer of the global models), not against the server; defaults to
    the zero-out relation for which the Poisson-subsampled Gaussian analysis (dp-accounting's PLD) is stated."""
    z = user_noise_multiplier(sigma=sigma, adjacency=adjacency)
    return eps_gaussian(noise_multiplier=z, sample_rate=_rate("sample_rate", sample_rate),
                        steps=_count("rounds", rounds), delta=delta)


# ---------------------------------------------------------------- central DP (DP-FedAvg), user level
SAMPLINGS = ("poisson", "fixed", "none")


def eps_central(*, noise_multiplier: float, population: int, cohort: int, rounds: int, delta: float,
                sampling: str = "poisson") -> float:
    """User-level ε of DP-FedAvg (McMahan et al. 2018): each round the server adds N(0, (z·C)²) to the sum of the
    cohort's updates clipped to C, for `rounds` rounds, seen by anyone who sees the released models.

    sampling 'poisson': each user joins a round independently with q = cohort/population, kept secret;
    add/remove-one-user neighbours (sensitivity C), PLD accountant.
    'fixed': a uniformly random cohort of exactly `cohort` users, kept secret; replace-one-user neighbours
    (sensitivity 2C, so multiplier z/2), the without-replacement RDP analysis (Wang, Balle & Kasiviswanathan 2019),
    or the T rounds' replace-one Gaussians without amplification where that is smaller (a cohort near the
    population; at cohort = population the only one, as replace-one: a full cohort is no reason to count
    add/remove).
    'none': no amplification (the cohort is known to the observer); every user counted in every round."""
    z = _pos("noise_multiplier", noise_multiplier)
    n_pop, m, t = _count("population", population), _count("cohort", cohort), _count("rounds", rounds)
    if sampling not in SAMPLINGS:
        raise FedevoError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLINGS)}")
    if not 1 <= m <= n_pop:
        raise FedevoError(f"need 1 <= cohort <= population, got cohort={m}, population={n_pop}")
    if sampling == "poisson":
        return eps_gaussian(noise_multiplier=z, sample_rate=m / n_pop, steps=t, delta=delta)
    if sampling == "none":
        return eps_gaussian(noise_multiplier=z, sample_rate=1.0, steps=t, delta=delta)
    # fixed: replace-one (multiplier z/2) in every relation, amplified or not, whichever bound is smaller: the
    # unamplified one (exact) wins near and at cohort = population (where it is the only one: no sampling)
    unamplified = eps_gaussian(noise_multiplier=z / 2.0, sample_rate=1.0, steps=t, delta=delta)
    if t == 0 or m == n_pop:
        return unamplified
    import dp_accounting as dpa
    event = dpa.SelfComposedDpEvent(dpa.SampledWithoutReplacementDpEvent(n_pop, m, dpa.GaussianDpEvent(z / 2.0)), t)
    return min(eps_rdp(event=event, delta=delta, replace_one=True), unamplified)


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


def solve_noise(*, eps_of: Callable[[float], float], target_eps: float) -> float:
    """Smallest noise multiplier z with eps_of(z) ≤ target_eps, within 0.1 % of it (any decreasing ε(z))."""
    return _solve(eps_of, _pos("target_eps", target_eps))


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


__all__ = ["solve_noise", "ADJACENCIES", "SAMPLINGS", "eps_central", "eps_gaussian", "eps_gaussian_exact", "eps_rdp", "step_noise_multiplier", "eps_step",
           "user_noise_multiplier", "eps_update", "eps_update_varying", "eps_update_effective",
           "eps_update_sampled", "eps_paper_step",
           "eps_paper_update", "calibrate_noise_multiplier", "calibrate_sigma_step", "calibrate_sigma_update"]
