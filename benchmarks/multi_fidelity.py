"""Hypervolume of the full-fidelity front against wall-clock time: plain NSGA-III vs fedevo's multi-fidelity search.

    python benchmarks/multi_fidelity.py                                   # digits_mlp, small (the committed run)
    python benchmarks/multi_fidelity.py --problem digits_mlp --pop 12 --gen 4 --mf-gen 10 --rounds 9 \\
        --fidelity 1/9,1/3,1 --seeds 0 1 2 --workers 0 --out benchmarks/results/multi_fidelity-digits
    # paper scale (experiments/ exp2: fashion_mlp_step, pop 20 x 20 generations, T = 5 rounds; rungs 1, 2 and 5
    # rounds; the plain search takes 5-6.5 min on 2 quiet Zen 5 cores; the multi-fidelity search stops at the end
    # of the first generation after 600 s): results/multi_fidelity-fashion-2026-11-25-*/
    PYTHONPATH=$PWD /work/stvenv/bin/python benchmarks/multi_fidelity.py --problem fashion_mlp_step --pop 20 \
        --gen 20 --mf-gen 200 --mf-budget-s 600 --fidelity 0.2,0.4,1 --seeds 2 3 --workers 2 --moasha \
        --out benchmarks/results/multi_fidelity-fashion

For each seed, one process runs the plain search (`--gen` generations, every evaluation trains all T rounds) and
the multi-fidelity search (`--fidelity`, `--mf-gen` generations) in fresh run directories, one after the other,
and records the wall-clock time of every evaluation as the search logs it (a SearchCallback; Ray start-up
included). Afterwards the hypervolume of the front of the full-fidelity evaluations finished by time t is computed
for every t, for both, with **one fixed normalisation and reference point** for the whole benchmark: the search's
space (error, comm, log10 ε; front_math), each objective scaled by the ideal and nadir point of all full-fidelity
ok evaluations of every method and seed, reference point 1.1 in each (pymoo HV). The plain search's total time is
the common budget: the table gives each method's hypervolume at that time, and the time the multi-fidelity search
took to reach the plain search's final hypervolume (or that it did not).

Outputs under --out: curves.csv (method, seed, t_s, full_evaluations, hypervolume), events.csv, summary.csv and summary.md
(the table, the machine: CPU model and flags, cores, load average before and after, the command). The plot of
hypervolume against time: benchmarks/hv_plot.py curves.csv --out NAME (an offline HTML page and a PNG of it).

With `--moasha`, each seed also runs Syne Tune's MOASHA (benchmarks/moasha.py) driving the same evaluation function
rung by rung on the same ladder, with the plain search's time as its budget; it then shares the normalisation and
appears in curves.csv, events.csv and the table as method 'moasha'. Syne Tune lives in a venv of its own (setup:
benchmarks/moasha.py's docstring), so the whole script then runs there:

    PYTHONPATH=$PWD /work/stvenv/bin/python benchmarks/multi_fidelity.py --problem digits_mlp --pop 12 --gen 4 \\
        --mf-gen 10 --rounds 9 --fidelity 1/9,1/3,1 --seeds 0 1 --workers 0 --moasha \\
        --out benchmarks/results/multi_fidelity-digits

events.csv has every evaluation of every method (method, seed, t_s since the method started, id, rung, fidelity,
rounds_trained, status, error, comm, eps, eps_paper): the curves can be recomputed from it.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from fedevo.searching import Runtime, SearchCallback, SearchSettings, search  # noqa: E402
from fedevo.searching.fidelity import parse_ladder  # noqa: E402
from fedevo.searching.front_math import HV_REF, feasible_ok, non_dominated, objective_matrix, to_search_space  # noqa: E402


class OutOfTime(Exception):
    """Raised by Clock at the end of the first generation after its budget: stops the search (a callback's
    exception stops a search, resumable)."""


class Clock(SearchCallback):
    """Records (seconds since the search was started, row) for every evaluation the search logs; with a budget,
    stops the search at the end of the first generation that ends after it."""

    def __init__(self, t0: float, budget_s: float | None = None):
        self.t0, self.events, self.budget_s = t0, [], budget_s

    def on_evaluation(self, row) -> None:
        self.events.append((time.monotonic() - self.t0, dict(row)))

    def on_generation(self, generation, run) -> None:
        if self.budget_s is not None and time.monotonic() - self.t0 > self.budget_s:
            raise OutOfTime(f"generation {generation} ended after the budget of {self.budget_s:.0f} s")


def machine() -> dict:
    model, flags = "?", ""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
            if line.startswith("Flags:"):
                have = set(line.split(":", 1)[1].split())
                flags = " ".join(f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16") if f in have)
    except (OSError, subprocess.SubprocessError):
        pass
    return {"cpu": model, "flags": flags, "cores": os.cpu_count(), "platform": platform.platform()}


def run_one(method: str, settings: SearchSettings, workers: int, tmp: Path, evaluator,
            budget_s: float | None = None) -> tuple[list, float]:
    out = tmp / method
    t0 = time.monotonic()
    clock = Clock(t0, budget_s)
    try:
        search(settings, out, Runtime(workers=workers), callbacks=[clock], evaluator=evaluator)
    except OutOfTime as e:
        print(f"  {method}: stopped, {e}", flush=True)
    return clock.events, time.monotonic() - t0


def full_ok(rows, eps_key):
    return [r for r in feasible_ok(rows, eps_key, {})]


def hv_curve(events, lo, scale, eps_key) -> list[tuple[float, int, float]]:
    """(t, full-fidelity evaluations so far, hypervolume of their front) after each full-fidelity evaluation."""
    from pymoo.indicators.hv import HV

    ind = HV(ref_point=np.full(3, HV_REF))
    done, out = [], [(0.0, 0, 0.0)]
    for t, row in events:
        if row.get("fidelity", 1.0) != 1.0:
            continue
        done.append(row)
        ok = full_ok(done, eps_key)
        if not ok:
            out.append((t, len(done), 0.0))
            continue
        F = (to_search_space(objective_matrix(ok, eps_key)) - lo) / scale
        F = F[non_dominated(F)]
        F = F[np.all(F < HV_REF, axis=1)]
        out.append((t, len(done), float(ind(F)) if len(F) else 0.0))
    return out


def normalisation(runs, eps_key) -> tuple[np.ndarray, np.ndarray]:
    """(lo, scale): the ideal point and range of all full-fidelity ok evaluations of every method and seed."""
    every = [r for events, _ in runs.values() for _, r in events if r.get("fidelity", 1.0) == 1.0]
    F = to_search_space(objective_matrix(full_ok(every, eps_key), eps_key))
    lo, hi = F.min(axis=0), F.max(axis=0)
    return lo, np.where(hi > lo, hi - lo, 1.0)


def write_curves(path: Path, runs, eps_key) -> dict:
    """curves.csv for `runs` {(method, seed): (events, wall)}, one normalisation for all; returns the curves."""
    lo, scale = normalisation(runs, eps_key)
    curves = {}
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["method", "seed", "t_s", "full_evaluations", "hypervolume"])
        for (method, seed), (events, _) in runs.items():
            curves[(method, seed)] = c = hv_curve(events, lo, scale, eps_key)
            w.writerows([method, seed, f"{t:.2f}", n, f"{hv:.6f}"] for t, n, hv in c)
    return curves


EVENT_COLUMNS = ("id", "rung", "fidelity", "rounds_trained", "status", "error", "comm", "eps", "eps_paper")


def write_events(path: Path, runs) -> None:
    """events.csv: every evaluation of every method with its time since the method started (a plain search's rows
    are rung 0, fidelity 1)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["method", "seed", "t_s", *EVENT_COLUMNS])
        for (method, seed), (events, _) in runs.items():
            for t, r in events:
                r = {"rung": 0, "fidelity": 1.0, **r}
                w.writerow([method, seed, f"{t:.3f}", *(r.get(k) for k in EVENT_COLUMNS)])


def at(curve, t: float) -> float:
    return max([hv for s, _, hv in curve if s <= t], default=0.0)


def n_at(curve, t: float) -> int:
    """Full-fidelity evaluations finished by time t."""
    return max([n for s, n, _ in curve if s <= t], default=0)


def reach(curve, target: float):
    return next((s for s, _, hv in curve if hv >= target - 1e-12), None)


def moasha_version() -> str:
    import syne_tune

    return syne_tune.__version__


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--pop", type=int, default=9)
    ap.add_argument("--gen", type=int, default=3, help="generations of the plain search")
    ap.add_argument("--mf-gen", type=int, default=6, help="generations of the multi-fidelity search")
    ap.add_argument("--rounds", type=int, default=None, help="T (default: the problem's)")
    ap.add_argument("--fidelity", default="1/9,1/3,1")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--mf-budget-s", type=float, default=None,
                    help="stop the multi-fidelity search at the end of the first generation after this many "
                         "seconds (default: run all --mf-gen generations)")
    ap.add_argument("--evaluator", default=None, help="'module:name' (default: fedevo's simulator)")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/multi_fidelity-digits"))
    ap.add_argument("--moasha", action="store_true",
                    help="also run Syne Tune's MOASHA (benchmarks/moasha.py; needs its venv) for the plain search's time")
    args = ap.parse_args()
    if args.moasha and args.evaluator:
        ap.error("--moasha drives fedevo's simulator (its exact continuation); leave --evaluator out")
    if args.moasha:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import importlib.util

        if importlib.util.find_spec("syne_tune") is None:
            ap.error("--moasha: syne_tune is not importable here; run this script in Syne Tune's venv (setup: "
                     "benchmarks/moasha.py's docstring)")

    ladder = parse_ladder(args.fidelity)
    evaluator = None  # settings.evaluator names it: the run loads it as `fedevo resume` would
    host = machine()
    load0 = os.getloadavg()
    runs = {}  # (method, seed) -> (events, wall)
    eps_key = "eps"
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for method, gen, fid in (("plain", args.gen, 1.0), ("multi-fidelity", args.mf_gen, ladder)):
                s = SearchSettings(problem=args.problem, pop=args.pop, gen=gen, seed=seed, rounds=args.rounds,
                                   fidelity=fid, **({"evaluator": args.evaluator} if args.evaluator else {}))
                budget = args.mf_budget_s if method == "multi-fidelity" else None
                events, wall = run_one(method, s, args.workers, Path(tmp) / f"seed{seed}", evaluator, budget)
                runs[(method, seed)] = (events, wall)
                n_full = sum(r.get("fidelity", 1.0) == 1.0 for _, r in events)
                print(f"seed {seed} {method:>15}: {wall:7.1f} s, {len(events)} evaluations ({n_full} full)",
                      flush=True)
            if args.moasha:  # the same evaluation function, ladder and seed; the plain search's time as budget
                import moasha

                events, wall = moasha.run(args.problem, rounds=args.rounds, ladder=ladder, seed=seed,
                                          budget_s=runs[("plain", seed)][1], workers=args.workers)
                runs[("moasha", seed)] = (events, wall)
                n_full = sum(r["fidelity"] == 1.0 for _, r in events)
                print(f"seed {seed} {'moasha':>15}: {wall:7.1f} s, {len(events)} evaluations ({n_full} full), "
                      f"{len({r['id'] for _, r in events})} trials", flush=True)
            from fedevo.problem import load_problem

            eps_key = load_problem(args.problem).eps_objective
    load1 = os.getloadavg()

    # one normalisation for everything: ideal and nadir of all full-fidelity ok evaluations
    args.out.mkdir(parents=True, exist_ok=True)
    curves, rows = write_curves(args.out / "curves.csv", runs, eps_key), []
    write_events(args.out / "events.csv", runs)
    for seed in args.seeds:
        plain, mf = curves[("plain", seed)], curves[("multi-fidelity", seed)]
        budget = runs[("plain", seed)][1]
        target = plain[-1][2]
        t_reach = reach(mf, target)
        rows.append({
            "seed": seed, "plain_s": round(budget, 1), "plain_full_evals": plain[-1][1], "plain_hv": round(target, 4),
            "mf_s": round(runs[("multi-fidelity", seed)][1], 1), "mf_full_evals": mf[-1][1],
            "mf_hv": round(mf[-1][2], 4), "mf_hv_at_plain_s": round(at(mf, budget), 4),
            "mf_hv_at_third": round(at(mf, budget / 3), 4), "plain_hv_at_third": round(at(plain, budget / 3), 4),
            "mf_s_to_plain_hv": "not reached" if t_reach is None else round(t_reach, 1),
            "time_ratio": "–" if t_reach is None else round(t_reach / budget, 2),
        })
        if args.moasha:  # at the plain search's time (MOASHA's budget; an evaluation running then ends later)
            mo = curves[("moasha", seed)]
            rows[-1].update({
                "moasha_trials": len({r["id"] for t, r in runs[("moasha", seed)][0] if t <= budget}),
                "moasha_full_evals": n_at(mo, budget), "moasha_hv_at_plain_s": round(at(mo, budget), 4),
                "moasha_hv_at_third": round(at(mo, budget / 3), 4),
            })
    cols = list(rows[0])
    with open(args.out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)
    ratios = [r["time_ratio"] for r in rows if r["time_ratio"] != "–"]
    lines = [
        f"# Multi-fidelity vs plain NSGA-III{' vs MOASHA' if args.moasha else ''} on {args.problem}",
        "",
        f"Command: `python {' '.join(sys.argv)}`",
        "",
        f"Machine: {host['cpu']} ({host['flags'] or 'no avx2/avx512 flags'}), {host['cores']} cores, {host['platform']}; "
        f"load average (1, 5, 15 min) before {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, after "
        f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} (the machine was shared with other jobs: times are noisy).",
        "",
        f"Plain: pop {args.pop} × {args.gen} generations, T = {args.rounds or 'the problem file’s'} rounds each. Multi-fidelity: pop "
        f"{args.pop} × {args.mf_gen} generations, rungs {args.fidelity} of T, ⌈n/3⌉ promoted per rung. Workers: "
        f"{args.workers}. "
        + (f"MOASHA (Syne Tune {moasha_version()}): random configurations, the same rungs and exact continuation, "
           "η = 3, objectives measured at each rung, budget = the plain search's time. " if args.moasha else "")
        + "Hypervolume: (error, comm, log10 ε) scaled by the ideal/nadir of all full-fidelity ok "
        f"evaluations of {'all' if args.moasha else 'both'} methods and every seed, reference point 1.1 (fixed for "
        "the whole table).",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
        *("| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows),
        "",
        (f"The multi-fidelity search reached the plain search's final hypervolume in {min(ratios):.2f}–"
         f"{max(ratios):.2f} of its time on {len(ratios)} of {len(rows)} seeds." if ratios else
         "The multi-fidelity search did not reach the plain search's final hypervolume on any seed."),
        "",
    ]
    if args.moasha:
        wins = sum(r["mf_hv_at_plain_s"] > r["moasha_hv_at_plain_s"] for r in rows)
        lines[-1:-1] = ["", f"At the plain search's time the multi-fidelity search's hypervolume exceeds MOASHA's on "
                            f"{wins} of {len(rows)} seeds."]
    (args.out / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))
    if any(math.isnan(r["plain_hv"]) for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
