"""Adaptive per-client DP budget with client filtering (seed 003, patent CN: 一种提供自适应梯度的差分私有联邦学习方法).

The patent leaves most formulas open; these are the ones fedevo uses (docs/secagg_signds_adaptive.md):

Non-IID degree (量化值). After local training client i evaluates its local model W_g + Δ_i on the shared test
data (a fixed public subset of the test set) and gets L_i; the server's global loss L_g is that of the current
global model. The drift u_i = max(0, 1 − L_g / L_i) ∈ [0, 1) (0: no worse than the global model; → 1: far
worse) is quantised into Q levels, q_i = min(Q − 1, ⌊Q·u_i⌋), degree d_i = q_i / (Q − 1) ∈ [0, 1].

Release of the level. The level depends on private data, so it is released by Q-ary randomized response with
ε_L (`adaptive_level_eps`): the true level with probability e^ε_L / (e^ε_L + Q − 1), each other level with
1 / (e^ε_L + Q − 1): pure ε_L-LDP per participation, added to the accountant's ε (basic composition). With
ε_L = None the level is sent in the clear, as in the patent, and the report says ε does not cover it.

Learning rate and budget (claim 2: more drift ⇒ larger learning rate, more noise, less budget). With the level
q_i the server sent last time (0 before a client's first report):
    lr_i = lr · (1 + γ·d_i)                     (γ = adaptive_gamma)
    budget share b_i = 1 − κ·d_i ∈ (0, 1]        (κ = adaptive_kappa < 1)
    noise multiplier z_i = σ / b_i               (the Gaussian mechanism's ε scales as 1/z, so ε_i ≈ b_i·ε_0)
on top of the ULDP-FED update mechanism (clip C_k, noise N(0, (z_i·C_k)²)). ε counts every upload at the
smallest multiplier, σ (valid whatever the released levels chose); the noise actually added gives a smaller ε
that holds only conditionally on the levels (reported as `eps_gaussian_conditional`).

Response time (simulated). τ_i = E · n_i · c_i · j_{i,t} / 1000, with a per-client speed c_i ~ LogNormal(0, 0.5)
drawn once (seeded) and a per-round jitter j ~ LogNormal(0, 0.1); feedback reaches the server in order of τ.

Quality (claim 3, "quantised update and samples / response time, proportional coefficient, mapped to an
interval"): o_i = n_i / τ_i, o_ref = the median speed's o (= 1000 / (E · median c)),
    raw_i = (1 − d_i) · o_i / o_ref,     quality Q_i = raw_i / (1 + raw_i) ∈ [0, 1)
(0.5 for a no-drift client of median speed; 0 for a client at the highest drift level).

Filtering buffer (claim 3). Capacity M = max(1, round(keep · p)) for p sampled clients, quality threshold θ.
In arrival order: while the buffer is not full, insert (i, Q_i) and sort by Q descending; once full, a new
client replaces the last (lowest) entry if its Q is larger, else it is discarded; whenever the buffer is full
and its lowest Q exceeds θ, the selection is complete and later feedback is ignored. The buffer's clients are
aggregated, weighted by sample count. Levels are updated for the clients whose feedback the server processed.
"""

from __future__ import annotations

import bisect
import math
from typing import Optional

import numpy as np
import torch

from fedevo.errors import FedevoError

from . import accounting as acc
from .mechanisms import UpdateLDP
from .local import UpdateMechanism


# ---------------------------------------------------------------- pure formulas
def drift_levels(local_loss, global_loss: float, levels: int) -> np.ndarray:
    """q_i = min(Q − 1, ⌊Q · max(0, 1 − L_g / L_i)⌋)."""
    if levels < 2:
        raise FedevoError(f"adaptive_levels must be >= 2, got {levels}")
    L = np.asarray(local_loss, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(L > 0, 1.0 - float(global_loss) / L, 0.0)
    u = np.where(np.isfinite(L), u, 1.0)  # a diverged local model (NaN/inf loss) drifts the most
    u = np.clip(np.nan_to_num(u, nan=1.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
    return np.minimum(levels - 1, np.floor(levels * u)).astype(np.int64)


def degrees(level, levels: int) -> np.ndarray:
    return np.asarray(level, dtype=np.float64) / (levels - 1)


def lr_factors(level, levels: int, gamma: float) -> np.ndarray:
    """lr_i / lr = 1 + γ·d_i."""
    return 1.0 + gamma * degrees(level, levels)


def budget_shares(level, levels: int, kappa: float) -> np.ndarray:
    """b_i = 1 − κ·d_i: the fraction of the base per-round budget a client at this level spends."""
    if not 0 <= kappa < 1:
        raise FedevoError(f"adaptive_kappa must be in [0, 1), got {kappa}")
    return 1.0 - kappa * degrees(level, levels)


def noise_multipliers(sigma: float, level, levels: int, kappa: float) -> np.ndarray:
    """z_i = σ / b_i."""
    return sigma / budget_shares(level, levels, kappa)


def randomized_response(level: np.ndarray, levels: int, eps: Optional[float], rng: np.random.Generator) -> np.ndarray:
    """Q-ary randomized response: keep with prob e^ε/(e^ε+Q−1), else a uniformly chosen other level."""
    level = np.asarray(level, dtype=np.int64)
    if eps is None:
        return level.copy()
    keep = rng.random(level.shape) < math.exp(eps) / (math.exp(eps) + levels - 1)
    other = (level + rng.integers(1, levels, size=level.shape)) % levels
    return np.where(keep, level, other)


def response_times(sizes, epochs: int, speed, jitter) -> np.ndarray:
    """τ_i = E · n_i · c_i · j_i / 1000."""
    return epochs * np.asarray(sizes, dtype=np.float64) * np.asarray(speed) * np.asarray(jitter) / 1000.0


def quality(degree, rate, ref_rate: float) -> np.ndarray:
    """Q_i = raw/(1+raw), raw = (1 − d_i)·o_i/o_ref."""
    raw = (1.0 - np.asarray(degree, dtype=np.float64)) * np.asarray(rate, dtype=np.float64) / ref_rate
    raw = np.maximum(raw, 0.0)
    return raw / (1.0 + raw)


class QualityBuffer:
    """The server's bounded store of (client, quality) pairs, kept sorted by quality, highest first."""

    def __init__(self, capacity: int, threshold: float):
        if capacity < 1:
            raise FedevoError(f"buffer capacity must be >= 1, got {capacity}")
        self.capacity, self.threshold = int(capacity), float(threshold)
        self._neg: list[float] = []  # −quality, ascending ⇒ quality descending
        self._ids: list[int] = []
        self.done = False
        self.offered = 0

    def offer(self, client: int, q: float) -> bool:
        """Process one feedback; returns whether it entered the buffer. No-op once `done`."""
        if self.done:
            return False
        self.offered += 1
        if len(self._ids) >= self.capacity:
            if q <= -self._neg[-1]:
                return False  # not better than the last entry: discard
            self._neg.pop()
            self._ids.pop()
        pos = bisect.bisect_right(self._neg, -q)  # ties: earlier arrival first
        self._neg.insert(pos, -q)
        self._ids.insert(pos, int(client))
        if len(self._ids) >= self.capacity and -self._neg[-1] > self.threshold:
            self.done = True
        return True

    def members(self) -> list[tuple[int, float]]:
        return [(i, -n) for i, n in zip(self._ids, self._neg)]


def filter_clients(clients, qualities, times, capacity: int, threshold: float) -> tuple[np.ndarray, int]:
    """Run the buffer over feedback in order of response time; (selected clients, feedback processed)."""
    order = np.argsort(np.asarray(times), kind="stable")
    buf = QualityBuffer(capacity, threshold)
    for j in order:
        if buf.done:
            break
        buf.offer(int(clients[j]), float(qualities[j]))
    return np.array(sorted(i for i, _ in buf.members()), dtype=np.int64), buf.offered


# ---------------------------------------------------------------- the simulator's pieces
class AdaptiveController:
    """Server state across rounds (levels, global loss, speeds) plus the per-client learning-rate step hook."""

    def __init__(self, *, sizes: np.ndarray, epochs: int, sampled_per_round: int, levels: int = 4,
                 gamma: float = 1.0, kappa: float = 0.5, keep: float = 0.8, threshold: float = 0.5,
                 level_eps: Optional[float] = 1.0, shared_x: torch.Tensor, shared_y: torch.Tensor, seed: int = 0):
        self.sizes = np.asarray(sizes)
        K = len(self.sizes)
        self.epochs, self.Q, self.gamma, self.kappa = int(epochs), int(levels), float(gamma), float(kappa)
        self.capacity = max(1, round(keep * sampled_per_round))
        self.threshold, self.level_eps = float(threshold), level_eps
        self.rng = np.random.default_rng(seed)
        self.speed = self.rng.lognormal(0.0, 0.5, size=K)
        self.ref_rate = 1000.0 / (self.epochs * float(np.median(self.speed)))
        self.level = np.zeros(K, dtype=np.int64)  # last level the server sent each client
        self.x, self.y = shared_x, shared_y
        self.model = self.params = None
        self.global_loss: Optional[float] = None
        self._chunk_of_seed: dict = {}
        self._reported: dict[int, int] = {}
        self.released = np.zeros(K, dtype=np.int64)  # level releases per client (for the ε of the RR)
        self.stats = {"selected": 0, "arrived": 0, "early_stops": 0, "quality_sum": 0.0, "quality_n": 0}
        self.global_losses: list[float] = []

    # -- losses on the shared test data
    def _loss(self, params) -> float:
        with torch.no_grad():
            logits = self.model.logits(params, self.x).float()
            return float(torch.nn.functional.cross_entropy(logits, self.y))

    # -- rounds.py hooks
    def begin_round(self, t: int, model, params, arrived: np.ndarray, chunk_of_seed: Optional[dict] = None) -> None:
        self.model, self.params = model, params
        self._chunk_of_seed = chunk_of_seed or {}
        if self.global_loss is None:
            self.global_loss = self._loss(params)
            self.global_losses.append(self.global_loss)
        self._reported = {}
        self._times = dict(zip(arrived.tolist(), response_times(
            self.sizes[arrived], self.epochs, self.speed[arrived], self.rng.lognormal(0.0, 0.1, size=len(arrived)))))

    def metadata_words(self, arrived: np.ndarray) -> float:
        """Upload cost beyond the update: the reported level (one word) per arrived client."""
        return float(len(arrived))

    def observe(self, deltas: torch.Tensor, clients: np.ndarray) -> None:
        """Local loss of W_g + Δ_i on the shared data → drift level → randomized response → reported level."""
        losses = []
        for row in deltas:
            off, local = 0, []
            for p in self.params:
                n = p.numel()
                local.append(p + row[off:off + n].view_as(p).to(p.dtype))
                off += n
            losses.append(self._loss(local))
        true = drift_levels(losses, self.global_loss, self.Q)
        rep = randomized_response(true, self.Q, self.level_eps, self.rng)
        self.released[clients] += 1
        self._reported.update(zip(np.asarray(clients).tolist(), rep.tolist()))

    def select(self, arrived: np.ndarray) -> np.ndarray:
        """Boolean mask over `arrived`: the clients in the filtering buffer."""
        if len(arrived) == 0:
            return np.zeros(0, dtype=bool)
        lv = np.array([self._reported.get(int(c), int(self.level[c])) for c in arrived])
        times = np.array([self._times[int(c)] for c in arrived])
        q = quality(degrees(lv, self.Q), self.sizes[arrived] / times, self.ref_rate)
        chosen, processed = filter_clients(arrived, q, times, self.capacity, self.threshold)
        order = np.argsort(times, kind="stable")[:processed]
        seen = arrived[order]
        self.level[seen] = lv[order]  # the server stores the levels of the feedback it processed
        mask = np.isin(arrived, chosen)
        self.stats["selected"] += int(mask.sum())
        self.stats["arrived"] += len(arrived)
        self.stats["early_stops"] += int(processed < len(arrived))
        self.stats["quality_sum"] += float(q[mask].sum())
        self.stats["quality_n"] += int(mask.sum())
        return mask

    def after_aggregate(self, params) -> None:
        self.global_loss = self._loss(params)
        self.global_losses.append(self.global_loss)

    # -- step-hook protocol of fl/engine.py: per-client learning rate lr·(1 + γ·d_i)
    def for_chunk(self, seed: int) -> "_ChunkLR":
        chunk = self._chunk_of_seed[seed]
        return _ChunkLR(torch.as_tensor(lr_factors(self.level[chunk], self.Q, self.gamma), dtype=torch.float32))

    def for_group(self, seeds, counts, device, noise=None) -> "_ChunkLR":
        """The device path's hook (fl/device.py) for the stacked clients of the chunks of `seeds`, in order."""
        chunks = [self._chunk_of_seed[s] for s in seeds]
        factor = torch.as_tensor(np.concatenate([lr_factors(self.level[c], self.Q, self.gamma) for c in chunks]),
                                 dtype=torch.float32)
        return _ChunkLR(factor.to(device))

    def end_round(self) -> None:
        pass

    def noise_factor(self, clients: np.ndarray) -> np.ndarray:
        return 1.0 / budget_shares(self.level[clients], self.Q, self.kappa)

    def summary(self) -> dict:
        s = self.stats
        hist = np.bincount(self.level, minlength=self.Q)
        return {"levels": self.Q, "level_histogram": hist.tolist(), "buffer_capacity": self.capacity,
                "quality_threshold": self.threshold, "selected": s["selected"], "arrived": s["arrived"],
                "filtered_out": s["arrived"] - s["selected"], "early_stops": s["early_stops"],
                "quality_mean": s["quality_sum"] / s["quality_n"] if s["quality_n"] else None,
                "global_loss_first": self.global_losses[0] if self.global_losses else None,
                "global_loss_last": self.global_losses[-1] if self.global_losses else None,
                "level_eps": self.level_eps, "level_releases_max": int(self.released.max(initial=0)),
                "lr_factor_max": float(1.0 + self.gamma), "noise_factor_max": float(1.0 / (1.0 - self.kappa))}


class _ChunkLR:
    """The engine's per-chunk hook: client k of the chunk steps with lr·factor_k (no clipping, no noise)."""

    def __init__(self, factor: torch.Tensor):
        self.factor = factor

    needs_norms = False

    def coefficients(self, grads, active, lr, norms=None):
        return (lr * self.factor) * active.to(torch.float32)

    def reserve_noise(self, i, p, m, active):
        return 0, 0, 0.0  # nothing to add

    def add_noise(self, i, p, m, active) -> None:
        pass

    def after_step(self, params, masks, active) -> None:
        pass


class AdaptiveUpdateLDP(UpdateLDP):
    """ULDP-FED's upload transform with client i's noise multiplier σ / b_i (its budget share), and the
    level report computed from the client's local model before noise (see `AdaptiveController.observe`)."""

    def __init__(self, *, controller: AdaptiveController, **kw):
        super().__init__(**kw)
        self.controller = controller
        self.base_sigma = self.sigma

    def __call__(self, deltas: torch.Tensor, clients: np.ndarray, omega: int):
        self.controller.observe(deltas, clients)  # on the clean local model; released through RR
        self.sigma = self.base_sigma * self.controller.noise_factor(clients)  # per-client σ·C_k in UpdateLDP
        try:
            return super().__call__(deltas, clients, omega)
        finally:
            self.sigma = self.base_sigma


# ---------------------------------------------------------------- the mechanism object (privacy/mechanism.py)
class AdaptiveMechanism(UpdateMechanism):
    """Seed 003: the `update` mechanism with per-client learning rate and budget share from a quantised non-IID
    degree (noise multiplier σ/b_i ≥ σ), and a server-side client-filtering buffer (`AdaptiveController`)."""

    audit_seam = None  # not audited (the level reports and the per-client noise are not modelled)

    def upload_words(self, omega: int) -> None:
        """The level reports and the filter's metadata depend on the clients that arrive: not known before."""
        return None

    def calibration_target(self, pc) -> float:
        """Calibrate the Gaussian part for b_i = 1 (the worst case), leaving room for the level reports."""
        target, m = pc.target_eps, self.participations()
        if pc.params.adaptive_level_eps is not None:
            target -= pc.params.adaptive_level_eps * m
            if target <= 0:
                raise FedevoError(f"target_eps={pc.target_eps} is used up by the level reports "
                                  f"(adaptive_level_eps × {m} participations); lower adaptive_level_eps")
        return target

    def controller(self, data, part, seed: int):
        cfg, pc = self.cfg, self.cfg.privacy
        g = torch.Generator().manual_seed(seed + 3)
        shared = torch.randperm(len(data.y_test), generator=g)[:512]  # the shared test data the server sends
        return AdaptiveController(
            sizes=part.sizes, epochs=cfg.epochs, sampled_per_round=cfg.sampled_per_round, levels=pc.params.adaptive_levels,
            gamma=pc.params.adaptive_gamma, kappa=pc.params.adaptive_kappa, keep=pc.params.adaptive_keep, threshold=pc.params.adaptive_threshold,
            level_eps=pc.params.adaptive_level_eps, shared_x=data.x_test[shared], shared_y=data.y_test[shared],
            seed=seed + 3)

    def upload(self, controller=None, **kw):
        return AdaptiveUpdateLDP(controller=controller, **kw)

    def noise_multiplier_max(self) -> float:
        pc = self.cfg.privacy
        return pc.params.sigma / (1.0 - pc.params.adaptive_kappa)

    def account(self, out, part) -> dict:
        """The Gaussian part (per-client noise actually added) plus the randomized-response level reports (pure
        ε_L each, basic composition); the per-client spread shows the budget split."""
        pc, up = self.cfg.privacy, self.run.transform
        rep = super().account(out, part)
        ex = self.run.controller.summary()
        vals = up.inv_sq[up.inv_sq > 0]
        with np.errstate(over="ignore"):  # rounding a Σ z⁻² near the floats' end overflows: that one unrounded
            sums = np.unique(np.where(np.isfinite(np.round(vals, 12)), np.round(vals, 12), vals))
        per = [acc.eps_update_effective(noise_multiplier=1.0 / math.sqrt(v) if math.isfinite(v) else 0.0,
                                        delta=pc.delta) for v in sums]
        # Valid whatever the levels: every upload's multiplier z_i = σ / b_i is at least σ (b_i <= 1), so each is
        # dominated by the σ-Gaussian, and an adaptive composition of dominated mechanisms by the composition of
        # the dominating ones: the most-exposed client's uploads counted at σ. The noise actually added (larger
        # for drifting clients) gives a smaller ε only conditionally: it depends on the released levels (no
        # privacy filter), so it is reported beside, not as eps (it was eps before 2026-11-27).
        n = int(up.joined.max(initial=0))
        eps_uncond = acc.eps_update_varying(noise_multipliers=[pc.params.sigma] * n, delta=pc.delta) if n else 0.0
        ex.update(eps_gaussian=eps_uncond, eps_gaussian_conditional=rep["eps"],
                  eps_client_min=min(per, default=0.0), eps_client_max=max(per, default=0.0))
        rep["eps"] = eps_uncond
        if pc.params.adaptive_level_eps is None:
            ex.update(level_release="in the clear (as in the patent): not covered by eps")
            rep.update(eps_conditional=True, eps_condition="the non-IID levels are released in the clear (as in "
                       "the patent): eps covers the noised updates only (set adaptive_level_eps to release them "
                       "by randomized response, counted in eps)")
        else:
            eps_rr = pc.params.adaptive_level_eps * ex["level_releases_max"]
            ex.update(level_release="randomized response", eps_levels=eps_rr)
            rep["eps"] += eps_rr
            rep.update(eps_conditional=False)
        rep.update(adaptive=ex)
        return rep


__all__ = ["drift_levels", "degrees", "lr_factors", "budget_shares", "noise_multipliers", "randomized_response",
           "response_times", "quality", "QualityBuffer", "filter_clients", "AdaptiveController",
           "AdaptiveUpdateLDP", "AdaptiveMechanism"]
