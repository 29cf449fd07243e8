"""Which fedevo wrote a run's rows: run.json's ``versions`` names the program that made the run (its version and,
since it was recorded, ``fedevo_source``: versions.source_hash), and ``resumed_by.json`` each other program a resume
continued it with, and from which row of evaluations.csv on (run.json never changes: its bytes start the log's
hash chain).

A resume by another fedevo (a pip upgrade, a checkout with edits) goes on, as Optuna and pymoo resume with what is
installed, but says so in one warning line naming both programs, and records the new one: the rows logged before
and after it come from different sources (an accountant, a kernel changed between them), so their numbers may not
be comparable. A run made before run.json recorded the source: its first resume says so in one line (fedevo's
version string has been 0.1.0 throughout, and numbers changed under it: the accountant's finer PLD, the SET
prune's tie-break, on 2026-11-28), and the source is recorded from then on."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import FedevoError

RESUMED_BY = "resumed_by.json"


def writers(run_dir: Path, meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The programs that wrote the run's rows, oldest first: the one that made it (run.json's ``versions``: rows
    from 0) and each recorded in resumed_by.json (`rows_before`: the rows of evaluations.csv logged before it).
    `fedevo_source` None: not recorded (a run made before it was)."""
    v = meta.get("versions") or {}
    out = [{"fedevo": v.get("fedevo"), "fedevo_source": v.get("fedevo_source"), "rows_before": 0}]
    return out + _resumes(Path(run_dir))


def _resumes(run_dir: Path) -> list[dict[str, Any]]:
    try:
        record = json.loads((run_dir / RESUMED_BY).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise FedevoError(f"{run_dir / RESUMED_BY} is unreadable ({type(e).__name__}: {e}): it records which fedevo "
                          "resumed the run; restore it or remove it") from None
    entries = record.get("resumed_by") if isinstance(record, dict) else None
    return [dict(e) for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _named(w: Mapping[str, Any], short: bool = False) -> str:
    """'fedevo 0.1.0 (source 3f2a…)': the source in full, or its first 10 digits (`short`, for sources_line)."""
    src = w.get("fedevo_source")
    return f"fedevo {w.get('fedevo') or '?'} (source {(src[:10] + '…' if short else src) if src else 'not recorded'})"


def change(last: Mapping[str, Any], here: Mapping[str, Any]) -> Optional[str]:
    """The warning for a resume by `here` (versions' fedevo and fedevo_source) of rows last written by `last`, or
    None where it is the same program: both sources known, they decide (a version string read from another
    install's metadata on the path can name a checkout's source wrongly); else the version and the source. A
    source not recorded under the same version string: that it may not be the same."""
    src_last, src_here = last.get("fedevo_source"), here.get("fedevo_source")
    same_version = last.get("fedevo") == here.get("fedevo")
    if (src_last == src_here) if src_last is not None and src_here is not None else (
            same_version and src_last == src_here):
        return None
    if same_version and src_last is None:
        return (f"its rows so far were written by fedevo {last.get('fedevo') or '?'} before runs recorded fedevo's "
                f"source, this resume runs {_named(here)}: if that was another source, rows logged before and after "
                "the resume may not be comparable (numbers changed under one version string)")
    return (f"its rows so far were written by {_named(last)}, this resume runs {_named(here)}: rows logged before "
            "and after the resume come from different sources of fedevo; numbers may not be comparable")


def note_resume(run_dir: Path, meta: Mapping[str, Any], rows_before: int, here: Mapping[str, Any]) -> Optional[str]:
    """A resume by `here` (versions()'s fedevo and fedevo_source) about to log rows after `rows_before`: the
    warning `change` gives against the program that wrote the run last, and here recorded in resumed_by.json where
    it is another program or that one's source was not recorded (written before any row of it is logged). Only for
    a process that holds the run directory."""
    from .log import atomic_write

    run_dir = Path(run_dir)
    earlier = writers(run_dir, meta)
    last = earlier[-1]
    entry = {"fedevo": here.get("fedevo"), "fedevo_source": here.get("fedevo_source")}
    if last.get("fedevo_source") is not None and last.get("fedevo_source") == entry["fedevo_source"]:
        return None
    resumes = [*earlier[1:], {**entry, "rows_before": int(rows_before), "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}]
    atomic_write(run_dir / RESUMED_BY, json.dumps({"resumed_by": resumes}, indent=2) + "\n")
    return change(last, here)


def sources_line(writers_: list[Mapping[str, Any]], n_rows: int) -> Optional[str]:
    """One line for a run whose `n_rows` logged rows come from more than one fedevo source (`writers`, oldest
    first): "rows 0–47 by fedevo 0.1.0 (source 3f2a…), 48–95 by fedevo 0.2.0 (source 9c1d…); numbers may not be
    comparable"; None where they come from one (a writer that logged no row is left out, and two in a row that
    `change` would not warn of are one: a source not recorded, the same version)."""
    spans: list[tuple[Mapping[str, Any], int, int]] = []
    for i, w in enumerate(writers_):
        start = min(max(int(w.get("rows_before") or 0), 0), n_rows)
        end = n_rows if i + 1 == len(writers_) else min(max(int(writers_[i + 1].get("rows_before") or 0), start),
                                                         n_rows)
        if end <= start:
            continue
        if spans and change(spans[-1][0], w) is None:
            spans[-1] = (spans[-1][0], spans[-1][1], end)
        else:
            spans.append((w, start, end))
    if len(spans) < 2:
        return None
    parts = [f"{'rows ' if n == 0 else ''}{a}–{b - 1} by {_named(w, short=True)}"
             for n, (w, a, b) in enumerate(spans)]
    return ", ".join(parts) + "; numbers may not be comparable"


__all__ = ["RESUMED_BY", "change", "note_resume", "sources_line", "writers"]
