"""What the search evaluates with: a callable, and what it may offer besides.

An *evaluator* is any callable ``evaluator(problem, params, *, seed, rounds, data_dir) -> EvaluationResult``
(``--evaluator module:function``, or ``evaluator=`` in the Python API). It may also offer

* ``check(problem, rounds)``: refuse a problem it cannot evaluate (FedevoError), before the run directory is made;
* ``cost(problem, params, rounds) -> float``: a relative compute estimate of one evaluation; Ray submits the most
  expensive first (longest-first), which leaves the fewest workers idle at the end of a generation.

fedevo's simulator (the spec ``fedevo.evaluate:evaluate``, the default) resolves to :data:`SIMULATOR`, which offers
both: the memory check (:func:`fedevo.guards.check_problem_memory`) and the cost model
(:func:`fedevo.fl.cost.relative_cost`). Any other evaluator, a plain function, gets neither: no memory check, and
the same cost for every evaluation (its tasks go in id order).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ..errors import FedevoError
from ..plugins import on_reimport
from ..result import EvaluationResult

DEFAULT_EVALUATOR = "fedevo.evaluate:evaluate"  # the name run.json records for the simulator (not imported)
_SIMULATOR_FUNCTION = ("fedevo.evaluation", "evaluate")  # the simulator's function, when passed itself

Evaluator = Callable[..., EvaluationResult]


class SimulatorEvaluator:
    """fedevo's FedAvg simulator (:func:`fedevo.evaluation.evaluate`) with its memory check and cost model."""

    spec = DEFAULT_EVALUATOR

    def __call__(self, problem, params: Optional[Mapping[str, Any]] = None, *, seed: int = 0,
                 rounds: Optional[int] = None, data_dir: Optional[str] = None, **kwargs) -> EvaluationResult:
        from ..evaluation import evaluate

        return evaluate(problem, params, seed=seed, rounds=rounds, data_dir=data_dir, **kwargs)

    def warm(self, problem, params: Optional[Mapping[str, Any]] = None, *, rounds: Optional[int] = None,
             data_dir: Optional[str] = None, **_) -> None:
        """Load what an evaluation loads once per process — the simulator's modules, the data into load_data's
        cache — so that a time limit counts the evaluation, not the process's start-up (containment)."""
        from .. import evaluation  # noqa: F401
        from ..data import load_data
        from ..fl import simulate  # noqa: F401

        load_data(problem.sim_config(params, rounds=rounds, data_dir=data_dir).data)

    def check(self, problem, rounds: Optional[int] = None) -> None:
        """Refuse a problem whose largest individual does not fit in the available memory."""
        from ..guards import check_problem_memory

        check_problem_memory(problem, rounds=rounds)

    def cost(self, problem, params: Mapping[str, Any], rounds: Optional[int] = None) -> float:
        """Relative compute of one evaluation; 0 (scheduled last) for genes that fail to build a configuration,
        as such an evaluation fails fast."""
        from ..fl.cost import relative_cost

        try:
            return relative_cost(problem.sim_config(params, rounds=rounds))
        except FedevoError:
            return 0.0

    continues = True  # evaluate(..., until=, resume_from=) continues a training exactly (multi-fidelity search)

    def planned(self, problem, params: Optional[Mapping[str, Any]] = None, rounds: Optional[int] = None) -> dict:
        """The objectives known before training (fedevo.evaluation.planned_objectives); {} for genes that fail to
        build a configuration (their evaluation fails on its own)."""
        from ..evaluation import planned_objectives

        try:
            return planned_objectives(problem, params, rounds=rounds)
        except FedevoError:
            return {}

    def __repr__(self) -> str:
        return f"SimulatorEvaluator({self.spec!r})"


SIMULATOR = SimulatorEvaluator()


def load_evaluator(spec: str) -> Evaluator:
    """'package.module:function' or 'python:file.py:function' -> the function; the default spec ->
    :data:`SIMULATOR`."""
    from ..plugins import check_evaluator_signature, load_callable

    if spec == DEFAULT_EVALUATOR:
        return SIMULATOR
    try:
        fn = load_callable(spec, kind="evaluator")
        check_evaluator_signature(fn)
        return fn
    except FedevoError as e:
        hint = ""
        if spec.startswith("__main__:"):  # a function of the script that called fedevo.search(evaluator=fn)
            hint = (f"; it was a function of the script that started the search: continue from that script with "
                    f"fedevo.resume(RUN, evaluator={spec.split(':', 1)[1]}), or move it to a module and name it "
                    "'module:function'")
        raise FedevoError(f"cannot load evaluator {spec!r}: {e}{hint}") from None


_LOADED: dict[str, Callable] = {}  # spec -> the evaluator function this process imported (see ProblemEvaluator)
on_reimport(_LOADED.clear)  # (a module beside its file reloaded after an edit: the file is imported anew, plugins)


class ProblemEvaluator:
    """A problem file's own `evaluator` (the user's training): called with the problem's fixed `[settings]` and
    the individual's genes as one dict, its result read by :func:`fedevo.result.measured`. Extra keyword
    arguments fedevo's simulator takes (retrain's eval_every, progress) are not passed on.

    A process imports a `python:` file's function once and calls that function for the rest of its life, as it
    does a model's factory: the file edited while a search runs (an editor's save, a `git pull`) leaves the running
    search on the code it recorded in run.json, where checking the file at every call failed every later
    evaluation; a new search or a resume in this process is refused at its start (fedevo.api), as a new process
    would be. A `module:function` is looked up at every call, as Python's import system holds it: a notebook's
    `importlib.reload(module)` is the code that runs."""

    def __init__(self, spec: str):
        self.spec = spec

    def _function(self) -> Callable:
        from ..plugins import PYTHON_PREFIX, load_callable

        if not self.spec.startswith(PYTHON_PREFIX):
            return load_callable(self.spec, kind="evaluator")
        fn = _LOADED.get(self.spec)
        if fn is None:
            fn = _LOADED[self.spec] = load_callable(self.spec, kind="evaluator")
        return fn

    def __call__(self, problem, params: Optional[Mapping[str, Any]] = None, *, seed: int = 0,
                 rounds: Optional[int] = None, data_dir: Optional[str] = None, **_simulator_only) -> EvaluationResult:
        from ..result import measured

        import time
        from dataclasses import replace

        fn = self._function()
        params = problem.resolve(params)
        t0 = time.perf_counter()
        raw = fn(problem, params, seed=seed, rounds=rounds, data_dir=data_dir)
        seconds = time.perf_counter() - t0
        result = measured(raw, seconds, rounds or params.get("rounds") or 0)
        # an EvaluationResult built without its time: fedevo's too (the row's wall_s is real, never 0.0)
        return result if result.wall_s else replace(result, wall_s=seconds)

    def warm(self, problem, params: Optional[Mapping[str, Any]] = None, **kwargs) -> None:
        """Import the user's evaluator (what a process does once) and run its own ``warm``, if it has one (e.g. an
        object whose ``warm(problem, params, rounds=, data_dir=)`` loads the data once per process): neither
        counts against a time limit (containment)."""
        warm = getattr(self._function(), "warm", None)
        if callable(warm):
            warm(problem, problem.resolve(params), **kwargs)

    def __repr__(self) -> str:
        return f"ProblemEvaluator({self.spec!r})"


def evaluating_spec(spec: str, problem) -> str:
    """The spec of what evaluates `problem` under a run's evaluator `spec`: `spec`, except that the default
    (fedevo's simulator) gives way to the problem file's own `evaluator` when it names one."""
    own = getattr(problem, "evaluator", None)
    return own if spec == DEFAULT_EVALUATOR and own else spec


def warm_up(evaluator: Evaluator, problem, params: Mapping[str, Any], eval_kwargs: Mapping[str, Any]) -> Callable:
    """What a child process runs before an evaluation's time limit starts counting: the evaluator's ``warm`` (its
    once-per-process loading), if it has one."""
    warm = getattr(evaluator, "warm", None)
    return (lambda: warm(problem, dict(params), rounds=eval_kwargs.get("rounds"),
                         data_dir=eval_kwargs.get("data_dir"))) if callable(warm) else None


def for_problem(spec: str, problem) -> Evaluator:
    """What evaluates `problem` (evaluating_spec): the evaluator `spec` names, or the problem file's own."""
    if evaluating_spec(spec, problem) != spec:
        return ProblemEvaluator(problem.evaluator)
    return load_evaluator(spec)


def evaluator_spec(evaluator: Evaluator) -> str:
    """The 'module:function' run.json records for an evaluator (the simulator's: the default spec)."""
    if isinstance(evaluator, SimulatorEvaluator):
        return evaluator.spec
    name = getattr(evaluator, "__qualname__", None)
    if (getattr(evaluator, "__module__", None), name) == _SIMULATOR_FUNCTION:
        return DEFAULT_EVALUATOR
    if name is None:  # an object: its name in its module is not known here
        raise FedevoError(f"evaluator {evaluator!r} has no 'module:name' to record in run.json; pass it by name "
                          "(SearchSettings(evaluator='package.module:name'))")
    return f"{evaluator.__module__}:{name}"


def resolve(evaluator: Evaluator) -> Evaluator:
    """The simulator's function itself (passed as ``evaluator=``) -> :data:`SIMULATOR`; anything else as it is."""
    return SIMULATOR if evaluator_spec(evaluator) == DEFAULT_EVALUATOR else evaluator


def check(evaluator: Evaluator, problem, rounds: Optional[int] = None) -> None:
    """The evaluator's own check of a problem, if it offers one."""
    fn = getattr(evaluator, "check", None)
    if fn is not None:
        fn(problem, rounds)


def cost(evaluator: Evaluator, problem, params: Mapping[str, Any], rounds: Optional[int] = None) -> float:
    """The evaluator's cost estimate of one evaluation, if it offers one; else 1 (every evaluation alike)."""
    fn = getattr(evaluator, "cost", None)
    return 1.0 if fn is None else float(fn(problem, params, rounds))


__all__ = ["DEFAULT_EVALUATOR", "Evaluator", "ProblemEvaluator", "SIMULATOR", "SimulatorEvaluator", "check", "cost",
           "evaluator_spec", "for_problem", "load_evaluator", "resolve"]
