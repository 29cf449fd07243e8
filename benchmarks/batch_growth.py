"""A search of batches of one (`--pop 1`: what `gp` and `tpe` do in-process) with two checkouts of fedevo (before
and after a change), side by side: whether the search's own seconds per batch and its checkpoints grow with the
batches run so far.

The problem is benchmarks/search_scale.py's analytic one (six real genes, error / comm / ε in closed form,
microseconds an evaluation). For each checkout, one worker process (PYTHONPATH = that checkout; the order alternating
between optimisers) runs in-process ``fedevo.search(..., optimizer, pop=1, budget=N, workers=0, page=False)`` with a
callback that stamps the start of every batch. A batch's wall seconds (from its start to the next's) less its
optimiser's ask + tell (batches.csv: ask_s, tell_s — the library's own, Optuna's or pymoo's, reported apart) and its
evaluations' (eval_s) are fedevo's own: reported as the mean over the first and the last tenth of the batches (both
the same: nothing grows). Then the checkpoints: the newest one's bytes, the files and their bytes in all; and whether
both checkouts found the same front and hypervolume table.

    python benchmarks/batch_growth.py --base /tmp/fedevo-base [--head .] [--sizes 2000] [--optimizers random,tpe]

(--base: an older checkout, e.g. `git archive REV | tar -x -C /tmp/fedevo-base`.) Prints the CPU (lscpu) and load.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402
from search_scale import EVALUATOR, PROBLEM, in_checkout  # noqa: E402

WORKER = r"""
import csv, json, os, sys, time
import fedevo
from fedevo.searching.callbacks import SearchCallback
from fedevo.searching.rundata import load_run
problem, optimizer, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
stamps = []
class Stamp(SearchCallback):
    def on_generation_start(self, generation):
        stamps.append(time.perf_counter())
t = time.perf_counter()
fedevo.search(problem, optimizer=optimizer, pop=1, budget=n, workers=0, seed=0, out=out, page=False,
              progress=False, callbacks=[Stamp()])
end = time.perf_counter()
search_s = end - t
batches = list(csv.DictReader(open(out + "/batches.csv")))
walls = [b - a for a, b in zip(stamps, stamps[1:] + [end])]
own = [w - float(b["ask_s"]) - float(b["tell_s"]) - float(b["eval_s"]) for w, b in zip(walls, batches)]
opt = [float(b["ask_s"]) + float(b["tell_s"]) for b in batches]
k = max(1, len(own) // 10)
data = load_run(out)
table = data.hypervolume()
cks = sorted((os.path.join(out, "checkpoints", f) for f in os.listdir(os.path.join(out, "checkpoints"))),
             key=lambda p: int(os.path.basename(p)[4:-4]))
print(json.dumps({"search_s": search_s, "batches": len(batches), "own_first_ms": 1e3 * sum(own[:k]) / k,
                  "own_last_ms": 1e3 * sum(own[-k:]) / k, "own_s": sum(own), "opt_s": sum(opt),
                  "opt_first_ms": 1e3 * sum(opt[:k]) / k, "opt_last_ms": 1e3 * sum(opt[-k:]) / k,
                  "eval_s": sum(float(b["eval_s"]) for b in batches),
                  "front": [r["id"] for r in data.front],
                  "hv": [(t["evaluations"], t["front_size"], t["hypervolume"]) for t in table],
                  "ck_files": len(cks), "ck_bytes": sum(map(os.path.getsize, cks)),
                  "ck_last": os.path.getsize(cks[-1])}))
"""


def run(checkout: str, problem: Path, optimizer: str, n: int, tmp: Path) -> dict:
    out = tmp / f"{Path(checkout).resolve().name}-{optimizer}-{n}"
    return in_checkout(checkout, WORKER, problem, optimizer, n, out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default=".")
    ap.add_argument("--sizes", default="2000")
    ap.add_argument("--optimizers", default="random,tpe")
    a = ap.parse_args()
    print(f"cpu: {cpu()}; load average before {os.getloadavg()}")
    print(f"pop 1, page=False, workers=0; base = {a.base}, head = {a.head}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "scale_eval.py").write_text(EVALUATOR)
        (tmp / "scale.toml").write_text(PROBLEM)
        k = 0
        for n in (int(s) for s in a.sizes.split(",")):
            for opt in a.optimizers.split(","):
                order = [("base", a.base), ("head", a.head)]
                res = {name: run(path, tmp / "scale.toml", opt, n, tmp)
                       for name, path in (order if k % 2 == 0 else order[::-1])}
                k += 1
                for name in ("base", "head"):
                    r = res[name]
                    print(f"{opt} N={n} {name}: search {r['search_s']:7.2f} s = evaluations {r['eval_s']:5.2f} s + "
                          f"optimiser (ask + tell) {r['opt_s']:7.2f} s + fedevo's own {r['own_s']:7.2f} s; "
                          f"fedevo's own per batch: first tenth {r['own_first_ms']:6.2f} ms, last tenth "
                          f"{r['own_last_ms']:6.2f} ms; optimiser per batch: first tenth {r['opt_first_ms']:6.2f} ms, "
                          f"last tenth {r['opt_last_ms']:6.2f} ms (load {os.getloadavg()[0]:.1f})", flush=True)
                    print(f"{'':>{len(opt) + len(str(n)) + 3}} checkpoints: the newest {r['ck_last']:,} B; "
                          f"{r['ck_files']} files, {r['ck_bytes']:,} B in all", flush=True)
                b, h = res["base"], res["head"]
                print(f"{opt} N={n}: same front: {b['front'] == h['front']}, same hypervolume table: "
                      f"{b['hv'] == h['hv']}; fedevo's own seconds ×{b['own_s'] / max(h['own_s'], 1e-9):.2f} fewer, "
                      f"the newest checkpoint ×{b['ck_last'] / h['ck_last']:.1f} smaller", flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
