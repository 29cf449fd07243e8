"""Warm-starting a model-based search from a cheap earlier one (`--init-from`), against the same search cold.

    python benchmarks/warm_start.py [--problem digits_mlp] [--optimizer gp] [--seeds 5] [--budget 32]
                                    [--cheap-rounds 3] [--cheap-pop 12] [--cheap-gen 2] [--at 10 16 24 32] OUT

Per seed s: an earlier, cheap NSGA-III search (--cheap-rounds rounds per evaluation, --cheap-pop × --cheap-gen
evaluations, seed 1000 + s), then the same `--optimizer` search at the problem's full rounds twice with seed s:
cold, and warm-started from the cheap run's front (its genes are the first candidates, evaluated afresh at full
rounds). The hypervolume of the cold and warm runs after their first n evaluations for each n in --at, under ONE
normalisation over all of them (fedevo.hypervolume; the cheap runs are not in it), mean ± sd over seeds, and per
seed the difference warm − cold. The cheap run's cost is printed too (its evaluations and seconds): the warm
start is not free. Runs in-process (workers 0), all in this process, one after another. Writes OUT/runs/ and
prints the table (with the CPU) to stdout.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedevo  # noqa: E402
from benchmarks.machine import cpu  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--optimizer", default="gp")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--cheap-rounds", type=int, default=3)
    ap.add_argument("--cheap-pop", type=int, default=12)
    ap.add_argument("--cheap-gen", type=int, default=2)
    ap.add_argument("--at", nargs="+", type=int, default=[10, 16, 24, 32])
    a = ap.parse_args()
    runs = a.out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} benchmarks/warm_start.py {' '.join(sys.argv[1:])}")
    print(f"# machine: {cpu()}; python {platform.python_version()}; fedevo {fedevo.__version__}")
    cold, warm, cheap_cost = {}, {}, {}
    for s in range(a.seeds):
        t0 = time.perf_counter()
        cheap = fedevo.search(a.problem, optimizer="nsga3", pop=a.cheap_pop, gen=a.cheap_gen, rounds=a.cheap_rounds,
                              seed=1000 + s, workers=0, page=False, out=runs / f"cheap-s{s}")
        cheap_cost[s] = (cheap.summary.evaluations, time.perf_counter() - t0)
        t0 = time.perf_counter()
        cold[s] = fedevo.search(a.problem, optimizer=a.optimizer, budget=a.budget, seed=s, workers=0, page=False,
                                out=runs / f"cold-s{s}").path
        t_cold = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm[s] = fedevo.search(a.problem, optimizer=a.optimizer, budget=a.budget, seed=s, workers=0, page=False,
                                out=runs / f"warm-s{s}", init_from=cheap.path).path
        t_warm = time.perf_counter() - t0
        print(f"# seed {s}: cheap {cheap_cost[s][0]} evaluations at {a.cheap_rounds} rounds in {cheap_cost[s][1]:.1f} s;"
              f" cold {t_cold:.1f} s, warm {t_warm:.1f} s", flush=True)
    order = [cold[s] for s in range(a.seeds)] + [warm[s] for s in range(a.seeds)]
    recs = fedevo.hypervolume(order, at=a.at)
    hv = {(str(r["run"]), r["evaluations"]): r["hypervolume"] for r in recs}

    def at(path, n):
        return hv[(str(path), n)]

    print(f"\n{a.problem}, --optimizer {a.optimizer}, budget {a.budget}, {a.seeds} seeds; warm start from NSGA-III "
          f"{a.cheap_pop}×{a.cheap_gen} at {a.cheap_rounds} rounds; one normalisation over the cold and warm runs\n")
    print("| evaluations | cold (mean ± sd) | warm (mean ± sd) | warm − cold per seed | warm ahead on |")
    print("|---|---|---|---|---|")
    for n in a.at:
        c = [at(cold[s], n) for s in range(a.seeds)]
        w = [at(warm[s], n) for s in range(a.seeds)]
        d = [wi - ci for wi, ci in zip(w, c)]
        sd = (lambda x: statistics.stdev(x) if len(x) > 1 else 0.0)
        print(f"| {n} | {statistics.mean(c):.3f} ± {sd(c):.3f} | {statistics.mean(w):.3f} ± {sd(w):.3f} | "
              f"{', '.join(f'{x:+.3f}' for x in d)} | {sum(x > 0 for x in d)} of {a.seeds} |")


if __name__ == "__main__":
    main()
