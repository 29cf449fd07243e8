"""The search's own overhead next to its evaluations, with and without the live page (issue #34: writing front.html
after every generation and importance.html at the end cost ~35 % of the evaluation time on digits_mlp).

    python benchmarks/search_overhead.py [--problem digits_mlp] [--pop 12] [--gen 4] [--seed 0] [--repeats 2]

Each configuration runs the same search in-process (workers=0) in a fresh directory: `page=False`; `page=True` as
fedevo.search does it now (the live front.html at most every api.PAGE_SECONDS, then front.html at the end); and
the behaviour before issue #34 (the page rewritten after every generation, PAGE_SECONDS = 0, and importance.html
written at the end). Overhead = wall time of fedevo.search − the evaluations' own wall_s (sum over evaluations.csv), as a
percentage of the latter; the time of the final pages is reported apart. Beside it, the baseline run side by side
in the same process: the run's configurations with their evaluation seeds evaluated again by ``fedevo.evaluate`` in
a plain loop, and the ratio search wall / loop wall (1.0: the search costs nothing beyond its evaluations). One
evaluation before any timing loads the imports, the data and the kernels, so neither side pays them. Prints one
line per run and the CPU (lscpu model name) and load average.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fedevo  # noqa: E402
from fedevo import api  # noqa: E402
from fedevo.privacy import offload  # noqa: E402
from machine import cpu  # noqa: E402  (benchmarks/machine.py)


def one(args, page: bool, seconds: float, importance: bool, tmp: Path) -> dict:
    api.PAGE_SECONDS = seconds
    final = [0.0]
    orig = api._final_page

    def timed(run_dir, **kw):
        t = time.perf_counter()
        try:
            return orig(run_dir, **kw)
        finally:
            final[0] = time.perf_counter() - t

    api._final_page = timed
    try:
        offload.forget()  # a repeat's search computes its ε afresh
        t0 = time.perf_counter()
        run = fedevo.search(args.problem, pop=args.pop, gen=args.gen, seed=args.seed, workers=0, out=tmp,
                            page=page, progress=False, importance=importance)
        wall = time.perf_counter() - t0
    finally:
        api._final_page = orig
    with open(run.path / "evaluations.csv") as f:
        evals = sum(float(r["wall_s"]) for r in csv.DictReader(f))
    # the baseline side by side: the same configurations with the same seeds, evaluated one after another by
    # fedevo.evaluate in this process (what the evaluations cost without any search around them)
    offload.forget()  # the search's ε are remembered (privacy/offload.py): the baseline computes its own
    t0 = time.perf_counter()
    for rec in run.evaluations:
        fedevo.evaluate(args.problem, dict(rec.params), seed=rec.seed)
    loop = time.perf_counter() - t0
    return {"wall": wall, "evals": evals, "final": final[0], "overhead": wall - evals, "loop": loop}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--pop", type=int, default=12)
    ap.add_argument("--gen", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.2f}")
    fedevo.evaluate(args.problem, None, seed=0)  # warm: imports, data and kernels load once, before any timing
    default = api.PAGE_SECONDS
    configs = [("page=False", False, default, False),
               (f"page=True (now: live page at most every {default:g} s)", True, default, False),
               ("before: page every generation + importance", True, 0.0, True)]
    for r in range(args.repeats):
        for name, page, seconds, importance in configs:
            with tempfile.TemporaryDirectory() as d:
                m = one(args, page, seconds, importance, Path(d) / "run")
            print(f"{name:50s} wall {m['wall']:6.2f} s  evaluations {m['evals']:6.2f} s  overhead {m['overhead']:5.2f} s "
                  f"({100 * m['overhead'] / m['evals']:4.0f} %)  of which final pages {m['final']:5.2f} s  |  "
                  f"the same evaluations in a loop {m['loop']:6.2f} s: search / loop = {m['wall'] / m['loop']:.3f}",
                  flush=True)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
