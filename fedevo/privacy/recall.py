"""ULDP-FED recall (seed 000 Alg. 1, lines 22–27): similarities (eqs. 11–13) and the store of noisy updates.

If sim(Δ̃ᵢᵗ, Δ̃ᵗ⁻¹) < τ the client sends the index (i, k) of its stored noisy update most similar to the last
global noisy update Δ̃ᵗ⁻¹, and the server uses that copy. Memory: the paper searches every earlier update
(up to r = 50 per user: 1000 users × 50 × 200k params × 4 B = 40 GB at float32). `RecallStore` keeps a
bounded window of the last H uploads per client as float16, allocated on a client's first upload:
worst case num_clients × H × P × 2 B (1000 × 4 × 200k × 2 B = 1.6 GB). Only add updates the server
actually received: recalling a copy that was never delivered (or a recalled round's unsent Δ̃) would
release new information under a round that was charged nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional

import numpy as np
import torch

from fedevo import native
from fedevo.errors import FedevoError

Similarity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def _check(a: torch.Tensor, b: torch.Tensor) -> None:
    if b.dim() != 1 or a.dim() < 1 or a.shape[-1] != b.shape[0]:
        raise FedevoError(f"similarity needs a (..., P) and b (P,), got {tuple(a.shape)} and {tuple(b.shape)}")


def sign_agreement(a: torch.Tensor, b: torch.Tensor, idx: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Eq. 11: fraction of the l coordinates where sgn(a_j) = sgn(b_j), sgn ∈ {−, 0, +} (zeros match zeros,
    as the paper defines it, so structural zeros of a sparse model count as agreement). a (..., P), b (P,)
    → (...), in [0, 1]. idx: only these coordinates count (l = len(idx)). One native pass where the kernels are
    there (fp32 or fp16 a on the CPU; same values as the torch expression below)."""
    _check(a, b)
    k = native.load()
    if (k is not None and a.device.type == "cpu" and a.dtype in (torch.float32, torch.float16)
            and b.dtype == torch.float32 and b.device.type == "cpu"):
        a2, b2 = a.reshape(-1, a.shape[-1]).contiguous(), b.contiguous()
        ix = None if idx is None else idx.to(torch.int64).contiguous()
        counts = torch.empty(a2.shape[0], dtype=torch.int64)
        n = b.shape[0] if ix is None else len(ix)
        if k.sign_agree(a2.data_ptr(), int(a.dtype == torch.float16), a2.shape[0], a2.shape[1], b2.data_ptr(),
                        0 if ix is None else ix.data_ptr(), n, counts.data_ptr()) == 0:
            return (counts.to(torch.float32) / n).reshape(a.shape[:-1])
    if idx is not None:
        a, b = a[..., idx], b[idx]
    return (torch.sign(a) == torch.sign(b)).sum(-1, dtype=torch.float32) / b.shape[0]


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eq. 13: a·b / (‖a‖·‖b‖) in float32; 0 when either vector is zero. a (..., P), b (P,) → (...)."""
    _check(a, b)
    a32, b32 = a.float(), b.float()
    denom = torch.linalg.vector_norm(a32, dim=-1) * torch.linalg.vector_norm(b32)
    return torch.where(denom > 0, (a32 @ b32) / denom.clamp_min(1e-30), torch.zeros_like(denom))


SIMILARITIES: dict[str, Similarity] = {"sign": sign_agreement, "cosine": cosine}


def similarity_over(similarity: str | Similarity, a: torch.Tensor, b: torch.Tensor,
                    idx: Optional[torch.Tensor] = None) -> torch.Tensor:
    """similarity(a, b) over the coordinates idx only (None: all), without gathering copies for eq. 11."""
    sim = similarity_fn(similarity)
    if sim is sign_agreement:
        return sign_agreement(a, b, idx)
    return sim(a, b) if idx is None else sim(a[..., idx], b[idx])


def similarity_fn(similarity: str | Similarity) -> Similarity:
    """'sign' (eq. 11) or 'cosine' (eq. 13), or a callable with the same contract."""
    if callable(similarity):
        return similarity
    if similarity not in SIMILARITIES:
        raise FedevoError(f"similarity must be one of {sorted(SIMILARITIES)}, got {similarity!r}")
    return SIMILARITIES[similarity]


class Match(NamedTuple):
    found: torch.Tensor  # (n,) bool: client had a stored update
    updates: torch.Tensor  # (n, P) float32: the best stored update (zeros where not found)
    slots: torch.Tensor  # (n,) int64: its ring slot (the index k the client sends), −1 where not found


class _History:
    __slots__ = ("buf", "count", "next")

    def __init__(self, window: int, num_params: int, dtype: torch.dtype, device):
        self.buf = torch.empty(window, num_params, dtype=dtype, device=device)
        self.count = 0  # valid rows
        self.next = 0  # ring position of the next write


class RecallStore:
    """Last `window` noisy uploads per client, in one (window, P) ring buffer per client that has uploaded."""

    def __init__(self, num_params: int, window: int = 4, dtype: torch.dtype = torch.float16, device="cpu"):
        if isinstance(num_params, bool) or not isinstance(num_params, (int, np.integer)) or num_params < 1:
            raise FedevoError(f"num_params must be an integer >= 1, got {num_params!r}")
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise FedevoError(f"window must be an integer >= 1, got {window!r}")
        if not dtype.is_floating_point:
            raise FedevoError(f"dtype must be a floating dtype, got {dtype}")
        self.num_params, self.window, self.dtype, self.device = int(num_params), int(window), dtype, device
        self._hist: dict[int, _History] = {}

    @staticmethod
    def worst_case_nbytes(*, num_clients: int, num_params: int, window: int = 4,
                          dtype: torch.dtype = torch.float16) -> int:
        """Bytes once every client has uploaded: num_clients × window × num_params × itemsize."""
        return num_clients * window * num_params * torch.empty(0, dtype=dtype).element_size()

    @property
    def nbytes(self) -> int:
        """Bytes held by the update buffers now."""
        return sum(h.buf.nbytes for h in self._hist.values())

    def __len__(self) -> int:
        return len(self._hist)

    def count(self, client: int) -> int:
        h = self._hist.get(int(client))
        return 0 if h is None else h.count

    def add(self, client_ids: Sequence[int] | np.ndarray | torch.Tensor, updates: torch.Tensor) -> None:
        """Store each client's delivered noisy update (n, P); the oldest of a full window is overwritten."""
        ids = _as_ids(client_ids)
        if updates.dim() != 2 or updates.shape != (len(ids), self.num_params):
            raise FedevoError(f"updates must have shape ({len(ids)}, {self.num_params}), got {tuple(updates.shape)}")
        big = torch.finfo(self.dtype).max
        if len(ids) and not float(updates.detach().abs().amax()) <= big:  # checked before the cast: fp16 ops are slow
            raise FedevoError(f"updates are non-finite or overflow {self.dtype} (|x| must be <= {big})")
        low = updates.detach().to(device=self.device, dtype=self.dtype)
        for row, cid in enumerate(ids):
            h = self._hist.get(cid)
            if h is None:
                h = self._hist[cid] = _History(self.window, self.num_params, self.dtype, self.device)
            h.buf[h.next].copy_(low[row])
            h.next = (h.next + 1) % self.window
            h.count = min(h.count + 1, self.window)

    def history(self, client: int) -> torch.Tensor:
        """A client's stored updates as float32 (h, P), in slot order (not age order)."""
        h = self._hist.get(int(client))
        if h is None:
            return torch.zeros(0, self.num_params)
        return h.buf[: h.count].float()

    def get(self, client: int, slot: int) -> torch.Tensor:
        """The stored update at (client, slot) as float32 — what the server uses when it receives (i, k)."""
        h = self._hist.get(int(client))
        if h is None or not 0 <= slot < h.count:
            raise FedevoError(f"no stored update for client {client} slot {slot}")
        return h.buf[slot].float()

    def best_match(self, client_ids, target: torch.Tensor, similarity: str | Similarity = "sign") -> Match:
        """For each client, its stored update most similar to `target` (P,) (eq. 12 / 13 over its history).
        Clients with no history get found=False and must upload normally."""
        ids = _as_ids(client_ids)
        sim = similarity_fn(similarity)
        target = target.detach().to(device=self.device, dtype=torch.float32)
        found = torch.zeros(len(ids), dtype=torch.bool)
        slots = torch.full((len(ids),), -1, dtype=torch.int64)
        out = torch.zeros(len(ids), self.num_params, dtype=torch.float32)
        for row, cid in enumerate(ids):  # one (h, P) block at a time: no (n, H, P) float32 temporary
            h = self._hist.get(cid)
            if h is None or h.count == 0:
                continue
            block = h.buf[: h.count]
            if sim is not sign_agreement or native.load() is None:  # the eq. 11 kernel reads float16; torch's CPU
                block = block.float()  # half-precision kernels are slow
            k = int(torch.argmax(sim(block, target)))
            found[row], slots[row] = True, k
            out[row] = block[k].float().cpu()
        return Match(found, out, slots)


def _as_ids(client_ids) -> list[int]:
    if isinstance(client_ids, torch.Tensor):
        client_ids = client_ids.tolist()
    ids = [int(c) for c in np.atleast_1d(np.asarray(client_ids))]
    if any(c < 0 for c in ids):
        raise FedevoError(f"client ids must be >= 0, got {ids!r}")
    return ids


__all__ = ["sign_agreement", "cosine", "similarity_fn", "similarity_over", "SIMILARITIES", "Match", "RecallStore"]
