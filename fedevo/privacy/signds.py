"""SignDS (seed 002 "基于LDP-SignDS算法的安全聚合"; Jiang, Zhou & Grossklags, ACM TIST 2022): ε-LDP uploads
that carry only a random sign and a set of h dimensions, chosen by the exponential mechanism EM-MDS.

Per upload of update Δ ∈ R^d (d = the active coordinates under SET sparsity):
  1. s ∈ {−1, +1} uniformly; S_k = the k largest entries of s·Δ (the k largest of Δ for s = 1, the k smallest
     for s = −1: "sign-consistent" top-k).
  2. EM-MDS: output a set J of h dimensions with probability
        P(J) = exp(ε·1(ν ≥ ν_th)) / Σ_τ ω_τ·exp(ε·1(τ ≥ ν_th)),   ν = |S_k ∩ J|,  ω_τ = C(k, τ)·C(d−k, h−τ).
     The score has sensitivity 1 and the normaliser does not depend on S_k, so any two updates give
     P(J|Δ)/P(J|Δ') ≤ e^ε: ε-LDP per upload for the whole user (replace-one user), s being data-independent.
  3. ν_th* = argmax_{ν_th ∈ [1, h]} E[ν | ν_th], computed in log space from ω_τ (a hypergeometric law).
  4. Sampling never enumerates the C(d, h) sets: ν by inverse CDF of p(ν = τ | ν_th*) ∝ ω_τ·e^{ε·1(τ≥ν_th*)},
     then ν dimensions uniformly from S_k and h − ν uniformly from the rest. Each J with ν top-k dimensions
     then has probability p(ν)/ω_ν = P(J).
  5. The upload is (J, s): h indices and one sign. The server builds Δ'_u = s·1_J and aggregates
     η_g · Σ_u n_u·Δ'_u / Σ_u n_u (FedAvg weights, η_g = the server's global learning rate `signds_lr`);
     the transform returns η_g·s·1_J so the simulator's weighted mean performs exactly that.

Accounting: each upload is pure ε-LDP; a user whose uploads reached the server m times is (ε_m(δ), δ)-LDP
with ε_m(δ) from dp-accounting's privacy-loss-distribution (PLD) accountant over the dominating pair of an
ε-DP mechanism, composed m times in closed form (`eps_signds`) — the optimal composition of Kairouz, Oh &
Viswanath (2015), whose exact value is `eps_pure_composition_exact`; it is at most m·ε (basic composition,
reported as `eps_paper`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import gammaln

from fedevo.errors import FedevoError
from .local import LocalMechanism
from .privatizer import UploadTransform


# ---------------------------------------------------------------- EM-MDS mathematics (pure functions)
def _check_dims(d: int, k: int, h: int) -> None:
    for name, v in (("d", d), ("k", k), ("h", h)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise FedevoError(f"SignDS: {name} must be an integer >= 1, got {v!r}")
    if k >= d:
        raise FedevoError(f"SignDS: top-k size k={k} must be < the number of dimensions d={d}")
    if h > d:
        raise FedevoError(f"SignDS: output size h={h} exceeds the number of dimensions d={d}")


def log_omega(d: int, k: int, h: int) -> np.ndarray:
    """log ω_τ = log[C(k, τ)·C(d−k, h−τ)] for τ = 0..h (−inf where ω_τ = 0)."""
    _check_dims(d, k, h)
    tau = np.arange(h + 1)
    ok = (tau <= k) & (h - tau <= d - k)
    t = np.where(ok, tau, 0)

    def lc(n, r):
        return gammaln(n + 1) - gammaln(r + 1) - gammaln(n - r + 1)

    return np.where(ok, lc(k, t) + lc(d - k, h - t), -np.inf)


def _logcumsum(a: np.ndarray) -> np.ndarray:
    return np.logaddexp.accumulate(a)


def expected_nu(d: int, k: int, h: int, eps: float) -> np.ndarray:
    """E[ν | ν_th] for ν_th = 1..h (index 0 ↔ ν_th = 1), in log space (safe for any ε and d)."""
    lw = log_omega(d, k, h)
    tau = np.arange(h + 1)
    with np.errstate(divide="ignore"):
        ltw = lw + np.log(tau)  # log(τ·ω_τ); τ = 0 → −inf
    head_w, head_tw = _logcumsum(lw), _logcumsum(ltw)  # Σ_{τ ≤ i}
    tail_w, tail_tw = _logcumsum(lw[::-1])[::-1], _logcumsum(ltw[::-1])[::-1]  # Σ_{τ ≥ i}
    th = np.arange(1, h + 1)
    # E = (Σ_{τ<th} τω + e^ε Σ_{τ≥th} τω) / (Σ_{τ<th} ω + e^ε Σ_{τ≥th} ω), divided through by e^ε
    num = np.logaddexp(head_tw[th - 1] - eps, tail_tw[th])
    den = np.logaddexp(head_w[th - 1] - eps, tail_w[th])
    with np.errstate(invalid="ignore"):
        return np.exp(num - den)


def optimal_threshold(d: int, k: int, h: int, eps: float) -> int:
    """ν_th* = argmax_{ν_th ∈ [1, h]} E[ν | ν_th] (smallest maximiser)."""
    e = expected_nu(d, k, h, eps)
    return int(np.nanargmax(e)) + 1


def nu_log_probs(d: int, k: int, h: int, eps: float, nu_th: int) -> np.ndarray:
    """log p(ν = τ | ν_th) for τ = 0..h."""
    lw = log_omega(d, k, h)
    a = lw + eps * (np.arange(h + 1) >= nu_th)
    m = a.max()
    return a - (m + np.log(np.exp(a - m).sum()))


def set_probability(nu: int, d: int, k: int, h: int, eps: float, nu_th: int) -> float:
    """P(J) of one particular set J with |S_k ∩ J| = ν."""
    lp = nu_log_probs(d, k, h, eps, nu_th)
    return float(np.exp(lp[nu] - log_omega(d, k, h)[nu]))


@dataclass(frozen=True)
class Plan:
    """Everything about (d, k, h, ε) that is public and fixed: the threshold and the inverse-CDF table."""

    d: int
    k: int
    h: int
    eps: float
    nu_th: int
    expected_nu: float
    cdf: np.ndarray  # P(ν ≤ τ), τ = 0..h
    lo: int  # smallest ν with nonzero probability
    hi: int


@lru_cache(maxsize=64)
def plan(d: int, k: int, h: int, eps: float) -> Plan:
    th = optimal_threshold(d, k, h, eps)
    lp = nu_log_probs(d, k, h, eps, th)
    p = np.exp(lp)
    cdf = np.cumsum(p)
    cdf /= cdf[-1]
    support = np.flatnonzero(np.isfinite(lp))
    return Plan(d=d, k=k, h=h, eps=float(eps), nu_th=th, expected_nu=float(expected_nu(d, k, h, eps)[th - 1]),
                cdf=cdf, lo=int(support[0]), hi=int(support[-1]))


def sample_nu(u: np.ndarray, pl: Plan) -> np.ndarray:
    """Inverse-CDF sampling: ν = min{τ : CDF(τ) > u} for u ~ U(0, 1)."""
    return np.clip(np.searchsorted(pl.cdf, u, side="right"), pl.lo, pl.hi)


def select(signed: torch.Tensor, pl: Plan, gen: torch.Generator) -> tuple[torch.Tensor, np.ndarray]:
    """EM-MDS for a batch: `signed` (c, d) = s·Δ per client. Returns (0/1 selection (c, d), ν per client)."""
    c, d = signed.shape
    if d != pl.d:
        raise ValueError(f"plan is for d={pl.d}, got {d}")
    k, h = pl.k, pl.h
    topk = torch.topk(signed, k, dim=1).indices  # S_k, (c, k)
    nu = sample_nu(torch.rand(c, generator=gen, dtype=torch.float64).numpy(), pl)
    nu_t = torch.as_tensor(nu).unsqueeze(1)
    out = torch.zeros(c, d, dtype=torch.float32)
    # ν of the k top-k dimensions, uniformly: the first ν of a random permutation
    perm = torch.rand(c, k, generator=gen).argsort(dim=1)
    chosen_top = topk.gather(1, perm)
    keep_top = (torch.arange(k).unsqueeze(0) < nu_t).to(torch.float32)
    out.scatter_(1, chosen_top, keep_top)
    # h − ν of the other d − k dimensions, uniformly: the smallest random priorities outside S_k
    m = min(h, d - k)
    if m > 0:
        prio = torch.rand(c, d, generator=gen)
        prio.scatter_(1, topk, 2.0)
        rest = torch.topk(prio, m, dim=1, largest=False).indices
        keep_rest = (torch.arange(m).unsqueeze(0) < (h - nu_t)).to(torch.float32)
        out.scatter_add_(1, rest, keep_rest)
    return out, nu


# ---------------------------------------------------------------- accounting
def _eps_round(eps_round: float) -> float:
    if not (isinstance(eps_round, (int, float, np.floating)) and math.isfinite(eps_round) and eps_round > 0):
        raise FedevoError(f"signds_eps must be a finite number > 0, got {eps_round!r}")
    return float(eps_round)


def _m(participations: int) -> int:
    if isinstance(participations, bool) or not isinstance(participations, (int, np.integer)) or participations < 0:
        raise FedevoError(f"participations must be an integer >= 0, got {participations!r}")
    return int(participations)


PLD_TAIL_MASS = 1e-15  # what dp-accounting's self-composition counts as infinite loss (its tail_mass_truncation)


def eps_signds(*, eps_round: float, participations: int, delta: float) -> float:
    """(ε, δ)-LDP of m pure-ε uploads of one user: dp-accounting's pessimistic privacy loss distribution (PLD) of an
    ε-DP mechanism, composed m times. Its dominating pair (randomized response) loses +ε with probability
    1/(1 + e^−ε) and −ε otherwise, rounded up to a grid of Δ = min(1e-4, ε/1000) (`from_privacy_parameters`: grid
    points a = ⌈ε/Δ⌉, b = ⌈−ε/Δ⌉). Composed m times, that two-point PLD is a binomial one: k of the m losses up,
    on grid point k·a + (m − k)·b. It is built here in closed form (log-space binomial pmf, O(m)), where
    dp-accounting's self-composition convolves the whole grid (O(m·ε/Δ): 25 s at m = 10⁴, over 15 GB at 10⁵), with
    its truncated tail's 1e-15 as infinite loss, and dp-accounting reads ε off it: its numbers (the tests pin them),
    at most m·ε."""
    from dp_accounting.pld import pld_pmf

    e, m = _eps_round(eps_round), _m(participations)
    if not 0 < delta < 1:
        raise FedevoError(f"delta must be in (0, 1), got {delta!r}")
    if m == 0:
        return 0.0
    step = min(1e-4, e / 1000)
    k, log_pmf = _ups(e, m)
    keep = log_pmf > -746.0  # the rest is 0 in float64
    grid = k[keep] * math.ceil(e / step) + (m - k[keep]) * math.ceil(-e / step)
    pmf = pld_pmf.SparsePLDPmf(dict(zip(grid.tolist(), np.exp(log_pmf[keep]).tolist())), step,
                               0.0 if m == 1 else PLD_TAIL_MASS, True)
    return min(float(pmf.get_epsilon_for_delta(delta)), m * e)


def _ups(e: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(k, log P[k]) for k = 0..m: of m compositions of the randomized-response pair of an e-DP mechanism, how many
    lose +e (each with probability 1/(1 + e^−e)), the rest −e: Binomial(m, 1/(1 + e^−e)), in log space."""
    k = np.arange(m + 1)
    return k, (gammaln(m + 1) - gammaln(k + 1) - gammaln(m - k + 1) - k * np.logaddexp(0.0, -e)
               - (m - k) * np.logaddexp(0.0, e))


def delta_pure_composition(*, eps_round: float, participations: int, eps: float) -> float:
    """Exact δ(ε) of m-fold composed ε_0-DP (Kairouz et al. 2015 Thm 3.3, via the randomized-response pair):
    δ = Σ_l C(m,l) q^l (1−q)^(m−l) · max(0, 1 − e^(ε − ε_0(m − 2l))), q = 1/(1 + e^ε_0) (l = m − k of `_ups`)."""
    e0, m = _eps_round(eps_round), _m(participations)
    k, log_pmf = _ups(e0, m)
    loss = e0 * (2 * k - m)
    return float(np.sum(np.exp(log_pmf) * -np.expm1(np.minimum(eps - loss, 0.0))))  # (1 − e^x)₊, no overflow


def eps_pure_composition_exact(*, eps_round: float, participations: int, delta: float) -> float:
    """Closed-form counterpart of `eps_signds`: the smallest ε with δ(ε) ≤ delta."""
    e0, m = _eps_round(eps_round), _m(participations)
    if m == 0 or delta_pure_composition(eps_round=e0, participations=m, eps=0.0) <= delta:
        return 0.0
    return brentq(lambda x: delta_pure_composition(eps_round=e0, participations=m, eps=x) - delta, 0.0, m * e0,
                  xtol=1e-12)


# ---------------------------------------------------------------- the simulator's upload transform
def dims(d: int, k_frac: float, h_frac: float) -> tuple[int, int]:
    """(k, h) from fractions of the d active coordinates: k ∈ [1, d−1], h ∈ [1, d]."""
    if d < 2:
        raise FedevoError(f"SignDS needs at least 2 active parameters, got {d}")
    k = min(d - 1, max(1, round(k_frac * d)))
    h = min(d, max(1, round(h_frac * d)))
    return k, h


class SignDSUpload(UploadTransform):
    """Upload transform over flat updates (c, P): each row becomes η_g·s·1_J on the active coordinates."""

    def __init__(self, *, eps: float, k_frac: float, h_frac: float, lr: float, clients: int,
                 active: torch.Tensor, seed: int = 0):
        self.eps, self.k_frac, self.h_frac, self.lr = float(eps), float(k_frac), float(h_frac), float(lr)
        self.gen = torch.Generator().manual_seed(seed)
        self.joined = np.zeros(clients, dtype=np.int64)  # uploads that reached the server, per client
        self.nu_sum = 0
        self.uploads = 0
        self.set_active(active)

    def set_active(self, active: torch.Tensor) -> None:
        self.idx = torch.nonzero(active.reshape(-1) > 0).squeeze(1)
        k, h = dims(int(self.idx.numel()), self.k_frac, self.h_frac)
        self.plan = plan(int(self.idx.numel()), k, h, self.eps)

    def begin_round(self, t: int) -> None:
        pass

    def __call__(self, deltas: torch.Tensor, clients: np.ndarray, omega: int) -> tuple[torch.Tensor, np.ndarray]:
        c = deltas.shape[0]
        x = deltas.index_select(1, self.idx)
        s = torch.where(torch.rand(c, generator=self.gen) < 0.5, -1.0, 1.0)
        sel, nu = select(x * s.unsqueeze(1), self.plan, self.gen)
        out = torch.zeros_like(deltas)
        out[:, self.idx] = (sel * (self.lr * s).unsqueeze(1)).to(deltas.dtype)
        self.joined[clients] += 1
        self.nu_sum += int(nu.sum())
        self.uploads += c
        return out, np.full(c, float(self.plan.h + 1))  # h indices + the sign

    def lost_cost(self, omega: int) -> float:
        """What a lost upload had cost: h indices and the sign (the simulator skips training lost clients)."""
        return float(self.plan.h + 1)

    def end_round(self, aggregate_flat: Optional[torch.Tensor]) -> None:
        pass

    def summary(self) -> dict:
        p = self.plan
        return {"signds_eps_round": self.eps, "d": p.d, "k": p.k, "h": p.h, "nu_th": p.nu_th,
                "expected_nu": p.expected_nu, "mean_nu": self.nu_sum / self.uploads if self.uploads else 0.0,
                "random_nu": p.h * p.k / p.d, "uploads": self.uploads, "global_lr": self.lr,
                "participations_max": int(self.joined.max(initial=0))}


# ---------------------------------------------------------------- the mechanism object (privacy/mechanism.py)
class SignDSMechanism(LocalMechanism):
    """Seed 002: each upload is a random sign on h dimensions chosen by EM-MDS, pure ε-LDP per upload."""

    def client_transforms(self, noise, seed: int, controller=None):
        cfg, pc = self.cfg, self.cfg.privacy
        return None, lambda active: SignDSUpload(eps=pc.params.signds_eps, k_frac=pc.params.signds_k, h_frac=pc.params.signds_h,
                                                 lr=pc.params.signds_lr, clients=cfg.data.clients, active=active,
                                                 seed=seed + 2)

    def upload_words(self, omega: int) -> Optional[float]:
        """h indices and the sign, h from the fractions of Ω (`dims`), under plain aggregation."""
        if super().upload_words(omega) is None:
            return None
        pc = self.cfg.privacy.params
        return float(dims(int(omega), pc.signds_k, pc.signds_h)[1] + 1)

    def default_range(self) -> float:
        return self.cfg.privacy.params.signds_lr  # the aggregate is η_g · weighted mean of s·1_J

    def account(self, out, part) -> dict:
        pc, up = self.cfg.privacy, self.run.transform
        m = int(up.joined.max(initial=0))  # ε-LDP uploads of the most exposed user
        return {"level": "user (replace-one user; pure ε-LDP per upload)", "neighbouring": "replace one user",
                "accountant": "pure ε-LDP per upload, PLD composition (dp-accounting)",
                "eps": eps_signds(eps_round=pc.params.signds_eps, participations=m, delta=pc.delta),
                "eps_paper": m * pc.params.signds_eps, **up.summary()}  # eps_paper: basic composition m·ε


__all__ = ["log_omega", "expected_nu", "optimal_threshold", "nu_log_probs", "set_probability", "Plan", "plan",
           "sample_nu", "select", "eps_signds", "delta_pure_composition", "eps_pure_composition_exact", "dims",
           "SignDSUpload", "SignDSMechanism"]
