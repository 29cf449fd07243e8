"""The distributed discrete Gaussian (DDG) of Kairouz, Liu & Steinke (ICML 2021): the maths of secure
aggregation with distributed noise, as pure keyword-only functions.

Each client scales its clipped update by 1/γ, rounds it to integers (unbiased randomised rounding), adds a
discrete Gaussian N_Z(0, (s/γ)²) and submits the integer vector to secure aggregation modulo 2^b; the server
sees only the sum. With n honest clients the noise in the sum is a sum of n discrete Gaussians; the paper's
Theorem 1 bounds how far that is from one discrete Gaussian (the τ term) and how much rounding inflates the L2
sensitivity, and its Proposition 14 gives the RDP of the result. We feed Proposition 14 to dp-accounting's RDP
accountant as zCDP events (no library has the DDG itself).

Source: the formulas are those of the paper's own accounting code, google-research/federated
distributed_dp/accounting_utils.py (last changed in commit 5e27a86323a3, read at 5e27a86 and at a5af8c4433c9):
`rounded_l2_norm_bound` (β = 0) and `rounded_l1_norm_bound` for the rounded sensitivities, the τ loop of
`ddgauss_epsilon`, and `compute_rdp_dgaussian`'s three terms (commented there "Proposition 14 of
https://arxiv.org/pdf/2102.06387.pdf"), l1/l2 scales over the std √n·σ_ℓ of the summed shares. The paper's text
was not at hand: theorem and proposition numbers are the code's.

Shares below σ_ℓ = 1/2 (σ_ℓ = s/γ, grid units) are refused, and `min_noise_multiplier` is the smallest noise
multiplier whose shares reach it. Where that floor comes from, as far as it was checked (2026-11-28): the paper's
text was not found in any source at hand (of its full-text copies only the abstract, the introduction and the
LaTeX skeleton were reachable), so whether Theorem 1 or Proposition 14 states σ ≥ 1/2 is not verified here. The
reference code applies no floor (google-research/federated distributed_dp/accounting_utils.py at a5af8c4, nor
tensorflow/privacy's DistributedDiscreteGaussianSumQuery at 03035d5, nor TensorFlow Federated's distributed DP
aggregator); an independent implementation does, citing the paper:
VectorInstitute/FL4Health fl4health/privacy/distributed_discrete_gaussian.py (commit dd3dccd) asserts
`sigma >= 0.5` under "these checks come from Proposition 14 in https://arxiv.org/pdf/2102.06387.pdf". fedevo
keeps the floor (no privacy claim is widened on a guess), and it costs no useful guarantee: at σ_ℓ = 1/2 with two
or more honest shares τ ≥ 10·exp(−π²/4) ≈ 0.848 and the bound itself is vacuous (ε ≥ τ·d·rounds in every
case tests/privacy/test_trust.py pins, e.g. ε ≈ 2083 for d = 1000, one round, δ = 1e-6); τ only grows below it.
With one honest share (τ = 0: the sum is one discrete Gaussian) it may be stricter than needed; that was not
checked either.
Modular wrap-around is post-processing of the sum (it changes utility, never privacy); `choose_gamma` picks γ so
that the sum of the whole deployment cohort wraps only with noise beyond `k` standard deviations.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import FedevoError
from .accounting import _count, _delta, _pos, eps_rdp


SHARE_SIGMA_MIN = 0.5  # shares N_Z(0, σ_ℓ²) below σ_ℓ = 1/2 (grid units) are refused (module doc: its provenance)
WRAP_STDS = 8.0  # choose_gamma's k: the noise sum wraps only beyond this many standard deviations


def secagg_threshold(*, fraction: float, cohort: int) -> int:
    """t = ⌈fraction · cohort⌉, at least 1: the clients of a round's cohort that must survive for secure aggregation
    to reveal the sum, and the shares the accountant counts (less the colluders: the honest ones)."""
    return max(1, math.ceil(fraction * cohort - 1e-9))


def _room(*, cohort: int, bits: int) -> float:
    """What the noise of a cohort's modular sum may fill: 2^(bits−1) − 1 − cohort (the rounding's +1 each)."""
    return 2.0 ** (bits - 1) - 1 - cohort


def rounded_l2_bound(*, l2: float, dim: int) -> float:
    """L2 norm bound of a vector of norm ≤ l2 (integer units) after unbiased randomised rounding of each
    coordinate: ≤ l2 + √d (each coordinate moves by < 1; the paper's bound without conditional rounding)."""
    return _pos("l2", l2) + math.sqrt(_count("dim", dim))


def ddg_tau(*, local_std: float, honest: int) -> float:
    """τ of Theorem 1: 10·Σ_{k=1}^{n−1} exp(−2π²·σ²·k/(k+1)), σ the local std in integer units, n the honest
    clients whose noise is counted (0 when n = 1: one discrete Gaussian is exact); summed as the reference code's
    `ddgauss_epsilon` loop sums it (module doc), each term down to the first that underflows; in numpy, a million
    terms at a time (the loop took ~0.1 s per million honest clients, on every call of a target-ε solve)."""
    s, n = _pos("local_std", local_std), _count("honest", honest)
    a = 2.0 * math.pi ** 2 * s * s
    total = 0.0
    for lo in range(1, n, _TAU_CHUNK):
        k = np.arange(lo, min(n, lo + _TAU_CHUNK), dtype=np.float64)
        terms = np.exp(-a * k / (k + 1.0))
        total += float(terms.sum())
        if terms[-1] == 0.0:  # the terms fall with k: every later one is 0.0 too (all of them once a/2 > ~745)
            break
    return 10.0 * total


_TAU_CHUNK = 1 << 20  # terms of τ summed at once (8 MiB)


def ddg_events(*, clip: float, gamma: float, local_std: float, honest: int, dim: int, rounds: int):
    """The per-deployment RDP curves of Proposition 14 as dp-accounting zCDP events, one per branch of the min
    (each alone is a valid bound): `rounds` compositions of the DDG sum of `honest` shares."""
    import dp_accounting as dpa

    c, g, s = _pos("clip", clip), _pos("gamma", gamma), _pos("local_std", local_std)
    n, d, t = _count("honest", honest), _count("dim", dim), _count("rounds", rounds)
    if n < 1:
        raise FedevoError("the distributed noise needs at least one honest surviving client")
    if s / g < SHARE_SIGMA_MIN:
        raise FedevoError(f"fedevo's DDG accounting (Kairouz et al. 2021) covers shares whose discrete Gaussian has "
                          f"σ_ℓ = local_std/gamma ≥ 1/2 grid units only, got {s / g:.3g}")
    d2 = rounded_l2_bound(l2=c / g, dim=d)  # sensitivity in integer units (zero-out one user)
    d1 = d2 * min(math.sqrt(d), d2)  # L1 ≤ √d·L2, and ≤ L2² on the integer grid
    sd = math.sqrt(n) * s / g  # std of the honest noise sum, integer units
    tau = ddg_tau(local_std=s / g, honest=n)
    l2, l1 = d2 / sd, d1 / sd
    branches = [(l2 * l2 / 2.0, tau * d), (l2 * l2 / 2.0 + l1 * tau + tau * tau * d / 2.0, 0.0),
                ((l2 + math.sqrt(d) * tau) ** 2 / 2.0, 0.0)]
    return [dpa.SelfComposedDpEvent(dpa.ZCDpEvent(rho, xi), t) for rho, xi in branches]


def eps_ddg(*, clip: float, gamma: float, local_std: float, honest: int, dim: int, rounds: int,
            delta: float) -> float:
    """ε against an honest-but-curious server that sees the modular sum of the DDG uploads of ≥ `honest` honest
    clients per round, for `rounds` rounds, zero-out one user (its update replaced by zero; the server knows the cohort and the
    survivors' count, so add/remove is not what it hides), no amplification.
    clip C and local_std s in the update's units, γ the rounding granularity, dim the vector's length."""
    d = _delta(delta)
    if _count("rounds", rounds) == 0:
        return 0.0
    return min(eps_rdp(event=e, delta=d, orders=_orders()) for e in ddg_events(
        clip=clip, gamma=gamma, local_std=local_std, honest=honest, dim=dim, rounds=rounds))


#: RDP orders beyond dp-accounting's default list (which ends at 1024), for the DDG's zCDP events: their RDP
#: ρ·α + ξ holds at every order, and a small ρ needs a large one (the best order is ~√(ln(1/δ)/ρ)): with the
#: default list alone ε stopped falling at ~0.0058 (δ = 1e-6) whatever the noise (σ = 10⁴ on digits_mlp's
#: deployment: 0.0058 for 0.00088), so a secagg target ε below it was refused as needing σ > 10⁷
LARGE_ORDERS = tuple(float(2 ** k) for k in range(11, 25))


def _orders() -> tuple:
    from dp_accounting.rdp.rdp_privacy_accountant import DEFAULT_RDP_ORDERS

    return tuple(DEFAULT_RDP_ORDERS) + LARGE_ORDERS


def choose_gamma(*, clip: float, local_std: float, cohort: int, bits: int, k: float = WRAP_STDS) -> float:
    """Granularity γ so that the modular sum of `cohort` uploads cannot wrap around 2^bits unless the noise sum
    exceeds k standard deviations: cohort·(C/γ + 1) + k·√cohort·s/γ ≤ 2^(bits−1) − 1 (worst case per coordinate,
    no random rotation assumed)."""
    c, s, m = _pos("clip", clip), _pos("local_std", local_std), _count("cohort", cohort)
    room = _room(cohort=m, bits=bits)
    if m < 1 or room <= 0:
        raise FedevoError(f"a cohort of {m} does not fit {bits}-bit secure aggregation; use secagg_bits = 64")
    return (m * c + k * math.sqrt(m) * s) / room


def shares(*, sigma: float, clip: float, honest: int, cohort: int, bits: int) -> tuple[float, float]:
    """(s, γ) of a deployment with noise multiplier σ: the `honest` counted shares have std s = σ·C/√honest each
    (their sum σ·C), and γ = choose_gamma for the `cohort` in `bits`-bit secure aggregation."""
    s = _pos("sigma", sigma) * _pos("clip", clip) / math.sqrt(_count("honest", honest))
    return s, choose_gamma(clip=clip, local_std=s, cohort=cohort, bits=bits)


def min_noise_multiplier(*, honest: int, cohort: int, bits: int, k: float = WRAP_STDS) -> float:
    """The smallest noise multiplier σ whose `shares` have σ_ℓ = s/γ ≥ SHARE_SIGMA_MIN (∞ if none has):
    s/γ = σ·room/(√honest·cohort + k·√cohort·σ) rises with σ (the clip cancels), and is 1/2 at
    σ = √honest·cohort / (2·room − k·√cohort)."""
    n, m = _count("honest", honest), _count("cohort", cohort)
    free = _room(cohort=m, bits=bits) / SHARE_SIGMA_MIN - k * math.sqrt(m)
    return math.sqrt(n) * m / free if free > 0 else math.inf


def discrete_gaussian(*, sigma: float, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exact samples of the discrete Gaussian N_Z(0, σ²) (Canonne, Kamath & Steinke 2020, Algorithm 3: discrete
    Laplace proposals accepted with probability exp(−(|y| − σ²/t)²/(2σ²))), vectorised; int64."""
    s = _pos("sigma", sigma)
    t = math.floor(s) + 1.0
    p = -math.expm1(-1.0 / t)  # geometric success probability of the two-sided geometric (discrete Laplace)
    out = np.empty(int(size), dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        batch = int(need * 1.6) + 16
        y = rng.geometric(p, batch) - rng.geometric(p, batch)  # discrete Laplace with scale t
        keep = rng.random(batch) < np.exp(-((np.abs(y) - s * s / t) ** 2) / (2.0 * s * s))
        acc = y[keep][:need]
        out[filled:filled + len(acc)] = acc
        filled += len(acc)
    return out


__all__ = ["SHARE_SIGMA_MIN", "rounded_l2_bound", "ddg_tau", "ddg_events", "eps_ddg", "choose_gamma", "shares",
           "min_noise_multiplier", "discrete_gaussian"]
