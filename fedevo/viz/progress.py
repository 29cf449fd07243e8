"""Progress display of `fedevo search` / `fedevo resume`: a rich live bar (a search callback; ``--quiet``: none)."""

from __future__ import annotations

import datetime
import math
import time
from collections import deque
from typing import Any, Mapping, Optional, Sequence

from ..searching.callbacks import SearchCallback
from ..searching.rundata import RunData
from .numfmt import num


def _fmt(v: Optional[float]) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return num(v)


SHORT_UNIT = 6  # a unit of at most this many characters, one word (ms, s, MB, kWh), follows its value on the line

RATE_WINDOW = 8  # the ETA's seconds per evaluation: the mean interval between the last 8 completions


def _clock(seconds: Optional[float]) -> str:
    return "-:--:--" if seconds is None else str(datetime.timedelta(seconds=int(max(seconds, 0.0) + 0.5)))


class RichReporter(SearchCallback):
    """Generation k/N, evaluations done/running, the best value of each objective so far (each alone, by its label:
    error / comm / ε, "worst-10 % client error", "latency 12 ms"), the Pareto front's
    size and hypervolume after the last finished generation (once its normalisation is fixed), the last
    evaluation's seconds and the optimiser's seconds per proposal (batches.csv's sampler_s), ETA.

    The ETA is the evaluations left times the mean interval between the last RATE_WINDOW completions (the
    optimiser's own seconds included), counted down while an evaluation runs, and never past what is left of
    --time-budget: rich's own estimate took the rate of the last 30 s only, so it stayed -:--:-- for evaluations
    of 30 s or more, and it knew no time budget (2 h for a 25 s search).

    On a terminal: a live progress bar. Otherwise (output redirected): one plain line per generation.
    """

    def __init__(self, eps_key: str = "eps", console=None, run_dir=None):
        from rich.console import Console

        self.run_dir = run_dir  # announced once evaluation starts (a setup error before that prints one line only)
        self.eps_key = eps_key
        self.console = console or Console(stderr=True)
        self._progress = None
        self._task = None
        self._objectives = None  # the run's ObjectiveSet (on_start); None: error, comm and eps_key
        self._plain = not self.console.is_terminal
        self._new_search()

    def _new_search(self) -> None:
        """What this display knows of one search (on_start starts it afresh: one reporter may serve several
        searches, a notebook's cells)."""
        self._best: dict[str, float] = {}
        self._gen = (0, 0)
        self._running = 0
        self._queued = 0
        self._bad = {"failed": 0, "diverged": 0}
        self._t0 = time.monotonic()
        self._done = 0
        self._total = 0
        self._front = ""
        self._settled = False  # the hypervolume's normalisation fixed (front_math.hv_settled)
        self._times: deque = deque(maxlen=RATE_WINDOW + 1)  # monotonic times: the start, then each completion
        self._time_left: Optional[float] = None  # seconds of --time-budget left at on_start (None: no time budget)
        self._last_s: Optional[float] = None  # the last finished evaluation's own seconds (its wall_s)
        self._proposal = ""  # the optimiser's seconds per proposal in the last batch, in words
        self._unread_said: set = set()  # objectives whose first unread value has been said (_say_unread)
        self._bad_said: set = set()  # statuses (failed, diverged) whose first evaluation has been said (_say_bad)

    def _note(self, row: Mapping[str, Any]) -> None:
        if row.get("status") != "ok":
            self._bad[row.get("status")] = self._bad.get(row.get("status"), 0) + 1
            return
        from ..searching.front_math import is_full

        if not is_full(row):  # a multi-fidelity search's lower rung: its ε and error are not the full-T ones
            return
        for o in self._objs():
            v = row.get(o.name)
            if v is not None and math.isfinite(v):
                b = self._best.get(o.name)
                self._best[o.name] = v if b is None else (max(b, v) if o.maximize else min(b, v))

    def _objs(self):
        from ..objectives import as_set

        return as_set(self._objectives, self.eps_key)

    def _time_bound(self) -> bool:
        """True while --time-budget, not the planned batches, is what ends the search first as far as known: its
        seconds left are fewer than the evaluations' ETA, or (no rate yet) the batches are the open cap of a search
        only a time budget bounds (budgets.OPEN_GEN). The display then counts time, not a total nobody asked for
        ("0/12000 evaluated" with a bar that never moved)."""
        if self._time_left is None:
            return False
        left = self._budget_left()
        count = self._count_eta()
        if count is None:
            from ..searching.budgets import OPEN_GEN

            return self._gen[1] >= OPEN_GEN
        return left < count

    def _open(self) -> bool:
        """No count bounds the search: only --patience (or --time-budget) ends it, and its batches are the open cap
        budgets.OPEN_GEN, a number for nobody. The display then counts without a total and gives no ETA of its
        evaluations: `gen 19/1000`, `19/1000 evaluated` and `ETA 0:17:18` (1,000 evaluations at the recent rate)
        for a --patience 3 search that ended at 19 in 11 s."""
        from ..searching.budgets import OPEN_GEN

        return self._gen[1] >= OPEN_GEN

    def _budget_left(self) -> float:
        return max(self._time_left - (time.monotonic() - self._t0), 0.0)

    def _count_eta(self) -> Optional[float]:
        """Seconds until the planned evaluations are done at the recent rate (None: no rate yet)."""
        left = max(self._total - self._done, 0)
        if left == 0:
            return 0.0
        if len(self._times) < 2:
            return None
        now = time.monotonic()
        per = (self._times[-1] - self._times[0]) / (len(self._times) - 1)
        return max(left * per - (now - self._times[-1]), (left - 1) * per)  # counted down, by one evaluation

    def fraction(self) -> float:
        """How much of the search is done, 0..1: of the time budget left at on_start while it binds
        (_time_bound), else of the planned evaluations."""
        if self._time_bound():
            return min(1.0, 1.0 - self._budget_left() / self._time_left) if self._time_left > 0 else 1.0
        return min(1.0, self._done / self._total) if self._total else 1.0

    def _count(self) -> str:
        """`24/48 evaluated`, or `24 evaluated` while the time budget binds."""
        return (f"{self._done} evaluated" if self._time_bound() or self._open() or self._done > self._total else
                f"{self._done}/{self._total} evaluated")

    def _fields(self) -> dict[str, str]:
        b = self._best
        # (past its planned count: a --gen derived from --budget that a short batch outran, or OPEN_GEN of a search
        # only --patience bounds, budgets.gen_derived: the count alone, not 'gen 1001/1000')
        open_ = self._time_bound() or self._open() or self._gen[0] > self._gen[1]
        return {"gen": f"gen {self._gen[0]}" + ("" if open_ else f"/{self._gen[1]}"),
                "running": f"{self._running} running" + (f", {self._queued} queued" if self._queued else ""),
                "best": "best " + " · ".join(self._best_of(o, b.get(o.name)) for o in self._objs()),
                "failed": "".join(f" · {n} {k}" for k, n in self._bad.items() if n),
                "front": self._front,
                "timing": ("" if self._last_s is None else f" · last eval {_fmt(self._last_s)} s") + self._proposal}

    def _best_of(self, o, v: Optional[float]) -> str:
        """One objective's best so far as the line says it: its label (ε for the search's ε), the value and a short
        unit ("latency 12 ms"; a unit of words, as comm's "parameters per round per client", is left to the pages)."""
        label = "ε" if o.name == self.eps_key else o.label
        unit = o.unit if o.unit and len(o.unit) <= SHORT_UNIT and " " not in o.unit and _fmt(v) != "–" else ""
        return f"{label} {_fmt(v)}" + (f" {unit}" if unit else "")

    def eta(self) -> Optional[float]:
        """Seconds until the search ends, as far as known now (None: no evaluation has finished yet, or only --patience
        ends the search, and no time budget)."""
        eta = None if self._open() else self._count_eta()  # (open: the end is the patience's, unknown)
        if self._time_left is not None:  # checked between batches: the batch running then still finishes
            budget = self._budget_left()
            eta = budget if eta is None else min(eta, budget)
        return eta

    def on_start(self, *, n_gen: int, generation: int, total: int, done: int,
                 rows: Sequence[Mapping[str, Any]] = (), runner: str = "", run_dir=None, eps_key: str = "eps",
                 objectives=None, time_left: Optional[float] = None) -> None:
        from rich.progress import Progress, ProgressColumn, TextColumn
        from rich.progress_bar import ProgressBar
        from rich.table import Column
        from rich.text import Text

        self.run_dir = self.run_dir if run_dir is None else run_dir
        self._new_search()
        self._t0 = time.monotonic()  # the search's time, as the summary's (which starts a little earlier): a
        # clock from this display's construction counted the set-up (native kernels built, ...) and then went back
        self.eps_key = eps_key
        self._objectives = objectives
        self._time_left = time_left
        self._times.clear()
        self._times.append(self._t0)

        for r in rows:
            self._note(r)
        self._gen = (generation, n_gen)
        self._done, self._total = done, total
        if self.run_dir is not None:
            self.console.print(f"run directory: {self.run_dir}", highlight=False, soft_wrap=True)
        if runner:
            self.console.print(f"[dim]evaluating {'' if runner.startswith('in-process') else 'on '}{runner}[/dim]",
                               soft_wrap=True)
        if self._plain:
            return
        reporter = self

        class Eta(ProgressColumn):
            def render(self, task) -> Text:
                return Text(f"· ETA {_clock(reporter.eta())}", style="progress.remaining", no_wrap=True)

        class Bar(ProgressColumn):  # drawn from reporter.fraction(): time moves the bar between evaluations too
            def render(self, task):
                return ProgressBar(total=1000, completed=round(1000 * reporter.fraction()), width=20)

        class Count(ProgressColumn):
            def render(self, task) -> Text:
                return Text(reporter._count(), style="progress.download", no_wrap=True)

        fixed = lambda: Column(no_wrap=True)  # noqa: E731 - kept whole; the last column wraps on a narrow terminal
        self._progress = Progress(
            TextColumn("{task.fields[gen]}", table_column=fixed()), Bar(table_column=fixed()),
            Count(table_column=fixed()), Eta(table_column=fixed()), TextColumn("· {task.fields[running]}{task.fields[failed]}", table_column=fixed()),
            TextColumn("· {task.fields[best]}{task.fields[front]}{task.fields[timing]}",
                       table_column=Column(ratio=1, overflow="fold")),
            console=self.console, transient=False, refresh_per_second=4)
        self._progress.start()
        self._task = self._progress.add_task("search", total=total, completed=done, **self._fields())

    def _line(self, last: bool = False) -> None:
        """One plain progress line; its seconds since the search's evaluation began (on_start), and (but on the
        last) the ETA."""
        f = self._fields()
        elapsed = time.monotonic() - self._t0
        self.console.print(f"{f['gen']}: {self._count()}{f['failed']} · {f['best']}"
                           f"{f['front']}{f['timing']} · {elapsed:.0f} s" + ("" if last else f", ETA {_clock(self.eta())}"),
                           highlight=False, soft_wrap=True)

    def on_generation_start(self, g: int) -> None:
        if self._plain and g > self._gen[0]:
            self._line()
        self._gen = (g, self._gen[1])
        self._update()

    def _say_unread(self, row: Mapping[str, Any]) -> None:
        """The first evaluation whose value of an objective could not be read (its function raised, returned a
        string: its worst value stands in), said at once, once per objective: with evaluations of minutes, the
        closing lines that count them come hours too late."""
        from ..searching.log import unread_objectives

        for name, _, _, first in unread_objectives([row], [o.name for o in self._objs()]):
            if name not in self._unread_said:
                self._unread_said.add(name)
                self.console.print(f"objective {name}: not read in evaluation {row.get('id')} ({first}); its worst "
                                   "value stands in (the closing lines count every such evaluation)",
                                   highlight=False, soft_wrap=True)

    def _say_bad(self, row: Mapping[str, Any]) -> None:
        """The first failed and the first diverged evaluation, said at once with its message's first line, once per
        status: the line showed only `1 failed`, and why was in evaluations.csv alone — with evaluations of
        minutes, a region of the genes that fails (out of memory, a bug of the evaluator) went unexplained for
        hours."""
        status = row.get("status")
        if status not in ("failed", "diverged") or status in self._bad_said:
            return
        self._bad_said.add(status)
        lines = str(row.get("message") or "").strip().splitlines()
        self.console.print(f"evaluation {row.get('id')} {status}: {lines[0] if lines else 'no message'} (said once; "
                           "each evaluation's message in evaluations.csv)", highlight=False, soft_wrap=True,
                           markup=False)

    def on_evaluation(self, row: Mapping[str, Any]) -> None:
        self._note(row)
        self._say_unread(row)
        self._say_bad(row)
        self._done += 1
        self._times.append(time.monotonic())
        wall = row.get("wall_s")
        if wall is not None and math.isfinite(wall):
            self._last_s = float(wall)
        self._update(advance=1)

    def on_generation(self, generation: int, run: RunData) -> None:
        """The Pareto front's size and hypervolume after the generation (the last row of hypervolume.csv; the
        hypervolume once its normalisation is fixed, front_math.hv_settled) and the optimiser's seconds per
        proposal in that batch (batches.csv)."""
        from ..searching.front_math import hv_settled, hv_skips_unmeasured

        table = run.hypervolume()
        if table:
            last = table[-1]
            # settled once, settled for good (rows only grow): not asked again of every row after each batch
            self._settled = self._settled or hv_settled(run.rows, run.objectives,
                                                        skip_unmeasured=hv_skips_unmeasured(run.meta))
            hv = f", HV {num(last['hypervolume'])}" if self._settled else ""
            self._front = f" · front {last['front_size']}{hv}"
        b = run.last_batch()
        if b is not None and b["asked"]:
            from ..searching.optimizers.user import label

            self._proposal = f" · {label(run.settings.optimizer)} {_fmt(b['sampler_s'] / b['asked'])} s/proposal"
        self._update()

    def on_tick(self, running: int, queued: int = 0) -> None:
        if (running, queued) != (self._running, self._queued):
            self._running, self._queued = running, queued
            self._update()

    def _update(self, advance: int = 0) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=advance, **self._fields())

    def on_finish(self, summary=None) -> None:
        if self._plain and self._total:
            self._line(last=True)  # the same clock as the lines before (the summary's also counts Ray's start)
            self._total = 0
        if self._progress is not None:
            self._running = self._queued = 0
            self._update()
            self._progress.stop()
            self._progress = None
