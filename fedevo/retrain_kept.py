"""The trainings a stopped `fedevo retrain` finished, kept so that the same command continues it.

A retrain writes its report once every training has finished; a long one (150 rounds of several solutions)
stopped by Ctrl-C, SIGTERM or a kill would otherwise lose every finished training. Each training's result is
kept as it finishes in ``REPORT_DIR/.kept/`` beside ``plan.json``, what the retrain is (the run, the picked
solutions and their genes, rounds, seed, the standard's settings, the dataset directory the trainings read and the
SHA-256 of its files' content (a re-downloaded or edited dataset under the same path is other data), the
device they train on and the compute precision there (bf16 where the CPU has native bf16 and the precision is
'auto'), fedevo's version and source hash). Run again with the same run, picks, rounds, seed, standard, data
directory, device, precision and fedevo, `retrain` finds that report directory (the one ``--out`` names, or the
newest ``RUN/retrain*`` without a report), trains only what is missing and writes the report, whose numbers
equal those of an uninterrupted retrain (each training is seeded on its own, whatever ran before it). A different
plan never continues a kept one: it takes a new report directory (where the kept plan differs only in where or by
which fedevo it trains, one note says why it was not continued: `passed_over`). ``.kept/`` is removed once the report is
written. A retrain locks ``.kept/`` (flock) while it writes the directory: a running one is never continued by
another.

The kept results are pickled: they are read back only from a report directory of the user's own run, as
the run's checkpoints are.
"""

from __future__ import annotations

import json
import pickle
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .dirlock import hold, is_held
from .errors import arg
from .result import EvaluationResult

KEPT = ".kept"
PLAN = "plan.json"


def plan_of(*, run_dir: Path | str, solutions: Sequence[Any], rounds: int, seed: int, eval_every: int,
            standard: Optional[Mapping[str, Any]], data: Optional[str] = None, data_sha256: Optional[str] = None,
            device: str = "cpu", precision: Optional[str] = None) -> dict[str, Any]:
    """What a retrain is, as kept in plan.json: two retrains with equal plans give equal numbers. data: the dataset
    directory the trainings read (None where they read none: a dataset made in memory); data_sha256: its files'
    content (retraining.data_content; None where fedevo reads no bundled dataset's files); device: where they train
    ('cpu', 'cuda'; the CUDA path's numbers equal the CPU's within a tolerance only, docs/engine.md); precision: the
    compute precision there ('fp32', 'bf16', both comma-separated; None: the problem's own evaluator, whose own it
    is); with fedevo's version and source hash (versions.program)."""
    from .searching.versions import program

    return json.loads(json.dumps({
        "run": str(Path(run_dir).resolve()), "rounds": int(rounds), "seed": int(seed), "eval_every": int(eval_every),
        "solutions": [{"key": s.key, "id": s.id, "params": dict(s.params)} for s in solutions],
        "standard": dict(standard or {}), "data": data, "data_sha256": data_sha256, "device": device,
        "precision": precision, **program()},
        sort_keys=True, default=str))


def _kept_plan(report_dir: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads((report_dir / KEPT / PLAN).read_text())
    except (OSError, ValueError):
        return None


# plan keys a retrain stopped before fedevo recorded them lacks
_ADDED = ("data", "device", "precision", "fedevo_source", "data_sha256")
# where, by which fedevo and on which data content a plan trains: a kept plan that differs from this one only there
# is passed over with a note
_ENGINE = (("device", "device"), ("precision", "precision"), ("fedevo", "fedevo"), ("fedevo_source", "fedevo source"),
           ("data_sha256", "data content SHA-256"))


def _shown(key: str, value: Any) -> str:
    return f"{value[:12]}…" if key == "data_sha256" and isinstance(value, str) else str(value)


def same_plan(kept: Optional[Mapping[str, Any]], plan: Mapping[str, Any]) -> bool:
    """A kept plan is `plan`: equal, or equal but for the keys a plan written before they were recorded lacks (a
    retrain stopped before an upgrade still continues)."""
    if kept is None:
        return False
    missing = [k for k in _ADDED if k not in kept]
    return dict(kept) == {k: v for k, v in plan.items() if k not in missing}


def engine_differences(kept: Optional[Mapping[str, Any]], plan: Mapping[str, Any]) -> list[str]:
    """'precision bf16 (here fp32)' for each of where and by which fedevo `plan` trains that a kept plan holds
    otherwise, where the two differ in nothing else ([]: they differ elsewhere too, or not at all)."""
    if kept is None:
        return []
    keys = [k for k, _ in _ENGINE]
    if not same_plan({k: v for k, v in kept.items() if k not in keys}, {k: v for k, v in plan.items() if k not in keys}):
        return []
    return [f"{name} {_shown(k, kept[k])} (here {_shown(k, plan.get(k))})" for k, name in _ENGINE
            if k in kept and kept[k] != plan.get(k)]


def passed_over(candidates: Sequence[Path], plan: Mapping[str, Any]) -> Optional[str]:
    """A note naming the newest of `candidates` (report directories, oldest first) that holds the kept trainings of
    this retrain made on another device or precision, by another fedevo or on other data content under the same
    dataset directory (`engine_differences`), which a new report directory leaves as they are; None where there is
    none."""
    for d in reversed(list(candidates)):
        if _only_kept(d) and not is_held(d / KEPT) and (diff := engine_differences(kept := _kept_plan(d), plan)):
            data = kept.get("data_sha256", plan.get("data_sha256")) != plan.get("data_sha256")
            why = "; ".join(w for w, on in (("its numbers would not be this machine's and fedevo's", len(diff) > data),
                                            ("the dataset's files changed since", data)) if on)
            return (f"{d} holds the kept trainings of this retrain made with {', '.join(diff)}: not continued "
                    f"({why}); training anew")
    return None


def _only_kept(report_dir: Path) -> bool:
    """`report_dir` holds kept trainings and nothing else (no report yet)."""
    try:
        return {p.name for p in report_dir.iterdir()} == {KEPT}
    except OSError:
        return False


def continuable(candidates: Sequence[Path], plan: Mapping[str, Any]) -> Optional[Path]:
    """The last of `candidates` (report directories, oldest first) that holds kept trainings of `plan` alone, and
    that no running retrain holds (`start`'s lock)."""
    for d in reversed(list(candidates)):
        if _only_kept(d) and same_plan(_kept_plan(d), plan) and not is_held(d / KEPT):
            return d
    return None


def continues(report_dir: Path, plan: Mapping[str, Any]) -> bool:
    """`report_dir` holds a stopped retrain of `plan` (its kept trainings, none of them finished included)."""
    return same_plan(_kept_plan(report_dir), plan)


def load(report_dir: Path) -> dict[str, EvaluationResult]:
    """The kept results by solution key (an unreadable one is trained again)."""
    out: dict[str, EvaluationResult] = {}
    for p in sorted((report_dir / KEPT).glob("*.pkl")):
        try:
            r = pickle.loads(p.read_bytes())
        except Exception:  # noqa: BLE001 - a half-written or foreign file: train that solution again
            continue
        if isinstance(r, EvaluationResult):
            out[p.stem] = r
    return out


def start(report_dir: Path, plan: Mapping[str, Any]):
    """Make `report_dir/.kept/` with its plan (kept as it is when it is already there) and lock it for this retrain:
    returns the lock (an open file; closing it releases it). FedevoError if another retrain holds it (two retrains
    of one plan started at once: the second would have trained into the first's directory)."""
    from .errors import FedevoError
    from .searching.log import atomic_write

    kept = report_dir / KEPT
    kept.mkdir(parents=True, exist_ok=True)
    fh = hold(kept, FedevoError(_busy(report_dir)))
    if not same_plan(_kept_plan(report_dir), plan):
        atomic_write(kept / PLAN, json.dumps(plan, indent=1, sort_keys=True) + "\n")
    return fh


def _busy(report_dir: Path) -> str:
    return f"another fedevo retrain is writing {report_dir}; wait for it, or give another {arg('out')}"


def keep(report_dir: Path, key: str, result: EvaluationResult) -> None:
    """Keep one finished training's result (written whole or not at all). A failed one is not kept (the same
    command trains it again: a Ray worker stopped by the Ctrl-C comes back failed), nor one that does not pickle
    (an own evaluator's privacy dict holding a lock, say: one line on stderr; the retrain goes on)."""
    import sys

    from .searching.log import atomic_write

    if result.status == "failed":
        return
    try:
        data = pickle.dumps(replace(result, state=None))
    except Exception as e:  # noqa: BLE001 - the report does not need it: only a continuation would
        print(f"fedevo: warning: training {key}'s result cannot be kept for a continuation ({type(e).__name__}: "
              f"{e}); a stopped retrain would train it again", file=sys.stderr)
        return
    atomic_write(report_dir / KEPT / f"{key}.pkl", data)


def describe_kept(report_dir: Path, this: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """Why a report directory holding only a retrain's kept trainings is not continued by this one (its plan:
    `this`), in words, or None where it holds none."""
    if not _only_kept(report_dir):
        return None
    if is_held(report_dir / KEPT):
        return _busy(report_dir)
    plan = _kept_plan(report_dir) or {}
    if this is not None and (diff := engine_differences(plan, this)):
        return (f"{report_dir} holds the kept trainings of this retrain made with {', '.join(diff)}: continued here "
                f"they would mix numbers of both in one report; continue it where it ran, or remove {report_dir / KEPT} "
                "(nothing was overwritten)")
    what = ", ".join(f"{name} {plan[k]}" for k, name in (("rounds", "rounds"), ("seed", "seed"), ("device", "device"),
                                                         ("precision", "precision"), ("data", "data directory"))
                     if plan.get(k) is not None)
    ids = [s.get("id") for s in plan.get("solutions", []) if s.get("id") is not None]
    return (f"{report_dir} holds the kept trainings of a stopped retrain of another plan ({what}, picked ids "
            f"{', '.join(map(str, ids)) or 'none'}): run that retrain again to continue it, or remove "
            f"{report_dir / KEPT} (nothing was overwritten)")


def drop(report_dir: Path) -> None:
    """The report is written: the kept trainings go."""
    shutil.rmtree(report_dir / KEPT, ignore_errors=True)
