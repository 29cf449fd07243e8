"""ULDP-FED per-user budget ledger (seed 000 §2.2, eqs. 14–15) and Theorem 3's noise scale.

A user may join at most r of the T rounds. At each participation its remaining budget is split evenly over
the participations it can still make, n = min(r − a, T − t + 1) (a = rounds joined so far, recalled ones
included; t = current round, 1-based), and this round is granted ε_rem / n. A round that uploads spends that
grant; a recalled round spends nothing, so the saving is re-spread over the later rounds. Without recalls
every round gets ε/r (eq. 14 with j − 1 rounds spent); after the first recall at participation j the user
holds ε' = ε − ε(j−1)/r and a non-recalled round j+1 leaves ε'' = ε' − ε'/(r−j) (eq. 15).

All state is numpy arrays over clients, so a round of 1000 clients is a few vector operations.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fedevo.errors import FedevoError


def theorem3_noise_std(*, eps: float | np.ndarray, rounds: int | np.ndarray, delta: float, sample_rate: float,
                       clip: float | np.ndarray) -> float | np.ndarray:
    """Seed 000 Theorem 3 (eq. 35): σ_k = 2q·C_k·√(r·ln(1/δ))/ε, the Gaussian std for a user who is to
    spend ε over r more rounds at sampling rate q with clip C_k. ε = 0 → inf (no budget: do not upload).

    The paper's moments-accountant approximation, kept for reproduction; the honest ε of the noise actually
    added is `accounting.eps_update_varying`."""
    if not 0 < delta < 1:
        raise FedevoError(f"delta must be in (0, 1), got {delta!r}")
    if not 0 < sample_rate <= 1:
        raise FedevoError(f"sample_rate must be in (0, 1], got {sample_rate!r}")
    e, r, c = np.asarray(eps, dtype=float), np.asarray(rounds, dtype=float), np.asarray(clip, dtype=float)
    if (e < 0).any() or (r < 0).any() or (c <= 0).any():
        raise FedevoError(f"eps and rounds must be >= 0 and clip > 0, got eps={eps!r}, rounds={rounds!r}, "
                          f"clip={clip!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(e > 0, 2.0 * sample_rate * c * np.sqrt(r * math.log(1.0 / delta)) / e, np.inf)
    return float(out) if out.ndim == 0 else out


def round_noise_std(*, round_eps: float | np.ndarray, max_participations: int, delta: float, sample_rate: float,
                    clip: float | np.ndarray) -> float | np.ndarray:
    """σ_k for a round granted ε_k: Theorem 3 with ε_i = r·ε_k, i.e. 2q·C_k·√(r·ln(1/δ))/(r·ε_k).

    Why r·ε_k: without recalls every grant is ε/r and this is Theorem 3's σ_k for (ε, r), the same every
    round; a recall raises later grants and so lowers their noise. (The paper does not say how a grant maps
    to σ_k; by its own moments bound, ε² = r·Σ g_k² over the grants, a user with fewer than r rounds left when
    it joins, or whose recalls' savings are re-spent, goes past ε: `UserBudgetLedger.paper_eps`. The honest ε of
    the noise actually used, against the server, is `accounting.eps_update_varying`.)"""
    r = max_participations
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)) or r < 1:
        raise FedevoError(f"max_participations must be an integer >= 1, got {r!r}")
    return theorem3_noise_std(eps=r * np.asarray(round_eps, dtype=float), rounds=r, delta=delta,
                              sample_rate=sample_rate, clip=clip)


class UserBudgetLedger:
    """Per-user ε ledger of ULDP-FED. Clients are integer ids in [0, num_clients); rounds are 1-based.

    Flow per round t for the sampled clients `ids` (see `eligible`): grant = budget_for(ids, t);
    σ_k from `noise_std`; after the similarity check call `spend(uploaded, t)` and `recall(recalled, t)`.
    """

    def __init__(self, *, total_eps: float, max_participations: int, rounds: int, num_clients: int,
                 delta: float = 1e-4):
        if not (math.isfinite(total_eps) and total_eps > 0):
            raise FedevoError(f"total_eps must be a finite number > 0, got {total_eps!r}")
        for name, v in (("rounds", rounds), ("max_participations", max_participations),
                        ("num_clients", num_clients)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise FedevoError(f"{name} must be an integer >= 1, got {v!r}")
        if max_participations > rounds:
            raise FedevoError(f"max_participations r={max_participations} exceeds rounds T={rounds}")
        if not 0 < delta < 1:
            raise FedevoError(f"delta must be in (0, 1), got {delta!r}")
        self.total_eps, self.r, self.T, self.delta = float(total_eps), int(max_participations), int(rounds), delta
        self.num_clients = int(num_clients)
        self._remaining = np.full(self.num_clients, self.total_eps)
        self.joined = np.zeros(self.num_clients, dtype=np.int64)  # a: rounds joined, recalled ones included
        self.recalled = np.zeros(self.num_clients, dtype=np.int64)
        self.granted_sq = np.zeros(self.num_clients)  # Σ g² of the grants each client's uploads spent
        self.last_round = np.zeros(self.num_clients, dtype=np.int64)  # 0: never

    # ---------------------------------------------------------------- queries
    def _ids(self, clients: int | Sequence[int] | np.ndarray) -> np.ndarray:
        ids = np.atleast_1d(np.asarray(clients))
        if ids.size and (ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= self.num_clients):
            raise FedevoError(f"client ids must be integers in [0, {self.num_clients}), got {clients!r}")
        return ids.astype(np.int64, copy=False)

    def _round(self, t: int) -> int:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 1 <= t <= self.T:
            raise FedevoError(f"round must be an integer in [1, {self.T}], got {t!r}")
        return int(t)

    def slots(self, clients, t: int) -> np.ndarray:
        """Participations the remaining budget is spread over: min(r − a, T − t + 1) (0 once r is used up)."""
        ids, t = self._ids(clients), self._round(t)
        return np.maximum(np.minimum(self.r - self.joined[ids], self.T - t + 1), 0)

    def eligible(self, clients, t: int) -> np.ndarray:
        """Mask of clients that may still join round t (fewer than r rounds joined, not yet in round t)."""
        ids = self._ids(clients)
        return (self.slots(ids, t) > 0) & (self.last_round[ids] < t)

    def budget_for(self, clients, t: int) -> np.ndarray:
        """ε granted to each client for round t: ε_rem / min(r − a, T − t + 1); 0 if it cannot join."""
        ids = self._ids(clients)
        n = self.slots(ids, t)
        return np.where(n > 0, self._remaining[ids] / np.maximum(n, 1), 0.0)

    def noise_std(self, clients, t: int, *, clip: float | np.ndarray, sample_rate: float) -> np.ndarray:
        """σ_k for round t: `round_noise_std` of each client's grant (inf where the client cannot join)."""
        return np.atleast_1d(round_noise_std(round_eps=self.budget_for(clients, t), max_participations=self.r,
                                             delta=self.delta, sample_rate=sample_rate, clip=clip))

    def remaining(self, clients=None) -> np.ndarray:
        """Budget each client still holds (all clients if None)."""
        return self._remaining.copy() if clients is None else self._remaining[self._ids(clients)]

    @property
    def spent(self) -> np.ndarray:
        """Budget spent per client: total − remaining, so it can never exceed the total."""
        return self.total_eps - self._remaining

    # ---------------------------------------------------------------- updates
    def _join(self, clients, t: int) -> np.ndarray:
        ids, t = self._ids(clients), self._round(t)
        if np.unique(ids).size != ids.size:
            raise FedevoError(f"duplicate client ids in one round: {ids.tolist()!r}")
        bad = ids[~self.eligible(ids, t)]
        if bad.size:
            raise FedevoError(f"clients {bad.tolist()} cannot join round {t} (already joined r={self.r} rounds "
                              f"or already in this round)")
        return ids

    def spend(self, clients, t: int) -> np.ndarray:
        """Charge round t's grant to clients that uploaded a fresh noisy update; returns the ε charged."""
        ids = self._join(clients, t)
        eps = self.budget_for(ids, t)
        self._remaining[ids] = self._remaining[ids] - eps
        self.granted_sq[ids] += eps * eps
        self.joined[ids] += 1
        self.last_round[ids] = t
        return eps

    def recall(self, clients, t: int) -> None:
        """Clients that sent an index instead: the round counts towards r, the budget is kept (eq. 15)."""
        ids = self._join(clients, t)
        self.joined[ids] += 1
        self.recalled[ids] += 1
        self.last_round[ids] = t

    def paper_eps(self) -> float:
        """The paper's own (moments-accountant) ε of the noise the most-exposed client's uploads used: Theorem 3
        composed over its grants g_k (`round_noise_std`: σ_k for r·g_k), ε² = r·Σ g_k². The budget where every
        client has r rounds ahead when it joins and never recalls (r grants of ε/r); more for a client with fewer
        rounds left (two grants of ε/2 with r = 4: √2·ε) and after recalls (re-spent savings). 0 if no upload."""
        return math.sqrt(self.r * float(self.granted_sq.max(initial=0.0)))

    def summary(self) -> dict:
        rem = self._remaining
        return {"total_eps": self.total_eps, "remaining_min": float(rem.min()), "remaining_mean": float(rem.mean()),
                "remaining_max": float(rem.max()), "spent_total": float(self.spent.sum()),
                "spent_max": float(self.spent.max()), "joined_max": int(self.joined.max()),
                "recalls": int(self.recalled.sum())}


__all__ = ["UserBudgetLedger", "round_noise_std", "theorem3_noise_std"]
