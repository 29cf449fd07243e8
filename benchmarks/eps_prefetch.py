"""A batched generation's planned ε computed by the accountant's workers while it trains (`offload.prefetch` in
fl/population.py) against computed after its training, when each run's result is measured (the way before),
side by side in one process.

Since 2026-11-27 the product prefetches on the CPU only (0.90x on an H100 host); this script forces each way.

The generation: --generation individuals of --problem drawn uniformly from its genes (benchmarks/cuda_population.py's
draw, --gen-seed), every one under central trust (its ε known from its settings: σ, q = M/N, T, δ), fp32,
evaluated as one batched program (`evaluate_population`) on --device; each way --repeats times, the order
alternating, every run computing its ε afresh (the memo cleared). Prints the wall seconds (median), the results
phase (`measure_s`: what the batch still waits for after its training) and the ratio; the objectives must be equal.
On a CPU the workers share the cores with the training; on a GPU host the training leaves the cores free.

    python benchmarks/eps_prefetch.py [--problem digits_mlp] [--generation 12] [--repeats 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_population import draw_generation  # noqa: E402
from machine import cpu  # noqa: E402
from side_by_side import alternate, outcome  # noqa: E402

from fedevo.fl import population  # noqa: E402
from fedevo.fl.population import evaluate_population  # noqa: E402
from fedevo.privacy import offload  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--generation", type=int, default=12)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    problem = load_problem(a.problem)
    gen = [dict(p, precision="fp32", **({"trust": "central"} if any(g.name == "trust" for g in problem.genes)
                                         else {}))
           for p in draw_generation(problem, a.generation, a.gen_seed)]
    seeds = list(range(1, len(gen) + 1))
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.1f}; accountant workers: "
          f"{offload.processes(len(gen))}; device {a.device}")
    print(f"{a.problem}: {len(gen)} individuals (gen-seed {a.gen_seed}, central trust, fp32), "
          f"{a.rounds or 'planned'} rounds; median of {a.repeats}, alternating")

    def run(timings):
        return evaluate_population(problem, gen, seeds, rounds=a.rounds, data_dir=a.data_dir, device=a.device,
                                   timings=timings)
    run(None)  # warm-up: data read, the accountant's workers started, kernels built
    # population._prefetch_eps prefetches on the CPU only (since 2026-11-27, from this script's H100 figures):
    # both ways are forced here, on any device
    real = population._prefetch_eps
    ways = {"after training (before)": lambda runs, d: offload.prefetch([]),
            "while training (prefetch)": lambda runs, d: offload.prefetch(r.su.mech.planned_eps for r in runs)}
    current: list = [None]
    measure: dict = {k: [] for k in ways}

    def use(name):
        def setup():
            population._prefetch_eps = ways[name]
            current[0] = name
        return setup

    def once():
        timings: dict = {}
        out = [outcome(r) for r in run(timings)]
        measure[current[0]].append(timings["measure_s"])
        return out
    walls: dict = {}
    try:
        med, last = alternate({name: use(name) for name in ways}, once, a.repeats, times=walls)
    finally:
        population._prefetch_eps = real
    base = med["after training (before)"]
    print(f"{'ε computed':<28}{'wall s':>8}{'min':>8}{'max':>8}{'measure_s':>11}{'vs before':>11}")
    for name in ways:
        print(f"{name:<28}{med[name]:8.3f}{min(walls[name]):8.3f}{max(walls[name]):8.3f}"
              f"{statistics.median(measure[name]):11.3f}{base / med[name]:10.2f}x")
    print(f"objectives equal: {last['after training (before)'] == last['while training (prefetch)']}")
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
