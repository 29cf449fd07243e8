"""A batched generation's ε (fl/population.py measures its runs in threads), side by side in one process: computed
in the threads themselves (dp-accounting's PLD accountant is pure Python: they wait on each other for the GIL)
against `privacy/offload.py`'s worker processes (`in_processes(n)`, as the population runs it). The 20 ε are those of
a fashion_mlp_dp generation under central trust (σ drawn from its gene, q = M/N = 1 %, T = 5, δ = 1e-7); each way
`--repeats` times, the order alternating, after one untimed batch that starts the workers (whose start is timed
apart: in a generation it overlaps the training). The numbers are checked equal.

    python benchmarks/accountant_offload.py [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo.privacy import accounting, offload  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    sigmas = [float(math.exp(rng.uniform(math.log(0.3), math.log(30.0)))) for _ in range(20)]

    def eps(s):
        return accounting.eps_gaussian(noise_multiplier=s, sample_rate=0.01, steps=5, delta=1e-7)

    def batch():
        offload.forget()  # each batch computes its 20 ε (privacy/offload.py would remember them)
        with ThreadPoolExecutor(a.threads) as pool:
            return list(pool.map(eps, sigmas))

    n = offload.processes(len(sigmas))
    print(f"CPU: {cpu()}; 20 ε in {a.threads} threads; worker processes: {n}")
    inline = batch()
    t = time.perf_counter()
    with offload.in_processes(n):
        cold = batch()
    start = time.perf_counter() - t
    times = {"in the threads (inline)": [], f"in {n} worker processes": []}
    same = cold == inline
    for r in range(a.repeats):
        for name in (list(times) if r % 2 == 0 else list(times)[::-1]):
            t = time.perf_counter()
            if name.startswith("in the threads"):
                got = batch()
            else:
                with offload.in_processes(n):
                    got = batch()
            times[name].append(time.perf_counter() - t)
            same &= got == inline
    base = statistics.median(times["in the threads (inline)"])
    print(f"{'20 ε of a generation':<28}{'median s':>10}{'min':>9}{'max':>9}{'vs inline':>11}")
    for name, ts in times.items():
        print(f"{name:<28}{statistics.median(ts):10.3f}{min(ts):9.3f}{max(ts):9.3f}"
              f"{base / statistics.median(ts):10.2f}x")
    print(f"the first batch in processes, their start included: {start:.3f} s; ε equal to inline: {same}")


if __name__ == "__main__":
    main()
