"""``--optimizer nsga3`` (the default): pymoo's NSGA-III through ask and tell, configured as in
:mod:`fedevo.searching.algorithm` (seed 004). Its state is the pymoo algorithm object itself (population,
reference-point normalisation, RNG), pickled in every checkpoint as before this seam existed, so runs and
checkpoints made before it continue unchanged and the same seeds give the same fronts."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

import numpy as np
from pymoo.core.problem import Problem as PymooProblem

from ..algorithm import CROSSOVER, MUTATION, make_nsga3
from .registry import register
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


@register
class NSGA3Optimizer(Optimizer):
    name = "nsga3"
    summary = "NSGA-III (pymoo; seed 004): Das–Dennis reference directions, SBX + polynomial mutation"
    uses_reference_directions = True

    def __init__(self, space, problem, *, pop: int, seed: int, settings=None):
        super().__init__(space, problem, pop=pop, seed=seed, settings=settings)
        self.algorithm = None
        self._pending = None

    @classmethod
    def warm_start_size(cls, pop: int) -> int:
        return int(pop)  # the warm start is the start of its initial population

    def _new(self):
        s = self.settings
        initial = None
        if s is not None and s.init is not None:
            from ..warmstart import initial_population

            initial = initial_population(self.space, s.init, s.pop, s.seed)
        partitions = s.partitions if s is not None else None
        return make_nsga3(self.space, self.problem, pop=self.pop, partitions=partitions, seed=self.seed,
                          initial=initial)

    def ask(self, n: int) -> list[dict[str, Any]]:
        if self.algorithm is None:
            self.algorithm = self._new()
        infills = self.algorithm.ask()
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
        self.algorithm.evaluator.eval(_Told(self.problem, F, G), infills, algorithm=self.algorithm)
        self.algorithm.tell(infills=infills)
        self.batch += 1

    def state(self) -> Any:
        if self.algorithm is None:
            self.algorithm = self._new()
        return self.algorithm

    def restore(self, state: Any) -> None:
        self.algorithm = state
        self.problem = state.problem  # as checkpointed (runs made before log ε keep their linear ε scale)

    def describe(self) -> dict[str, Any]:
        p = self.settings.partitions if self.settings is not None else None
        return {"name": "pymoo NSGA3",
                "ref_dirs": f"das-dennis, {self.n_obj} objectives, n_partitions={p}",
                "selection": "binary tournament (constraint violation, else random)",
                "crossover": f"SBX({CROSSOVER})", "mutation": f"PM({MUTATION}, prob_var=min(0.5, 1/n_var))",
                "repair": "int/choice genes rounded on [low-1/2, high+1/2] (unbiased)",
                "eliminate_duplicates": True, "seed": self.seed}
