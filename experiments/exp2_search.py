"""Seed 004 §4.3 — Pareto search + enhancement: the paper's search (population 20 × 20 generations, K=100,
5 rounds × 5 local epochs per evaluation, per-step LDP, seed-004 gene ranges) on IID and/or label-shard
(non-IID) clients, then the two lowest-error solutions and the knee retrained for 150 rounds against the
standard solution (dense, no privacy) — the layout of the paper's Tables 5–6.

The paper used MNIST and CIFAR-10; here Fashion-MNIST (offline) by default (`fashion_mlp_step`), MNIST with
--problem mnist_mlp --data-dir D. A run directory that already exists is resumed (finished runs return at once).

    python experiments/exp2_search.py [--partition iid,shards] [--pop 20] [--gen 20] [--retrain-rounds 150]
                                      [--workers 2] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from common import command, machine

from fedevo.retraining import retrain
from fedevo.searching import Runtime, SearchSettings, resume, search

PUBLISHED = ("seed 004 (MNIST): picked solutions cost 7.98–13.03% of the standard's communication, reach up to "
             "96.71% of its accuracy, average ε 2.31 (paper formula, δ=1e-4); CIFAR-10: 13.55–21.38%, 95.02%, ε 6.06")


def problem_file(base: str, partition: str, out: Path) -> str:
    """The bundled problem with its partition switched (written next to the results, so the run is self-contained)."""
    from fedevo.problem import load_problem

    if partition == "iid":
        return base
    src = Path(load_problem(base).path).read_text()
    text = src.replace('partition = "iid"', f'partition = "{partition}"').replace(
        f'name = "{base}"', f'name = "{base}_{partition}"')
    path = out / f"{base}_{partition}.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def summarise(report_csv: Path) -> tuple[str, list[str]]:
    rows = list(csv.DictReader(open(report_csv)))
    picked = [r for r in rows if r["solution"] != "standard"]
    comm = [float(r["comm_pct_of_standard"]) for r in picked]
    acc = [float(r["accuracy_global_pct_of_standard"]) for r in picked]
    eps = [float(r["eps"]) for r in picked]
    eps_p = [float(r["eps_paper"]) for r in picked]
    line = (f"comm {min(comm):.2f}–{max(comm):.2f}% of standard, accuracy up to {max(acc):.2f}% of standard, "
            f"mean ε {sum(eps) / len(eps):.4g} (accountant) / {sum(eps_p) / len(eps_p):.4g} (paper formula)")
    return line, [f"| {r['solution']} | {r['label']} | {r['accuracy_global']} | {r['accuracy_global_pct_of_standard']} | "
                  f"{r['comm']} | {r['comm_pct_of_standard']} | {r['eps']} | {r['eps_paper']} | {r['omega']} |"
                  for r in rows]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="fashion_mlp_step")
    ap.add_argument("--partition", default="iid,shards")
    ap.add_argument("--data-dir")
    ap.add_argument("--pop", type=int, default=20)
    ap.add_argument("--gen", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=None, help="rounds per evaluation (problem default: 5)")
    ap.add_argument("--retrain-rounds", type=int, default=150)
    ap.add_argument("--pick", default="lowest-error:2,knee")
    ap.add_argument("--standard-participation", type=float, default=1.0,
                    help="C of the standard solution (seed 004 §4.1: K=100, C=1)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke test: digits_mlp_local, pop 6 × 2, 1 round, retrain 2")
    ap.add_argument("--out", default="experiments/results")
    a = ap.parse_args(argv)
    if a.quick:
        a.problem, a.partition, a.pop, a.gen, a.rounds, a.retrain_rounds, a.workers = \
            "digits_mlp_local", "iid", 6, 2, 1, 2, 0
    out = Path(a.out)
    md = ["# Experiment 2 — Pareto search + enhancement (seed 004 §4.3)", "", f"Machine: {machine()}", "",
          f"Published: {PUBLISHED}.", ""]
    for part in a.partition.split(","):
        run_dir = out / f"exp2_search_{a.problem}_{part}"
        prob = problem_file(a.problem, part, out / "problems")
        rt = Runtime(workers=a.workers)
        t0 = time.perf_counter()
        if (run_dir / "run.json").exists():
            s = resume(run_dir, rt)
        else:
            s = search(SearchSettings(problem=prob, pop=a.pop, gen=a.gen, seed=a.seed, rounds=a.rounds,
                                      data_dir=a.data_dir), run_dir, rt)
        t_search = time.perf_counter() - t0
        from fedevo.viz import write_front_html

        write_front_html(run_dir)
        t0 = time.perf_counter()
        retrain(run_dir, a.pick, rounds=a.retrain_rounds, workers=a.workers,
                standard={"participation": a.standard_participation})
        t_retrain = time.perf_counter() - t0
        line, table = summarise(run_dir / "retrain" / "report.csv")
        section = [f"## {a.problem}, {part}", "", f"Command: `{command()}`", "",
                   f"Search: {s.evaluations} evaluations, front of {s.front_size}, {t_search:.0f} s this invocation "
                   f"(see `{run_dir.name}/run.json` and `evaluations.csv` wall_s for the original run). "
                   f"Retrain ({a.retrain_rounds} rounds, {a.pick} + standard): {t_retrain:.0f} s.", "",
                   f"Ours: {line}.", "",
                   "| solution | picked by | global accuracy | % of standard | comm | % of standard | ε (accountant) | "
                   "ε (paper) | Ω |", "|---|---|---|---|---|---|---|---|---|", *table, "",
                   f"Front plot: `{run_dir.name}/front.html`; report: `{run_dir.name}/retrain/report.md`, "
                   f"curves: `{run_dir.name}/retrain/curves.html`.", ""]
        (run_dir / "exp2_section.md").write_text("\n".join(section) + "\n")
        print("\n".join(section))
    # the page holds every partition run so far, not only this invocation's
    for sec in sorted(out.glob(f"exp2_search_{a.problem}_*/exp2_section.md")):
        md.append(sec.read_text())
    (out / "exp2_README.md").write_text("\n".join(md))


if __name__ == "__main__":
    main()
