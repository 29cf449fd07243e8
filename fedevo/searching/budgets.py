"""When a search stops: the first budget reached ends it.

* ``gen``: --gen batches (generations) of --pop candidates have run -- only a --gen given: one derived from the
  other budgets (settings.gen_derived: ceil(budget / pop), or OPEN_GEN) is a count for displays, so that a batch
  NSGA-III returns short (duplicates removed) does not end a --budget search below N, nor OPEN_GEN batches a
  search only --time-budget or --patience bounds;
* ``budget``: --budget N evaluations (individuals asked; a multi-fidelity individual counts once, whatever rungs
  it reached); the last batch is cut to what is left of N;
* ``time_budget``: --time-budget S seconds of search wall time, counted across resumes (the checkpoint carries
  the seconds so far); checked between batches, so a batch that has started is finished;
* ``patience``: --patience K batches in a row without hypervolume growth (the run's hypervolume.csv value);
* ``exhausted``: the optimiser proposed nothing new (NSGA-III: no non-duplicate offspring).

The reason is kept in the checkpoint (``stop``) and in the run directory's ``stop.json`` (written when the search
stops: reason, batches, evaluations, search seconds and the budgets), and reported in the Summary; `fedevo resume`
reads the budgets from run.json, so it honours them (a run stopped by a budget is finished).

Raising them: `fedevo resume DIR --budget N` (also --gen, --time-budget, --patience) puts new budgets in force
for the rest of the search — each one given replaces the run's; --gen, when not given, no longer bounds the
search (it becomes enough batches for the rest of --budget, else open) — so a search an earlier budget ended goes
on from its newest checkpoint, as if it had been started with the new budgets. They are totals since the search
began (evaluations, batches, seconds of search), kept in ``budgets.json`` beside run.json (which never changes:
its bytes start the log's hash chain) with the history of raises, and read wherever run.json is
(:func:`fedevo.searching.rundata.read_run_json`). What ends a search is therefore derived again from the budgets in
force at each checkpoint (:func:`stop_in_force`); only an exhausted optimiser stays ended.
"""

from __future__ import annotations

import bisect
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import FedevoError, arg, resume_call

REASONS = {
    "gen": "--gen batches done",
    "budget": "--budget evaluations reached",
    "time_budget": "--time-budget seconds reached",
    "patience": "--patience batches without hypervolume growth",
    "exhausted": "the optimiser proposed no new candidates",
}
STOP_FILE = "stop.json"
DEFAULT_GEN = 4  # --gen when no budget says otherwise
OPEN_GEN = 1000  # the displays' --gen when only a time budget or patience bounds the search (not a cap)
BUDGETS_FILE = "budgets.json"  # the budgets in force after `fedevo resume --budget ...` (run.json's until then)
KEYS = ("gen", "budget", "time_budget", "patience")


def check_budgets(budget: Any, time_budget: Any, patience: Any) -> None:
    """FedevoError (one line) for a budget that is not a positive number."""
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
        raise FedevoError(f"{arg('budget')} must be a whole number of evaluations >= 1, got {budget!r}")
    if time_budget is not None and (isinstance(time_budget, bool) or not isinstance(time_budget, (int, float))
                                    or not math.isfinite(time_budget) or time_budget <= 0):
        raise FedevoError(f"{arg('time_budget')} must be a number of seconds > 0, got {time_budget!r}")
    if patience is not None and (isinstance(patience, bool) or not isinstance(patience, int) or patience < 1):
        raise FedevoError(f"{arg('patience')} must be a whole number of batches >= 1, got {patience!r}")


def batch_size(settings, asked: int) -> int:
    """Candidates to ask for the next batch: --pop, cut to what is left of --budget."""
    n = settings.pop
    if settings.budget is not None:
        n = min(n, settings.budget - asked)
    return max(0, n)


# growth of the hypervolume below this fraction of it counts as none for --patience: a new point in a corner of the
# front adding 6.6e-11 to 1.2 kept a --patience 3 search going for 320 batches (and, with no batch cap, for ever)
HV_GROWTH_TOL = 1e-6


def grew(new: float, old: float) -> bool:
    """The hypervolume `new` grew on `old` by more than HV_GROWTH_TOL of it (any growth from 0)."""
    return new > old + HV_GROWTH_TOL * abs(old)


def stagnant(hypervolumes: Sequence[float], patience: Optional[int]) -> bool:
    """True when the last `patience` batches did not grow the hypervolume (by more than HV_GROWTH_TOL of it)."""
    if patience is None or len(hypervolumes) <= patience:
        return False
    return not grew(max(hypervolumes[-patience:]), hypervolumes[-patience - 1])


def hv_steps(hypervolumes: Sequence[float], steps: Sequence[Sequence] = (), since: int = 0) -> list[list]:
    """The hypervolume after each batch as a checkpoint keeps it: [batch, value] at batch 1 and wherever the value
    changed (a batch that did not change the front repeats the one before), so that its size grows with the front's
    changes, not with the batches (a list of every batch's value made each checkpoint of a run of thousands of
    batches of one grow with its batches). `hypervolumes`: the values of batches `since` + 1, ... appended to
    `steps` (those of batches 1..`since`)."""
    out = [list(s) for s in steps]
    for b, v in enumerate(hypervolumes, start=since + 1):
        if not out or out[-1][1] != v:
            out.append([b, v])
    return out


def stagnant_steps(steps: Sequence[Sequence], batches: int, patience: Optional[int]) -> bool:
    """`stagnant` of the hypervolumes of batches 1..`batches` given as `hv_steps`."""
    if patience is None or batches <= patience or not steps:
        return False
    starts = [int(s[0]) for s in steps]

    def at(b: int) -> float:
        return steps[bisect.bisect_right(starts, b) - 1][1]

    first = batches - patience + 1  # the last `patience` batches: first..batches
    last = [at(first)] + [v for b, v in steps if first < b <= batches]
    return not grew(max(last), at(first - 1))


def stop_reason(settings, *, batches: int, asked: int, search_s: float,
                hypervolumes: Sequence[float] = (), hypervolume_steps: Optional[Sequence[Sequence]] = None
                ) -> Optional[str]:
    """The budget that ends the search now, or None to go on (checked in this order)."""
    if settings.budget is not None and asked >= settings.budget:
        return "budget"
    if batches >= settings.gen and not getattr(settings, "gen_derived", False):
        return "gen"
    if settings.time_budget is not None and search_s >= settings.time_budget:
        return "time_budget"
    if (stagnant(hypervolumes, settings.patience) if hypervolume_steps is None
            else stagnant_steps(hypervolume_steps, batches, settings.patience)):
        return "patience"
    return None


def stop_in_force(settings, state: Mapping[str, Any]) -> Optional[str]:
    """What ends the search at checkpoint `state` under the budgets of `settings`, or None to go on: an exhausted
    optimiser stays ended; a budget is derived again, so that budgets raised since the checkpoint let it go on."""
    if state.get("stopped_early"):
        return state.get("stop") or "exhausted"
    return stop_reason(settings, batches=state.get("generation", 0), asked=state.get("next_id", 0),
                       search_s=float(state.get("search_s", 0.0)), hypervolumes=state.get("hypervolumes", ()),
                       hypervolume_steps=state.get("hypervolume_steps"))  # (a checkpoint before the steps: the list)


def budgets_of(settings) -> dict[str, Any]:
    return {k: getattr(settings, k) for k in KEYS}


def _value(value: Any) -> str:
    return "none" if value is None else format(value, "g") if isinstance(value, float) else str(value)


def raised(settings, state: Mapping[str, Any], given: Mapping[str, Any], *, logged: int = 0):
    """The settings with the budgets `given` (not None) in force at checkpoint `state`: each replaces the run's;
    --gen, when not given, becomes derived (gen_derived: it no longer ends the search; its count for displays is
    enough batches for the rest of --budget, with one, or OPEN_GEN more). FedevoError (one line, nothing changed)
    for a bad value, for an optimiser that proposed nothing new, when a budget in force is reached already, or
    for a --budget below `logged`, the individuals the log holds (ids 0..logged-1): a process killed during a
    batch logged rows past its checkpoint, and a budget below them would leave rows the optimiser never saw in
    the run (and its next raise asking other genes for their ids)."""
    given = {k: v for k, v in given.items() if v is not None}
    unknown = set(given) - set(KEYS)
    if unknown:
        raise TypeError(f"not a budget: {sorted(unknown)}")
    check_budgets(given.get("budget"), given.get("time_budget"), given.get("patience"))
    if "gen" in given and (isinstance(given["gen"], bool) or not isinstance(given["gen"], int) or given["gen"] < 1):
        raise FedevoError(f"{arg('gen')} must be a whole number of batches >= 1, got {given['gen']!r}")
    if state.get("stopped_early"):
        raise FedevoError(f"the search ended because {REASONS['exhausted']}: a larger budget would not change "
                          "that (nothing was changed)")
    new = {**budgets_of(settings), **given}
    batches, asked = state.get("generation", 0), state.get("next_id", 0)
    if "budget" in given and asked < given["budget"] < logged:
        raise FedevoError(f"{arg('budget', given['budget'])} is below the {logged} evaluations this run has logged "
                          f"(its last process was stopped during a batch, after its checkpoint of {asked}): give "
                          f"{arg('budget', logged)} or more (nothing was changed)")
    if "gen" not in given:
        new["gen"] = (batches + -(-(new["budget"] - asked) // settings.pop) if new["budget"] is not None
                      and new["budget"] > asked else batches + OPEN_GEN)
    out = replace(settings, **new, gen_derived="gen" not in given)
    reason = stop_in_force(out, state)
    if reason:
        done = f"{asked} evaluations, {batches} batches, {float(state.get('search_s', 0.0)):.0f} s of search"
        raise FedevoError(f"{arg(reason, _value(new[reason]))} is reached already ({done}): give a larger one "
                          f"(budgets are totals since the search began; nothing was changed)")
    return out


def describe_change(before, after) -> str:
    """One line: the budgets that changed, old → new; not a --gen the user did not give (gen_derived: a count for
    the displays, which bounds nothing)."""
    derived = getattr(after, "gen_derived", False)
    parts = [f"{arg(k, _value(getattr(before, k)))} → {_value(getattr(after, k))}"
             for k in KEYS if getattr(before, k) != getattr(after, k) and not (k == "gen" and derived)]
    return ", ".join(parts) or "unchanged"


def write_raised(run_dir: Path, before, after, state: Mapping[str, Any]) -> None:
    """budgets.json: the budgets in force now, and this raise appended to the history."""
    from .log import atomic_write

    path = Path(run_dir) / BUDGETS_FILE
    history = read_raised(run_dir).get("raised", []) if path.exists() else []
    record = {"budgets": budgets_of(after), "gen_derived": bool(getattr(after, "gen_derived", False)),
              "raised": [*history, {"at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "batches": state.get("generation", 0),
                                    "evaluations": state.get("next_id", 0), "from": budgets_of(before),
                                    "to": budgets_of(after)}]}
    atomic_write(path, json.dumps(record, indent=2) + "\n")


def read_raised(run_dir: Path) -> dict[str, Any]:
    """budgets.json of a run ({} where none): FedevoError (one line) if it is not what write_raised writes."""
    path = Path(run_dir) / BUDGETS_FILE
    if not path.exists():
        return {}
    try:
        record = json.loads(path.read_text())
        if not isinstance(record, dict) or not isinstance(record.get("budgets"), dict) \
                or set(record["budgets"]) != set(KEYS) or not isinstance(record.get("raised"), list):
            raise ValueError("not a budgets record")
        b = record["budgets"]
        check_budgets(b["budget"], b["time_budget"], b["patience"])
        if isinstance(b["gen"], bool) or not isinstance(b["gen"], int) or b["gen"] < 1:
            raise ValueError(f"gen {b['gen']!r}")
    except (OSError, ValueError, FedevoError) as e:
        raise FedevoError(f"{path} is corrupt ({e}); delete it to go back to run.json's budgets") from None
    return record


def in_force(settings, run_dir: Path):
    """The settings with the budgets of the run's budgets.json, if any (run.json's otherwise)."""
    record = read_raised(run_dir)
    if not record:
        return settings
    derived = record.get("gen_derived")  # (budgets.json written before it: run.json's)
    return replace(settings, **record["budgets"],
                   **({"gen_derived": derived} if isinstance(derived, bool) else {}))


def read_stop(run_dir: Path) -> Optional[dict[str, Any]]:
    """The run's stop.json (stop_record: `reason`, `why`, `batches`, `evaluations`, `search_s`, `budgets`), or None
    while the search has not ended (or one that cannot be read).

    A stop.json written under other budgets than budgets.json's is None too: `fedevo resume --budget` writes
    budgets.json and then removes stop.json, and a kill between the two left the raised search reading as ended
    (pages, `front`, resume's refusal) until it ended again."""
    try:
        rec = json.loads((Path(run_dir) / STOP_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict):
        return None
    try:
        now = read_raised(run_dir).get("budgets")
    except FedevoError:  # a corrupt budgets.json: its readers say so; the stop stands as written
        now = None
    was = rec.get("budgets")
    if now and isinstance(was, dict) and any(was.get(k) != now[k] for k in KEYS if k in was):
        return None
    return rec


def overrun(search_s: float, time_budget: Optional[float]) -> float:
    """Seconds of search past --time-budget (0 without one, or within it): the budget is checked between batches,
    and a batch that has started is finished, so the last one may run far past it."""
    return 0.0 if time_budget is None else round(max(float(search_s) - time_budget, 0.0), 3)


def stop_record(reason: str, state: Mapping[str, Any], settings) -> dict[str, Any]:
    search_s = round(float(state.get("search_s", 0.0)), 3)
    over = overrun(search_s, settings.time_budget) if reason == "time_budget" else 0.0
    return {"reason": reason, "why": REASONS.get(reason, reason), "batches": state["generation"],
            "evaluations": state["next_id"], "search_s": search_s,
            **({"over_time_budget_s": over} if over else {}),
            "budgets": {"gen": settings.gen, "pop": settings.pop, "budget": settings.budget,
                        "time_budget": settings.time_budget, "patience": settings.patience,
                        **({"gen_derived": True} if getattr(settings, "gen_derived", False) else {})}}





def go_on(stop: Optional[Mapping[str, Any]], run_dir: Path | str) -> str:
    """How to search on after the stop `stop` (stop.json's record): the call that raises the budget that ended it,
    as the caller calls fedevo (the shell command, or fedevo.resume from Python; "" for an exhausted optimiser,
    which no budget changes). Each budget not given to the resume stays, so raising another than the one that
    ended the search is refused as reached already."""
    stop = stop or {}
    reason, budgets = stop.get("reason"), stop.get("budgets") or {}
    if reason == "exhausted":
        return ""
    if reason == "time_budget":
        now = budgets.get("time_budget")
        return resume_call(run_dir, arg("time_budget", "S")) + (f" (S above {_value(now)} seconds)" if now else "")
    if reason == "patience":
        now = budgets.get("patience")
        return resume_call(run_dir, arg("patience", "K")) + (f" (K above {now} batches)" if now else "")
    done = stop.get("evaluations")
    return resume_call(run_dir, arg("budget", "N")) + (f" (N above its {done} evaluations)" if done else "")


def said(reason: str, why: str) -> str:
    """stop.json's `why` (REASONS: the options' command-line spelling) as the caller spells the budget."""
    return why.replace(f"--{reason.replace('_', '-')} ", f"{arg(reason)} ", 1) if reason in REASONS else why


def gen_derived(gen: Optional[int], budget: Optional[int], time_budget: Optional[float],
                patience: Optional[int]) -> bool:
    """Whether --gen is derived from the other budgets (not given, and one of them given): then it never ends the
    search itself (stop_reason)."""
    return gen is None and (budget is not None or time_budget is not None or patience is not None)


def default_gen(gen: Optional[int], pop: int, budget: Optional[int], time_budget: Optional[float],
                patience: Optional[int]) -> int:
    """--gen as given; else enough batches for --budget (ceil(budget / pop)); else, with only --time-budget or
    --patience, OPEN_GEN batches (a count for displays: they end it); else DEFAULT_GEN."""
    if gen is not None:
        return gen
    if budget is not None and isinstance(budget, int) and not isinstance(budget, bool) and budget >= 1 \
            and isinstance(pop, int) and pop >= 1:
        return -(-budget // pop)
    if time_budget is not None or patience is not None:
        return OPEN_GEN
    return DEFAULT_GEN


__all__ = ["BUDGETS_FILE", "DEFAULT_GEN", "OPEN_GEN", "REASONS", "STOP_FILE", "batch_size", "budgets_of",
           "check_budgets", "default_gen", "gen_derived", "overrun", "go_on", "describe_change", "hv_steps", "in_force",
           "raised", "read_raised", "read_stop",
           "stagnant", "stagnant_steps",
           "stop_in_force", "stop_reason", "stop_record", "write_raised"]
