"""Syne Tune's MOASHA driving fedevo's own evaluation function, rung by rung: the third method of multi_fidelity.py.

MOASHA (Schmucker et al. 2021; Salinas et al. 2021, Syne Tune 0.16.0:
``syne_tune.optimizer.schedulers.multiobjective.moasha.MOASHA``) is asynchronous successive halving whose promotion rule
ranks a trial among those recorded at the same rung by non-dominated sorting, within a front by an ε-net (the
point farthest from those already picked first, seeded by the lowest error): a trial continues from a rung when
its rank is within the top 1/η of the trials recorded there so far, else it stops. Its configurations are drawn
at random from the search space (MOASHA 0.16 has no model-based searcher).

How it is driven here (one process, a plain ask/tell loop, no Syne Tune backend):

* the search space is fedevo's problem genes (``config_space``): a real gene -> ``uniform``, with ``log = true``
  -> ``loguniform``; an int gene -> ``randint`` (``lograndint``); a choice gene -> ``choice``;
* trial i is trained with fedevo's runner and simulator exactly as an individual of a multi-fidelity search
  (``fedevo.searching.runner.run_one`` with ``SIMULATOR``, seed ``eval_seed(seed, i)``, ``rounds = T``): first to
  rung 0's rounds (``until``), then, while MOASHA says continue, **continued** from the returned training state
  (``resume_from``) to the next rung — the same ladder (``fidelity.rung_rounds``) and the same exact continuation
  as fedevo's multi-fidelity search, never a restart;
* after each rung, MOASHA gets the objectives measured there as fedevo's search sees them: (error, comm, log10 ε),
  sanitised (failed or diverged -> the worst values; a failed trial stops). It does not get the full-T ε and comm
  that fedevo's promotion uses where they are known before training (``planned_objectives``): MOASHA ranks on
  what the rung measured;
* MOASHA's resource attribute ``level`` is η^k at rung k (η = fedevo's ETA = 3, grace period 1, max_t = η^(L-1)
  for L rungs): its brackets' milestones are then exactly fedevo's rungs, whatever their rounds (on digits with
  T = 9 and 1/9,1/3,1 the levels 1, 3, 9 are the rounds themselves);
* new trials start until the wall-clock budget is spent (checked before every rung evaluation); with
  ``workers`` > 0 that many trials run side by side in spawned processes (one torch thread each, as fedevo's Ray
  workers), MOASHA deciding as each rung result arrives (asynchronous); ``workers = 0`` runs in this process.

Every evaluation becomes a row like a multi-fidelity search's (id, rung, fidelity, rounds_trained, status, error,
comm, eps, eps_paper, genes) with its wall-clock time since the start, so multi_fidelity.py's hypervolume (full-
fidelity ok rows only, one normalisation for all methods) applies unchanged. Seeded: MOASHA 0.16 samples
configurations (and brackets) with numpy's global generator, which ``run`` seeds with ``seed``; with workers = 0
the same seed gives the same sequence of trials and decisions (the budget only decides where it is cut).

Environment (Syne Tune's dependencies stay out of fedevo's venv; torch is not installed twice): a venv of its own
that sees fedevo's venv after its own packages::

    python3 -m venv /work/stvenv
    echo /work/venv/lib/python3.11/site-packages > /work/stvenv/lib/python3.11/site-packages/fedevo-venv.pth
    /work/stvenv/bin/pip install syne-tune==0.16.0   # or the downloaded wheel: syne_tune-0.16.0-py3-none-any.whl
    cd REPO && PYTHONPATH=$PWD /work/stvenv/bin/python -c "import syne_tune, torch, fedevo"

The .pth file comes first, so pip finds numpy, pandas, scikit-learn, dill, tqdm ... already installed (fedevo's
versions: the simulator runs on the same libraries in both venvs) and adds only what is missing (statsmodels,
xgboost, psutil, sortedcontainers ...). PYTHONPATH makes the checkout's fedevo win.

Usage (the comparison: all three methods, one normalisation, MOASHA's budget = the plain search's time)::

    PYTHONPATH=$PWD /work/stvenv/bin/python benchmarks/multi_fidelity.py --moasha ...   # see that script

Alone (a check; curves normalised over MOASHA's own evaluations, so not comparable with other runs)::

    PYTHONPATH=$PWD /work/stvenv/bin/python benchmarks/moasha.py --problem digits_mlp --rounds 9 \\
        --fidelity 1/9,1/3,1 --seeds 0 --budget 60 --out /tmp/moasha-check
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from datetime import datetime
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from syne_tune.backend.trial_status import Trial  # noqa: E402
from syne_tune.config_space import choice, loguniform, lograndint, randint, uniform  # noqa: E402
from syne_tune.optimizer.scheduler import SchedulerDecision  # noqa: E402
from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA  # noqa: E402
from syne_tune.optimizer.schedulers.multiobjective.multiobjective_priority import NonDominatedPriority  # noqa: E402
from syne_tune.optimizer.schedulers.multiobjective.non_dominated_priority import (  # noqa: E402
    compute_epsilon_net, pareto_efficient)

from fedevo.errors import FedevoError  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402
from fedevo.result import EvaluationResult  # noqa: E402
from fedevo.searching.evaluator import SIMULATOR  # noqa: E402
from fedevo.searching.fidelity import ETA, parse_ladder, rung_rounds  # noqa: E402
from fedevo.objectives import as_set  # noqa: E402
from fedevo.searching.rungs import total_rounds  # noqa: E402
from fedevo.searching.runner import _ray_task, run_one  # noqa: E402
from fedevo.searching.settings import eval_seed  # noqa: E402

METRICS = ("error", "comm", "eps")  # reported to MOASHA in fedevo's search space (eps: log10)
LEVEL = "level"  # MOASHA's resource attribute: ETA ** rung


def config_space(problem) -> dict[str, Any]:
    """fedevo's genes as Syne Tune domains (see the module doc)."""
    space = {}
    for g in problem.genes:
        if g.type == "choice":
            space[g.name] = choice(list(g.choices))
        elif g.type == "int":
            lo, hi = math.ceil(g.low), math.floor(g.high)
            space[g.name] = (lograndint if g.log else randint)(lo, hi)
        else:
            space[g.name] = (loguniform if g.log else uniform)(float(g.low), float(g.high))
    return space


def genes_of(problem, config: Mapping[str, Any]) -> dict[str, Any]:
    """A Syne Tune configuration -> fedevo's genes with their Python types (numpy scalars cast), checked."""
    out = {}
    for g in problem.genes:
        v = config[g.name]
        if g.type == "int":
            v = int(v)
        elif g.type == "real":
            v = float(v)
        out[g.name] = g.check(v)
    return out


class RankedNonDominatedPriority(NonDominatedPriority):
    """MOASHA's non-dominated sort with an ε-net inside each front, returned as each trial's *rank*.

    Syne Tune 0.16.0's ``Bracket.on_result`` reads ``priority(X)[i]`` as trial i's priority (lower: better) and
    ranks the newest trial by the last entry, but ``NonDominatedPriority`` returns ``nondominated_sort``'s list of
    trial indices in sorted order (and within a front indexes the front by the ε-net's ranks, not its order). So
    a trial that dominates every trial recorded at its rung can be stopped: recorded (error, comm) = (0.5, 5),
    (0.6, 6), (0.7, 7), (0.8, 8), then (0.1, 1) -> the order [4, 0, 1, 2, 3], whose last entry 3 gives the new
    trial the rank 3/5 > 1/3: STOP. This class computes the same sort (syne_tune's ``pareto_efficient`` front by
    front, ``compute_epsilon_net`` inside each, seeded by the lowest value of objective `dim`) and returns the
    ranks, which is what the bracket expects: the same example gives the new trial rank 0 (CONTINUE).
    """

    def priority_unsafe(self, objectives: np.ndarray) -> np.ndarray:
        X = np.asarray(objectives, dtype=float)
        remaining, order = np.arange(len(X)), []
        while remaining.size:
            mask = pareto_efficient(X[remaining])
            front = remaining[mask]
            order.extend(front[np.argsort(compute_epsilon_net(X[front], dim=self.dim), kind="stable")])
            remaining = remaining[~mask]
        ranks = np.empty(len(X), dtype=int)
        ranks[np.asarray(order, dtype=int)] = np.arange(len(X))
        return ranks


PRIORITIES = {"ranked": RankedNonDominatedPriority, "shipped": NonDominatedPriority}


def scheduler(problem, rungs: int, seed: int, priority: str = "ranked"):
    """MOASHA over the problem's genes with fedevo's η and one milestone per rung (levels 1, η, ..., η^(L-1));
    `priority`: 'ranked' (the rule as described, :class:`RankedNonDominatedPriority`) or 'shipped' (Syne Tune
    0.16.0's NonDominatedPriority as it is)."""
    s = MOASHA(config_space=config_space(problem), metrics=list(METRICS), do_minimize=True, time_attr=LEVEL,
               multiobjective_priority=PRIORITIES[priority](dim=0), max_t=ETA ** (rungs - 1), grace_period=1,
               reduction_factor=ETA, random_seed=seed)
    milestones = sorted(m for m, _ in s.brackets[0].rungs)
    assert milestones == [ETA ** k for k in range(rungs)], milestones  # MOASHA's rungs are fedevo's
    return s


def row(trial: int, seed: int, params: Mapping[str, Any], k: int, fidelity: float, r: EvaluationResult) -> dict:
    """One evaluation as a multi-fidelity search logs it (the fields multi_fidelity.py's hypervolume reads)."""
    return {"id": trial, "generation": 0, "index": trial, "seed": seed, **params, "error": r.error, "comm": r.comm,
            "eps": r.eps, "eps_paper": r.eps_paper, "accuracy_global": r.accuracy_global, "omega": r.omega,
            "status": r.status, "wall_s": r.wall_s, "rounds_trained": int(r.rounds or 0),
            "message": (r.message or "").strip().splitlines()[0] if (r.message or "").strip() else "",
            "rung": k, "fidelity": float(fidelity)}


def reported(k: int, r: EvaluationResult, eps_key: str) -> dict[str, float]:
    """What MOASHA gets after rung k: (error, comm, log10 ε) as fedevo's search sees them, and the level."""
    F = as_set(eps_key).vector_of(r)
    return {LEVEL: ETA ** k, **{m: float(v) for m, v in zip(METRICS, F)}}


class _Trial:
    def __init__(self, ident: int, config: Mapping[str, Any], params: Mapping[str, Any], seed: int,
                 rounds: Sequence[int]):
        self.st = Trial(trial_id=ident, config=dict(config), creation_time=datetime.now())
        self.id, self.params, self.seed, self.rounds = ident, dict(params), seed, tuple(rounds)
        self.rung, self.state = 0, None

    def kwargs(self, total: Optional[int]) -> dict[str, Any]:
        """The evaluator's keyword arguments of this trial's current rung (as fedevo's rung Task gives them)."""
        last = self.rung == len(self.rounds) - 1
        out: dict[str, Any] = {"rounds": total, "data_dir": None}
        if not last:
            out["until"] = self.rounds[self.rung]
        if self.state is not None:
            out["resume_from"] = self.state
        return out


def run(problem_name: str, *, rounds: Optional[int], ladder: Sequence[float], seed: int, budget_s: float,
        workers: int = 0, max_trials: Optional[int] = None, priority: str = "ranked",
        log=None) -> tuple[list[tuple[float, dict]], float]:
    """MOASHA for `budget_s` seconds (or `max_trials` trials): ([(seconds since start, row)] in completion order,
    wall time). See the module doc."""
    t0 = time.monotonic()
    problem = load_problem(problem_name)
    eps_key = problem.eps_objective
    ladder = tuple(ladder)
    np.random.seed(seed)  # MOASHA 0.16 samples configurations and brackets with numpy's global generator
    sched = scheduler(problem, len(ladder), seed, priority)
    events: list[tuple[float, dict]] = []
    next_id = 0

    def elapsed() -> float:
        return time.monotonic() - t0

    def new_trial() -> Optional[_Trial]:
        nonlocal next_id
        if elapsed() >= budget_s or (max_trials is not None and next_id >= max_trials):
            return None
        config = sched.suggest().config
        params = genes_of(problem, config)
        t = _Trial(next_id, config, params, eval_seed(seed, next_id),
                   rung_rounds(ladder, total_rounds(problem, params, rounds)))
        next_id += 1
        sched.on_trial_add(t.st)
        return t

    def done(t: _Trial, kind: str, r) -> bool:
        """Log rung t.rung's result, tell MOASHA; True when the trial continues to its next rung."""
        if kind == "abort":  # data missing, no GPU: every evaluation would hit it
            raise FedevoError(str(r))
        events.append((elapsed(), row(t.id, t.seed, t.params, t.rung, ladder[t.rung], r)))
        if log:
            log(f"  trial {t.id} rung {t.rung}: {r.status} error {r.error:.4f} comm {r.comm:.0f} "
                f"{eps_key} {getattr(r, eps_key)} at {events[-1][0]:.1f} s")
        report = reported(t.rung, r, eps_key)
        if t.rung == len(ladder) - 1:
            sched.on_trial_complete(t.st, report)
            return False
        decision = sched.on_trial_result(t.st, report)
        if r.status != "ok" or r.state is None or decision != SchedulerDecision.CONTINUE or elapsed() >= budget_s:
            return False
        t.rung, t.state = t.rung + 1, r.state
        return True

    if workers <= 0:
        while (t := new_trial()) is not None:
            while True:
                kind, r, _ = run_one(SIMULATOR, problem, t.params, t.seed, t.kwargs(rounds))
                if not done(t, kind, r):
                    break
        return events, elapsed()

    # asynchronous: `workers` trials side by side, each rung result told to MOASHA as it arrives
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        def submit(t: _Trial):
            return pool.submit(_ray_task, problem, SIMULATOR, t.params, t.seed, t.kwargs(rounds), 1)

        flying = {}
        while True:
            while len(flying) < workers and (t := new_trial()) is not None:
                flying[submit(t)] = t
            if not flying:
                break
            finished, _ = wait(list(flying), return_when=FIRST_COMPLETED)
            for f in sorted(finished, key=lambda f: flying[f].id):
                t = flying.pop(f)
                if done(t, *f.result()[:2]):
                    flying[submit(t)] = t
    return events, elapsed()


def main() -> None:
    from multi_fidelity import write_events, write_curves

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--rounds", type=int, default=None, help="T (default: the problem's)")
    ap.add_argument("--fidelity", default="1/9,1/3,1")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--budget", type=float, nargs="+", default=[60.0],
                    help="wall-clock seconds: one for every seed, or one per seed")
    ap.add_argument("--max-trials", type=int, default=None, help="stop after this many trials (a determinism check)")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("/tmp/moasha-check"))
    ap.add_argument("--priority", choices=sorted(PRIORITIES), default="ranked",
                    help="MOASHA's promotion ranks: 'ranked' (default; RankedNonDominatedPriority) or 'shipped'")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if len(args.budget) not in (1, len(args.seeds)):
        ap.error("--budget: give one value, or one per seed")
    ladder = parse_ladder(args.fidelity)
    eps_key = load_problem(args.problem).eps_objective
    runs = {}
    for i, seed in enumerate(args.seeds):
        budget = args.budget[i if len(args.budget) > 1 else 0]
        events, wall = run(args.problem, rounds=args.rounds, ladder=ladder, seed=seed, budget_s=budget,
                           workers=args.workers, max_trials=args.max_trials, priority=args.priority,
                           log=print if args.verbose else None)
        runs[("moasha", seed)] = (events, wall)
        n_full = sum(r["fidelity"] == 1.0 for _, r in events)
        print(f"seed {seed} moasha: {wall:7.1f} s, {len(events)} evaluations ({n_full} full), "
              f"{len({r['id'] for _, r in events})} trials", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_events(args.out / "events.csv", runs)
    curves = write_curves(args.out / "curves.csv", runs, eps_key)
    for (method, seed), c in curves.items():
        print(f"seed {seed} {method}: final hypervolume {c[-1][2]:.4f} ({c[-1][1]} full evaluations; normalised "
              "over this run's own evaluations)")
    print(json.dumps({"events": str(args.out / "events.csv"), "curves": str(args.out / "curves.csv")}))


if __name__ == "__main__":
    main()
