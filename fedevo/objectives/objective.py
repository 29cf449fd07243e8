"""One objective: what it is called and measured in, how it is read from an evaluation, its worst value and the
transform the optimiser sees."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional

DIRECTIONS = ("minimize", "maximize")
# what run.json records of an objective (everything but `read`): a run's readers rebuild it without the user's code
RECORD_FIELDS = ("name", "label", "unit", "direction", "worst", "log", "floor", "lower", "upper", "description")


@dataclass(frozen=True)
class Objective:
    """One objective of a search.

    name: its key (the problem file's ``objectives`` list, the evaluation log's column, picks' ``lowest-NAME`` and
    ``NAME<=X``); label / unit: what pages and tables print; read(result): the raw value of one evaluation
    (an :class:`~fedevo.result.EvaluationResult`), None where it is undefined; worst: the raw value that stands in
    for an undefined, NaN or infinite value (and caps finite values), and every objective of a failed or diverged
    evaluation; log: the optimiser sees log10(max(v, floor)) (values spanning orders of magnitude, as ε);
    lower / upper: the range a valid value lies in (a value outside it is the evaluator's error, not a result).
    """

    name: str
    label: str
    read: Callable[[Any], Optional[float]]
    worst: float
    unit: str = ""
    direction: str = "minimize"
    log: bool = False
    floor: float = 0.0
    lower: Optional[float] = None
    upper: Optional[float] = None
    description: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"objective name {self.name!r} must be an identifier (letters, digits, _)")
        if not callable(self.read):
            raise ValueError(f"objective {self.name!r}: read must be a function of an evaluation, got {self.read!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"objective {self.name!r}: direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if isinstance(self.worst, bool) or not isinstance(self.worst, (int, float)) or not math.isfinite(self.worst):
            raise ValueError(f"objective {self.name!r}: worst must be finite, got {self.worst!r}")
        if self.log and not (self.floor > 0 and self.worst > 0):
            raise ValueError(f"objective {self.name!r}: a log objective needs floor > 0 and worst > 0")

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"

    def sanitize(self, v: Any) -> float:
        """The raw value with None / NaN / ±inf replaced by the worst value and finite values capped at it."""
        v = math.nan if v is None else float(v)
        if not math.isfinite(v):
            return self.worst
        return max(v, self.worst) if self.maximize else min(v, self.worst)

    def search_value(self, v: Any) -> float:
        """What the optimiser minimises: the sanitised value, log10 for a log objective, negated if maximised."""
        s = self.sanitize(v)
        if self.log:
            s = math.log10(max(s, self.floor))
        return -s if self.maximize else s

    def search_bound(self, bound: float) -> float:
        """A constraint ``value <= bound`` (``>=`` for a maximised objective) on the optimiser's scale."""
        return self.search_value(bound)

    def satisfies(self, v: Any, bound: float) -> bool:
        """The sanitised value within a constraint: ``<= bound`` (``>=`` for a maximised objective)."""
        s = self.sanitize(v)
        return s >= float(bound) if self.maximize else s <= float(bound)

    def best_search_value(self) -> float:
        """The best value on the optimiser's scale that the valid range allows (0 where it does not say): the
        hypervolume's fallback normalisation."""
        best = self.upper if self.maximize else self.lower
        return self.search_value(0.0 if best is None else best)

    def value(self, result: Any) -> Optional[float]:
        """The raw value of one evaluation as a float (None where undefined): ``row[name]`` of a logged row (a
        mapping), else read(result)."""
        v = result.get(self.name) if isinstance(result, Mapping) else self.read(result)
        return None if v is None else float(v)

    def record(self) -> dict[str, Any]:
        """What run.json records of it (no code): enough for every reader of a run."""
        return {k: getattr(self, k) for k in RECORD_FIELDS}

    def linear(self) -> "Objective":
        """The same objective seen without its log transform (checkpoints made before log ε: ``eps_scale``)."""
        return replace(self, log=False) if self.log else self
