"""The same evaluations with two checkouts of fedevo (e.g. before and after a change), side by side: one worker
process per checkout, each importing its own fedevo (PYTHONPATH), fed the same (params, seed) in turn, the order
alternating; each times `fedevo.evaluate` inside its process after a warm-up. Prints wall seconds per
evaluation, the ratio, and whether error, comm, ε and Ω are equal.

The configurations are cuda_population.py's drawn generation (--generation N from the problem's genes with
--gen-seed; seeds 1..N), on the problem's default engine (precision 'auto', the CPU).

    python benchmarks/compare_checkouts.py --base ../wt-base --head . [--problem fashion_mlp_dp] [--generation 20]
        [--gen-seed 0] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

WORKER = r"""
import json, sys, time
import fedevo
problem = fedevo.load_problem(sys.argv[1]) if hasattr(fedevo, "load_problem") else sys.argv[1]
rounds = None if sys.argv[2] == "none" else int(sys.argv[2])
fedevo.evaluate(problem, {}, seed=0, rounds=1)  # warm-up: data read, kernels built, imports done
print(json.dumps({"ready": fedevo.__file__}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    t = time.perf_counter()
    r = fedevo.evaluate(problem, job["params"], seed=job["seed"], rounds=rounds)
    wall = time.perf_counter() - t
    print(json.dumps({"wall": wall, "out": [r.error, r.comm, r.eps, r.omega, r.status]}), flush=True)
"""


def worker(path: str, problem: str, rounds) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(path), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", ""))
    if not env["OMP_NUM_THREADS"]:
        env.pop("OMP_NUM_THREADS")
    p = subprocess.Popen([sys.executable, "-c", WORKER, problem, str(rounds or "none")], cwd=os.path.abspath(path),
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ready = json.loads(p.stdout.readline())
    print(f"  {path}: fedevo from {ready['ready']}", flush=True)
    return p


def same_results(a: list, b: list) -> bool:
    """Equal, NaN equal to NaN (a diverged evaluation's objectives)."""
    def norm(v):
        return "nan" if isinstance(v, float) and v != v else v
    return [norm(v) for v in a] == [norm(v) for v in b]


def ask(p: subprocess.Popen, params: dict, seed: int) -> dict:
    p.stdin.write(json.dumps({"params": params, "seed": seed}) + "\n")
    p.stdin.flush()
    return json.loads(p.stdout.readline())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default=".")
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--generation", type=int, default=20)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    a = ap.parse_args(argv)
    from cuda_population import draw_generation
    from fedevo.problem import load_problem

    gen = draw_generation(load_problem(a.problem), a.generation, a.gen_seed)
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.1f}")
    procs = {"base": worker(a.base, a.problem, a.rounds), "head": worker(a.head, a.problem, a.rounds)}
    print(f"{'#':>3}  {'params':<58}{'base s':>8}{'head s':>8}{'ratio':>7}  equal")
    tb, th, same = [], [], 0
    for i, p in enumerate(gen):
        order = ("base", "head") if i % 2 == 0 else ("head", "base")
        got = {name: ask(procs[name], p, i + 1) for name in order}
        b, h = got["base"], got["head"]
        tb.append(b["wall"])
        th.append(h["wall"])
        eq = same_results(b["out"], h["out"])
        same += eq
        short = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in p.items()
                 if k in ("trust", "layers", "units", "participation")}
        print(f"{i:>3}  {str(short):<58}{b['wall']:8.3f}{h['wall']:8.3f}{b['wall'] / h['wall']:7.2f}  {eq}",
              flush=True)
    for proc in procs.values():
        proc.stdin.close()
        proc.wait(timeout=60)
    ratios = [b / h for b, h in zip(tb, th)]
    print(f"all {len(gen)}: base {sum(tb):.2f} s, head {sum(th):.2f} s ({sum(tb) / sum(th):.2f}x); per evaluation "
          f"median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}); results equal "
          f"for {same}/{len(gen)}; load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
