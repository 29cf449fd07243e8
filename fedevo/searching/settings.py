"""What defines a search (SearchSettings, stored in run.json), how it is evaluated (Runtime), and the evaluation
seeds derived from the run's seed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from ..errors import FedevoError
from ..guards import check_rounds, check_search_sizes, check_seed
from .evaluator import DEFAULT_EVALUATOR


def n_ref_dirs(partitions: int, n_obj: int = 3) -> int:
    """Number of Das–Dennis reference directions: C(partitions + n_obj - 1, n_obj - 1)."""
    return math.comb(partitions + n_obj - 1, n_obj - 1)


@dataclass(frozen=True)
class SearchSettings:
    """What defines a search (stored in run.json; the same settings + seed give the same front)."""

    problem: str = "digits_mlp"
    pop: int = 12
    gen: int = 4
    seed: int = 0
    partitions: Optional[int] = None  # Das–Dennis partitions; None: the largest whose directions fit in pop
    rounds: Optional[int] = None  # override the problem's rounds per evaluation
    data_dir: Optional[str] = None
    evaluator: str = DEFAULT_EVALUATOR
    # multi-fidelity rung ladder (fractions of the rounds, increasing, ending at 1; fedevo.searching.fidelity);
    # None: the problem file's `fidelity`, else the plain search. (1.0,) is the plain search too.
    fidelity: Optional[tuple[float, ...]] = None
    # warm start (--init-from RUN; fedevo.searching.warmstart): the genes that begin the initial population, and
    # the run they came from (recorded: a resume never reads that run again). None: a random initial population.
    init: Optional[tuple[dict, ...]] = None
    init_from: Optional[str] = None

    @property
    def multi_fidelity(self) -> bool:
        return self.fidelity is not None and len(self.fidelity) > 1

    def resolved(self) -> "SearchSettings":
        """Validated copy with `partitions` filled in; bad values raise FedevoError."""
        if self.gen < 1:
            raise FedevoError(f"--gen must be >= 1 (generation 1 is the initial population), got {self.gen}")
        check_seed(self.seed)
        check_rounds(self.rounds)
        check_search_sizes(self.pop, self.gen)
        if self.pop < n_ref_dirs(1):
            raise FedevoError(f"--pop {self.pop} is too small: NSGA-III needs at least one individual per reference "
                              f"direction, and 3 objectives need at least {n_ref_dirs(1)} Das–Dennis directions "
                              f"(n_partitions=1); use --pop {n_ref_dirs(1)} or more (the paper uses 20)")
        p = self.partitions
        if p is None:
            p = 1
            while n_ref_dirs(p + 1) <= self.pop:
                p += 1
        elif p < 1:
            raise FedevoError(f"--partitions must be >= 1, got {p}")
        elif n_ref_dirs(p) > self.pop:
            raise FedevoError(f"--pop {self.pop} is too small for --partitions {p}: that gives {n_ref_dirs(p)} "
                              f"Das–Dennis reference directions for 3 objectives and NSGA-III needs --pop >= "
                              f"{n_ref_dirs(p)}")
        from .fidelity import parse_ladder

        init = None if self.init is None else tuple(dict(x) for x in self.init)
        if init is not None and len(init) > self.pop:
            raise FedevoError(f"--init-from: {len(init)} starting individuals do not fit in --pop {self.pop}")
        return replace(self, partitions=p, fidelity=parse_ladder(self.fidelity), init=init)

    @property
    def expected_evaluations(self) -> int:
        """Rows of evaluations.csv when nothing fails: initial population + (gen - 1) generations of `pop`
        offspring, each with its promoted rung evaluations in a multi-fidelity search."""
        if self.multi_fidelity:
            from .fidelity import expected_per_generation

            return self.gen * expected_per_generation(self.pop, len(self.fidelity))
        return self.pop * self.gen


@dataclass(frozen=True)
class Runtime:
    """How to evaluate (not part of a run's identity: may change on resume)."""

    workers: Optional[int] = None  # None: number of cores; 0: serial, in-process
    ray_address: Optional[str] = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    eval_timeout: Optional[float] = None  # seconds an evaluation may take (None: the problem file's eval_timeout)


def eval_seed(run_seed: int, individual_id: int) -> int:
    """The evaluation seed of individual `individual_id`: independent of worker count and completion order."""
    return int(np.random.SeedSequence([run_seed, individual_id]).generate_state(1)[0])


__all__ = ["Runtime", "SearchSettings", "eval_seed", "n_ref_dirs"]
