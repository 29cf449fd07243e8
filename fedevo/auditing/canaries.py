"""Audit canaries: users whose round update is a known direction, each inserted with probability ½.

A canary user's update in a round is c·ũ (c its clip, ũ a unit vector on the model's active coordinates). The
directions of one round are orthonormal: the active coordinates are split at random into m disjoint groups of
equal size and canary j gets random signs on group j (normalised), drawn afresh each round since SET regrowth
moves the active coordinates. Disjoint supports make the canaries invisible to each other: the projection of the
observed vector on ũ_j is canary j's own contribution plus the noise's projection, nothing of the other canaries
(random dense directions, as in Andrew et al., interfere with each other when m is not ≪ the dimension).

Steinke et al.'s design: canary j is *included* with probability ½ (`included`). What "not included" means
follows the accountant's neighbouring relation: add/remove one user, or zero-out one user (its update replaced
by zero: no sampling, the cohort known) → the canary contributes nothing; replace one user → it contributes −c·ũ
(the other member of a neighbouring pair at distance 2c).

Exposure follows the accountant too (`Exposure`): a canary joins each accounted round with the accountant's
sampling rate (secret Poisson or fixed-size sampling: M/N; no amplification: every round), so the audit tests
the mechanism the accountant describes, not a more exposed user.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

RELATIONS = ("add/remove", "zero-out", "replace")


@dataclass(frozen=True)
class Exposure:
    relation: str  # neighbouring relation of the accountant: "add/remove", "zero-out" or "replace"
    rate: float  # probability that a canary joins an accounted round (1: every round)
    rounds: int  # accounted rounds: a canary may join rounds 1..rounds

    def __post_init__(self):
        assert self.relation in RELATIONS, self.relation
        assert 0 < self.rate <= 1 and self.rounds >= 0


@dataclass(frozen=True)
class Directions:
    index: torch.Tensor  # (m, g) coordinates of each canary's group
    value: torch.Tensor  # (m, g) ±1/√g
    size: int  # P, the flat parameter count


class CanarySet:
    """m canaries: their inclusion bits, per-round directions and participation, and the recorded statistics.

    Per observed accounted round the caller records z (m,): the projection of what the observer sees, minus the
    part it already knows (the other users' clipped updates), on each ũ_j, in units of the accounted noise std;
    and μ (m,): the shift a participating included canary would give z (its clip over the accounted noise)."""

    def __init__(self, *, count: int, exposure: Exposure, seed: int):
        if count < 1:
            raise ValueError("need at least 1 canary")
        self.m = int(count)
        self.exposure = exposure
        self.rng = np.random.default_rng(seed)
        self.included = self.rng.random(self.m) < 0.5
        self.joined = np.zeros(self.m, dtype=np.int64)  # participations so far (clip decay)
        self.z: list[np.ndarray] = []
        self.mu: list[np.ndarray] = []
        self.joins: list[np.ndarray] = []

    # ---------------------------------------------------------------- per round
    def join(self, t: int) -> np.ndarray:
        """Which canaries take part in round t (1-based): none after the accounted rounds."""
        e = self.exposure
        if t > e.rounds:
            return np.zeros(self.m, dtype=bool)
        if e.rate >= 1.0:
            return np.ones(self.m, dtype=bool)
        return self.rng.random(self.m) < e.rate

    def signs(self, joins: np.ndarray) -> np.ndarray:
        """+1 (included, joining), −1 (not included, joining, replace relation), 0 otherwise."""
        s = np.where(self.included, 1.0, -1.0 if self.exposure.relation == "replace" else 0.0)
        return s * joins

    def directions(self, active: torch.Tensor) -> Directions:
        idx = torch.nonzero(active.reshape(-1) > 0).squeeze(1)
        g = idx.numel() // self.m
        if g < 1:
            raise ValueError(f"{self.m} canaries need at least {self.m} active coordinates, the model has "
                             f"{idx.numel()}")
        perm = torch.from_numpy(self.rng.permutation(idx.numel())[: self.m * g])
        signs = torch.from_numpy(self.rng.integers(0, 2, size=(self.m, g)).astype(np.float32) * 2 - 1)
        return Directions(index=idx[perm].view(self.m, g), value=signs / math.sqrt(g), size=active.numel())

    @staticmethod
    def embed(d: Directions, weights: np.ndarray) -> torch.Tensor:
        """Σ_j w_j·ũ_j as a flat (P,) vector."""
        out = torch.zeros(d.size, dtype=torch.float32)
        w = torch.as_tensor(weights, dtype=torch.float32).unsqueeze(1)
        out.index_add_(0, d.index.reshape(-1), (d.value * w).reshape(-1))
        return out

    @staticmethod
    def rows(d: Directions, weights: np.ndarray, block: slice) -> torch.Tensor:
        """(b, P) rows w_j·ũ_j for the canaries in `block` (the uploads of canary users)."""
        ix, val = d.index[block], d.value[block]
        out = torch.zeros(ix.shape[0], d.size, dtype=torch.float32)
        out.scatter_(1, ix, val * torch.as_tensor(weights[block], dtype=torch.float32).unsqueeze(1))
        return out

    @staticmethod
    def project(d: Directions, vec: torch.Tensor) -> np.ndarray:
        """<vec, ũ_j> for every canary (vec flat (P,))."""
        return (vec.reshape(-1)[d.index].to(torch.float64) * d.value.to(torch.float64)).sum(1).numpy()

    @staticmethod
    def project_rows(d: Directions, rows: torch.Tensor, block: slice) -> np.ndarray:
        """<rows[i], ũ_j> for the canaries j of `block`, row i being canary j's own upload."""
        picked = torch.gather(rows, 1, d.index[block]).to(torch.float64)
        return (picked * d.value[block].to(torch.float64)).sum(1).numpy()

    def record(self, *, z: np.ndarray, mu: np.ndarray, joins: np.ndarray) -> None:
        self.z.append(np.asarray(z, dtype=float))
        self.mu.append(np.asarray(mu, dtype=float))
        self.joins.append(np.asarray(joins, dtype=bool))
        self.joined += joins

    # ---------------------------------------------------------------- statistics
    @property
    def observed_rounds(self) -> int:
        return len(self.z)

    def scores(self) -> np.ndarray:
        """The log-likelihood ratio of "included" vs "not included" given the recorded z (an attack's score; any
        score gives a valid one-run bound, this one is the most powerful for the accounted Gaussian): per round
        log(1 − q + q·exp(μz − μ²/2)), minus the same at −z for the replace relation (2μz when q = 1). With
        near-noiseless uploads (μ ~ 1e200) a ratio beyond the floats is ±∞, its true order; μ(z − μ/2) is formed
        without μ², whose overflow made ∞ − ∞ = NaN of every score."""
        if not self.z:
            return np.zeros(self.m)
        Z, MU = np.vstack(self.z), np.vstack(self.mu)
        q, replace = self.exposure.rate, self.exposure.relation == "replace"

        def mix(x):
            a = MU * (x - MU / 2)
            return a if q >= 1.0 else np.logaddexp(math.log1p(-q), math.log(q) + a)

        with np.errstate(over="ignore"):  # |log-likelihood ratio| > 1.8e308: ±∞ is its value here
            if q >= 1.0 and replace:  # (μz − μ²/2) − (−μz − μ²/2), without the two infinities of its terms
                s = 2.0 * MU * Z
            else:
                s = mix(Z) - mix(-Z) if replace else mix(Z)
        return s.sum(0)

    def statistic(self) -> np.ndarray:
        """The Gaussian-fit statistic: Σ_t z_t / √(rounds observed), N(0, 1) for a canary that never joined
        (at the accounted noise); the analogue of Andrew et al.'s cosine with the final model delta."""
        if not self.z:
            return np.zeros(self.m)
        return np.vstack(self.z).sum(0) / math.sqrt(len(self.z))


__all__ = ["CanarySet", "Directions", "Exposure", "RELATIONS"]
