"""The model-based optimisers' own cost per proposal against a problem's evaluation time, side by side in one
process (issue #34: "its own overhead under the evaluation time on fashion_mlp_dp").

    python benchmarks/gp_proposal_cost.py [--problem fashion_mlp_dp] [--optimizers gp tpe] \\
        [--told 16 48 96 192] [--evaluations 4] [--seed 0]

For each optimiser and each history size n: the optimiser (fedevo.searching.optimizers, as ``--optimizer``
builds it for the problem's search space and objectives) is told n uniformly random candidates of the search space
with synthetic objective vectors (each objective uniform in [0, 1]; Optuna standardises the values, and the GP's
fitting cost depends on n and the genes far more than on the values; the number of non-dominated told vectors,
which the acquisition's box decomposition depends on, is printed), then the seconds of one ``ask(1)`` are timed
(the median of 3; every ask builds its study afresh from the told history, as a search's batch does, so the three
are the same computation). Then ``--evaluations`` random configurations of the problem are evaluated for real
(``fedevo.evaluate``, the problem's own rounds, in this process, torch's default threads) and their seconds
reported. Prints one line per measurement, the CPU (lscpu model name, family, model), torch's and Optuna's
versions and threads, and the load average before and after; the ratio proposal / median evaluation says where
the optimiser pays for itself.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
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


def cpu() -> str:
    """lscpu's model name, family and model."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    field = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in out.splitlines() if ":" in ln}
    return f"{field.get('Model name', '?')} (family {field.get('CPU family', '?')}, model {field.get('Model', '?')})"


def proposal_seconds(name: str, problem, n: int, seed: int) -> tuple[float, int]:
    """(median seconds of ask(1) after n told, non-dominated told vectors)."""
    from fedevo.searching.front_math import non_dominated

    space = SearchSpace.from_problem(problem)
    sp = _search_problem(problem, space)
    rng = np.random.default_rng(seed)
    opt = make(name, space, sp, pop=1, seed=seed)
    params = [space.decode_batch(rng.uniform(space.xl, space.xu, size=(1, space.n_var)))[0] for _ in range(n)]
    F = rng.uniform(0, 1, size=(n, sp.n_obj))
    opt.tell(params, F, np.zeros((n, sp.n_ieq_constr)) if sp.n_ieq_constr else None)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        opt.ask(1)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(non_dominated(F))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--optimizers", nargs="+", default=["gp", "tpe"])
    ap.add_argument("--told", nargs="+", type=int, default=[16, 48, 96, 192])
    ap.add_argument("--evaluations", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    import optuna
    import torch

    print(f"CPU: {cpu()}, {os.cpu_count()} cores; torch {torch.__version__}, {torch.get_num_threads()} threads "
          f"(the optimisers ask on 1); optuna {optuna.__version__}; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"problem {args.problem}; told sizes {args.told}; {args.evaluations} evaluations; seed {args.seed}", flush=True)
    problem = load_problem(args.problem)
    cost = {}
    for name in args.optimizers:
        for n in args.told:
            s, nd = proposal_seconds(name, problem, n, args.seed)
            cost[name, n] = s
            print(f"{name:4s} proposal after {n:4d} told evaluations ({nd} non-dominated): {s:7.2f} s", flush=True)
    space = SearchSpace.from_problem(problem)
    rng = np.random.default_rng(args.seed + 1)
    evals = []
    for i in range(args.evaluations):
        params = space.decode_batch(rng.uniform(space.xl, space.xu, size=(1, space.n_var)))[0]
        t0 = time.perf_counter()
        r = fedevo.evaluate(problem, params, seed=args.seed + i, data_dir=args.data_dir)
        evals.append(time.perf_counter() - t0)
        print(f"evaluation {i}: {evals[-1]:7.2f} s ({r.status}; {', '.join(f'{k}={params[k]}' for k in list(params)[:3])}...)",
              flush=True)
    med = statistics.median(evals)
    print(f"median evaluation {med:.2f} s (min {min(evals):.2f}, max {max(evals):.2f}) on {args.problem}")
    for (name, n), s in cost.items():
        print(f"{name:4s} after {n:4d}: proposal / median evaluation = {s / med:.2f}")
    print(f"load average after {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
