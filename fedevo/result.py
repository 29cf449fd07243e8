"""What one evaluation returns: the measured values every objective reads (fedevo.objectives), plus what a user
needs to trust them."""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Optional

STATUSES = ("ok", "diverged", "failed")


@dataclass(frozen=True)
class EvaluationResult:
    error: float  # f1: 1 - mean per-client test accuracy
    comm: float  # f2: parameters uploaded per round per client slot (Ω·C for full uploads)
    eps: Optional[float]  # f3: accountant's bound for the mechanism as implemented (inf: no privacy)
    eps_paper: Optional[float]  # the paper's closed form, for comparison with the published tables
    accuracy_global: float  # accuracy of the global model on the whole test set
    omega: int  # active parameters of the global model
    status: str = "ok"
    wall_s: float = 0.0
    rounds: int = 0
    accuracy_curve: tuple = ()  # mean client accuracy after each evaluated round (retrain curves)
    privacy: dict = field(default_factory=dict)  # recalls, clip thresholds, budgets, accounting level...
    message: str = ""
    engine: dict = field(default_factory=dict)  # compute precision and why, CPU, kernels (fedevo.hardware)
    # the mean test error of the worst-served 10 % of clients (objective worst_client_error); None: not measured
    worst_client_error: Optional[float] = None
    # multiply-adds a participating client spends on local training in one round (objective train_macs)
    train_macs: Optional[float] = None
    metrics: dict = field(default_factory=dict)  # any other number the evaluator measured (a user objective reads it)
    # the training state after `rounds` of fewer than the planned rounds (evaluate(..., until=)): continue it
    # exactly with evaluate(..., resume_from=state); never written to a log
    state: Optional[bytes] = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"status {self.status!r} is not one of {', '.join(STATUSES)}")

    MEASURED = ("error", "comm", "eps", "eps_paper", "accuracy_global")  # what an evaluation that is not ok lacks

    def reported(self) -> "EvaluationResult":
        """The result as every reader reports it (the run's log, `fedevo evaluate`): one that is not ok measured
        nothing, so its MEASURED values are NaN (a diverged model's stand-ins, error 1 and ε = inf, are the
        search's worst values, not results: they read as a model and as 'no privacy'). An ok one is itself."""
        if self.status == "ok":
            return self
        return replace(self, **{k: math.nan for k in self.MEASURED})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("state", None)
        d["accuracy_curve"] = list(self.accuracy_curve)
        return d


def _scalar(v: Any) -> Any:
    """A numpy scalar, a 0-d array or a 0-d tensor as its Python value (`.item()`); anything else as it is."""
    if getattr(v, "shape", None) == () and callable(getattr(v, "item", None)):
        return v.item()
    return v


def _real(v: Any, what: str) -> float:
    """A real number as a float (an int, a float, a numpy scalar, a 0-d array or tensor); TypeError otherwise (a
    bool, a str, None, an array of several values)."""
    v = _scalar(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{what} must be a number, got {v!r}")
    return float(v)


class NotAResult(TypeError):
    """What an evaluator returned is not a result: one line, "TypeError: ..." or "ValueError: ...", saying what is
    wrong with it (a run logs the evaluation failed with that line alone: no traceback, which would show only
    where fedevo found it out)."""


def coerce_result(value: Any) -> EvaluationResult:
    """`_coerce` (below); what is wrong with `value` raised as NotAResult (a TypeError)."""
    try:
        return _coerce(value)
    except NotAResult:
        raise
    except (TypeError, ValueError) as e:
        raise NotAResult(f"{type(e).__name__}: {e}") from None


def measured(raw: Any, seconds: float, rounds: int) -> EvaluationResult:
    """What a user's evaluator returned (`raw`, read by coerce_result) as its row records it: a dict, a tuple or a
    list, which carries no time and no rounds, gets the seconds fedevo measured around the call (`wall_s`) and the
    rounds it was asked for; an EvaluationResult keeps its own."""
    r = coerce_result(raw)
    return r if isinstance(raw, EvaluationResult) else replace(r, wall_s=seconds, rounds=rounds)


_NUMBER_FIELDS = ("error", "comm", "eps", "eps_paper", "accuracy_global", "worst_client_error", "train_macs",
                  "wall_s")


def _held_to_numbers(r: EvaluationResult) -> EvaluationResult:
    """An EvaluationResult as built (by fedevo's simulator or the user's code), its numbers by the one rule of
    `_real` (a str 'abc' as its error crashed a search writing its row; '0.3' was taken as 0.3; a 0-d tensor is
    its value): itself where every field already is a Python number."""
    changes: dict[str, Any] = {}
    for k in _NUMBER_FIELDS:
        v = getattr(r, k)
        if v is not None and type(v) is not float:
            changes[k] = _real(v, f"the evaluation's {k}")
    for k in ("omega", "rounds"):
        v = getattr(r, k)
        if type(v) is not int:
            changes[k] = _integer(v, f"the evaluation's {k}")
    metrics = _metrics(r.metrics, "the evaluation's")  # checked whatever their types
    if any(type(v) is not float for v in r.metrics.values()):
        changes["metrics"] = metrics
    return replace(r, **changes) if changes else r


def _integer(v: Any, what: str) -> int:
    """An integer as an int (a numpy one, a 0-d array or tensor included); TypeError otherwise (a bool, 2.5)."""
    v = _scalar(v)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{what} must be an integer, got {v!r}")
    return int(v)


def _metrics(m: Any, whose: str) -> dict[str, float]:
    """A result's metrics: a dict of named numbers, each a float (`_real`); TypeError otherwise."""
    if not isinstance(m, dict) or not all(isinstance(k, str) for k in m):
        raise TypeError(f"{whose} metrics must be a dict of named numbers, got {m!r}")
    return {k: _real(v, f"{whose} metrics[{k!r}]") for k, v in m.items()}


def _coerce(value: Any) -> EvaluationResult:
    """What a user's evaluator returned, as an EvaluationResult: itself, a mapping with `error`, `comm` and `eps`
    (None: no ε; and optionally `eps_paper`, `accuracy_global`, `omega`, `worst_client_error`, `train_macs`,
    `metrics` (a dict of numbers a user objective may read), `privacy`, `message`), or a tuple or a list (error,
    comm, eps). A number may be a numpy scalar or a 0-d array or tensor (its `.item()`); a bool or a string is not
    one. TypeError / ValueError with one line saying what is wrong (the evaluation is then marked failed)."""
    if isinstance(value, EvaluationResult):
        return _held_to_numbers(value)
    if isinstance(value, (tuple, list)):
        if len(value) != 3:
            raise TypeError(f"evaluator returned a {type(value).__name__} of {len(value)} values; expected "
                            "(error, comm, eps)")
        value = dict(zip(("error", "comm", "eps"), value))
    if not isinstance(value, dict):
        raise TypeError(f"evaluator returned {type(value).__name__}; expected an EvaluationResult, a dict with "
                        "error, comm and eps, or a tuple or a list (error, comm, eps)")
    missing = [k for k in ("error", "comm", "eps") if k not in value]
    if missing:
        raise TypeError(f"evaluator's result lacks {', '.join(missing)} (it has {', '.join(map(str, value)) or 'nothing'})")
    extra = set(value) - {"error", "comm", "eps", "eps_paper", "accuracy_global", "omega", "privacy", "message",
                          "worst_client_error", "train_macs", "metrics"}
    if extra:
        raise TypeError(f"evaluator's result has unknown key(s) {', '.join(sorted(map(str, extra)))}")

    def number(key: str, default: Any = None) -> Optional[float]:
        v = value.get(key, default)
        if v is None and default is None and key not in ("error", "comm", "eps"):
            return math.nan
        if v is None and key == "eps":  # no ε: an evaluation without a privacy guarantee to report
            return None
        v = _real(v, f"evaluator's {key}")
        if math.isnan(v) and key in ("error", "comm", "eps"):
            raise ValueError(f"evaluator's {key} is NaN")
        return v

    privacy = value.get("privacy", {})
    if not isinstance(privacy, dict):
        raise TypeError(f"evaluator's privacy must be a dict, got {type(privacy).__name__}")
    omega = _integer(value.get("omega", 0), "evaluator's omega")
    metrics = _metrics(value.get("metrics", {}), "evaluator's")
    optional = {k: number(k) if value.get(k) is not None else None for k in ("worst_client_error", "train_macs")}
    return EvaluationResult(error=number("error"), comm=number("comm"), eps=number("eps"),
                            eps_paper=number("eps_paper", math.nan), accuracy_global=number("accuracy_global", math.nan),
                            omega=omega, privacy=privacy, message=str(value.get("message", "")), metrics=dict(metrics),
                            **optional)
