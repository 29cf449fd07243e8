"""Server-side aggregation as pure functions (Flower style)."""

from __future__ import annotations

import torch


def weighted_mean(updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """FedAvg: Σ_k n_k·Δ_k / Σ_k n_k over the updates that arrived; updates (n, P), weights (n,)."""
    if updates.shape[0] != weights.shape[0] or updates.shape[0] == 0:
        raise ValueError("need one weight per update and at least one update")
    w = weights.to(updates.dtype)
    return (w @ updates) / w.sum()
