"""A search's objectives in order, and the one rule for its objective vector (worst values included): every
reader of an evaluation — the optimiser, the front, the hypervolume, picks, multi-fidelity promotion — goes
through :class:`ObjectiveSet`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from .objective import Objective, ObjectiveError
from .registry import from_record, get

MIN_OBJECTIVES, MAX_OBJECTIVES = 2, 5
# a constraint's violation (G > 0, on the optimiser's scale) for an evaluation that does not meet its bound where
# value - bound says nothing (a failure's worst value, or a value capped to it, at or under a bound set above it)
FAILED_VIOLATION = 1.0


def default_names(eps_objective: str = "eps") -> tuple[str, ...]:
    """The objectives of a problem that names none: error, comm and its ε (``eps_objective``)."""
    return ("error", "comm", eps_objective)


def _one(item: Union[str, Objective, Mapping[str, Any]]) -> Objective:
    if isinstance(item, Objective):
        return item
    if isinstance(item, Mapping):
        return from_record(item)
    return get(item)


@dataclass(frozen=True)
class ObjectiveSet:
    """The objectives of one search, in order (2 to 5 of them, names unique)."""

    objectives: tuple[Objective, ...]

    def __post_init__(self):
        names = [o.name for o in self.objectives]
        if not MIN_OBJECTIVES <= len(names) <= MAX_OBJECTIVES:
            raise ObjectiveError(f"a search has {MIN_OBJECTIVES} to {MAX_OBJECTIVES} objectives, got {len(names)} "
                             f"({', '.join(names) or 'none'})")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ObjectiveError(f"objective {dup[0]!r} is listed twice")

    @classmethod
    def of(cls, items: Iterable[Union[str, Objective, Mapping[str, Any]]]) -> "ObjectiveSet":
        """From names (the registry), Objectives, or run.json records (`Objective.record`)."""
        return cls(tuple(_one(i) for i in items))

    def __len__(self) -> int:
        return len(self.objectives)

    def __iter__(self):
        return iter(self.objectives)

    def __getitem__(self, i):
        return self.objectives[i]

    def __contains__(self, name) -> bool:
        return name in self.names

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.objectives)

    def index(self, name: str) -> int:
        return self.names.index(name)

    def by_name(self, name: str) -> Objective:
        return self.objectives[self.index(name)]

    def records(self) -> list[dict[str, Any]]:
        """What run.json records (``objective_specs``): every objective without its code."""
        return [o.record() for o in self.objectives]

    def linear(self) -> "ObjectiveSet":
        """The set without log transforms (checkpoints made before log ε: ``eps_scale = "linear"``)."""
        return ObjectiveSet(tuple(o.linear() for o in self.objectives))

    # ------------------------------------------------------------------ one evaluation
    def raw(self, result: Any) -> dict[str, Any]:
        """{name: raw value} of one evaluation (what the log writes); a logged row's own values for a mapping."""
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

    def vector_of(self, result: Any) -> np.ndarray:
        """search_vector of an evaluation: a logged row (``row[name]``) or a result (each objective's read)."""
        status = result.get("status", "ok") if isinstance(result, Mapping) else getattr(result, "status", "ok")
        if status != "ok":
            return self.worst_vector()
        return self.search_vector(self.raw(result))

    # ------------------------------------------------------------------ many rows
    def sanitized_matrix(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """sanitized() of each row, as an n x len(self) matrix (raw scale)."""
        return np.array([self.sanitized(r) for r in rows], dtype=float).reshape(len(rows), len(self))

    def search_matrix(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """search_vector of each row (its ``status`` respected), as an n x len(self) matrix."""
        return np.array([self.search_vector(r, r.get("status", "ok")) for r in rows],
                        dtype=float).reshape(len(rows), len(self))

    def fallback_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) on the optimiser's scale from the objectives' own best and worst values: the hypervolume's
        normalisation when no evaluation gives one."""
        a = np.array([o.best_search_value() for o in self.objectives])
        b = self.worst_vector()
        return np.minimum(a, b), np.maximum(a, b)

    # ------------------------------------------------------------------ constraints
    def constraint_items(self, constraints: Optional[Mapping[str, float]]) -> tuple[tuple[int, float], ...]:
        """[constraints] as (objective index, bound), in the set's order. A bound on ``eps`` binds the set's ε
        when it searches ``eps_paper`` instead (problem files before the objectives list wrote it so)."""
        out = {}
        for k, b in (constraints or {}).items():
            if k not in self.names and k == "eps" and "eps_paper" in self.names:
                k = "eps_paper"
            if k not in self.names:
                raise KeyError(f"[constraints] {k}: not one of the search's objectives ({', '.join(self.names)})")
            out[self.index(k)] = float(b)
        return tuple(sorted(out.items()))

    def constraint_terms(self, constraints: Optional[Mapping[str, float]]) -> list[tuple[str, bool, float]]:
        """[constraints] as (the key as written, whether the bound is a floor: ``>=`` for a maximised objective,
        the bound), for saying them: "acc >= 0.9", "eps <= 1"."""
        out = []
        for k, b in (constraints or {}).items():
            ((j, bound),) = self.constraint_items({k: b})
            out.append((k, self.objectives[j].maximize, bound))
        return out

    def feasible(self, row: Mapping[str, Any], constraints: Optional[Mapping[str, float]]) -> bool:
        """The row's raw values within every bound (``>=`` for a maximised objective; `Objective.satisfies`). A row
        whose status is not ok (failed, diverged) is never feasible, whatever the bounds."""
        if row.get("status", "ok") != "ok":
            return False
        return all(self.objectives[j].satisfies(row.get(self.objectives[j].name), b)
                   for j, b in self.constraint_items(constraints))

    def violations(self, values: Mapping[str, Any], constraints: Optional[Mapping[str, float]],
                   status: str = "ok") -> np.ndarray:
        """G of one evaluation, one per constraint in `constraint_items` order, on the optimiser's scale (<= 0
        feasible): its search value less the bound's. Where the evaluation does not meet a bound but that difference
        says it does — a failed or diverged evaluation (its worst values), or a value beyond a bound at or above its
        objective's worst value (both capped to it) — the violation is ``FAILED_VIOLATION``: a failure is never
        feasible, and `feasible` and G agree on every row."""
        out = []
        for j, b in self.constraint_items(constraints):
            o = self.objectives[j]
            v = values.get(o.name) if status == "ok" else None
            g = o.search_value(v) - o.search_bound(b)
            if g <= 0 and (status != "ok" or not o.satisfies(v, b)):
                g = FAILED_VIOLATION
            out.append(g)
        return np.array(out, dtype=float)


ObjectivesLike = Union[ObjectiveSet, str, Sequence[Union[str, Objective, Mapping[str, Any]]], None]


def as_set(objectives: ObjectivesLike, eps_key: str = "eps") -> ObjectiveSet:
    """An ObjectiveSet from what callers hold: a set, names / records, or an ε key (the default three: error,
    comm and that ε, as callers before the objectives list passed ``eps_key``); None: the default three."""
    if isinstance(objectives, ObjectiveSet):
        return objectives
    if objectives is None:
        return ObjectiveSet.of(default_names(eps_key))
    if isinstance(objectives, str):
        return ObjectiveSet.of(default_names(objectives))
    return ObjectiveSet.of(objectives)
