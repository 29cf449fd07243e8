"""One evaluation's round of local training as the stacked trainers take it (fl/stacked.py's MLP `Member`,
fl/stacked_cnn.py's `CNNMember`): what every model family's member holds, and what both trainers do with a
bucket of them alike (the members' client slots, their size classes, their per-step hooks as one)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..privacy.mechanisms import batch_norms


@dataclass(eq=False)  # members hold tensors: compared by identity
class LocalRound:
    """params: the global model's parameters in the model's order; masks: {parameter index: 0/1 mask} (SET); lr;
    chunks: each chunk's clients as arrays of rows of the training set; seeds: each chunk's seed; epochs and
    batch_size; clients: how many arrived (all chunks')."""
    params: list
    masks: dict
    lr: float
    chunks: list
    seeds: list
    epochs: int
    batch_size: int
    clients: int = field(init=False)

    def __post_init__(self):
        self.clients = sum(len(c) for c in self.chunks)


def steps_of(m: LocalRound) -> int:
    """Local steps of the member's longest client."""
    return max((m.epochs * -(-len(ix) // m.batch_size) for ch in m.chunks for ix in ch), default=0)


def client_spans(members: Sequence[LocalRound]) -> list[slice]:
    """Each member's clients' slots in a bucket's stacked state, members in order."""
    out, k = [], 0
    for m in members:
        out.append(slice(k, k + m.clients))
        k += m.clients
    return out


def size_class(n: int) -> int:
    """The power-of-two class of a width n ≥ 1 (2^(c-1) < n ≤ 2^c): members of one class pad to at most twice their
    width."""
    return int(max(n, 1) - 1).bit_length()


class MemberHooks:
    """A bucket's members' per-step hooks (each `privatizer.for_group`'s, made for its own clients) as one for the
    bucket's clients: each member's coefficients for its clients' rows (StepLDP's from the norms of their gradients,
    computed once for the bucket). The trainers add the noise (`after_step`) on views of each member's own shapes."""

    def __init__(self, members: Sequence[LocalRound]):
        self.members = members
        self.spans = client_spans(members)
        self.needs_norms = any(getattr(m.hook, "needs_norms", True) for m in members)

    def coefficients(self, grads, active, lr=None, norms=None) -> torch.Tensor:
        """(clients,): each member's hook's coefficients for its clients (its own lr; `lr` is unused)."""
        if norms is None and self.needs_norms:
            norms = batch_norms(grads)
        return torch.cat([m.hook.coefficients(None, active[sl], float(m.lr),
                                              norms=None if norms is None else norms[sl])
                          for m, sl in zip(self.members, self.spans)])


__all__ = ["LocalRound", "MemberHooks", "client_spans", "size_class", "steps_of"]
