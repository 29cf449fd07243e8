"""A search of thousands of fast evaluations with two checkouts of fedevo (before and after a change), side by side:
what a run costs beyond its evaluations as it grows (the front, hypervolume.csv and the checkpoints after every
generation; the readers after it).

The problem is an analytic one (its own evaluator: six real genes, error / comm / ε in closed form, microseconds
an evaluation), so that everything measured is fedevo's own work. For each size, one worker process per checkout
(PYTHONPATH = that checkout; the order alternating between sizes) runs in-process ``fedevo.search(...,
optimizer, pop, budget=N, workers=0, page=False)`` in a fresh directory and reports: the search's wall seconds and
the sum of its evaluations' own wall_s; its peak RSS; then, reading the finished run, ``load_run`` +
``RunData.hypervolume()`` (what `fedevo plot` and `fedevo front` compute) and the peak memory tracemalloc sees
while ``front_math.non_dominated`` sorts every evaluation's objective vector; and the run's checkpoints on disk
(checkpoints/: their files and bytes, the newest one's bytes). With --plot, then ``fedevo.plot(run)`` (front.html
and importance.html, plotly.js shared beside them): its seconds, the pages' bytes and the importance table as the
page gives it (each gene's importance per objective: base and head should rank the genes alike). The two
checkouts must give the same front and the same hypervolume table (checked, printed).

    python benchmarks/search_scale.py --base /tmp/fedevo-base [--head .] [--sizes 1000,3000] [--pop 100]
        [--optimizer random] [--plot]

(--base: an older checkout, e.g. `git archive REV | tar -x -C /tmp/fedevo-base`.) Prints the CPU (lscpu) and load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

EVALUATOR = '''
import math
def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    x = [params[f"x{i}"] for i in range(6)]
    g = sum((v - 0.5) ** 2 for v in x[2:])
    a, b = x[0], x[1]
    return {"error": min(1.0, 0.05 + 0.45 * (1 + g) * (1 - math.sqrt(a))), "comm": 1000.0 * (1 + g) * (a + 0.01),
            "eps": 0.01 + 50.0 * (1 + g) * b * (1 - 0.3 * a)}
'''

PROBLEM = '''name = "scale"
description = "analytic: fedevo's own cost at scale"
evaluator = "python:scale_eval.py:evaluate"
[settings]
rounds = 1
[genes]
''' + "".join(f'x{i} = {{ type = "real", low = 0.0, high = 1.0, default = 0.5 }}\n' for i in range(6))

WORKER = r"""
import csv, json, os, re, resource, sys, time, tracemalloc
import fedevo
from fedevo.searching import front_math
from fedevo.searching.rundata import load_run
problem, optimizer, pop, n, out, plot = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], \
    sys.argv[6] == "plot"
t = time.perf_counter()
fedevo.search(problem, optimizer=optimizer, pop=pop, budget=n, workers=0, seed=0, out=out, page=False,
              progress=False)
search_s = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
evals_s = sum(float(r["wall_s"]) for r in csv.DictReader(open(out + "/evaluations.csv")))
t = time.perf_counter()
data = load_run(out)
table = data.hypervolume()
read_s = time.perf_counter() - t
F = data.objectives.search_matrix([r for r in data.rows if r["status"] == "ok"])
tracemalloc.start()
front_math.non_dominated(F)
nd_peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
cks = sorted(os.path.join(out, "checkpoints", f) for f in os.listdir(os.path.join(out, "checkpoints")))
res = {"search_s": search_s, "evals_s": evals_s, "rss": rss, "read_s": read_s, "nd_peak": nd_peak,
       "front": [r["id"] for r in data.front], "hv": [(t["evaluations"], t["front_size"], t["hypervolume"]) for t in table],
       "ck_files": len(cks), "ck_bytes": sum(map(os.path.getsize, cks)), "ck_last": os.path.getsize(cks[-1])}
if plot:
    t = time.perf_counter()
    fedevo.plot(out)
    res["plot_s"] = time.perf_counter() - t
    res["plot_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    res["front_bytes"] = os.path.getsize(os.path.join(out, "front.html"))
    text = open(os.path.join(out, "importance.html"), encoding="utf-8").read()
    res["importance_bytes"] = len(text.encode())
    table = text[text.index("<table>"):text.index("</table>")]
    res["importance"] = [" | ".join(re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row))
                         for row in re.findall(r"<tr>(.*?)</tr>", table)]
print(json.dumps(res))
"""


def in_checkout(checkout: str, worker: str, *args) -> dict:
    """`worker` (Python source) run with `args` in a fresh process on `checkout`'s fedevo: its last stdout line, a
    JSON object."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    r = subprocess.run([sys.executable, "-c", worker, *map(str, args)], cwd=os.path.abspath(checkout), env=env,
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{checkout}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def run(checkout: str, problem: Path, optimizer: str, pop: int, n: int, tmp: Path, plot: bool) -> dict:
    out = tmp / f"{Path(checkout).resolve().name}-{n}"
    return in_checkout(checkout, WORKER, problem, optimizer, pop, n, out, "plot" if plot else "-")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default=".")
    ap.add_argument("--sizes", default="1000,3000")
    ap.add_argument("--pop", type=int, default=100)
    ap.add_argument("--optimizer", default="random")
    ap.add_argument("--plot", action="store_true", help="also time fedevo.plot(run) and measure its pages")
    a = ap.parse_args()
    print(f"cpu: {cpu()}; load average before {os.getloadavg()}")
    print(f"{a.optimizer}, pop {a.pop}, page=False, workers=0; base = {a.base}, head = {a.head}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "scale_eval.py").write_text(EVALUATOR)
        (tmp / "scale.toml").write_text(PROBLEM)
        for k, n in enumerate(int(s) for s in a.sizes.split(",")):
            order = [("base", a.base), ("head", a.head)]
            res = {name: run(path, tmp / "scale.toml", a.optimizer, a.pop, n, tmp, a.plot)
                   for name, path in (order if k % 2 == 0 else order[::-1])}
            b, h = res["base"], res["head"]
            for name in ("base", "head"):
                r = res[name]
                print(f"N={n:6d} {name}: search {r['search_s']:8.2f} s (evaluations' own {r['evals_s']:6.2f} s; "
                      f"the rest {r['search_s'] - r['evals_s']:8.2f} s), peak RSS {r['rss'] / 2**20:6.0f} MiB, "
                      f"load_run + hypervolume() {r['read_s']:6.2f} s, non_dominated of all {n}: peak "
                      f"{r['nd_peak'] / 2**20:7.1f} MiB; front {len(r['front'])}", flush=True)
                print(f"         checkpoints: {r['ck_files']} files, {r['ck_bytes']:,} B (the newest "
                      f"{r['ck_last']:,} B)", flush=True)
                if a.plot:
                    print(f"         fedevo.plot {r['plot_s']:6.2f} s (peak RSS {r['plot_rss'] / 2**20:.0f} MiB): "
                          f"importance.html {r['importance_bytes']:,} B, front.html {r['front_bytes']:,} B; "
                          "importance table:", flush=True)
                    for row in r["importance"]:
                        print(f"           {row}", flush=True)
            rest = (b["search_s"] - b["evals_s"]) / max(h["search_s"] - h["evals_s"], 1e-9)
            print(f"N={n:6d} search ×{b['search_s'] / h['search_s']:.2f} faster (the rest ×{rest:.2f}), reading "
                  f"×{b['read_s'] / h['read_s']:.2f}; same front: {b['front'] == h['front']}, same hypervolume table: "
                  f"{b['hv'] == h['hv']}; checkpoints ×{b['ck_bytes'] / h['ck_bytes']:.2f} smaller"
                  + (f", fedevo.plot ×{b['plot_s'] / h['plot_s']:.2f} faster, importance.html "
                     f"×{b['importance_bytes'] / h['importance_bytes']:.1f} smaller" if a.plot else ""), flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
