"""When a search stops: the first budget reached ends it.

* ``gen``: --gen batches (generations) of --pop candidates have run;
* ``budget``: --budget N evaluations (individuals asked; a multi-fidelity individual counts once, whatever rungs
  it reached); the last batch is cut to what is left of N;
* ``time_budget``: --time-budget S seconds of search wall time, counted across resumes (the checkpoint carries
  the seconds so far); checked between batches, so a batch that has started is finished;
* ``patience``: --patience K batches in a row without hypervolume growth (the run's hypervolume.csv value);
* ``exhausted``: the optimiser proposed nothing new (NSGA-III: no non-duplicate offspring).

The reason is kept in the checkpoint (``stop``) and in the run directory's ``stop.json`` (written when the search
stops: reason, batches, evaluations, search seconds and the budgets), and reported in the Summary; `fedevo resume`
reads the budgets from run.json, so it honours them (a run stopped by a budget is finished).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from ..errors import FedevoError

REASONS = {
    "gen": "--gen batches done",
    "budget": "--budget evaluations reached",
    "time_budget": "--time-budget seconds reached",
    "patience": "--patience batches without hypervolume growth",
    "exhausted": "the optimiser proposed no new candidates",
}
STOP_FILE = "stop.json"


def check_budgets(budget: Any, time_budget: Any, patience: Any) -> None:
    """FedevoError (one line) for a budget that is not a positive number."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise FedevoError(f"--budget must be a whole number of evaluations >= 1, got {budget!r}")
    if time_budget is not None and (isinstance(time_budget, bool) or not isinstance(time_budget, (int, float))
                                    or not math.isfinite(time_budget) or time_budget <= 0):
        raise FedevoError(f"--time-budget must be a number of seconds > 0, got {time_budget!r}")
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int) or patience < 1):
        raise FedevoError(f"--patience must be a whole number of batches >= 1, got {patience!r}")


def batch_size(settings, asked: int) -> int:
    """Candidates to ask for the next batch: --pop, cut to what is left of --budget."""
    n = settings.pop
    if settings.budget is not None:
        n = min(n, settings.budget - asked)
    return max(0, n)


def stagnant(hypervolumes: Sequence[float], patience: Optional[int]) -> bool:
    """True when the last `patience` batches did not grow the hypervolume."""
    if patience is None or len(hypervolumes) <= patience:
        return False
    return max(hypervolumes[-patience:]) <= hypervolumes[-patience - 1]


def stop_reason(settings, *, batches: int, asked: int, search_s: float,
                hypervolumes: Sequence[float] = ()) -> Optional[str]:
    """The budget that ends the search now, or None to go on (checked in this order)."""
    if settings.budget is not None and asked >= settings.budget:
        return "budget"
    if batches >= settings.gen:
        return "gen"
    if settings.time_budget is not None and search_s >= settings.time_budget:
        return "time_budget"
    if stagnant(hypervolumes, settings.patience):
        return "patience"
    return None


def stop_record(reason: str, state: Mapping[str, Any], settings) -> dict[str, Any]:
    return {"reason": reason, "why": REASONS.get(reason, reason), "batches": state["generation"],
            "evaluations": state["next_id"], "search_s": round(float(state.get("search_s", 0.0)), 3),
            "budgets": {"gen": settings.gen, "pop": settings.pop, "budget": settings.budget,
                        "time_budget": settings.time_budget, "patience": settings.patience}}




DEFAULT_GEN = 4  # --gen when no budget says otherwise
OPEN_GEN = 1000  # --gen when only a time budget or patience bounds the search


def default_gen(gen: Optional[int], pop: int, budget: Optional[int], time_budget: Optional[float],
                patience: Optional[int]) -> int:
    """--gen as given; else enough batches for --budget (ceil(budget / pop)); else, with only --time-budget or
    --patience, OPEN_GEN batches (they end it first); else DEFAULT_GEN."""
    if gen is not None:
        return gen
    if budget is not None and isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1 \
            and isinstance(pop, int) and pop >= 1:
        return -(-budget // pop)
    if time_budget is not None or patience is not None:
        return OPEN_GEN
    return DEFAULT_GEN


__all__ = ["DEFAULT_GEN", "OPEN_GEN", "REASONS", "STOP_FILE", "batch_size", "check_budgets", "default_gen", "stagnant",
           "stop_reason", "stop_record"]
