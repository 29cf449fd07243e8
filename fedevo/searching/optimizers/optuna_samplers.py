"""``--optimizer gp`` and ``--optimizer tpe``: Optuna's model-based samplers through ask-and-tell, for expensive
evaluations (a Gaussian process needs far fewer evaluations than NSGA-III for a good front; its own cost grows
with the evaluations it has seen: seconds per proposal, so it pays where an evaluation takes many seconds).

* Genes become Optuna distributions: ``int`` -> IntDistribution(low, high, log), ``real`` ->
  FloatDistribution(low, high, log), ``choice`` -> CategoricalDistribution(choices). Values told are the objective
  vector as the search sees it (:meth:`SearchProblem.objectives_of`: log10 ε), all minimised; the problem file's
  constraints are told as the trial's constraints (``constraints:cK`` system attributes, what ``Trial.set_constraint``
  writes; feasible <= 0), which both samplers read (GPSampler: constrained log EHVI; TPE: feasibility first).
* A failed or diverged evaluation (``tell(..., failed=)``, the run loop says which) is kept with F None and told to
  each study by the optimiser's ``failures`` rule (`trials_of`; its G violates every constraint): ``gp`` (and an
  OptunaOptimizer of yours) as a completed trial at the worst value OBSERVED among the completed trials, per
  objective (a FAIL trial while none has completed); ``tpe`` as a FAIL trial, which its sampler skips. Never its
  objectives' worst values: one comm of 1e9 among values of 10-1,000 flattened every real one once Optuna
  standardised them (measured: benchmarks/failure_telling.py, docs/search.md "Failed evaluations") — except in a
  run whose checkpoint an earlier fedevo made, which keeps that rule ("worst") so that its resume stays exact.
* Batches: the n candidates of a batch are asked one after another, the earlier ones left RUNNING, so the GP's
  acquisition (qLogEHVI over running trials, sequential greedy) and TPE's constant liar spread them out: the
  parallel workers get n different, useful candidates.
* A warm start (--init-from): the earlier front's genes are enqueued as the first trials (``enqueue_trial``:
  asked RUNNING with those values, so the rest of their batch spreads out from them too) and replace Optuna's
  random start-up; they stand at the told count, so resume places them again.
* Exact resume: the optimiser's state is the told (params, F, G) a batch's study may still see, in id order (F
  None: a failure), and the count told. Each batch builds a fresh in-memory study, adds those trials in id order
  and asks with a sampler seeded from (run seed, batch number); so a run resumed from its checkpoint asks exactly
  what the uninterrupted run asked.
* Its own cost is bounded and measured: the GP sees at most ``HISTORY_CAP`` told evaluations (the non-dominated
  ones first, then the most recent), and the seconds of each batch's ask + tell are recorded (batches.csv). Only
  those it may still see are kept — the non-dominated ones and the ``HISTORY_CAP`` most recent: an evaluation
  dominated once is dominated for good, and one older than those never becomes recent again — so its state, and
  each checkpoint, grows with the front, not with every evaluation told (2,000 batches of one kept all 2,000).
"""

from __future__ import annotations

from abc import abstractmethod
import sys
import time
import warnings
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .registry import register
from .base import Optimizer

HISTORY_CAP = 256  # told evaluations a batch's model sees at most (GP fitting is cubic in them)
STARTUP = 10  # evaluations told before the model is used (Optuna's default); a batch asked before then is random


def distributions(space) -> dict[str, Any]:
    """{gene name: Optuna distribution} of a SearchSpace's genes."""
    import math

    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    out: dict[str, Any] = {}
    for g in space.genes:
        if g.type == "choice":
            out[g.name] = CategoricalDistribution(list(g.choices))
        elif g.type == "int":
            out[g.name] = IntDistribution(math.ceil(g.low), math.floor(g.high), log=bool(g.log))
        else:
            out[g.name] = FloatDistribution(float(g.low), float(g.high), log=bool(g.log))
    return out


def _typed(space, params: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for g in space.genes:
        v = params[g.name]
        out[g.name] = v if g.type == "choice" else int(v) if g.type == "int" else float(v)
    return out


def _history(told: list, cap: int, front: Optional[Sequence[bool]] = None) -> list:
    """At most `cap` told evaluations, in id order: the non-dominated ones (by F; a failure, F None, never is),
    then the most recent. `told`: every evaluation told, or those `_seen` keeps of them (the same answer: the front
    of those is the front of all); `front`: whether each is non-dominated, where known (`_Front`)."""
    if len(told) <= cap:
        return told
    if front is None:
        front = _Front([t[1] for t in told]).on
    nd = np.flatnonzero(front)
    keep = set(nd.tolist()[:cap])
    for i in range(len(told) - 1, -1, -1):
        if len(keep) >= cap:
            break
        keep.add(i)
    return [told[i] for i in sorted(keep)]


def _seen(told: list, cap: int, front: Sequence[bool]) -> list[int]:
    """The places in `told` (in id order) of what `_history` can take from it now or after later evaluations: the
    non-dominated ones (`front`: whether each is) and the `cap` most recent."""
    return [i for i in range(len(told)) if front[i] or i >= len(told) - cap]


class _Front:
    """Whether each told evaluation kept is non-dominated (by F), kept up to date as evaluations are told: a new one
    is compared with the front alone (what `non_dominated` of all of them would say, a sort of every one after each
    batch). A failure (F None) is never on it."""

    def __init__(self, F: Sequence[Optional[Sequence[float]]]):
        from ..front_math import non_dominated

        self.F = np.zeros((0, 0))
        self.on = np.zeros(0, dtype=bool)
        ok = [i for i, f in enumerate(F) if f is not None]
        if ok:
            width = len(F[ok[0]])
            self.F = np.array([[np.nan] * width if f is None else f for f in F], dtype=float)
            self.on = np.zeros(len(F), dtype=bool)
            self.on[np.array(ok)[non_dominated(self.F[ok])]] = True
        elif F:  # failures only: their width is unknown until an evaluation completes
            self.F = np.zeros((len(F), 0))
            self.on = np.zeros(len(F), dtype=bool)

    def add(self, f: Optional[Sequence[float]]) -> None:
        from ..front_math import dominated_by

        if f is None:  # a failure: never on the front
            self.F = np.concatenate([self.F, np.full((1, self.F.shape[1]), np.nan)])
            self.on = np.append(self.on, False)
            return
        f = np.asarray(f, dtype=float).reshape(1, -1)
        if self.F.shape[1] != f.shape[1]:  # nothing told yet, or failures only
            self.F = np.concatenate([np.full((len(self.F), f.shape[1]), np.nan), f])
            self.on = np.append(self.on, True)
            return
        front = np.flatnonzero(self.on)
        new = not dominated_by(f, self.F[front])[0]
        if new:
            self.on[front[dominated_by(self.F[front], f)]] = False
        self.F = np.concatenate([self.F, f])
        self.on = np.append(self.on, new)

    def keep(self, places: Sequence[int]) -> None:
        self.F, self.on = self.F[list(places)], self.on[list(places)]


# how a failed evaluation is told to a study (trials_of); "worst": as a result with the objectives' worst values, the
# rule of a run whose checkpoint was made before failures were told apart (it keeps it: its resume stays exact)
FAILURE_RULES = ("impute", "fail", "worst")


def trials_of(told: Sequence, dists: Mapping[str, Any], failures: str = "impute") -> list:
    """The Optuna trials of told evaluations (params, F, G), in order; G, the problem's [constraints], as each
    trial's constraints (a failure's violates each one: ObjectiveSet.violations). A failed or diverged one (F None)
    is, by `failures`: ``"impute"``, a completed trial at the worst value OBSERVED among the completed ones, per
    objective, its constraints violated on their scale (`_imputed_violations`; a FAIL trial while none has
    completed); ``"fail"``, an Optuna FAIL trial, which the samplers skip.

    Why (benchmarks/failure_telling.py; docs/search.md "Failed evaluations"): told the objectives' worst values
    (comm 1e9 among values of 10-1,000), the GP lost its way once Optuna standardised them; told FAIL, it learnt
    nothing of the failing region and proposed it again and again; imputed, it found the best fronts. TPE ranks its
    trials (imputed and worst values gave it the same proposals) and found better fronts told FAIL."""
    from optuna.trial import TrialState, create_trial

    if failures not in FAILURE_RULES:
        raise ValueError(f"failures must be one of {', '.join(FAILURE_RULES)}, got {failures!r}")
    ok = [f for _, f, _ in told if f is not None]
    worst = np.max(np.array(ok, dtype=float), axis=0).tolist() if ok and failures == "impute" else None
    g_fail = _imputed_violations([g for _, f, g in told if f is not None]) if worst is not None else None
    out = []
    for p, f, g in told:
        if f is None and g_fail is not None and len(g):  # its G on the completed ones' scale, still a violation
            g = g_fail
        attrs = {f"constraints:c{j}": float(v) for j, v in enumerate(g)}
        if f is None and worst is None:
            out.append(create_trial(params=p, distributions=dists, state=TrialState.FAIL, system_attrs=attrs))
        else:
            out.append(create_trial(params=p, distributions=dists, values=list(worst if f is None else f),
                                    system_attrs=attrs))
    return out


def _imputed_violations(completed: Sequence[Sequence[float]]) -> Optional[list[float]]:
    """What an imputed failure's constraints are told (feasible <= 0): per constraint, the completed trials' largest
    value, at least 0, plus their spread (1 where they have none) — a violation on their scale, where the G a
    failure's worst values give (1e9 - a bound of 500) flattened the GP's constraint model once Optuna standardised
    it, as they did its objectives (review18 F4). None where none completed or there are no constraints."""
    if not completed or not len(completed[0]):
        return None
    G = np.array(completed, dtype=float)
    hi, spread = G.max(axis=0), G.max(axis=0) - G.min(axis=0)
    return (np.maximum(hi, 0.0) + np.where(spread > 0, spread, 1.0)).tolist()


class OptunaOptimizer(Optimizer):
    """Any Optuna sampler as an optimiser: subclasses set ``name`` and give ``sampler(seed)``, a new sampler seeded
    with `seed` (asked once a batch, with the batch's seed; the module's docstring says how its trials are kept).
    Your own (docs/search.md "Your own optimiser")::

        class QMC(OptunaOptimizer):
            name = "qmc"

            def sampler(self, seed):
                return optuna.samplers.QMCSampler(seed=seed, scramble=True)
    """

    default_pop = None  # one candidate per parallel evaluation (registry.default_pop)
    #: how a failed or diverged evaluation is told to each batch's study: "impute" or "fail" (trials_of)
    failures = "impute"

    def __init__(self, space, problem, *, pop: int, seed: int, settings=None):
        super().__init__(space, problem, pop=pop, seed=seed, settings=settings)
        # what ask() imports, imported once here: the run loop's clock around ask (batches.csv's ask_s, the display's
        # "gp 1.3 s/proposal") counted it in the first batch of each process, 1-2 s of importing torch and Optuna
        # where your own evaluator had imported neither (a start-up proposal otherwise takes milliseconds)
        import optuna  # noqa: F401
        import torch  # noqa: F401

        # the told evaluations a batch's model may still see (_seen), in id order; how many were told
        self.told: list[tuple[dict[str, Any], list[float], list[float]]] = []
        self.told_count = 0
        self._front = _Front([])
        self._dists = distributions(space)

    @abstractmethod  # (a marker: user.py names what a class of yours lacks)
    def sampler(self, seed: int):
        raise NotImplementedError

    def _batch_seed(self) -> int:
        return int(np.random.SeedSequence([self.seed, self.batch, 1]).generate_state(1)[0])

    def _study(self):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        study = optuna.create_study(directions=["minimize"] * self.n_obj, sampler=self.sampler(self._batch_seed()))
        trials = trials_of(_history(self.told, HISTORY_CAP, self._front.on), self._dists, self.failures)
        if trials:
            study.add_trials(trials)
        return study

    def ask(self, n: int) -> list[dict[str, Any]]:
        import torch

        t0 = time.perf_counter()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the GP's torch work: faster on one thread (Optuna's advice), same numbers anywhere
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # experimental-feature and independent-sampling notices
                study = self._study()
                for p in self.warm(self.told_count, int(n)):
                    study.enqueue_trial(p)  # asked first, in order
                out = [_typed(self.space, study.ask(self._dists).params) for _ in range(int(n))]
        finally:
            torch.set_num_threads(threads)
        self.sampler_s = time.perf_counter() - t0
        return out

    def tell(self, params: Sequence[Mapping[str, Any]], F, G: Optional[np.ndarray] = None, *,
             failed: Optional[Sequence[bool]] = None) -> None:
        """`failed`: whether each evaluation failed or diverged (the run loop says; their F rows are the worst values,
        not results): kept with F None, and told to each batch's study by `trials_of`'s rule."""
        F, G = self._check_told(params, F, G)
        failed = [False] * len(params) if failed is None else [bool(x) for x in failed]
        if len(failed) != len(params):
            raise ValueError(f"tell(): {len(failed)} failed flags for {len(params)} candidates")
        for p, f, g, bad in zip(params, F, G, failed):
            bad = bad and self.failures != "worst"  # (that rule keeps a failure's worst values, as told)
            self.told.append((_typed(self.space, p), None if bad else [float(v) for v in f], [float(v) for v in g]))
            self.told_count += 1
            self._front.add(self.told[-1][1])
        self._forget()
        self.batch += 1

    def _forget(self) -> None:
        """Keep only the told evaluations a later batch's model may see (_seen)."""
        keep = _seen(self.told, HISTORY_CAP, self._front.on)
        if len(keep) < len(self.told):
            self.told = [self.told[i] for i in keep]
            self._front.keep(keep)

    def state(self) -> Any:
        return {"optimizer": self.name, "batch": self.batch, "told": list(self.told), "told_count": self.told_count,
                "history_cap": HISTORY_CAP, "failures": self.failures}

    def restore(self, state: Any) -> None:
        cap = state.get("history_cap", HISTORY_CAP)  # (a checkpoint before the told were forgotten kept all)
        if cap != HISTORY_CAP:  # what it forgot is gone: a model of HISTORY_CAP would have seen other trials
            print(f"fedevo: warning: optimizer {self.name!r}: its checkpoint kept what a model of {cap} trials may "
                  f"see, this fedevo's sees {HISTORY_CAP}: the resumed search may ask other candidates than an "
                  "uninterrupted one", file=sys.stderr)
        self.batch = int(state["batch"])
        self.told = [(dict(p), None if f is None else list(f), list(g)) for p, f, g in state["told"]]
        # a checkpoint of a fedevo that told failures as results with the worst values: the run keeps that rule, so
        # that its resume asks what it would have asked (telling them apart now asked other candidates, and a batch
        # partly logged before the kill then stopped the resume as an inconsistent run directory)
        rule = state.get("failures", "worst")
        if rule not in FAILURE_RULES:
            raise ValueError(f"optimizer {self.name!r}: its checkpoint tells failures by {rule!r}, which this fedevo "
                             f"does not know ({', '.join(FAILURE_RULES)})")
        self.failures = rule
        # (a checkpoint made before the told were forgotten holds every one; one that kept their ids: not read)
        self.told_count = int(state.get("told_count", len(self.told)))
        self._front = _Front([f for _, f, _ in self.told])
        self._forget()

    def describe(self) -> dict[str, Any]:
        import optuna

        return {"name": f"Optuna {type(self.sampler(0)).__name__}", "optuna": optuna.__version__,
                "seed": self.seed, "batch_size": self.pop, "history_cap": HISTORY_CAP,
                "startup_trials": STARTUP, "sampler_seed": "SeedSequence([seed, batch, 1]).generate_state(1)[0]",
                "batch": "asked one after another, the earlier ones RUNNING (GP: qLogEHVI; TPE: constant liar)",
                "failures": {"impute": "a completed trial at the worst value observed per objective (FAIL before "
                                       "one completed)", "fail": "a FAIL trial",
                             "worst": "a completed trial at the objectives' worst values (a run made before failures "
                                      "were told apart)"}[self.failures]}


@register
class GPOptimizer(OptunaOptimizer):
    name = "gp"
    summary = "Optuna's GPSampler (Gaussian process, log EHVI; for expensive evaluations)"

    def sampler(self, seed: int):
        import optuna

        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=STARTUP,
                                         warn_independent_sampling=False)


@register
class TPEOptimizer(OptunaOptimizer):
    name = "tpe"
    summary = "Optuna's TPESampler (multivariate, constant liar)"
    failures = "fail"  # told FAIL it found better fronts than told the worst values, or imputed (trials_of)

    def sampler(self, seed: int):
        import optuna

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=STARTUP, multivariate=True,
                                              constant_liar=True, warn_independent_sampling=False)
