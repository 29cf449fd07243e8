"""Secure aggregation simulated as its ideal functionality (`fedevo/secagg/ideal.py`, the default) against the full
protocol (FEDEVO_SECAGG=protocol: keys, Shamir shares, AES-CTR masks), side by side in one process.

The individuals are those of benchmarks/cuda_population.py's fashion_mlp_dp generation (--generation N drawn
uniformly from the problem's genes with --gen-seed; the trust gene decides), of which the secagg members are
evaluated (`fedevo.evaluate`, --rounds, seeds 1..N as there) once with each simulation, in alternating order.
Per member: wall seconds of each, their ratio, and whether error, comm, ε and Ω are equal (they must be: the two
give the same aggregate bit for bit, tests/secagg/test_ideal.py).

    python benchmarks/secagg_simulation.py [--generation 20] [--gen-seed 0] [--rounds R] [--data-dir D]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fedevo  # noqa: E402
from cuda_population import draw_generation  # noqa: E402
from fedevo.data import load_data  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402
from machine import cpu  # noqa: E402


def timed(problem, params, seed, rounds, data_dir, simulation):
    os.environ["FEDEVO_SECAGG"] = simulation
    t = time.perf_counter()
    r = fedevo.evaluate(problem, params, seed=seed, rounds=rounds, data_dir=data_dir)
    return time.perf_counter() - t, r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generation", type=int, default=20)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    problem = load_problem("fashion_mlp_dp")
    gen = draw_generation(problem, a.generation, a.gen_seed)
    load_data(problem.sim_config(gen[0], rounds=a.rounds, data_dir=a.data_dir).data)  # read before any timing
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.1f}")
    print(f"fashion_mlp_dp, generation of {a.generation} drawn with seed {a.gen_seed}: its secagg members, "
          f"{a.rounds or 'the planned'} rounds, seeds as in cuda_population.py; wall seconds")
    timed(problem, dict(gen[0], trust="secagg"), 0, 1, a.data_dir, "sum")  # warm-up (imports, native kernels)
    print(f"{'#':>3}{'L':>3}{'units':>6}{'part':>6}{'protocol s':>12}{'sum s':>8}{'ratio':>7}  "
          "equal (error, comm, ε, Ω)")
    proto_t, sum_t, ratios = [], [], []
    for i, p in enumerate(gen):
        if p["trust"] != "secagg":
            continue
        order = ("protocol", "sum") if len(ratios) % 2 == 0 else ("sum", "protocol")
        got = {sim: timed(problem, p, i + 1, a.rounds, a.data_dir, sim) for sim in order}
        (tp, rp), (ts, rs) = got["protocol"], got["sum"]
        same = (rp.error, rp.comm, rp.eps, rp.omega) == (rs.error, rs.comm, rs.eps, rs.omega)
        proto_t.append(tp)
        sum_t.append(ts)
        ratios.append(tp / ts)
        print(f"{i:>3}{p['layers']:>3}{p['units']:>6}{p['participation']:>6.2f}{tp:12.3f}{ts:8.3f}{tp / ts:7.2f}  "
              f"{same} ({rs.status}/{rp.status})", flush=True)
    os.environ.pop("FEDEVO_SECAGG", None)
    print(f"secagg members: {len(ratios)}; protocol {sum(proto_t):.2f} s, sum {sum(sum_t):.2f} s in all "
          f"({sum(proto_t) / sum(sum_t):.2f}x); per member median {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}, max {max(ratios):.2f}); load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
