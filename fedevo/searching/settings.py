"""What defines a search (SearchSettings, stored in run.json), how it is evaluated (Runtime), and the evaluation
seeds derived from the run's seed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Union

import numpy as np

from ..errors import FedevoError, arg
from ..guards import check_rounds, check_search_sizes, check_seed, check_task_resources
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
    # the optimiser (fedevo.searching.optimizers: nsga3, random, gp, tpe) and the budgets: the search ends at the
    # first reached of --gen batches of --pop, `budget` evaluations (individuals asked), `time_budget` seconds of
    # search (counted across resumes) and `patience` batches without hypervolume growth (fedevo.searching.budgets)
    optimizer: str = "nsga3"
    budget: Optional[int] = None
    time_budget: Optional[float] = None
    patience: Optional[int] = None
    # --gen not given, derived from the other budgets (budgets.default_gen): a count for displays, never what ends
    # the search (--budget, --time-budget or --patience does: a short batch cannot end it below --budget, and a
    # time budget is not cut at OPEN_GEN batches). False: --gen as given (and runs made before this field).
    gen_derived: bool = False

    @property
    def multi_fidelity(self) -> bool:
        return self.fidelity is not None and len(self.fidelity) > 1

    def resolved(self, n_obj: int = 3) -> "SearchSettings":
        """Validated copy with `partitions` filled in (NSGA-III's, for `n_obj` objectives); bad values raise
        FedevoError."""
        from .budgets import check_budgets
        from .optimizers.registry import check_name, uses_reference_directions  # (registers the built-in ones)

        if self.gen < 1:
            raise FedevoError(f"{arg('gen')} must be >= 1 (generation 1 is the initial population), got {self.gen}")
        check_seed(self.seed)
        check_rounds(self.rounds)
        check_search_sizes(self.pop, self.gen)
        check_name(self.optimizer)
        check_budgets(self.budget, self.time_budget, self.patience)
        refs = uses_reference_directions(self.optimizer)
        if refs is None:  # your own class, not loaded by this reader: as run.json recorded its partitions
            refs = self.partitions is not None
        if not refs:
            if self.partitions is not None:
                raise FedevoError(f"{arg('partitions')} sets NSGA-III's reference directions; "
                                  f"{arg('optimizer', self.optimizer)} has none: drop {arg('partitions')}")
            if self.pop < 1:
                raise FedevoError(f"{arg('pop')} (the batch size) must be >= 1, got {self.pop}")
            from .fidelity import parse_ladder

            init = None if self.init is None else tuple(dict(x) for x in self.init)
            return replace(self, partitions=None, fidelity=parse_ladder(self.fidelity), init=init)
        if self.pop < n_ref_dirs(1, n_obj):
            least = n_ref_dirs(1, n_obj)
            raise FedevoError(f"{arg('pop', self.pop)} is too small: NSGA-III needs at least one individual per "
                              f"reference direction, and {n_obj} objectives need at least {least} Das–Dennis "
                              f"directions (n_partitions=1); use {arg('pop', least)} or more (the paper uses 20)")
        p = self.partitions
        if p is None:
            p = 1
            while n_ref_dirs(p + 1, n_obj) <= self.pop:
                p += 1
        elif p < 1:
            raise FedevoError(f"{arg('partitions')} must be >= 1, got {p}")
        elif n_ref_dirs(p, n_obj) > self.pop:
            raise FedevoError(f"{arg('pop', self.pop)} is too small for {arg('partitions', p)}: that gives "
                              f"{n_ref_dirs(p, n_obj)} Das–Dennis reference directions for {n_obj} objectives and "
                              f"NSGA-III needs {arg('pop')} >= {n_ref_dirs(p, n_obj)}")
        from .fidelity import parse_ladder

        init = None if self.init is None else tuple(dict(x) for x in self.init)
        if init is not None and len(init) > self.pop:
            raise FedevoError(f"{arg('init_from')}: {len(init)} starting individuals do not fit in "
                              f"{arg('pop', self.pop)}")
        return replace(self, partitions=p, fidelity=parse_ladder(self.fidelity), init=init)

    @property
    def planned_evaluations(self) -> Optional[int]:
        """expected_evaluations where a count bounds the search; None where only --time-budget or --patience does
        (gen_derived without --budget: its OPEN_GEN batches are no bound, so neither are their evaluations)."""
        return None if self.gen_derived and self.budget is None else self.expected_evaluations

    @property
    def expected_evaluations(self) -> int:
        """Rows of evaluations.csv when nothing fails: initial population + (gen - 1) generations of `pop`
        offspring, each with its promoted rung evaluations in a multi-fidelity search."""
        if self.multi_fidelity:
            from .fidelity import expected_per_generation

            return self.gen * expected_per_generation(self.pop, len(self.fidelity))
        return self.pop * self.gen if self.budget is None else min(self.budget, self.pop * self.gen)


@dataclass(frozen=True)
class Runtime:
    """How to evaluate (not part of a run's identity: may change on resume)."""

    workers: Union[int, str, None] = "auto"  # "auto"/None: fedevo.searching.workers decides; 0: in-process; N: Ray
    ray_address: Optional[str] = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    eval_timeout: Optional[float] = None  # seconds an evaluation may take (None: the problem file's eval_timeout)
    # a generation's evaluations a batch at a time on one device (fedevo/searching/batched.py): True, False or None
    # (auto: where they would train on a GPU); batches of at most batch_size_per_gpu (None: one per slot)
    batch_generation: Optional[bool] = None
    batch_size_per_gpu: Optional[int] = None

    def __post_init__(self):  # a search and its resume alike (resume used to take --cpus-per-task 0)
        check_task_resources(cpus_per_task=self.cpus_per_task, gpus_per_task=self.gpus_per_task,
                             workers=self.workers, ray_address=self.ray_address)
        if self.batch_generation is False and self.batch_size_per_gpu is not None:
            raise FedevoError(f"{arg('batch_size_per_gpu')} sizes the batches of {arg('batch_generation', True)}; "
                              f"with {arg('batch_generation', False)} there are none: drop one")

    def resume_options(self) -> str:
        """The options `fedevo resume` needs to continue as this ran (" --ray-address HOST:PORT", " --workers N"
        where given, --cpus-per-task/--gpus-per-task where not the defaults); "" where resume's defaults serve. A
        local `--workers 2` search stopped by Ctrl-C said `fedevo resume DIR`, whose `--workers auto` evaluates
        in-process on 2 cores: its batches of two, one after the other, at half the speed it had chosen (and a
        `--gpus-per-task` dropped trains on the CPU)."""
        from .workers import AUTO

        return ((f" --ray-address {self.ray_address}" if self.ray_address else "")
                + (f" --workers {self.workers}" if self.workers not in (AUTO, None) else "")
                + (f" --cpus-per-task {self.cpus_per_task:g}" if self.cpus_per_task != 1.0 else "")
                + (f" --gpus-per-task {self.gpus_per_task:g}" if self.gpus_per_task else ""))


def eval_seed(run_seed: int, individual_id: int) -> int:
    """The evaluation seed of individual `individual_id`: independent of worker count and completion order."""
    return int(np.random.SeedSequence([run_seed, individual_id]).generate_state(1)[0])


__all__ = ["Runtime", "SearchSettings", "eval_seed", "n_ref_dirs"]
