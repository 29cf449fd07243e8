"""The three objectives of the search and their worst values (what a failed, diverged or unbounded result
counts as); shared by the pymoo problem (:mod:`fedevo.searching.problem`) and the front / hypervolume
(:mod:`fedevo.searching.front_math`)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

OBJECTIVES = ("error", "comm", "eps")

# Worst values standing in for inf/NaN (and caps for finite values): error is at most 1; 1e9 parameters
# per round is far beyond any model here, and an ε of 1e9 means no privacy at all.
WORST = {"error": 1.0, "comm": 1e9, "eps": 1e9}
WORST_F = np.array([WORST[k] for k in OBJECTIVES])


def sanitize(objs: Sequence[float]) -> np.ndarray:
    """(error, comm, ε) with None/NaN/inf -> worst value and finite values clipped into [.., worst]."""
    out = np.empty(3)
    for j, v in enumerate(objs):
        v = math.nan if v is None else float(v)
        out[j] = WORST_F[j] if not math.isfinite(v) else min(v, WORST_F[j])
    return out
