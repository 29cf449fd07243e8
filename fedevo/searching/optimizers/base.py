"""The optimiser seam: what proposes the candidates of a search (one small class per optimiser).

An optimiser asks for a batch, the run loop evaluates it (in parallel, on its runner), and tells it the results::

    opt = make("random", space, problem, pop=12, seed=0)
    params = opt.ask(12)                  # [{gene: value}, ...]: the candidates, in ask order (their ids follow it)
    F = [problem.objectives_of(r) ...]    # the objective vectors as the optimiser sees them (n × problem.n_obj)
    G = [problem.constraints_of(f) ...]   # the problem file's constraints, <= 0 feasible (n × constraints)
    opt.tell(params, F, G)
    state = opt.state()                   # picklable; checkpointed after every batch
    opt = from_state("random", state, space, problem, ...)   # resumes exactly: the next ask is the same

Rules every optimiser keeps (the run loop and `fedevo resume` rely on them):

* seeded: the same (seed, space, problem, told values) give the same asks, on any machine with the same libraries;
* ``state()`` after ``tell`` holds everything the next ``ask`` depends on, so a run killed anywhere in a batch
  and resumed from the checkpoint before it asks exactly the same candidates again (their logged evaluations
  are then reused);
* ``ask(n)`` returns at most n candidates (NSGA-III: fewer, or none, when its mating finds no new offspring;
  an empty batch ends the search); F holds finite numbers (failed and diverged evaluations get the problem's worst
  values, and G > 0 in every constraint); an optimiser whose ``tell`` takes the keyword ``failed`` (a bool per
  candidate: Optuna's, optuna_samplers.py) is also told which evaluations failed, whose F rows are then no results;
* a warm start (``settings.init``: an earlier run's front, fedevo.searching.warmstart) comes first: its genes are
  the first candidates asked, in order (NSGA-III: the start of its initial population), up to
  ``warm_start_size(pop)`` of them.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..space import SearchSpace


WARM_START = 10  # an earlier front's members a warm start evaluates first (Optuna's random start-up: 10 trials)


class Optimizer:
    """Base class: subclasses set ``name`` and implement ``ask``, ``tell``, ``state`` and ``restore``."""

    name: str = ""
    #: one line for ``--optimizer`` help and docs
    summary: str = ""
    #: whether it needs --pop >= the number of NSGA-III reference directions (only NSGA-III does)
    uses_reference_directions: bool = False
    #: its batch when --pop is not given: a number, or None for "one candidate per parallel evaluation" (a
    #: model-based optimiser learns from every result, so a batch larger than the workers only costs it
    #: information; in-process: batches of one). See registry.default_pop.
    default_pop: Optional[int] = 12

    @classmethod
    def warm_start_size(cls, pop: int) -> int:
        """How many members of an earlier run's front a warm start (--init-from) evaluates first: WARM_START, or a
        batch where that is more (a model-based optimiser's random start-up is replaced by them)."""
        return max(int(pop), WARM_START)

    def __init__(self, space: SearchSpace, problem, *, pop: int, seed: int, settings=None):
        self.space = space
        self.problem = problem  # a SearchProblem: n_obj, objectives_of, constraints_of, n_ieq_constr
        self.pop = int(pop)
        self.seed = int(seed)
        self.settings = settings
        self.batch = 0  # batches told so far
        self.sampler_s = 0.0  # seconds spent in ask + tell of the last batch (the optimiser's own cost)

    # ------------------------------------------------------------------ the interface
    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def ask(self, n: int) -> list[dict[str, Any]]:
        raise NotImplementedError

    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def tell(self, params: Sequence[Mapping[str, Any]], F: np.ndarray, G: Optional[np.ndarray] = None) -> None:
        raise NotImplementedError

    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def state(self) -> Any:
        """Picklable state after the last tell (checkpoints hold it)."""
        raise NotImplementedError

    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def restore(self, state: Any) -> None:
        """Continue from `state` (what `state()` returned)."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """How it searches, for run.json's ``algorithm``."""
        return {"name": self.name, "seed": self.seed, "batch_size": self.pop}

    # ------------------------------------------------------------------ helpers
    @property
    def init(self) -> tuple:
        """The warm start's genes (an earlier run's front), () without one."""
        return tuple(self.settings.init or ()) if self.settings is not None else ()

    def warm(self, asked: int, n: int) -> list[dict[str, Any]]:
        """The warm start's candidates among the next `n` asks, `asked` candidates having been asked before."""
        return [dict(p) for p in self.init[asked:asked + n]]

    @property
    def n_obj(self) -> int:
        return int(self.problem.n_obj)

    def _check_told(self, params, F, G) -> tuple[np.ndarray, np.ndarray]:
        n = len(params)
        F = np.asarray(F, dtype=float).reshape(n, self.n_obj)
        n_con = int(getattr(self.problem, "n_ieq_constr", 0) or 0)
        G = np.zeros((n, 0)) if G is None or n_con == 0 else np.asarray(G, dtype=float).reshape(n, n_con)
        return F, G


def takes_failed(method) -> bool:
    """Whether a ``tell`` takes the keyword ``failed``."""
    import inspect

    try:
        return "failed" in inspect.signature(method).parameters
    except (TypeError, ValueError):  # a tell without a signature Python can read
        return False


def tell(opt: Optimizer, params: Sequence[Mapping[str, Any]], F: np.ndarray, G: Optional[np.ndarray],
         failed: Sequence[bool]) -> None:
    """``opt.tell(params, F, G)``, with ``failed=`` (which evaluations failed or diverged) where its tell takes
    that keyword."""
    if takes_failed(opt.tell):
        opt.tell(params, F, G, failed=list(failed))
    else:
        opt.tell(params, F, G)


__all__ = ["Optimizer", "WARM_START", "takes_failed", "tell"]
