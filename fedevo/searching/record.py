"""One evaluation as a search run records it: :class:`EvaluationRecord`, frozen (in the spirit of Optuna's
``FrozenTrial``).

It is the one type an evaluation has once it is logged: :class:`fedevo.searching.log.EvalLog` parses each row of
evaluations.csv into it, and its ``append`` returns the record of the row it wrote, exactly as it will be read
back; the search tells the optimiser from it, its callbacks get it
(``on_evaluation``), and every reader — the front, the hypervolume, picks, pages, retrain, the audit,
``fedevo.Run.evaluations`` — reads it. Its objective vector comes from one rule,
:meth:`fedevo.objectives.ObjectiveSet.vector_of` (the worst values included).

Fields: ``id``, ``generation`` (the batch it was asked in), ``index`` (its place in the batch), ``seed`` (the
evaluation seed), ``params`` (gene name → value), ``result`` (the :class:`~fedevo.result.EvaluationResult` as
logged: the fixed fields, no training state), ``objective_values`` (the raw value of each objective that has a column of
its own, e.g. ``worst_client_error``), and for a multi-fidelity search ``rung`` and ``fidelity`` (None in a plain
search, whose log has no such columns).

It is also a read-only mapping over the log's columns, so ``rec["error"]``, ``rec["lr"]`` (a gene),
``rec["worst_client_error"]`` and ``dict(rec)`` (a plain dict of the row, for JSON or pandas) read what the CSV
holds, by the same names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Optional

from ..result import EvaluationResult

# the evaluation's leading columns, then the genes, then these result columns, then one column per objective
# without one here, then (multi-fidelity) the rung columns: evaluations.csv's order (fedevo.searching.log)
HEAD_COLUMNS = ("id", "generation", "index", "seed")
RESULT_COLUMNS = ("error", "comm", "eps", "eps_paper", "accuracy_global", "omega", "status", "wall_s",
                  "rounds_trained", "privacy", "message")
RUNG_COLUMNS = ("rung", "fidelity")


def _result_cells(r: EvaluationResult) -> tuple:
    """RESULT_COLUMNS' values of a result, in order."""
    return (r.error, r.comm, r.eps, r.eps_paper, r.accuracy_global, r.omega, r.status, r.wall_s, r.rounds,
            r.privacy, r.message)


@dataclass(frozen=True, eq=False)
class EvaluationRecord(Mapping[str, Any]):
    """One logged evaluation (see the module doc). Equal to another record or mapping with the same columns (NaN equal to NaN)."""

    id: int
    generation: int
    index: int
    seed: int
    params: Mapping[str, Any]
    result: EvaluationResult
    objective_values: Mapping[str, Optional[float]] = field(default_factory=dict)
    rung: Optional[int] = None
    fidelity: Optional[float] = None

    def __post_init__(self):
        if not isinstance(self.result, EvaluationResult):
            raise TypeError(f"EvaluationRecord.result must be an EvaluationResult, got {type(self.result).__name__}")
        if (self.rung is None) != (self.fidelity is None):
            raise ValueError("EvaluationRecord: rung and fidelity go together (both None in a plain search)")
        clash = set(self.params) & set(self.objective_values)
        if clash:
            raise ValueError(f"EvaluationRecord: {sorted(clash)[0]!r} is both a gene and an objective")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "objective_values", MappingProxyType(dict(self.objective_values)))
        flat: dict[str, Any] = dict(zip(HEAD_COLUMNS, (self.id, self.generation, self.index, self.seed)))
        flat.update(self.params)
        flat.update(zip(RESULT_COLUMNS, _result_cells(self.result)))
        flat.update(self.objective_values)
        if self.rung is not None:
            flat.update(rung=self.rung, fidelity=self.fidelity)
        object.__setattr__(self, "_flat", flat)

    # ------------------------------------------------------------------ the common questions
    @property
    def status(self) -> str:
        """"ok", "diverged" or "failed"."""
        return self.result.status

    @property
    def ok(self) -> bool:
        return self.result.status == "ok"

    @property
    def full(self) -> bool:
        """Trained for all its rounds (always, in a plain search; the top rung in a multi-fidelity one): the rule of
        :func:`fedevo.searching.front_math.is_full`, which decides what enters the front."""
        from .front_math import is_full

        return is_full(self)

    def value(self, name: str) -> Optional[float]:
        """The raw value of objective (or column) `name`, as a float; None where it is empty or not a number."""
        v = self._flat.get(name)
        if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
            return None
        return None if math.isnan(float(v)) else float(v)

    # ------------------------------------------------------------------ the mapping over the log's columns
    def __getitem__(self, key: str) -> Any:
        return self._flat[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._flat)

    def __len__(self) -> int:
        return len(self._flat)

    def __eq__(self, other: object) -> bool:
        """The same columns with the same values, a NaN cell equal to a NaN cell (an undefined ε paper, a failed
        evaluation's objectives: the same record read twice was unequal to itself)."""
        if not isinstance(other, Mapping):
            return NotImplemented
        theirs = dict(other)
        return self._flat.keys() == theirs.keys() and all(_same(v, theirs[k]) for k, v in self._flat.items())

    __hash__ = None  # a mapping (as before: Mapping's)

    def __repr__(self) -> str:
        genes = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        rung = "" if self.rung is None else f", rung={self.rung}"
        return (f"EvaluationRecord(id={self.id}, generation={self.generation}, seed={self.seed}{rung}, "
                f"status={self.status!r}, error={self.result.error!r}, {genes})")

    def __reduce__(self):  # pickles by its fields (the flat view is derived)
        return (_rebuild, (self.id, self.generation, self.index, self.seed, dict(self.params), self.result,
                           dict(self.objective_values), self.rung, self.fidelity))


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _rebuild(*fields) -> EvaluationRecord:
    return EvaluationRecord(*fields)


__all__ = ["EvaluationRecord", "HEAD_COLUMNS", "RESULT_COLUMNS", "RUNG_COLUMNS"]
