"""A search's objectives in order, and the one rule for its objective vector."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from .objective import Objective
from .registry import get


def default_names(eps_objective: str = "eps") -> tuple[str, ...]:
    """The objectives of a problem that names none: error, comm and its ε (``eps_objective``)."""
    return ("error", "comm", eps_objective)


@dataclass(frozen=True)
class ObjectiveSet:
    """The objectives of one search, in order (2 to 5 of them)."""

    objectives: tuple[Objective, ...]

    @classmethod
    def of(cls, names: Iterable[str]) -> "ObjectiveSet":
        return cls(tuple(get(n) for n in names))

    def __len__(self) -> int:
        return len(self.objectives)

    def __iter__(self):
        return iter(self.objectives)

    def __getitem__(self, i):
        return self.objectives[i]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.objectives)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def raw(self, result: Any) -> dict[str, Any]:
        """{name: raw value} of one evaluation (what the log writes)."""
        return {o.name: o.value(result) for o in self.objectives}

    def sanitized(self, values: Mapping[str, Any]) -> np.ndarray:
        """Raw values (a row or ``raw()``'s dict) with the worst-value rule applied, on their own scale."""
        return np.array([o.sanitize(values.get(o.name)) for o in self.objectives], dtype=float)

    def worst_vector(self) -> np.ndarray:
        """The search-space vector of a failed or diverged evaluation: every objective at its worst."""
        return np.array([o.search_value(o.worst) for o in self.objectives], dtype=float)

    def search_vector(self, values: Mapping[str, Any], status: str = "ok") -> np.ndarray:
        """What the optimiser minimises for one evaluation: the worst vector unless status is ok."""
        if status != "ok":
            return self.worst_vector()
        return np.array([o.search_value(values.get(o.name)) for o in self.objectives], dtype=float)

    def search_matrix(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """search_vector of each row (its ``status`` respected), as an n x len(self) matrix."""
        return np.array([self.search_vector(r, r.get("status", "ok")) for r in rows],
                        dtype=float).reshape(len(rows), len(self))
