"""Sample efficiency of fedevo's optimisers: the hypervolume each reaches after 48, 96 and 192 evaluations.

    python benchmarks/optimizers.py                                     # the full benchmark (hours on 2 cores)
    python benchmarks/optimizers.py --problems digits_mlp --optimizers nsga3 random gp --budgets 8 16 \\
        --pop 4 --seeds 0 1 --rounds 1 --out /tmp/opt-tiny                 # a tiny check that it works

For each problem, optimiser (``--optimizer``: nsga3, random, gp, tpe, or your own: ``python:FILE.py:Class``, named
by its class in the table) and seed, one search of ``--pop``-sized batches
(default: 16 for nsga3 and random; gp and tpe their own default, one candidate per parallel evaluation)
runs to the largest budget (``fedevo.searching.search(..., budget=max)``; evaluations in-process unless --workers)
in OUT/runs/<problem>/<optimizer>-s<seed>/; a run directory that is already there is resumed if unfinished and
reused if finished, so an interrupted benchmark continues where it stopped.

Then, per problem, **one normalisation** for every run (``fedevo.hypervolume(runs, at=[1, ..., max])``): the
objectives as the optimisers see them (error, comm, log10 ε) of all ok evaluations of every optimiser and seed give
the minimum and range each objective is scaled by, and the hypervolume of the front of a run's first k evaluations
is measured with pymoo's HV at reference point 1.1 in every objective. The table gives, per optimiser, the mean ± sd (over seeds) of that
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
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import fedevo  # noqa: E402
from fedevo.searching.front_math import HV_REF  # noqa: E402
from fedevo.searching.optimizers.user import label  # noqa: E402  (yours by its class, in the table and folders)


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
    fedevo.search(problem, pop=batch(optimizer, args), budget=budget, seed=seed, workers=args.workers, out=out,
                  rounds=args.rounds, data_dir=args.data_dir, optimizer=optimizer, page=False, progress=False)
    return out


def batch(optimizer: str, args) -> "int | None":
    """The batch size of an optimiser's searches: --pop when given, else 16 for nsga3 and random (the issue's
    NSGA-III population) and the optimiser's own default for a model-based one (gp, tpe: one candidate per
    parallel evaluation, 1 in-process: what `fedevo search --optimizer gp` does without --pop)."""
    if args.pop is not None:
        return args.pop
    from fedevo.searching.optimizers.registry import get

    return 16 if get(optimizer).default_pop is not None else None


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
    ap.add_argument("--pop", type=int, default=None, help="one batch size for every optimiser (default: 16 for "
                    "nsga3 and random, each model-based optimiser's own: 1 in-process)")
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
              f"pop (batch size) {args.pop or '16 for nsga3/random, the default (1 in-process) for gp/tpe'}, budgets {args.budgets}, seeds {args.seeds}, workers {args.workers}, "
              f"rounds {args.rounds or 'the problem’s'}; one normalisation per problem over the union of all runs "
              f"(search-space objectives), reference point {HV_REF}.", ""]
    for problem in args.problems:
        runs: dict[tuple[str, int], Path] = {}
        for opt in args.optimizers:
            for seed in args.seeds:
                d = args.out / "runs" / Path(problem).stem / f"{label(opt)}-s{seed}"  # a file: its name
                t0 = time.time()
                runs[(opt, seed)] = run_search(problem, opt, seed, args, d)
                print(f"{problem} {opt} seed {seed}: {time.time() - t0:.0f} s", flush=True)
        top = max(args.budgets)
        keys = list(runs)
        # one normalisation for every run of the problem: fedevo.hypervolume (the objectives as the optimiser sees
        # them, minimum and range of all the runs' ok evaluations, reference point 1.1)
        records = fedevo.hypervolume([runs[k] for k in keys], at=list(range(1, top + 1)))
        per_run: dict[str, list[float]] = {}
        for rec in records:  # per run, one record per point of `at`, in its order
            per_run.setdefault(str(rec["run"]), []).append(rec["hypervolume"])
        curves = {k: per_run[str(runs[k])] for k in keys}
        assert all(len(c) == top for c in curves.values())
        for key in keys:
            hv_rows += [(problem, key[0], key[1], n, curves[key][n - 1]) for n in range(1, top + 1)]
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
            lines.append(f"| {label(opt)} | " + " | ".join(mean_sd([curves[(opt, s)][b - 1] for s in args.seeds])
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
