"""Search throughput side by side: serial in-process vs local Ray with 1, 2, ... workers (one process).

    python benchmarks/search_parallel.py                      # digits_mlp, pop 8 x 2 generations, 3 rounds
    python benchmarks/search_parallel.py --pop 12 --gen 3 --rounds 5 --workers 0 1 2
    python benchmarks/search_parallel.py --ray-address 127.0.0.1:6379   # add an existing cluster

Each configuration runs the same search (same seed) in a fresh run directory and reports wall time,
evaluations per second, Ray start-up included, and whether its Pareto front (ids and objectives) is
identical to the first configuration's. Identical fronts are guaranteed for a deterministic evaluator; with the real simulator they
can differ only if torch's results depend on the thread count (workers get max(1, cores // workers) threads).

A cluster for --ray-address, on this machine:

    ray start --head --node-ip-address=127.0.0.1 --port=6379 --num-cpus=2 --include-dashboard=false --block &
    RAY_AUTH_MODE=token python benchmarks/search_parallel.py --ray-address 127.0.0.1:6379
    kill %1        # `ray start --block` stops the processes it started
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fedevo.searching import Runtime, SearchSettings, search  # noqa: E402
from fedevo.searching.runner import cores  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--pop", type=int, default=8)
    ap.add_argument("--gen", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, nargs="+", default=None,
                    help="worker counts to compare (0 = serial); default: 0 1 ... cores")
    ap.add_argument("--ray-address", default=None)
    args = ap.parse_args()

    configs = [Runtime(workers=w) for w in (args.workers if args.workers is not None else range(cores() + 1))]
    if args.ray_address:
        configs.append(Runtime(ray_address=args.ray_address))
    settings = SearchSettings(problem=args.problem, pop=args.pop, gen=args.gen, seed=args.seed, rounds=args.rounds)
    print(f"{args.problem}: pop {args.pop} x {args.gen} generations = {settings.expected_evaluations} evaluations, "
          f"{args.rounds} rounds each, seed {args.seed}, {cores()} cores")
    print(f"{'runner':<28} {'wall s':>8} {'eval/s':>8} {'vs first':>9} {'front':>6}  same front as first")
    first = base = None
    with tempfile.TemporaryDirectory() as tmp:
        for i, rt in enumerate(configs):
            out = Path(tmp) / f"run{i}"
            t0 = time.perf_counter()
            s = search(settings, out, rt)
            wall = time.perf_counter() - t0
            with open(out / "front.csv", newline="") as f:  # wall_s differs from run to run: compare the rest
                front = [(r["id"], r["error"], r["comm"], r["eps"], r["eps_paper"]) for r in csv.DictReader(f)]
            if first is None:
                first, base = front, s.evaluations / wall
            name = (f"cluster {rt.ray_address}" if rt.ray_address else
                    "serial (in-process)" if rt.workers == 0 else f"local Ray, {rt.workers} worker(s)")
            rate = s.evaluations / wall
            print(f"{name:<28} {wall:8.1f} {rate:8.2f} {rate / base:8.2f}x {s.front_size:6d}  {front == first}",
                  flush=True)


if __name__ == "__main__":
    main()
