"""SET sparsity (Mocanu et al. 2018; seed 004 §2.2 eq. 2).

Each fully-connected weight matrix n_in × n_out is an Erdős–Rényi mask with connection probability
ε = α(n_in + n_out)/(n_in·n_out), capped at 1. The connection count is drawn exactly (round(ε·n_in·n_out)),
so Ω is a deterministic function of the architecture and α, and prune/regrow keeps it constant.
Conv layers and biases stay dense (a user model's Conv2d weights are masked too with `sparse_conv`, drawn as a
(c_out) × (c_in·k·k) matrix and kept in the weight's own shape; docs/models.md).
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from .layout import density


def erdos_renyi_masks(shapes: list[tuple], weight_ids: tuple, alpha: Optional[float],
                      gen: torch.Generator) -> dict[int, torch.Tensor]:
    """{param index: float mask} for the FC weights; empty when dense (alpha None) or when every density is 1."""
    masks = {}
    if alpha is None:
        return masks
    for i in weight_ids:
        s = tuple(shapes[i])  # (n_in, n_out) of a built-in FC weight; a user module's Linear (out, in) or Conv2d
        n_in, n_out = s[0], math.prod(s[1:])  # (c_out, c_in, k, k): ER's formula is symmetric in the two
        total = n_in * n_out
        k = mask_count(alpha, n_in, n_out)
        if k >= total:
            continue
        m = torch.zeros(total)
        m[torch.randperm(total, generator=gen)[:k]] = 1.0
        masks[i] = m.view(s)  # (a conv weight's mask in its own 4-D shape: it multiplies the weight)
    return masks


def mask_count(alpha: float, n_in: int, n_out: int) -> int:
    """Connections an (n_in, n_out) layer keeps under Erdős–Rényi density `alpha` (≥ 1; all of them when the
    density reaches 1). SET's prune/regrow keeps each layer's count, so it holds for every round."""
    return min(n_in * n_out, max(1, round(density(alpha, n_in, n_out) * n_in * n_out)))


def planned_omega(shapes: list[tuple], weight_ids: tuple, alpha: Optional[float]) -> int:
    """Ω, the active parameters every round, from the shapes and α alone: what `omega` gives for the masks
    `erdos_renyi_masks` draws (any generator) and for every round after SET's prune/regrow."""
    total = 0
    for i, s in enumerate(shapes):
        n = math.prod(s)
        if alpha is not None and i in weight_ids:
            n = mask_count(alpha, s[0], math.prod(s[1:]))
        total += int(n)
    return total


def omega(shapes: list[tuple], masks: dict[int, torch.Tensor]) -> int:
    """Active parameters: mask ones for masked weights, everything else dense."""
    total = 0
    for i, s in enumerate(shapes):
        total += int(masks[i].sum().item()) if i in masks else int(torch.Size(s).numel())
    return total


def prune_keys(mag: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """One int64 sort key per weight: |update| `mag` first, a random `r` in [0, 1) among equal sizes, so ties (all-zero
    updates; equal non-zero sizes, as sign-based updates give) are broken at random and pruning carries no
    positional bias. A random term added to |update| vanished below fp32 resolution for equal non-zero sizes,
    pruning them as one contiguous block. Both are non-negative fp32, whose bit patterns order as their values;
    one stable argsort of these keys (equal keys, equal draws among equal sizes, in index order) costs less than
    the one of |update| did (benchmarks/prune_sort.py)."""
    hi = mag.float().contiguous().view(torch.int32).to(torch.int64)
    lo = r.float().contiguous().view(torch.int32).to(torch.int64)
    return (hi << 31) | lo


def prune_regrow(params: list[torch.Tensor], masks: dict[int, torch.Tensor], update: list[torch.Tensor],
                 xi: float, gen: torch.Generator) -> None:
    """In place: drop the fraction xi of active weights with the smallest |update|, regrow as many at random
    inactive positions (new weights start at 0), keeping each layer's connection count."""
    if xi <= 0:
        return
    for i, m in masks.items():
        flat_m = m.view(-1)
        active = flat_m.nonzero().squeeze(1)
        n_drop = int(xi * active.numel())
        inactive = (flat_m == 0).nonzero().squeeze(1)
        n_drop = min(n_drop, inactive.numel())
        if n_drop == 0:
            continue
        mag = update[i].reshape(-1)[active].abs()
        order = torch.argsort(prune_keys(mag, torch.rand(mag.shape, generator=gen).to(mag.device)), stable=True)
        drop = active[order[:n_drop]]
        grow = inactive[torch.randperm(inactive.numel(), generator=gen)[:n_drop]]
        flat_m[drop] = 0.0
        flat_m[grow] = 1.0
        w = params[i].view(-1)
        w[drop] = 0.0
        w[grow] = 0.0
