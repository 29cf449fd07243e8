"""Any pymoo algorithm as an optimiser (:class:`PymooOptimizer`): NSGA-III (nsga3.py) and your own — SMS-EMOA,
AGE-MOEA, MOEA/D, NSGA-II, ... — through pymoo's ask and tell.

A subclass gives ``algorithm()``: the pymoo algorithm, made with ``self.pop`` offspring a batch and, for the
search's int and choice genes and its warm start, ``repair=self.repair`` and ``sampling=self.sampling``. It is
set up here on the search problem (never terminating by itself: the run loop counts batches) with ``self.seed``
unless the algorithm was given a seed of its own. Its state is the pymoo algorithm object itself (population,
archive, RNG), pickled in every checkpoint, so a run killed anywhere resumes with the same asks. pymoo asks a
whole generation at a time; a budget's last batch evaluates its first n.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Mapping, Optional, Sequence

import numpy as np
from pymoo.core.problem import Problem as PymooProblem

from .base import Optimizer


class _Told(PymooProblem):
    """A pymoo Problem that 'evaluates' a population by handing back the values already measured, so that pymoo's
    own Evaluator fills the population (F, G, CV, feasibility, its evaluation counter) exactly as when it called
    the search problem itself."""

    def __init__(self, like, F: np.ndarray, G: np.ndarray):
        super().__init__(n_var=like.n_var, n_obj=like.n_obj, n_ieq_constr=like.n_ieq_constr, xl=like.xl, xu=like.xu)
        self.F, self.G = F, G

    def _evaluate(self, X, out, *args, **kwargs):
        out["F"] = self.F
        if self.n_ieq_constr:
            out["G"] = self.G


class PymooOptimizer(Optimizer):
    """A pymoo algorithm through ask and tell: subclasses set ``name`` and give ``algorithm()`` (the module's
    docstring). Your own (docs/search.md "Your own optimiser")::

        class SMSEMOA(PymooOptimizer):
            name = "sms-emoa"

            def algorithm(self):
                from pymoo.algorithms.moo.sms import SMSEMOA
                return SMSEMOA(pop_size=self.pop, n_offsprings=self.pop, sampling=self.sampling,
                               repair=self.repair, eliminate_duplicates=True)
    """

    def __init__(self, space, problem, *, pop: int, seed: int, settings=None):
        super().__init__(space, problem, pop=pop, seed=seed, settings=settings)
        self.algorithm_ = None  # the set-up pymoo algorithm (its state)
        self._pending = None

    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def algorithm(self):
        """The pymoo algorithm, set up here or already (``problem`` set: as NSGA-III's is, algorithm.py)."""
        raise NotImplementedError

    @property
    def repair(self):
        """pymoo Repair rounding the int and choice genes without bias (the search space's)."""
        from ..space import GeneRepair

        return GeneRepair(self.space)

    @property
    def sampling(self):
        """The initial population's sampling: uniform in the encoded box, or a warm start's genes first
        (--init-from) and uniform draws after them."""
        s = self.settings
        if s is not None and s.init is not None:
            from ..warmstart import initial_population

            return initial_population(self.space, s.init, self.pop, self.seed)
        from pymoo.operators.sampling.rnd import FloatRandomSampling

        return FloatRandomSampling()

    @classmethod
    def warm_start_size(cls, pop: int) -> int:
        return int(pop)  # the warm start is the start of its initial population

    def _new(self):
        alg = self.algorithm()
        if getattr(alg, "problem", None) is None:
            from pymoo.config import Config
            from pymoo.core.termination import NoTermination

            Config.warnings["not_compiled"] = False
            alg.setup(self.problem, termination=NoTermination(), verbose=False,
                      seed=self.seed if alg.seed is None else alg.seed)
        return alg

    def ask(self, n: int) -> list[dict[str, Any]]:
        if self.algorithm_ is None:
            self.algorithm_ = self._new()
        infills = self.algorithm_.ask()
        if infills is None or len(infills) == 0:  # no new (non-duplicate) offspring
            self._pending = None
            return []
        if n < len(infills):  # the last batch of an evaluation budget
            infills = infills[:n]
        self._pending = infills
        return self.problem.space.decode_batch(infills.get("X"))

    def tell(self, params: Sequence[Mapping[str, Any]], F, G: Optional[np.ndarray] = None) -> None:
        F, G = self._check_told(params, F, G)
        infills, self._pending = self._pending, None
        if infills is None or len(infills) != len(params):
            raise RuntimeError("tell() does not answer the last ask()")
        self.algorithm_.evaluator.eval(_Told(self.problem, F, G), infills, algorithm=self.algorithm_)
        self.algorithm_.tell(infills=infills)
        self.batch += 1

    def state(self) -> Any:
        if self.algorithm_ is None:
            self.algorithm_ = self._new()
        return self.algorithm_

    def restore(self, state: Any) -> None:
        self.algorithm_ = state
        self.problem = state.problem  # as checkpointed (runs made before log ε keep their linear ε scale)

    def describe(self) -> dict[str, Any]:
        return {"name": f"pymoo {type(self.algorithm()).__name__}", "seed": self.seed, "batch_size": self.pop}


__all__ = ["PymooOptimizer"]
