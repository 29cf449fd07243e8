"""How a running search reports: callbacks (in the spirit of pymoo's ``Callback`` and Ray Tune's ``Callback``).

Subclass :class:`SearchCallback`, override the hooks you need (each does nothing by default) and hand instances
to the search (``SearchRun.run(..., callbacks=[...])``, ``search(..., callbacks=[...])``). The hooks are called in
the search's own process, in this order::

    on_start(n_gen=, generation=, total=, done=, rows=, runner=, run_dir=, eps_key=[, objectives=, time_left=])
                                                                   once, at start
        on_generation_start(generation)                            each generation, before its individuals run
            on_evaluation(row)                                     each finished evaluation, as it finishes
            on_tick(running, queued)                               while evaluations run (progress displays)
        on_generation(generation, run)                             each generation, once its outputs are written
    on_finish(summary)                                             once, last

* ``on_start``: ``n_gen`` generations in all, the first to run (``generation``; > 1 when resumed), ``total``
  evaluations expected in all, ``done`` of them already logged (``rows``: their records), ``runner``:
  where evaluations run, in words; ``run_dir``: the run directory; ``eps_key``: the ε the search minimises;
  ``objectives``: the run's :class:`~fedevo.objectives.ObjectiveSet` (what each row's ``row[name]`` holds), passed
  only to an ``on_start`` that takes it (or ``**kwargs``), so callbacks written before it keep working;
  ``time_left``: the seconds of ``--time-budget`` left (the budget less the seconds of search before a resume),
  None without one, passed the same way. Not called for a run that has nothing left to do.
* ``on_evaluation(row)``: the evaluation's :class:`~fedevo.searching.record.EvaluationRecord` as appended to
  evaluations.csv (frozen: ``.id``, ``.generation``, ``.seed``, ``.params``, ``.result``, ``.status``; also a
  mapping of the log's columns: ``row["error"]``, a gene's ``row["lr"]``, each objective's ``row[name]``), in
  completion order.
* ``on_generation(generation, run)``: ``run`` is a :class:`~fedevo.searching.rundata.RunData` built from the rows
  the search holds in memory (every evaluation so far, in id order), with its Pareto front
  (``run.front``), hypervolume table (``run.hypervolume()``), run.json (``run.meta``), problem and settings: the
  same view :func:`~fedevo.searching.rundata.load_run` gives of the run directory, without reading it. front.csv,
  hypervolume.csv and the generation's checkpoint are written before the call.
* ``on_finish(summary)``: the :class:`~fedevo.searching.run.Summary`, or None when the search stops on an error or
  Ctrl-C (the exception goes on after the call). Called once for every ``SearchRun.run`` (also when nothing was
  left to do, or when the run could not even start: run directory in use, corrupt checkpoint, Ray refused), after
  the run directory is released.

An exception raised by a callback stops the search (resumable, as an error would): a callback that must never do
so (fedevo.viz.live's page) catches its own.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from .rundata import RunData


class SearchCallback:
    """Hooks of a running search; every one does nothing unless overridden."""

    def on_start(self, *, n_gen: int, generation: int, total: int, done: int,
                 rows: Sequence[Mapping[str, Any]] = (), runner: str = "", run_dir=None, eps_key: str = "eps",
                 objectives=None, time_left: Optional[float] = None) -> None:
        pass

    def on_generation_start(self, generation: int) -> None:
        pass

    def on_evaluation(self, row: Mapping[str, Any]) -> None:
        pass

    def on_tick(self, running: int, queued: int = 0) -> None:
        pass

    def on_generation(self, generation: int, run: RunData) -> None:
        pass

    def on_finish(self, summary: Optional[Any]) -> None:
        """summary: a fedevo.searching.run.Summary, or None when the search stopped on an error or Ctrl-C."""


class CallbackList(SearchCallback):
    """Several callbacks as one, each hook called on each callback in the order given."""

    def __init__(self, callbacks: Iterable[SearchCallback] = ()):
        self.callbacks = list(callbacks)

    def on_start(self, **kwargs) -> None:
        for c in self.callbacks:  # the keywords added later go only to an on_start that takes them
            c.on_start(**{k: v for k, v in kwargs.items() if k not in LATER or _takes(c.on_start, k)})

    def on_generation_start(self, generation: int) -> None:
        for c in self.callbacks:
            c.on_generation_start(generation)

    def on_evaluation(self, row: Mapping[str, Any]) -> None:
        for c in self.callbacks:
            c.on_evaluation(row)

    def on_tick(self, running: int, queued: int = 0) -> None:
        for c in self.callbacks:
            c.on_tick(running, queued)

    def on_generation(self, generation: int, run: RunData) -> None:
        for c in self.callbacks:
            c.on_generation(generation, run)

    def on_finish(self, summary: Optional[Any]) -> None:
        """Every callback's on_finish runs, even if one of them raises (the first exception is raised after)."""
        first: Optional[BaseException] = None
        for c in self.callbacks:
            try:
                c.on_finish(summary)
            except BaseException as e:  # noqa: BLE001 - re-raised below, once every callback has finished
                first = first or e
        if first is not None:
            raise first


LATER = ("objectives", "time_left")  # on_start's keywords that callbacks written before them do not take


def _takes(fn, name: str) -> bool:
    """True when `fn` accepts the keyword `name` (by name, or through **kwargs)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


class Throttled(SearchCallback):
    """A callback whose ``on_generation`` runs at most every `seconds` (the first generation always; later ones
    once `seconds` have passed since the last call it let through began), and, where that call itself took long,
    not before `rest` times its duration has passed since it ended: for costly reports such as a page rewritten
    while the search runs, whose cost grows with the run (front.html took seconds to write at thousands of
    evaluations, and a write every 10 s then took a large share of a search of fast evaluations; with `rest` = 4
    it stays within a fifth). Every other hook is passed on as it comes."""

    def __init__(self, callback: SearchCallback, seconds: float, clock=None, rest: float = 0.0):
        import time

        self.callback = callback
        self.seconds = float(seconds)
        self.rest = float(rest)
        self.clock = clock or time.monotonic
        self._last: Optional[float] = None
        self._end = 0.0
        self._took = 0.0

    def on_start(self, **kwargs) -> None:
        CallbackList([self.callback]).on_start(**kwargs)

    def on_generation_start(self, generation: int) -> None:
        self.callback.on_generation_start(generation)

    def on_evaluation(self, row: Mapping[str, Any]) -> None:
        self.callback.on_evaluation(row)

    def on_tick(self, running: int, queued: int = 0) -> None:
        self.callback.on_tick(running, queued)

    def on_generation(self, generation: int, run: RunData) -> None:
        now = self.clock()
        if self._last is None or (now - self._last >= self.seconds and now - self._end >= self.rest * self._took):
            self._last = now
            try:
                self.callback.on_generation(generation, run)
            finally:
                self._end = self.clock()
                self._took = self._end - now

    def on_finish(self, summary: Optional[Any]) -> None:
        self.callback.on_finish(summary)


__all__ = ["CallbackList", "SearchCallback", "Throttled"]
