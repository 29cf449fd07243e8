"""The NSGA-III configuration (seed 004 §2.4, §3.4; Deb & Jain 2014) as pymoo objects.

* Das–Dennis reference directions for the problem's objectives (3 by default) (``n_partitions`` chosen so that pop >= directions);
* binary tournament: the less constraint-violating individual wins, else a random one (pymoo's NSGA-III
  default, as in Deb & Jain: parents are picked at random, feasibility first);
* SBX crossover (prob 0.9, eta 15) and polynomial mutation (eta 20, each gene with prob min(1/2, 1/n_var)),
  followed by :class:`~fedevo.searching.space.GeneRepair`, which rounds the int/choice genes without bias;
* duplicates eliminated, ``pop`` offspring per generation (pymoo evaluates only the offspring; parents keep
  their objectives), reference-direction survival.

Everything here pickles by reference (checkpoints hold the whole algorithm object).
"""

from __future__ import annotations

import numpy as np
from pymoo.algorithms.moo.nsga3 import NSGA3
from pymoo.operators.selection.tournament import compare

from .problem import SearchProblem
from .space import GeneRepair, SearchSpace

CROSSOVER = {"prob": 0.9, "eta": 15}
MUTATION = {"eta": 20}


def binary_tournament(pop, P, random_state=None, **kwargs):
    """pymoo's NSGA-III tournament comparator (`comp_by_cv_then_random`: the less constraint-violating parent wins,
    a tie or two feasible ones by a coin), as a module-level function so that checkpoints pickle, and with every
    coin from the algorithm's own seeded generator: pymoo 0.6.2's passes none to `compare` for two infeasible
    parents of equal violation, which then tossed it with a fresh unseeded generator, so that the same seed gave
    another front wherever such parents met (a problem file's [constraints] with several evaluations equally far
    outside them, e.g. ε = ∞). pymoo's own fix (anyoptimization/pymoo#794, #795) came after 0.6.2; this is the same
    comparator."""
    S = np.full(P.shape[0], np.nan)
    for i in range(P.shape[0]):
        a, b = P[i, 0], P[i, 1]
        if pop[a].CV > 0.0 or pop[b].CV > 0.0:
            S[i] = compare(a, pop[a].CV, b, pop[b].CV, method="smaller_is_better", return_random_if_equal=True,
                           random_state=random_state)
        else:
            S[i] = random_state.choice([a, b])
    return S[:, None].astype(int)


def make_nsga3(space: SearchSpace, problem: SearchProblem, *, pop: int, partitions: int, seed: int,
               initial=None) -> NSGA3:
    """A set-up NSGA3 (ask/tell ready, never terminating by itself: the caller counts generations). initial: the
    encoded initial population (pop × genes, fedevo.searching.warmstart), repaired like pymoo's own sampling;
    None: pymoo's uniform random sampling."""
    from pymoo.config import Config
    from pymoo.core.termination import NoTermination
    from pymoo.operators.crossover.sbx import SBX
    from pymoo.operators.mutation.pm import PM
    from pymoo.operators.sampling.rnd import FloatRandomSampling
    from pymoo.operators.selection.tournament import TournamentSelection
    from pymoo.util.ref_dirs import get_reference_directions

    Config.warnings["not_compiled"] = False
    ref_dirs = get_reference_directions("das-dennis", problem.n_obj, n_partitions=partitions)
    assert len(ref_dirs) <= pop, (len(ref_dirs), pop)
    sampling = FloatRandomSampling() if initial is None else initial
    algorithm = NSGA3(ref_dirs=ref_dirs, pop_size=pop, n_offsprings=pop, sampling=sampling,
                      selection=TournamentSelection(func_comp=binary_tournament, pressure=2),
                      crossover=SBX(**CROSSOVER), mutation=PM(**MUTATION), repair=GeneRepair(space),
                      eliminate_duplicates=True, seed=seed)
    algorithm.setup(problem, termination=NoTermination(), verbose=False)
    return algorithm
