"""``--optimizer random``: uniform sampling of the search space, the baseline every other optimiser must beat.

Each candidate is drawn uniformly in the encoded box (:mod:`fedevo.searching.space`: a log gene log-uniformly;
an int or choice gene on its widened interval and rounded, so every integer and choice is equally likely), by a
numpy Generator seeded from (run seed, batch number): no state but the batch counter, so a resumed run draws
exactly what the uninterrupted one drew. It ignores what it is told. A warm start's genes (--init-from) are its
first candidates; the candidates asked so far are counted in its state for them."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .registry import register
from .base import Optimizer


def batch_rng(seed: int, batch: int, salt: int = 0) -> np.random.Generator:
    """The Generator of one batch: independent of every other batch, run seed and worker count."""
    return np.random.default_rng(np.random.SeedSequence([seed, batch, salt]))


@register
class RandomOptimizer(Optimizer):
    name = "random"
    summary = "uniform random sampling of the search space (the baseline)"

    asked = 0  # candidates asked (and told) so far: where a warm start's genes stand

    def ask(self, n: int) -> list[dict[str, Any]]:
        warm = self.warm(self.asked, int(n))
        rng = batch_rng(self.seed, self.batch)
        X = rng.uniform(self.space.xl, self.space.xu, size=(int(n) - len(warm), self.space.n_var))
        return warm + self.space.decode_batch(self.space.repair(X))

    def tell(self, params: Sequence[Mapping[str, Any]], F, G: Optional[np.ndarray] = None) -> None:
        self._check_told(params, F, G)
        self.batch += 1
        self.asked += len(params)

    def state(self) -> Any:
        return {"optimizer": self.name, "batch": self.batch, "asked": self.asked}

    def restore(self, state: Any) -> None:
        self.batch = int(state["batch"])
        self.asked = int(state.get("asked", 0))  # checkpoints made before warm starts: none to place

    def describe(self) -> dict[str, Any]:
        return {"name": "random sampling", "seed": self.seed, "batch_size": self.pop,
                "sampling": "uniform in the encoded space (log genes log-uniform; int/choice genes each value "
                            "equally likely), numpy Generator seeded by SeedSequence([seed, batch, 0])"}
