"""The model-based optimisers' own cost per proposal against a problem's evaluation time, side by side in one
process (issue #34: "its own overhead under the evaluation time on fashion_mlp_dp").

    python benchmarks/gp_proposal_cost.py [--problem fashion_mlp_dp] [--optimizers gp tpe] \\
        [--told 16 48 96 192] [--evaluations 6] [--seed 0]

For each optimiser and each history size n, the optimiser (fedevo.searching.optimizers, as ``--optimizer``
builds it for the problem's search space and objectives) is told n uniformly random candidates of the search space
with synthetic objective vectors (each objective uniform in [0, 1]; Optuna standardises the values, and the GP's
fitting cost depends on n and the genes far more than on the values; the number of non-dominated told vectors,
which the acquisition's box decomposition depends on, is printed). Then, after one untimed one-round evaluation
that loads the data set (which a search does once per process), ``--evaluations`` rounds, each: one timed
``ask(1)`` of every (optimiser, n) — every ask builds its study afresh from the told history, as a search's batch
does, so the asks of a pair are the same computation — then one random configuration of the problem evaluated for
real (``fedevo.evaluate``, the problem's own rounds, in this process, torch's default threads). Interleaved, so
that on a shared machine the asks and the evaluations meet the same load. Prints every measurement, the CPU
(lscpu model name, family, model), torch's and Optuna's versions and threads, the load average; and per
(optimiser, n) the median ask against the median evaluation: where the optimiser pays for itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import fedevo  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402
from fedevo.searching.optimizers import make  # noqa: E402
from fedevo.searching.run import _search_problem  # noqa: E402
from fedevo.searching.space import SearchSpace  # noqa: E402
from machine import cpu  # noqa: E402  (benchmarks/machine.py)


def told_optimizer(name: str, problem, n: int, seed: int):
    """(the optimiser told n random candidates with synthetic objectives, non-dominated told vectors)."""
    from fedevo.searching.front_math import non_dominated

    space = SearchSpace.from_problem(problem)
    sp = _search_problem(problem, space)
    rng = np.random.default_rng(seed)
    opt = make(name, space, sp, pop=1, seed=seed)
    params = [space.decode_batch(rng.uniform(space.xl, space.xu, size=(1, space.n_var)))[0] for _ in range(n)]
    F = rng.uniform(0, 1, size=(n, sp.n_obj))
    opt.tell(params, F, np.zeros((n, sp.n_ieq_constr)) if sp.n_ieq_constr else None)
    return opt, len(non_dominated(F))


def ask_seconds(opt) -> float:
    t0 = time.perf_counter()
    opt.ask(1)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--optimizers", nargs="+", default=["gp", "tpe"])
    ap.add_argument("--told", nargs="+", type=int, default=[16, 48, 96, 192])
    ap.add_argument("--evaluations", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    if args.evaluations < 1:
        ap.error("--evaluations must be at least 1")
    import optuna
    import torch

    print(f"CPU: {cpu()}; torch {torch.__version__}, {torch.get_num_threads()} threads "
          f"(the optimisers ask on 1); optuna {optuna.__version__}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"problem {args.problem}; told sizes {args.told}; {args.evaluations} evaluations; seed {args.seed}", flush=True)
    problem = load_problem(args.problem)
    opts = {}
    for name in args.optimizers:
        for n in args.told:
            opts[name, n], nd = told_optimizer(name, problem, n, args.seed)
            print(f"{name:4s} told {n:4d} ({nd} non-dominated)", flush=True)
    space = SearchSpace.from_problem(problem)
    rng = np.random.default_rng(args.seed + 1)
    t0 = time.perf_counter()
    fedevo.evaluate(problem, None, seed=args.seed, rounds=1, data_dir=args.data_dir)  # loads the data (untimed)
    print(f"warm-up (data set loaded, one round of the defaults): {time.perf_counter() - t0:.2f} s", flush=True)
    evals, asks = [], {k: [] for k in opts}
    for i in range(args.evaluations):
        for key, opt in opts.items():  # one ask of each, then one evaluation: the same load for both
            asks[key].append(ask_seconds(opt))
        print(f"round {i}: asks " + ", ".join(f"{name} after {n}: {asks[name, n][-1]:.2f} s" for name, n in opts),
              flush=True)
        params = space.decode_batch(rng.uniform(space.xl, space.xu, size=(1, space.n_var)))[0]
        t0 = time.perf_counter()
        r = fedevo.evaluate(problem, params, seed=args.seed + i, data_dir=args.data_dir)
        evals.append(time.perf_counter() - t0)
        genes = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
        print(f"round {i}: evaluation {evals[-1]:7.2f} s ({r.status}; {genes}); "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
    med = statistics.median(evals)
    print(f"median evaluation {med:.2f} s (min {min(evals):.2f}, max {max(evals):.2f}) on {args.problem}")
    for (name, n), ts in asks.items():
        s = statistics.median(ts)
        print(f"{name:4s} proposal after {n:4d} told: median {s:6.2f} s (min {min(ts):.2f}, max {max(ts):.2f}); "
              f"proposal / median evaluation = {s / med:.2f}")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
