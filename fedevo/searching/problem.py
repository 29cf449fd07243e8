"""The pymoo Problem: decode X, hand the batch to an injected evaluator, fill F (and G).

Objectives (all minimised): f1 = error, f2 = comm, f3 = ε (the problem's ``eps_objective``: ``eps`` or
``eps_paper``), which the algorithm sees as log10 ε (``eps_scale = "log10"``, see
:mod:`fedevo.searching.front_math`; checkpoints of runs made before that choice keep ``"linear"``).
pymoo normalises objectives (NSGA-III's hyperplane normalisation), which breaks on inf/NaN, so
every non-finite objective (a failed or diverged evaluation, ε = inf without privacy) becomes a fixed, large,
finite *worst value* and finite values above it are clipped to it (``WORST``); an evaluation whose status
is not ``ok`` (failed, diverged) gets the worst value in all three objectives, so that a broken configuration
never survives for its (real) low communication or ε. Constraints from the problem
file (``[constraints] eps = 8``) become ``G = f - bound <= 0``.

The evaluator is injected (pymoo style: the parallelism and the evaluation function come from outside):
``batch_evaluate(list_of_gene_dicts) -> list of results`` where each result has ``objectives(eps_key)``
(an :class:`~fedevo.result.EvaluationResult` or anything with that method).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
from pymoo.core.problem import Problem as PymooProblem

from .front_math import EPS_SCALE, bound_in_search_space, to_search_space
from .objectives import OBJECTIVES, WORST, WORST_F, sanitize
from .space import SearchSpace

__all__ = ["OBJECTIVES", "WORST", "WORST_F", "SearchProblem", "sanitize"]


class SearchProblem(PymooProblem):
    """pymoo Problem over a :class:`SearchSpace`; evaluation is delegated to ``batch_evaluate``."""

    def __init__(self, space: SearchSpace, *, eps_key: str = "eps",
                 constraints: Optional[Mapping[str, float]] = None,
                 batch_evaluate: Optional[Callable[[list[dict[str, Any]]], Sequence[Any]]] = None,
                 eps_scale: Optional[str] = None):
        self.space = space
        self.eps_key = eps_key
        self.eps_scale = eps_scale or EPS_SCALE
        self.constraint_items = tuple(sorted((constraints or {}).items()))
        self.batch_evaluate = batch_evaluate
        super().__init__(n_var=space.n_var, n_obj=3, n_ieq_constr=len(self.constraint_items),
                         xl=space.xl, xu=space.xu)

    # the evaluator (Ray handles, open files) is not part of the algorithm's state: checkpoints leave it out
    def __getstate__(self):
        state = dict(self.__dict__)
        state["batch_evaluate"] = None
        return state

    def objectives_of(self, result: Any) -> np.ndarray:
        """F of one result; a failed or diverged evaluation gets the worst value in every objective."""
        scale = getattr(self, "eps_scale", "linear")  # checkpoints made before log ε have no attribute
        if getattr(result, "status", "ok") != "ok":
            return to_search_space(WORST_F, scale)
        return to_search_space(sanitize(result.objectives(self.eps_key)), scale)

    def constraints_of(self, F: np.ndarray) -> np.ndarray:
        scale = getattr(self, "eps_scale", "linear")
        return np.array([F[OBJECTIVES.index(k)] - bound_in_search_space(k, b, scale)
                         for k, b in self.constraint_items])

    def _evaluate(self, X, out, *args, **kwargs):
        if self.batch_evaluate is None:
            raise RuntimeError("SearchProblem has no evaluator attached (set problem.batch_evaluate)")
        params = self.space.decode_batch(X)
        results = self.batch_evaluate(params)
        if len(results) != len(params):
            raise RuntimeError(f"evaluator returned {len(results)} results for {len(params)} individuals")
        F = np.array([self.objectives_of(r) for r in results]).reshape(len(params), 3)
        out["F"] = F
        if self.constraint_items:
            out["G"] = np.array([self.constraints_of(f) for f in F]).reshape(len(params), -1)
