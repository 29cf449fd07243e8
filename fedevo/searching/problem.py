"""The pymoo Problem: decode X, hand the batch to an injected evaluator, fill F (and G).

Objectives: the run's :class:`~fedevo.objectives.ObjectiveSet` (default error, comm and the problem's ε,
``eps_objective``), each as the optimiser sees it — ε as log10 ε (``eps_scale = "log10"``, see
:mod:`fedevo.searching.front_math`; checkpoints of runs made before that choice keep ``"linear"``), a maximised
objective negated. pymoo normalises objectives (NSGA-III's hyperplane normalisation), which breaks on inf/NaN, so
every non-finite objective (a failed or diverged evaluation, ε = inf without privacy) becomes its objective's
fixed, large, finite *worst value* and finite values beyond it are capped to it; an evaluation whose status is
not ``ok`` (failed, diverged) gets the worst value in every objective, so that a broken configuration never
survives for its (real) low communication or ε (the rule is ObjectiveSet's alone). Constraints from the problem
file (``[constraints] eps = 8``) become ``G = f - bound <= 0`` on the same scale; a failed or diverged evaluation
violates every one (G > 0, ``ObjectiveSet.violations``), also where a bound lies at or above the worst value.

The evaluator is injected (pymoo style: the parallelism and the evaluation function come from outside):
``batch_evaluate(list_of_gene_dicts) -> list of evaluations``, each a logged row (a mapping: ``row[name]``) or an
:class:`~fedevo.result.EvaluationResult` (each objective's ``read``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
from pymoo.core.problem import Problem as PymooProblem

from ..objectives import ObjectiveSet, as_set
from .front_math import EPS_SCALE
from .space import SearchSpace

__all__ = ["SearchProblem", "status_of"]


def status_of(result: Any) -> str:
    """An evaluation's status (ok, diverged, failed): a logged row's ``status`` or a result's."""
    return result.get("status", "ok") if isinstance(result, Mapping) else getattr(result, "status", "ok")


class SearchProblem(PymooProblem):
    """pymoo Problem over a :class:`SearchSpace`; evaluation is delegated to ``batch_evaluate``.

    objectives: the run's ObjectiveSet (or names / records); None: error, comm and ``eps_key``."""

    def __init__(self, space: SearchSpace, *, eps_key: str = "eps",
                 constraints: Optional[Mapping[str, float]] = None,
                 batch_evaluate: Optional[Callable[[list[dict[str, Any]]], Sequence[Any]]] = None,
                 eps_scale: Optional[str] = None, objectives=None):
        self.space = space
        self.eps_key = eps_key
        self.eps_scale = eps_scale or EPS_SCALE
        objectives = as_set(objectives, eps_key)
        # records, not Objectives: a checkpoint pickles the problem, and a user's read function may not pickle
        self.objective_records = tuple(objectives.records())
        self.constraint_items = tuple(sorted((constraints or {}).items()))
        self.batch_evaluate = batch_evaluate
        super().__init__(n_var=space.n_var, n_obj=len(objectives), n_ieq_constr=len(self.constraint_items),
                         xl=space.xl, xu=space.xu)

    # the evaluator (Ray handles, open files) is not part of the algorithm's state: checkpoints leave it out
    def __getstate__(self):
        state = dict(self.__dict__)
        state["batch_evaluate"] = None
        state.pop("_objectives", None)
        return state

    @property
    def objectives(self) -> ObjectiveSet:
        """The objectives as this problem's optimiser sees them (a checkpoint made before log ε: no log)."""
        scale = getattr(self, "eps_scale", "linear")  # checkpoints made before log ε have no attribute
        cached = self.__dict__.get("_objectives")
        if cached is None or cached[0] != scale:
            records = self.__dict__.get("objective_records")  # checkpoints made before the objectives list: none
            s = ObjectiveSet.of(records) if records else as_set(None, self.eps_key)
            cached = (scale, s if scale == "log10" else s.linear())
            self.__dict__["_objectives"] = cached
        return cached[1]

    def objectives_of(self, result: Any) -> np.ndarray:
        """F of one evaluation (a logged row or a result); a failed or diverged one is worst in every objective."""
        return self.objectives.vector_of(result)

    def constraints_of(self, F: np.ndarray, result: Any = None) -> np.ndarray:
        """G of one evaluation (<= 0 feasible): F - bound on the optimiser's scale; given the evaluation itself
        (`result`: a logged row or a result), ObjectiveSet.violations: a failed or diverged evaluation violates every
        constraint, whatever its bound (a bound at or above an objective's worst value let F - bound say feasible)."""
        objs = self.objectives
        if result is not None:
            status = status_of(result)
            return objs.violations(objs.raw(result) if status == "ok" else {}, dict(self.constraint_items), status)
        return np.array([F[j] - objs[j].search_bound(b)
                         for j, b in objs.constraint_items(dict(self.constraint_items))])

    def _evaluate(self, X, out, *args, **kwargs):
        if self.batch_evaluate is None:
            raise RuntimeError("SearchProblem has no evaluator attached (set problem.batch_evaluate)")
        params = self.space.decode_batch(X)
        results = self.batch_evaluate(params)
        if len(results) != len(params):
            raise RuntimeError(f"evaluator returned {len(results)} results for {len(params)} individuals")
        F = np.array([self.objectives_of(r) for r in results]).reshape(len(params), self.n_obj)
        out["F"] = F
        if self.constraint_items:
            out["G"] = np.array([self.constraints_of(f, r) for f, r in zip(F, results)]).reshape(len(params), -1)
