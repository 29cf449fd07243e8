"""Sample efficiency of fedevo's optimisers: the hypervolume each reaches after 48, 96 and 192 evaluations.

    python benchmarks/optimizers.py                                     # the full benchmark (hours on 2 cores)
    python benchmarks/optimizers.py --problems digits_mlp --optimizers nsga3 random gp --budgets 8 16 \\
        --pop 4 --seeds 0 1 --rounds 1 --out /tmp/opt-tiny                 # a tiny check that it works

For each problem, optimiser (``--optimizer``: nsga3, random, gp, tpe) and seed, one search of ``--pop``-sized batches
runs to the largest budget (``fedevo.searching.search(..., budget=max)``; evaluations in-process unless --workers)
in OUT/runs/<problem>/<optimizer>-s<seed>/; a run directory that is already there is resumed if unfinished and
reused if finished, so an interrupted benchmark continues where it stopped.

Then, per problem, **one normalisation** for every run: the search-space objectives (error, comm, log10 ε: what
the optimisers minimise; fedevo.searching.front_math) of all full-fidelity ok evaluations within the problem's
constraints, of every optimiser and seed, give the ideal and nadir point; each objective is scaled to [0, 1] by
them and the hypervolume of the front of a run's first k evaluations (ids 0..k-1) is measured with pymoo's HV at
reference point 1.1 in every objective. The table gives, per optimiser, the mean ± sd (over seeds) of that
hypervolume at each budget, and the evaluations each run needed to reach NSGA-III's mean hypervolume at the
largest budget (the target; "never" when it did not within the largest budget).

Time: batches.csv of every run holds, per batch, the seconds the optimiser spent proposing and being told
(``sampler_s``) and the seconds its evaluations took (``eval_s``); the table reports both summed over a run (mean
over seeds) and the optimiser's mean seconds per proposal, so its own cost stays apart from the evaluations'.

Outputs under --out (default benchmarks/results/optimizers-<date>/): hv.csv (problem, optimizer, seed, k, hypervolume
for every k), runs.csv (per run: evaluations, sampler_s, eval_s, evaluations to reach the target), summary.md (the
tables, the machine: CPU model from lscpu, cores, load average before and after, the command).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import fedevo  # noqa: E402
from fedevo.searching import load_run  # noqa: E402
from fedevo.searching.front_math import HV_REF, feasible_ok, non_dominated, objective_matrix, to_search_space  # noqa: E402


def machine() -> dict:
    model = "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name:")), "?")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "platform": platform.platform()}


def run_search(problem: str, optimizer: str, seed: int, args, out: Path) -> Path:
    """The run directory of one (problem, optimiser, seed), searched to the largest budget (or resumed)."""
    budget = max(args.budgets)
    if (out / "run.json").exists():
        try:
            fedevo.resume(out, workers=args.workers, page=False, progress=False)
        except fedevo.FedevoError as e:
            if "finished search" not in str(e):
                raise
        return out
    fedevo.search(problem, pop=args.pop, budget=budget, seed=seed, workers=args.workers, out=out,
                  rounds=args.rounds, data_dir=args.data_dir, optimizer=optimizer, page=False, progress=False)
    return out


def search_space_rows(run_dir: Path) -> tuple[list[int], np.ndarray]:
    """(ids, objective matrix as the search sees it) of a run's feasible full-fidelity ok evaluations."""
    data = load_run(run_dir)
    rows = feasible_ok(data.rows, data.eps_key, data.meta.get("constraints", {}))
    F = to_search_space(objective_matrix(rows, data.eps_key)) if rows else np.zeros((0, 3))
    return [int(r["id"]) for r in rows], F


def hypervolume(F: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> float:
    """Hypervolume of the non-dominated rows of F, normalised by (lo, scale), reference point HV_REF."""
    from pymoo.indicators.hv import HV

    if len(F) == 0:
        return 0.0
    Z = (F[non_dominated(F)] - lo) / scale
    Z = Z[np.all(Z < HV_REF, axis=1)]
    return float(HV(ref_point=np.full(F.shape[1], HV_REF))(Z)) if len(Z) else 0.0


def timing(run_dir: Path) -> dict:
    with open(run_dir / "batches.csv") as f:
        b = list(csv.DictReader(f))
    asked = sum(int(r["asked"]) for r in b)
    sampler = sum(float(r["sampler_s"]) for r in b)
    return {"evaluations": asked, "sampler_s": sampler, "eval_s": sum(float(r["eval_s"]) for r in b),
            "sampler_s_per_proposal": sampler / max(1, asked)}


def mean_sd(xs) -> str:
    xs = np.asarray(xs, dtype=float)
    return f"{xs.mean():.3f} ± {xs.std(ddof=1) if len(xs) > 1 else 0.0:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", nargs="+", default=["digits_mlp", "fashion_mlp_dp"])
    ap.add_argument("--optimizers", nargs="+", default=["nsga3", "random", "gp", "tpe"])
    ap.add_argument("--budgets", nargs="+", type=int, default=[48, 96, 192])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--pop", type=int, default=16)
    ap.add_argument("--workers", default="0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", type=Path, default=Path(f"benchmarks/results/optimizers-{time.strftime('%Y-%m-%d')}"))
    args = ap.parse_args()
    args.budgets = sorted(args.budgets)
    args.out.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()
    t_start = time.time()
    hv_rows, run_rows, lines = [], [], []
    mach = machine()
    lines += [f"# Optimisers: hypervolume at equal evaluations ({time.strftime('%Y-%m-%d')})", "",
              f"`{' '.join([Path(sys.executable).name, *sys.argv])}`", "",
              f"CPU: {mach['cpu']}, {mach['cores']} cores, {mach['platform']}; load average before "
              f"{load0[0]:.2f}", "",
              f"pop (batch size) {args.pop}, budgets {args.budgets}, seeds {args.seeds}, workers {args.workers}, "
              f"rounds {args.rounds or 'the problem’s'}; one normalisation per problem over the union of all runs "
              f"(search-space objectives), reference point {HV_REF}.", ""]
    for problem in args.problems:
        runs: dict[tuple[str, int], Path] = {}
        for opt in args.optimizers:
            for seed in args.seeds:
                d = args.out / "runs" / problem / f"{opt}-s{seed}"
                t0 = time.time()
                runs[(opt, seed)] = run_search(problem, opt, seed, args, d)
                print(f"{problem} {opt} seed {seed}: {time.time() - t0:.0f} s", flush=True)
        data = {key: search_space_rows(d) for key, d in runs.items()}
        union = np.vstack([F for _, F in data.values() if len(F)])
        lo, hi = union.min(axis=0), union.max(axis=0)
        scale = np.where(hi - lo > 0, hi - lo, 1.0)
        curves: dict[tuple[str, int], list[float]] = {}
        top = max(args.budgets)
        for key, (ids, F) in data.items():
            ids = np.asarray(ids)
            curves[key] = [hypervolume(F[ids < k], lo, scale) for k in range(1, top + 1)]
            hv_rows += [(problem, key[0], key[1], k, curves[key][k - 1]) for k in range(1, top + 1)]
        base = "nsga3" if "nsga3" in args.optimizers else args.optimizers[0]
        target = float(np.mean([curves[(base, s)][top - 1] for s in args.seeds]))
        lines += [f"## {problem}", "", f"Target: {base}'s mean hypervolume at {top} evaluations = {target:.3f}.", "",
                  "| optimiser | " + " | ".join(f"HV at {b}" for b in args.budgets)
                  + f" | evaluations to reach {target:.3f} | optimiser s / run | evaluation s / run "
                    "| optimiser s / proposal |",
                  "|---|" + "---|" * (len(args.budgets) + 4)]
        for opt in args.optimizers:
            reach, times = [], []
            for seed in args.seeds:
                c = curves[(opt, seed)]
                k = next((i + 1 for i, v in enumerate(c) if v >= target - 1e-12), None)
                reach.append(k)
                t = timing(runs[(opt, seed)])
                times.append(t)
                run_rows.append({"problem": problem, "optimizer": opt, "seed": seed, **t,
                                 "reach_target": "" if k is None else k,
                                 **{f"hv_{b}": c[b - 1] for b in args.budgets}})
            hit = [k for k in reach if k is not None]
            reach_txt = (f"{min(hit)}–{max(hit)} on {len(hit)} seed{'s' if len(hit) != 1 else ''} "
                         f"(mean {np.mean(hit):.0f})" if hit else "") + \
                        (f"{', ' if hit else ''}never on {len(reach) - len(hit)}" if len(hit) < len(reach) else "")
            lines.append(f"| {opt} | " + " | ".join(mean_sd([curves[(opt, s)][b - 1] for s in args.seeds])
                                                   for b in args.budgets)
                         + f" | {reach_txt} | {np.mean([t['sampler_s'] for t in times]):.1f} | "
                           f"{np.mean([t['eval_s'] for t in times]):.1f} | "
                           f"{np.mean([t['sampler_s_per_proposal'] for t in times]):.3f} |")
        lines.append("")
    load1 = os.getloadavg()
    lines += [f"Load average after {load1[0]:.2f}; {time.time() - t_start:.0f} s in all.", ""]
    with open(args.out / "hv.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem", "optimizer", "seed", "evaluations", "hypervolume"])
        w.writerows(hv_rows)
    with open(args.out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(run_rows[0]))
        w.writeheader()
        w.writerows(run_rows)
    (args.out / "summary.md").write_text("\n".join(lines))
    (args.out / "machine.json").write_text(json.dumps(mach, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
