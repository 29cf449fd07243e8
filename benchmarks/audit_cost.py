"""What `fedevo audit` costs against one evaluation of the same configuration, side by side in one process.

    python benchmarks/audit_cost.py [--problem digits_mlp] [--params JSON] [--seeds 5]

For each seed: one `evaluate` (simulate) and one `audit_config` of the same configuration, interleaved after a
warm-up of each; prints both times and their ratio, and the median ratio (issue #17 asks ≤ about 3×).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="digits_mlp")
    ap.add_argument("--params", default=None, help="JSON gene/setting overrides")
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args(argv)

    from fedevo.auditing.run import audit_config
    from fedevo.fl.simulate import simulate
    from fedevo.problem import load_problem

    cfg = load_problem(a.problem).sim_config(json.loads(a.params) if a.params else None)
    simulate(cfg, seed=0), audit_config(cfg, seed=0)  # warm-up: imports, data, native kernels
    print(f"{a.problem} {a.params or ''}; load average {os.getloadavg()[0]:.2f}")
    print("seed  evaluate s  audit s  ratio  canaries")
    ratios = []
    for seed in range(a.seeds):
        t0 = time.perf_counter()
        simulate(cfg, seed=seed)
        t1 = time.perf_counter()
        r = audit_config(cfg, seed=seed)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
        print(f"{seed:4d}  {t1 - t0:10.3f}  {t2 - t1:7.3f}  {ratios[-1]:5.2f}  {r.canaries}")
    print(f"median ratio: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
