"""Local DP mechanisms as transforms that plug into the simulator's two seams.

- `StepLDP` (seed 004 Alg. 3) is a per-step hook of the batched engine: clip each client's batch gradient to S,
  step, then add N(0, σ²) to every active parameter.
- `UpdateLDP` (ULDP-FED, seed 000 Alg. 1) transforms each client's round update Δ before upload: clip to
  C_k = C₀·e^(−β·k) (k = that client's participation count), add N(0, (σ·C_k)²) on active coordinates, and
  optionally recall an earlier noisy update instead (see `recall.py`).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import torch

from .noise import NoiseSource, TorchNoise
from .privatizer import UploadTransform


def _col(v: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return v.view(-1, *([1] * (like.dim() - 1)))


def batch_norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """L2 norm per client (leading dim) over a list of stacked tensors, without materialising squares."""
    sq = None
    for t in tensors:
        n = torch.linalg.vector_norm(t.reshape(t.shape[0], -1), dim=1, dtype=torch.float32)
        sq = n * n if sq is None else sq.add_(n * n)
    return sq.sqrt_()


COMPACT_BELOW = 0.5  # mask density under which per-step noise is drawn for the active weights only


def draws_compact(mask: torch.Tensor) -> bool:
    """Whether per-step noise for a masked parameter is drawn compactly: one value per active weight, in flat index
    order (else one per weight, then masked). fl/sparse.py follows the same rule so its stream matches."""
    return float(mask.reshape(-1).float().mean()) < COMPACT_BELOW


class StepLDP:
    """Seed 004 per-step LDP: round-level state; `for_chunk` gives the per-chunk hook the engine calls.

    clip=None: S is the median of the unclipped gradient norms of the previous round (in round 1, of each chunk's
    first step) — the paper's choice; that median is not itself privatised. `clips` records, per round, the
    largest S any chunk used (the accountant needs the max).
    """

    def __init__(self, *, sigma: float, clip: Optional[float], seed: int = 0):
        self.sigma = sigma
        self.fixed = clip
        self.S = clip
        self.seed = seed
        self.clips: list[float] = []
        self._chunks: list[_ChunkStep] = []

    def for_chunk(self, seed: int, noise=None) -> "_ChunkStep":
        if noise is None:
            noise = NoiseSource((seed ^ self.seed) % (1 << 62), threads=torch.get_num_threads())
        hook = _ChunkStep(self, noise)
        self._chunks.append(hook)  # list.append is atomic: chunks may run in threads
        return hook

    def for_group(self, seeds: Sequence[int], counts: Sequence[int], device, noise=None) -> "_GroupStep":
        """The device path's hook (fl/device.py): the clients of several chunks stacked (`counts` clients of the
        chunks of `seeds`, in order) on `device`. Each chunk keeps its own S (the median rule's first-step median
        is per chunk, as on the CPU); the noise comes from one torch generator on the device for the group,
        seeded from its first chunk's seed (same distribution as the CPU's native stream, other draws)."""
        if noise is None:
            noise = TorchNoise((int(seeds[0]) ^ self.seed) % (1 << 62), device)
        hook = _GroupStep(self, counts, noise, torch.device(device))
        self._chunks.append(hook)
        return hook

    def end_round(self) -> None:
        used = [h.S for h in self._chunks if h.S is not None]
        if used:
            self.clips.append(max(used))
        norms = [n for h in self._chunks for n in h.norms]
        if self.fixed is None and norms:
            self.S = float(torch.cat(norms).median())
        for h in self._chunks:
            h.noise.close()
        self._chunks = []


class _ChunkStep:
    def __init__(self, parent: StepLDP, noise):
        self.sigma = parent.sigma
        self.S = parent.S
        self.noise = noise
        self.norms: list[torch.Tensor] = []
        self._buf: dict = {}

    needs_norms = True

    def coefficients(self, grads, active, lr, norms: Optional[torch.Tensor] = None):
        """Per-client step size lr·min(1, S/‖g‖); `norms` when the caller already has ‖g‖ (fused kernels)."""
        if norms is None:
            norms = batch_norms(grads)
        live = norms[active]
        if live.numel():
            self.norms.append(live)
            if self.S is None:
                self.S = float(live.median())
        s = self.S if self.S is not None else 1.0
        return (s / norms.clamp_min(1e-12)).clamp_(max=1.0).mul_(lr).mul_(active)

    def reserve_noise(self, i: int, p: torch.Tensor, m, active: torch.Tensor):
        """(key, counter, σ) of the noise `add_noise` would add to dense parameter i, reserved for a fused kernel
        to add, when every client stepped and the native sampler is in use; None otherwise."""
        if m is not None or getattr(self.noise, "backend", "") != "native" or not bool(active.all()):
            return None
        key, counter = self.noise.reserve(p.numel())
        return key, counter, self.sigma

    def after_step(self, params, masks, active):
        for i, (p, m) in enumerate(zip(params, masks)):
            self.add_noise(i, p, m, active)

    def add_noise(self, i: int, p: torch.Tensor, m, active: torch.Tensor) -> None:
        """N(0, σ²) on the active weights of parameter i of the clients that stepped. Parameters are noised in
        index order, so a fused step (reserve_noise) draws the same stream values as this eager path."""
        act = None if bool(active.all()) else active.to(torch.float32)
        idx = self._active_index(i, m)
        if idx is not None:  # sparse layer: draw noise for the active weights only, add it in place
            noise = self._buffer(("s", i), (p.shape[0], idx.numel()))
            self.noise.fill_(noise, self.sigma)
            if act is not None:
                noise.mul_(act.unsqueeze(1))
            p.view(p.shape[0], -1).index_add_(1, idx, noise)
            return
        if m is None and act is None:  # dense, every client stepped: add in place, no temporary
            self.noise.add_(p, self.sigma)
            return
        buf = self._buffer(("d", i), p.shape)
        self.noise.fill_(buf, self.sigma)
        if m is not None:
            buf.mul_(m)
        if act is not None:
            buf.mul_(_col(act, buf))
        p.add_(buf)

    def _buffer(self, key, shape) -> torch.Tensor:
        buf = self._buf.get(key)
        if buf is None or buf.shape != torch.Size(shape):
            buf = self._buf[key] = torch.empty(shape)
        return buf

    def _active_index(self, i: int, m) -> Optional[torch.Tensor]:
        """Flat indices of a mask's ones when it is sparse enough that drawing only those pays (masks are fixed
        during local training, so this is computed once per chunk)."""
        if m is None:
            return None
        key = ("idx", i)
        if key not in self._buf:
            flat = m.reshape(-1)
            self._buf[key] = flat.nonzero().squeeze(1) if draws_compact(m) else None
        return self._buf[key]


class _GroupStep:
    """StepLDP's per-step transform for a group of chunks on one device, without a host synchronisation inside the
    step loop (no `.item()`, no boolean indexing, no data-dependent branch): S is a per-chunk tensor (NaN until
    known), the noise is drawn for every weight and multiplied by the mask and by the clients' `active` flags
    (×1 or ×0) instead of branching on them. `S` and `norms` (read by `StepLDP.end_round`) synchronise once."""

    needs_norms = True

    def __init__(self, parent: StepLDP, counts: Sequence[int], noise, device: torch.device):
        self.sigma = parent.sigma
        self.noise = noise
        n, width = len(counts), max(counts)
        chunk_of = [j for j, k in enumerate(counts) for _ in range(k)]
        slot = [j * width + i for j, k in enumerate(counts) for i in range(k)]
        self._chunk_of = torch.tensor(chunk_of, device=device)  # (C,) each client's chunk
        self._slot = torch.tensor(slot, device=device)  # (C,) its place in a (chunks, width) table
        self._shape = (n, width)
        self._median = parent.S is None  # the median rule's first round: S from each chunk's first live step
        self._s = torch.full((n,), math.nan if parent.S is None else float(parent.S), device=device)
        self._seen: list[tuple[torch.Tensor, torch.Tensor]] = []  # (norms, active) per step

    def coefficients(self, grads, active, lr, norms: Optional[torch.Tensor] = None):
        """lr·min(1, S_chunk/‖g‖) per client, 0 for the idle ones."""
        if norms is None:
            norms = batch_norms(grads)
        self._seen.append((norms, active))
        if self._median:  # chunks whose S is still unknown take the median of this step's live norms (NaN: none)
            table = torch.full((self._shape[0] * self._shape[1],), math.nan, device=norms.device)
            table[self._slot] = torch.where(active, norms, math.nan)
            med = table.view(self._shape).nanmedian(1).values
            self._s = torch.where(torch.isnan(self._s), med, self._s)
        s = self._s[self._chunk_of]
        s = torch.where(torch.isnan(s), 1.0, s)
        return (s / norms.clamp_min(1e-12)).clamp_(max=1.0).mul_(lr).mul_(active)

    def reserve_noise(self, i, p, m, active):
        return None  # no fused kernels on the device path

    def after_step(self, params, masks, active):
        act = active.to(torch.float32)
        for i, (p, m) in enumerate(zip(params, masks)):
            self._noise(p, m, act)

    def add_noise(self, i: int, p: torch.Tensor, m, active: torch.Tensor) -> None:
        self._noise(p, m, active.to(torch.float32))

    def _noise(self, p: torch.Tensor, m, act: torch.Tensor) -> None:
        """N(0, σ²) on the active weights of the clients that stepped (act: 1.0 or 0.0 per client)."""
        buf = self.noise.fill_(torch.empty_like(p), self.sigma)
        if m is not None:
            buf.mul_(m)
        p.add_(buf.mul_(_col(act, buf)))

    @property
    def S(self) -> Optional[float]:
        """The largest S any chunk of the group used (None: none known), as `_ChunkStep.S` for one chunk."""
        known = self._s[~torch.isnan(self._s)]
        return float(known.max()) if known.numel() else None

    @property
    def norms(self) -> list[torch.Tensor]:
        """The live clients' gradient norms of every step, on the CPU (StepLDP.end_round's median)."""
        if not self._seen:
            return []
        n = torch.stack([a for a, _ in self._seen])
        act = torch.stack([b for _, b in self._seen])
        return [n[act].cpu()]


class UpdateLDP(UploadTransform):
    """ULDP-FED upload transform over flat updates (c, P); `active` (P,) marks the coordinates that exist.

    Noise std per upload is σ·C_k, or, with a per-user `ledger` (eqs. 14–15), Theorem 3's σ_k for the budget
    the ledger grants this round. Every participation's noise multiplier (std / C_k) is kept per client as
    Σ z⁻², which is all the accountant needs (Gaussians compose into one with z = (Σ z⁻²)^(−1/2)).
    """

    def __init__(self, *, sigma: float, clip: float, beta: float, clients: int, active: torch.Tensor,
                 noise: NoiseSource, recall=None, tau: float = 0.0, similarity: str = "sign", ledger=None,
                 sample_rate: float = 1.0):
        self.sigma, self.clip0, self.beta = sigma, clip, beta
        self.active = active
        self.noise = noise
        self.recall = recall
        self.tau = tau
        self.similarity = similarity
        self.ledger = ledger
        self.sample_rate = sample_rate
        self.joined = np.zeros(clients, dtype=np.int64)  # participations that reached the server
        self.recalls = np.zeros(clients, dtype=np.int64)
        self.inv_sq = np.zeros(clients)  # Σ_k z_k⁻² per client
        self.last_global: Optional[torch.Tensor] = None  # last aggregated noisy update (flat)
        self.clips_used: list[float] = []
        self.round = 1

    def begin_round(self, t: int) -> None:
        self.round = t

    @property
    def active(self) -> torch.Tensor:
        return self._active

    @active.setter
    def active(self, active: torch.Tensor) -> None:
        self._active = active
        # the coordinates the similarity compares: an index (faster than a boolean mask), None when all are used
        self._act_idx = None if bool(active.all()) else active.bool().nonzero().squeeze(1)

    def set_active(self, active: torch.Tensor) -> None:
        """SET prune/regrow moved the active coordinates: noise and similarity follow them."""
        self.active = active

    def thresholds(self, clients: np.ndarray) -> np.ndarray:
        """C_k = C₀·e^(−β·k), k = the client's participations so far."""
        return self.clip0 * np.exp(-self.beta * self.joined[clients])

    def __call__(self, deltas: torch.Tensor, clients: np.ndarray, omega: int) -> tuple[torch.Tensor, np.ndarray]:
        """Privatise in place; returns (uploads as the server uses them, upload cost per client)."""
        ck_np = self.thresholds(clients)
        ck = torch.as_tensor(ck_np, dtype=deltas.dtype)
        if self.ledger is not None:
            std_np = self.ledger.noise_std(clients, self.round, clip=ck_np, sample_rate=self.sample_rate)
        else:
            std_np = self.sigma * ck_np
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a zero clip tells nothing: 0; a
            # zero (or underflowed) noise std against a positive clip: ∞, so that the ε is ∞, never NaN or 0
            self.inv_sq[clients] += np.where(ck_np > 0, (ck_np / std_np) ** 2, 0.0)
        norms = torch.linalg.vector_norm(deltas, dim=1)
        deltas.mul_((ck / norms.clamp_min(1e-12)).clamp_(max=1.0).unsqueeze(1))
        self.noise.add_rows_(deltas, torch.as_tensor(std_np, dtype=deltas.dtype), self.active)
        cost = np.full(len(clients), float(omega))
        recalled = np.zeros(len(clients), dtype=bool)
        if self.recall is not None and self.last_global is not None:
            from .recall import similarity_over

            low = (similarity_over(self.similarity, deltas, self.last_global, self._act_idx) < self.tau).numpy()
            if low.any():
                ids = np.flatnonzero(low)
                match = self.recall.best_match(clients[ids], self.last_global, self.similarity)
                found = match.found.numpy()
                use = ids[found]
                if len(use):
                    deltas[torch.as_tensor(use)] = match.updates[torch.as_tensor(found)].to(deltas.dtype)
                    cost[use] = 1.0  # an index (i, k) instead of Ω parameters
                    recalled[use] = True
        spent = ~recalled
        self.clips_used.extend(ck_np[spent].tolist())
        if self.recall is not None and spent.any():
            self.recall.add(clients[spent], deltas[torch.as_tensor(spent)])
        if self.ledger is not None:
            if spent.any():
                self.ledger.spend(clients[spent], self.round)
            if recalled.any():
                self.ledger.recall(clients[recalled], self.round)
        self.joined[clients] += 1
        self.recalls[clients[recalled]] += 1
        return deltas, cost

    def end_round(self, aggregate_flat: Optional[torch.Tensor]) -> None:
        if aggregate_flat is not None:
            self.last_global = aggregate_flat.clone()

    def effective_sigma(self) -> Optional[float]:
        """The single noise multiplier equivalent to the most-exposed client's participations (None: none; 0.0:
        a participation without noise against its clip, or Σ z⁻² past the floats: ε = ∞)."""
        worst = float(self.inv_sq.max(initial=0.0))
        if not worst > 0 and not np.isnan(worst):
            return None
        return 1.0 / math.sqrt(worst) if math.isfinite(worst) else 0.0

    def summary(self) -> dict:
        clips = self.clips_used
        out = {"recalls": int(self.recalls.sum()), "uploads": int((self.joined - self.recalls).sum()),
               "participations_max": int(self.joined.max(initial=0)),
               **clip_stats(clips)}
        if self.ledger is not None:
            out["budget"] = self.ledger.summary()
        return out


def clip_stats(values: list[float]) -> dict:
    if not values:
        return {}
    return {"clip_min": min(values), "clip_max": max(values), "clip_mean": float(np.mean(values)),
            "clip_last": values[-1]}


__all__ = ["StepLDP", "UpdateLDP", "batch_norms", "clip_stats"]
