"""``--optimizer nsga3`` (the default): pymoo's NSGA-III through ask and tell (pymoo_base.py), configured as in
:mod:`fedevo.searching.algorithm` (seed 004). Its state is the pymoo algorithm object itself (population,
reference-point normalisation, RNG), pickled in every checkpoint as before this seam existed, so runs and
checkpoints made before it continue unchanged and the same seeds give the same fronts."""

from __future__ import annotations

from typing import Any

from ..algorithm import CROSSOVER, MUTATION, make_nsga3
from .registry import register
from .pymoo_base import PymooOptimizer, _Told  # noqa: F401  (_Told: where checkpoints made before may name it)


@register
class NSGA3Optimizer(PymooOptimizer):
    name = "nsga3"
    summary = "NSGA-III (pymoo; seed 004): Das–Dennis reference directions, SBX + polynomial mutation"
    uses_reference_directions = True

    def algorithm(self):
        s = self.settings
        initial = None
        if s is not None and s.init is not None:
            from ..warmstart import initial_population

            initial = initial_population(self.space, s.init, s.pop, s.seed)
        partitions = s.partitions if s is not None else None
        return make_nsga3(self.space, self.problem, pop=self.pop, partitions=partitions, seed=self.seed,
                          initial=initial)

    def describe(self) -> dict[str, Any]:
        p = self.settings.partitions if self.settings is not None else None
        return {"name": "pymoo NSGA3",
                "ref_dirs": f"das-dennis, {self.n_obj} objectives, n_partitions={p}",
                "selection": "binary tournament (constraint violation, else random)",
                "crossover": f"SBX({CROSSOVER})", "mutation": f"PM({MUTATION}, prob_var=min(0.5, 1/n_var))",
                "repair": "int/choice genes rounded on [low-1/2, high+1/2] (unbiased)",
                "eliminate_duplicates": True, "seed": self.seed}
