"""One evaluation's round of local training as the stacked trainers take it (fl/stacked.py's MLP `Member`,
fl/stacked_cnn.py's `CNNMember`): what every model family's member holds."""

from __future__ import annotations

from dataclasses import dataclass, field


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


__all__ = ["LocalRound"]
