"""The optimiser table of finished benchmark runs, whatever their lengths (runs stopped by a time budget included).

    python benchmarks/optimizers_report.py RUNS_DIR [--budgets 16 32 48 64 96 192] [--target nsga3@192]

RUNS_DIR holds one run directory per optimiser and seed, named OPTIMIZER-sSEED (what benchmarks/optimizers.py
writes under OUT/runs/PROBLEM/). One normalisation for all of them (``fedevo.hypervolume``: the objectives as the
optimisers see them, minimum and range of every run's ok evaluations, reference point 1.1). Per optimiser: the
hypervolume mean ± sd over seeds at each budget that all its runs reached ("–" where a run stopped earlier), the
evaluations each run needed to reach the target (the mean hypervolume of the target optimiser at its budget;
"not within N" when a run stopped at N evaluations without reaching it), and from each run's batches.csv the
optimiser's own seconds per proposal and the evaluations' seconds. Below the table, per optimiser: the evaluations
each seed needed (">N": not within its N) and, where some seed missed, the mean with each miss counted as N + 1
(a lower bound on the mean: such a run would need at least N + 1); then per run the optimiser's seconds per
proposal (mean, and in its last batch: the model's cost grows with the evaluations it has seen) and the
evaluations' mean seconds.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

import fedevo  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("--budgets", nargs="+", type=int, default=[16, 32, 48, 64, 96, 192])
    ap.add_argument("--target", default="nsga3@192", help="OPTIMIZER@EVALUATIONS whose mean hypervolume is the target")
    args = ap.parse_args()
    dirs = sorted(d for d in args.runs.iterdir() if (d / "run.json").exists())
    if not dirs:
        sys.exit(f"no run directories in {args.runs}")
    counts = {d: len(fedevo.open_run(d).evaluations) for d in dirs}
    top = max(counts.values())
    recs = fedevo.hypervolume(dirs, at=list(range(1, top + 1)))
    curve: dict[str, list[float]] = {}
    for r in recs:
        curve.setdefault(r["run"], []).append(r["hypervolume"])
    groups: dict[str, list[Path]] = {}
    for d in dirs:
        groups.setdefault(d.name.rsplit("-s", 1)[0], []).append(d)
    t_opt, t_n = args.target.split("@")
    t_n = int(t_n)
    target = float(np.mean([curve[str(d)][t_n - 1] for d in groups[t_opt]]))
    print(f"target: {t_opt}'s mean hypervolume at {t_n} evaluations = {target:.3f} (one normalisation over "
          f"{len(dirs)} runs)\n")
    print("| optimiser | runs (evaluations) | " + " | ".join(f"HV at {b}" for b in args.budgets)
          + f" | evaluations to reach {target:.3f} | optimiser s / proposal | evaluation s / evaluation |")
    print("|---|---|" + "---|" * (len(args.budgets) + 3))
    per_seed, per_run = [], []
    for opt, ds in groups.items():
        cells = []
        for b in args.budgets:
            if all(counts[d] >= b for d in ds):
                v = np.array([curve[str(d)][b - 1] for d in ds])
                cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0:.3f}")
            else:
                cells.append("–")
        reach = []
        for d in ds:
            k = next((i + 1 for i, v in enumerate(curve[str(d)]) if v >= target - 1e-12), None)
            reach.append(k if k is not None and k <= counts[d] else None)
        hit = [k for k in reach if k is not None]
        seeds = ", ".join(f"{d.name.rsplit('-s', 1)[1]}: {k if k is not None else f'>{counts[d]}'}"
                          for d, k in zip(ds, reach))
        line = f"- {opt}: {seeds}"
        if hit and len(hit) < len(ds):
            bound = np.mean([k if k is not None else counts[d] + 1 for d, k in zip(ds, reach)])
            line += f"; mean counting each miss as its evaluations + 1: >= {bound:.1f}"
        elif hit:
            line += f"; mean {np.mean(hit):.1f}"
        per_seed.append(line)
        miss = [counts[d] for d, k in zip(ds, reach) if k is None]
        txt = (f"{min(hit)}–{max(hit)} on {len(hit)} (mean {np.mean(hit):.0f})" if hit else "") + \
              (("; " if hit else "") + f"not within {sorted(set(miss))} on {len(miss)}" if miss else "")
        ask = ev = n_ask = n_ev = 0.0
        for d in ds:
            with open(d / "batches.csv") as f:
                rows = list(csv.DictReader(f))
            r_ask = sum(float(row["sampler_s"]) for row in rows)
            r_n = sum(int(row["asked"]) for row in rows)
            r_ev = sum(float(row["eval_s"]) for row in rows)
            last = float(rows[-1]["sampler_s"]) / max(int(rows[-1]["asked"]), 1) if rows else 0.0
            per_run.append(f"- {d.name}: optimiser {r_ask / max(r_n, 1):.3f} s / proposal (last batch {last:.3f}), "
                           f"evaluation {r_ev / max(counts[d], 1):.3f} s")
            ask += r_ask
            ev += r_ev
            n_ask += r_n
        n_ev = sum(counts[d] for d in ds)
        print(f"| {opt} | {len(ds)} ({', '.join(str(counts[d]) for d in ds)}) | " + " | ".join(cells)
              + f" | {txt} | {ask / max(n_ask, 1):.3f} | {ev / max(n_ev, 1):.3f} |")
    print(f"\nevaluations to reach {target:.3f}, per seed:")
    print("\n".join(per_seed))
    print("\nseconds per run:")
    print("\n".join(per_run))


if __name__ == "__main__":
    main()
