"""The stacked trainer's first layer updated once every k steps (opt-in: `FEDEVO_FIRST_LAYER_WINDOW=k`, off by
default; fl/stacked.py's `_Bucket.loop`, docs/engine.md).

Where the step loop is bound by memory traffic rather than arithmetic (the reference MLP round on a GPU with TF32:
every step reads each client's first-layer weights W (C·784·200 floats) for the forward and reads and writes them
again for the update), the first layer's k updates of a window of steps can be one GEMM. Within a window that
starts with weights W, step j's first-layer pre-activation is, exactly,

    X_j·(W + Σ_{i<j} X_iᵀ·δ_i) = X_j·W + Σ_{i<j} (X_j·X_iᵀ)·δ_i,

so the window's inputs X = [X_0; …; X_{k−1}] (per client, its k batches' rows) multiply W once (Z = X·W, one GEMM
of k·b rows), each step adds the correction G_j·D_{<j} (G_j = X_j·X_{<j}ᵀ: a client's b × j·b Gram block, D the
window's first-layer δs kept so far) and keeps its own δ in D, and the window ends with W += Xᵀ·D (one GEMM over
the k·b rows). W is read twice and written once a window instead of read twice and written once a step; the cost
is the Gram blocks ((k−1)/2 · b·(d_in + d_out)/(d_in·d_out) of the first layer's forward multiply-adds a step on
average: +21 % of the reference round's step for k = 4) and three buffers of (C, k·b, ·). The numbers are the
plain loop's up to rounding (a reassociation of the same sums; tests/fl/test_stacked_window.py).

Only for a bucket without per-step hooks (their gradients are clipped per step) whose first layer has no SET mask
(a masked update M⊙(Xᵀδ) is no longer low-rank): `applies`. Measured (`benchmarks/cuda_population.py --window K`):
on an H100 with the schedule drawn on the GPU and TF32 the reference round 14.1 ms with k = 4 against 15.8 ms (the
best round so far), nothing gained in fp32 with the CPU engine's schedule; on the CPU, bound by arithmetic, slower
(benchmarks/results-2026-11-27-cuda-h100.txt, results-2026-11-27-first-layer-window-cpu.txt). It stays an opt-in:
a search's SET-masked first layers never use it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..envvars import env_count

VARIABLE = "FEDEVO_FIRST_LAYER_WINDOW"


def steps() -> int:
    """The window's steps: FEDEVO_FIRST_LAYER_WINDOW where set (a count; 1: every step, the plain loop), else 1."""
    return env_count(VARIABLE) or 1


def applies(hooked: bool, first_masked: bool) -> bool:
    """Whether a bucket may defer its first layer's updates: no per-step hook, no SET mask on the first layer."""
    return not hooked and not first_masked


class Window:
    """One window of steps of a bucket's first layer: its inputs gathered once, their product with the window's
    starting weights, the δs kept, and the update at its end.

    x: the training set (N, d_in) on the device; rows: the bucket's plan rows (steps' C·b slots, client-major
    within a step); off: the window's first slot; sizes: its steps' batch columns (`_Bucket.used`); W: the first
    layer's stacked weights (C, d_in, d_out), read here and updated by `update`; real: its columns that train
    (the rest, fl/stacked_bias.py's ones and zero units, are kept as they are), default all."""

    def __init__(self, x: torch.Tensor, rows: torch.Tensor, off: int, sizes: Sequence[int], C: int,
                 W: torch.Tensor, real: Optional[int] = None):
        spans, starts, o = [], [], 0
        for b in sizes:
            spans.append(rows[off:off + C * b].view(C, b))
            starts.append(o)
            off, o = off + C * b, o + b
        self.starts, self.sizes = starts, list(sizes)
        idx = spans[0] if len(spans) == 1 else torch.cat(spans, dim=1)  # (C, S): each client's window rows
        self.X = x.index_select(0, idx.reshape(-1)).view(C, o, x.shape[1])
        self.Z = torch.bmm(self.X, W)  # X·W, the window's pre-activations before its updates (no bias)
        # the δs; W's columns beyond `real` (the ones and zero units of fl/stacked_bias.py) get none: zeros there
        self.real = W.shape[2] if real is None else real
        new = torch.empty if self.real == W.shape[2] else torch.zeros
        self.D = new(C, o, W.shape[2], device=W.device, dtype=W.dtype)

    def input(self, j: int) -> torch.Tensor:
        """Step j's batch rows, (C, b, d_in) (a view)."""
        o = self.starts[j]
        return self.X[:, o:o + self.sizes[j]]

    def z(self, j: int) -> torch.Tensor:
        """Step j's first-layer pre-activation without the bias: X_j·W + (X_j·X_{<j}ᵀ)·D_{<j} (the first step's a
        view of Z, the others new tensors; the caller may change it in place)."""
        o, b = self.starts[j], self.sizes[j]
        if o == 0:
            return self.Z[:, :b]
        G = torch.bmm(self.input(j), self.X[:, :o].transpose(1, 2))  # (C, b, o): the Gram block
        return torch.baddbmm(self.Z[:, o:o + b], G, self.D[:, :o])

    def slot(self, j: int) -> torch.Tensor:
        """Where step j's first-layer δ (C, b, d_out) is kept (a view of D)."""
        o = self.starts[j]
        return self.D[:, o:o + self.sizes[j], :self.real]

    def update(self, W: torch.Tensor) -> None:
        """The window's first-layer updates at once: W += Xᵀ·D (δ carries −lr already)."""
        W.baddbmm_(self.X.transpose(1, 2), self.D)


__all__ = ["VARIABLE", "Window", "applies", "steps"]
