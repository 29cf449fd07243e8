"""One objective: what it is called and measured in, how it is read from an evaluation, its worst value and the
transform the optimiser sees."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Optional

from ..errors import FedevoError

DIRECTIONS = ("minimize", "maximize")
# what run.json records of an objective (everything but `read`): a run's readers rebuild it without the user's code
RECORD_FIELDS = ("name", "label", "unit", "direction", "worst", "log", "floor", "lower", "upper", "description")


class ObjectiveError(FedevoError, ValueError):
    """An objective defined or registered wrongly: one line (a ValueError too, as before it was a FedevoError)."""


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
        def bad(why: str):
            raise ObjectiveError(f"objective {self.name!r}: {why}")
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ObjectiveError(f"objective name {self.name!r} must be an identifier (letters, digits, _)")
        if not callable(self.read):
            bad(f"read must be a function of an evaluation, got {self.read!r}")
        if self.direction not in DIRECTIONS:
            bad(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        for key in ("worst", "lower", "upper", "floor"):
            v = getattr(self, key)
            if (v is not None or key in ("worst", "floor")) and (
                    isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                bad(f"{key} must be a finite number, got {v!r}")
        if self.log and not (self.floor > 0 and self.worst > 0):
            bad("a log objective needs floor > 0 and worst > 0")
        if self.lower is not None and self.upper is not None and self.lower > self.upper:
            bad(f"lower = {self.lower:g} is above upper = {self.upper:g}")
        # the worst value must be at least as bad as every valid value: else it caps good values to itself and a
        # failed evaluation (every objective at its worst) ties with the best
        ends = ("lower", "upper") if self.maximize else ("upper", "lower")
        key = next((k for k in ends if getattr(self, k) is not None), None)
        if key is not None:
            far = getattr(self, key)
            if self.worst > far if self.maximize else self.worst < far:
                bad(f"worst = {self.worst:g} is better than {key} = {far:g}: a "
                    f"{'maximised' if self.maximize else 'minimised'} objective's worst must be "
                    f"{'<=' if self.maximize else '>='} every value it can take")

    @property
    def maximize(self) -> bool:
        return self.direction == "maximize"

    @property
    def heading(self) -> str:
        """Its label with its unit, as a page's axis or a table's column names it: "latency (ms)"."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

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
        """The raw value within a constraint: ``<= bound`` (``>=`` for a maximised objective). A value the worst
        value stands in for (None, NaN, ±inf) meets no bound, and a finite value beyond the worst value is
        compared as it is: a bound at or above the worst value would otherwise let every one of them through."""
        v = math.nan if v is None else float(v)
        if not math.isfinite(v):
            return False
        return v >= float(bound) if self.maximize else v <= float(bound)

    def best_search_value(self) -> float:
        """The best value on the optimiser's scale that the valid range allows (0 where it does not say): the
        hypervolume's fallback normalisation."""
        best = self.upper if self.maximize else self.lower
        return self.search_value(0.0 if best is None else best)

    def value(self, result: Any) -> Optional[float]:
        """The raw value of one evaluation as a float (None where undefined): ``row[name]`` of a logged row (a
        mapping), else read(result)."""
        v = result.get(self.name) if isinstance(result, Mapping) else self.read(result)
        if v is None:
            return None
        if isinstance(v, (str, bytes, bool)):  # "0.3" is not taken for 0.3, nor True for 1
            raise TypeError(f"returned {v!r}; expected a number or None")
        return float(v)

    def outside(self, v: Optional[float]) -> Optional[str]:
        """Why a finite raw value lies outside the objective's valid range, or None (None, NaN and ±inf are the
        worst value's to stand in for)."""
        if v is None or not math.isfinite(v):
            return None
        if (self.lower is not None and v < self.lower) or (self.upper is not None and v > self.upper):
            lo = "-inf" if self.lower is None else f"{self.lower:g}"
            hi = "inf" if self.upper is None else f"{self.upper:g}"
            return f"{v!r} is outside its range [{lo}, {hi}]"
        return None

    def record(self) -> dict[str, Any]:
        """What run.json records of it (no code): enough for every reader of a run."""
        return {k: getattr(self, k) for k in RECORD_FIELDS}

    def linear(self) -> "Objective":
        """The same objective seen without its log transform (checkpoints made before log ε: ``eps_scale``)."""
        return replace(self, log=False) if self.log else self
