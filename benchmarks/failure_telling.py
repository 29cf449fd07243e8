"""How an optimiser (`gp`, `tpe`, `nsga3`) should be told a FAILED evaluation, side by side in one process: the
front it reaches in ~48 evaluations (nsga3: 192) when a region of the search space fails.

    python benchmarks/failure_telling.py [--optimizers gp tpe nsga3] [--seeds 0 1 2 3 4] [--evaluations 48]
        [--nsga3-evaluations 192] [--modes worst fail impute infeasible fedevo] [--region 0.6]

The problem is the tests' toy (tests/searching/search_helpers.TOY_TOML: six genes, two of them the "model size")
evaluated by the tests' cheap fake (tests/searching/search_fakes.fake_evaluate: error, comm and ε in closed form
of the genes, conflicting, microseconds an evaluation), except that an evaluation FAILS where the model-size genes'
mean (in [0, 1]) exceeds ``--region`` (a model too large for the machine, say): the low-error corner borders the
failures, as it does in a real search. Each optimiser is fedevo's (its Optuna sampler, seeded per batch, batches
of one: its in-process default), told each failure in one of these ways:

* ``worst``: as a completed trial with the objectives' worst values (error 1, comm 1e9, log10 ε 9: what fedevo
  told before this benchmark; one 1e9 among comm values of 10-1,100 flattens them once Optuna standardises);
* ``fail``: as an Optuna FAIL trial (``TrialState.FAIL``; the samplers skip it: Optuna's own guidance);
* ``impute``: as a completed trial with the worst value OBSERVED among the completed evaluations, per objective
  (a FAIL trial until one has completed);
* ``infeasible``: ``impute``'s values and a constraint the failure violates (+1; -1 for a completed one), which
  both samplers model (GP: the probability of feasibility; TPE: feasible first);
* ``fedevo``: fedevo's own optimiser told as its run loop tells it (``tell(..., failed=)``, its rule: `gp`
  ``impute``, `tpe` ``fail``; optuna_samplers.trials_of): the same evaluations as that mode, or the rule changed.

``nsga3`` (pymoo's NSGA-III, batches of 12, 3 Das-Dennis partitions: 10 reference directions;
--nsga3-evaluations, measured at 48, half and all of them) is told ``worst`` or ``impute`` (the worst value observed
so far, per objective, at the tell: its state is pymoo's). ``random`` ignores what it is told.

Per optimiser, every (mode, seed) run's ok evaluations are measured under ONE hypervolume normalisation
(fedevo.searching.front_math.common_hypervolume, as `fedevo plot A B --out compare.html`); per mode, the mean and
standard deviation over the seeds of the hypervolume after 24 and after --evaluations evaluations, its ratio to
``worst``'s, and the evaluations that failed. Prints the CPU (lscpu) and load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from machine import cpu  # noqa: E402  (benchmarks/machine.py)

MODES = ("worst", "fail", "impute", "infeasible", "fedevo")


def toy_problem():
    from fedevo.problem import load_problem
    from tests.searching.search_helpers import TOY_TOML

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "toy.toml"
        p.write_text(TOY_TOML)
        return load_problem(str(p))


def evaluate(problem, params, *, seed: int, region: float) -> dict:
    """One evaluation as a logged row would hold it: the fake's values, or a failure in the failing region."""
    from tests.searching.search_fakes import _unit, fake_evaluate

    u = _unit(problem, params)
    if u[: max(1, len(u) // 3)].mean() > region:
        return {"status": "failed", "error": None, "comm": None, "eps": None}
    r = fake_evaluate(problem, params, seed=seed)
    return {"status": "ok", "error": r.error, "comm": r.comm, "eps": r.eps}


class Told:
    """fedevo's Optuna optimiser (its sampler, distributions, per-batch seed) with the failures told by `mode`.
    Keeps every evaluation told (fewer than fedevo's HISTORY_CAP here, so its model sees what fedevo's would)."""

    def __init__(self, name: str, mode: str, space, sp, seed: int):
        from fedevo.searching.optimizers import make

        self.opt = make(name, space, sp, pop=1, seed=seed)
        self.mode, self.sp, self.told = mode, sp, []  # (params, F, failed)

    def _trials(self):
        from optuna.trial import TrialState, create_trial

        ok = [f for _, f, failed in self.told if not failed]
        imputed = np.max(ok, axis=0).tolist() if ok else None
        out = []
        for p, f, failed in self.told:
            attrs = {"constraints:c0": 1.0 if failed else -1.0} if self.mode == "infeasible" else {}
            if failed and (self.mode == "fail" or (self.mode in ("impute", "infeasible") and imputed is None)):
                out.append(create_trial(params=p, distributions=self.opt._dists, state=TrialState.FAIL,
                                        system_attrs=attrs))
            else:
                values = imputed if failed and self.mode != "worst" else f
                out.append(create_trial(params=p, distributions=self.opt._dists, values=list(values),
                                        system_attrs=attrs))
        return out

    def ask(self) -> dict:
        import warnings

        import optuna

        optuna.logging.set_verbosity(optuna.logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study = optuna.create_study(directions=["minimize"] * self.sp.n_obj,
                                        sampler=self.opt.sampler(self.opt._batch_seed()))
            trials = self._trials()
            if trials:
                study.add_trials(trials)
            return study.ask(self.opt._dists).params

    def tell(self, params: dict, row: dict) -> None:
        self.told.append((params, self.sp.objectives_of(row).tolist(), row["status"] != "ok"))
        self.opt.batch += 1


def pymoo_run(name: str, mode: str, seed: int, problem, space, sp, n: int, region: float, pop: int) -> list:
    """NSGA-III (fedevo's, batches of `pop`) told each failure as `worst` (its worst values) or `impute` (the worst
    value observed so far among the completed evaluations, per objective; the worst values until one completed)."""
    from types import SimpleNamespace

    from fedevo.searching.optimizers import make

    opt = make(name, space, sp, pop=pop, seed=seed,
               settings=SimpleNamespace(init=None, partitions=None if pop != 12 else 3, pop=pop, seed=seed))
    rows, observed = [], None
    while len(rows) < n:
        params = opt.ask(min(pop, n - len(rows)))
        batch = [{"id": len(rows) + i, "generation": opt.batch + 1,
                  **evaluate(problem, p, seed=int(np.random.SeedSequence([seed, len(rows) + i]).generate_state(1)[0]),
                             region=region)} for i, p in enumerate(params)]
        F = np.array([sp.objectives_of(r) for r in batch])
        ok = np.array([r["status"] == "ok" for r in batch])
        if ok.any():
            worst_ok = F[ok].max(axis=0)
            observed = worst_ok if observed is None else np.maximum(observed, worst_ok)
        if mode == "impute" and observed is not None:
            F[~ok] = observed
        opt.tell(params, F, None)
        rows += batch
    return rows


def fedevo_run(name: str, seed: int, problem, space, sp, n: int, region: float) -> list:
    """fedevo's own optimiser, told as its run loop tells it (``failed=``): its rule, to set beside the modes."""
    from fedevo.searching.optimizers import make

    opt, rows = make(name, space, sp, pop=1, seed=seed), []
    for i in range(n):
        params = opt.ask(1)
        row = {"id": i, "generation": i + 1,
               **evaluate(problem, params[0], seed=int(np.random.SeedSequence([seed, i]).generate_state(1)[0]),
                          region=region)}
        opt.tell(params, sp.objectives_of(row)[None], None, failed=[row["status"] != "ok"])
        rows.append(row)
    return rows


def one_run(name: str, mode: str, seed: int, problem, space, sp, n: int, region: float) -> tuple[list, float]:
    from fedevo.searching.optimizers.optuna_samplers import _typed

    t0 = time.perf_counter()
    if name == "nsga3":
        return pymoo_run(name, mode, seed, problem, space, sp, n, region, 12), time.perf_counter() - t0
    if mode == "fedevo":
        return fedevo_run(name, seed, problem, space, sp, n, region), time.perf_counter() - t0
    t = Told(name, mode, space, sp, seed)
    rows = []
    for i in range(n):
        params = _typed(space, t.ask())
        row = {"id": i, "generation": i + 1,
               **evaluate(problem, params, seed=int(np.random.SeedSequence([seed, i]).generate_state(1)[0]),
                          region=region)}
        t.tell(params, row)
        rows.append(row)
    return rows, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optimizers", nargs="+", default=["gp", "tpe", "nsga3"])
    ap.add_argument("--modes", nargs="+", default=list(MODES[:4]), choices=MODES)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--evaluations", type=int, default=48)
    ap.add_argument("--nsga3-evaluations", type=int, default=192, help="nsga3's evaluations (batches of 12)")
    ap.add_argument("--region", type=float, default=0.6,
                    help="an evaluation fails where the model-size genes' mean in [0, 1] exceeds this")
    a = ap.parse_args()
    if a.evaluations < 24:
        ap.error("--evaluations must be at least 24")
    import optuna

    from fedevo.objectives import as_set
    from fedevo.searching.front_math import common_hypervolume
    from fedevo.searching.run import _search_problem
    from fedevo.searching.space import SearchSpace

    print(f"cpu: {cpu()}; optuna {optuna.__version__}; load average before "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    problem = toy_problem()
    space = SearchSpace.from_problem(problem)
    sp = _search_problem(problem, space)
    objs = as_set(None)
    rng = np.random.default_rng(12345)  # the failing share of the space, by uniform draws
    draws = [space.decode_batch(space.repair(rng.uniform(space.xl, space.xu, size=(1, space.n_var))))[0]
             for _ in range(2000)]
    share = np.mean([evaluate(problem, p, seed=0, region=a.region)["status"] != "ok" for p in draws])
    print(f"toy problem (tests' TOY_TOML, fake_evaluate); fails where the size genes' mean > {a.region}: "
          f"{share:.1%} of uniform draws; {a.evaluations} evaluations in batches of one; seeds {a.seeds}", flush=True)
    n_of = {name: a.nsga3_evaluations if name == "nsga3" else a.evaluations for name in a.optimizers}
    for name in a.optimizers:
        at = [24, n_of[name]] if name != "nsga3" else [48, n_of[name] // 2, n_of[name]]
        runs = {}
        for seed in a.seeds:
            for mode in (a.modes if name != "nsga3" else [m for m in a.modes if m in ("worst", "impute")]):
                # modes interleaved per seed: the same load for each
                rows, s = one_run(name, mode, seed, problem, space, sp, n_of[name], a.region)
                runs[mode, seed] = rows
                print(f"{name} {mode:10s} seed {seed}: {sum(r['status'] != 'ok' for r in rows):2d} failed, "
                      f"{s:6.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)
        keys = list(runs)
        tables, lo, scale = common_hypervolume([(runs[k], {}) for k in keys], objs, at)
        hv = {k: [t["hypervolume"] for t in tab] for k, tab in zip(keys, tables)}
        print(f"{name}: hypervolume after {at[0]} and {at[1]} evaluations (one normalisation over its "
              f"{len(keys)} runs: lo {np.round(lo, 3).tolist()}, scale {np.round(scale, 3).tolist()}); "
              "per seed, then mean ± std over seeds")
        base = {j: statistics.mean(hv["worst", s][j] for s in a.seeds) if "worst" in a.modes else None
                for j in range(len(at))}
        for mode in [m for m in a.modes if (m, a.seeds[0]) in runs]:
            per = [[hv[mode, s][j] for s in a.seeds] for j in range(len(at))]
            fails = [sum(r["status"] != "ok" for r in runs[mode, s]) for s in a.seeds]
            cells = []
            for j, n in enumerate(at):
                m = statistics.mean(per[j])
                sd = statistics.stdev(per[j]) if len(per[j]) > 1 else 0.0
                ratio = f" (×{m / base[j]:.3f} worst's)" if base[j] else ""
                cells.append(f"@{n}: {m:.4f} ± {sd:.4f}{ratio} [{' '.join(f'{v:.3f}' for v in per[j])}]")
            print(f"  {mode:10s} " + "; ".join(cells) + f"; failed evaluations {statistics.mean(fails):.1f} "
                  f"[{' '.join(map(str, fails))}]", flush=True)
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
