"""Progress display of `fedevo search` / `fedevo resume`: a rich live bar (a search callback; ``--quiet``: none)."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Optional, Sequence

from ..searching.callbacks import SearchCallback
from ..searching.rundata import RunData
from .numfmt import num


def _fmt(v: Optional[float]) -> str:
    if v is None or not math.isfinite(v):
        return "–"
    return num(v)


class RichReporter(SearchCallback):
    """Generation k/N, evaluations done/running, best error / comm / ε so far (each alone), the Pareto front's
    size and hypervolume after the last finished generation, ETA.

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
        self._best: dict[str, float] = {}
        self._gen = (0, 0)
        self._running = 0
        self._queued = 0
        self._bad = {"failed": 0, "diverged": 0}
        self._t0 = time.monotonic()
        self._done = 0
        self._total = 0
        self._plain = not self.console.is_terminal
        self._front = ""

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

    def _fields(self) -> dict[str, str]:
        b = self._best
        return {"gen": f"gen {self._gen[0]}/{self._gen[1]}",
                "running": f"{self._running} running" + (f", {self._queued} queued" if self._queued else ""),
                "best": "best " + " · ".join(f"{'ε' if o.name == self.eps_key else o.name} {_fmt(b.get(o.name))}"
                                             for o in self._objs()),
                "failed": "".join(f" · {n} {k}" for k, n in self._bad.items() if n),
                "front": self._front}

    def on_start(self, *, n_gen: int, generation: int, total: int, done: int,
                 rows: Sequence[Mapping[str, Any]] = (), runner: str = "", run_dir=None, eps_key: str = "eps",
                 objectives=None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.run_dir = self.run_dir if run_dir is None else run_dir
        self._t0 = time.monotonic()  # the search's time, as the summary's (which starts a little earlier): a
        # clock from this display's construction counted the set-up (native kernels built, ...) and then went back
        self.eps_key = eps_key
        self._objectives = objectives

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
        self._progress = Progress(
            TextColumn("{task.fields[gen]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("evaluated · {task.fields[running]}{task.fields[failed]}"),
            TextColumn("· {task.fields[best]}{task.fields[front]}"), TextColumn("· ETA"), TimeRemainingColumn(),
            console=self.console, transient=False, refresh_per_second=4)
        self._progress.start()
        self._task = self._progress.add_task("search", total=total, completed=done, **self._fields())

    def _line(self) -> None:
        """One plain progress line; its seconds since the search's evaluation began (on_start)."""
        f = self._fields()
        elapsed = time.monotonic() - self._t0
        self.console.print(f"{f['gen']}: {self._done}/{self._total} evaluated{f['failed']} · {f['best']}"
                           f"{f['front']} · {elapsed:.0f} s", highlight=False, soft_wrap=True)

    def on_generation_start(self, g: int) -> None:
        if self._plain and g > self._gen[0]:
            self._line()
        self._gen = (g, self._gen[1])
        self._update()

    def on_evaluation(self, row: Mapping[str, Any]) -> None:
        self._note(row)
        self._done += 1
        self._update(advance=1)

    def on_generation(self, generation: int, run: RunData) -> None:
        """The Pareto front's size and hypervolume after the generation (the last row of hypervolume.csv)."""
        table = run.hypervolume()
        if table:
            last = table[-1]
            self._front = f" · front {last['front_size']}, HV {num(last['hypervolume'])}"
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
            self._line()  # the same clock as the lines before (the summary's also counts Ray's start)
            self._total = 0
        if self._progress is not None:
            self._running = self._queued = 0
            self._update()
            self._progress.stop()
            self._progress = None
