"""A deterministic sample of a run's evaluations by id: the k whose SHA-256 of (seed, id) is lowest.

What importance.html fits its forests to and draws beyond a count (fedevo.viz.importance: FIT_MAX, DRAW_MAX):
the same evaluations on every write of the same run with the same seed, whatever their order; as a run grows, an
evaluation leaves the sample only for a new one that hashes lower, so a page written later keeps most of its
points. Uniform over the ids: no generation, front or value is favoured."""

from __future__ import annotations

import hashlib
from typing import Sequence


def sample(ids: Sequence[int], k: int, seed: int = 0) -> list[int]:
    """Positions in `ids` of the sample of k, ascending; every position when there are k or fewer."""
    if len(ids) <= k:
        return list(range(len(ids)))
    rank = sorted(range(len(ids)), key=lambda i: (hashlib.sha256(f"{seed}:{ids[i]}".encode()).digest(), i))
    return sorted(rank[:k])


__all__ = ["sample"]
