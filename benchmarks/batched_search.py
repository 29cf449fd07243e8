"""A search with its generations batched (`--batch-generation`, issue #37) against the same search one evaluation
at a time, in-process (workers=0), on whatever device the problem's evaluations train on (a GPU where torch sees
one: `device = "auto"`; `--device cpu` forces the CPU).

    python benchmarks/batched_search.py [--problem fashion_mlp_dp] [--pop 20] [--gen 2] [--seed 0] [--rounds R]
        [--data-dir D] [--device auto|cpu|cuda] [--batch-size-per-gpu N]

Prints the device (GPU name, driver via torch, torch and CUDA versions; else the CPU's lscpu model name), per
generation the evaluations' seconds (batches.csv `eval_s`) of each search and their ratio, the slowest member's
own wall_s in the unbatched search (issue #37 asks for a generation in ≤ 2× its slowest member alone), and how far
the batched evaluations are from the unbatched ones (same ids, seeds and genes; ε and comm equal; the largest
|Δ error|). Both searches run in fresh temporary directories, the unbatched one first, after one warm-up
evaluation each way.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedevo  # noqa: E402


def machine() -> str:
    import torch

    if torch.cuda.is_available() and os.environ.get("FEDEVO_DEVICE") != "cpu":
        return (f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
                f"{os.cpu_count()} CPUs")
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        name = next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name:")), "?")
    except (OSError, subprocess.SubprocessError):
        name = "?"
    return f"CPU {name}, {os.cpu_count()} cores, torch {torch.__version__}, load average {os.getloadavg()[0]:.1f}"


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return sorted(csv.DictReader(f), key=lambda r: int(r["id"]))


def search(args, tmp: Path, batched: bool) -> Path:
    out = tmp / ("batched" if batched else "alone")
    try:
        fedevo.search(args.problem, pop=args.pop, gen=args.gen, seed=args.seed, rounds=args.rounds,
                      data_dir=args.data_dir, workers=0, out=out, page=False, batch_generation=batched,
                      batch_size_per_gpu=args.batch_size_per_gpu)
    except fedevo.FedevoError as e:  # every evaluation failed: the rows still tell
        print(f"  ({'batched' if batched else 'alone'}: {e})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--pop", type=int, default=20)
    ap.add_argument("--gen", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--batch-size-per-gpu", type=int, default=None)
    args = ap.parse_args()
    if args.device != "auto":
        os.environ["FEDEVO_DEVICE"] = args.device
    print(machine())
    print(f"{args.problem}: --pop {args.pop} --gen {args.gen} --seed {args.seed}"
          + (f" --rounds {args.rounds}" if args.rounds else ""))
    warm_up(args)
    with tempfile.TemporaryDirectory() as tmp:
        alone, batched = search(args, Path(tmp), False), search(args, Path(tmp), True)
        a_rows, b_rows = rows(alone / "evaluations.csv"), rows(batched / "evaluations.csv")
        a_gen, b_gen = rows_of(alone / "batches.csv"), rows_of(batched / "batches.csv")
        print("generation | one at a time s | batched s | ratio | slowest member alone s | batched / slowest")
        for g, (a, b) in enumerate(zip(a_gen, b_gen), 1):
            slowest = max(float(r["wall_s"]) for r in a_rows if int(r["generation"]) == g)
            ta, tb = float(a["eval_s"]), float(b["eval_s"])
            print(f"{g} | {ta:.3f} | {tb:.3f} | {ta / tb:.2f}x | {slowest:.3f} | {tb / slowest:.2f}x")
        same = all((x["id"], x["seed"], x["comm"], x["eps"]) == (y["id"], y["seed"], y["comm"], y["eps"])
                   for x, y in zip(a_rows, b_rows)) and len(a_rows) == len(b_rows)
        errs = [abs(float(x["error"]) - float(y["error"])) for x, y in zip(a_rows, b_rows)
                if x["status"] == y["status"] == "ok"]
        print(f"ids, seeds, comm and eps equal: {same}; max |Δ error| {max(errs, default=math.nan):.2e} over "
              f"{len(errs)} ok pairs; statuses {sorted({r['status'] for r in b_rows})}")


def warm_up(args) -> None:
    """One evaluation each way first (data read and cached, kernels loaded, CUDA initialised): neither search pays
    the process's first-time costs."""
    from fedevo.evaluation import evaluate_population
    from fedevo.problem import load_problem

    prob = load_problem(args.problem)
    fedevo.evaluate(prob, seed=0, rounds=1, data_dir=args.data_dir)
    evaluate_population(prob, [{}], [0], rounds=1, data_dir=args.data_dir)


def rows_of(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


if __name__ == "__main__":
    main()
