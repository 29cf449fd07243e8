"""Secure aggregation's DDG client encoding (`privacy/distributed.py`, `DDGEncoder.encode_rows`: randomised rounding
plus a discrete Gaussian share per coordinate, native/ddg.c) of one chunk's rows, row after row in one thread (the
way before) against the rows in threads (torch's intra-op count where the CPU engine aggregates; 1 inside a batched
generation, whose runs already go in threads), side by side in one process, outputs checked equal.

Workload: a chunk of 5 clients' updates of the reference MLP (784-200-200-10, 199,210 coordinates, dense), fashion
scale (values N(0, 0.01²), γ = 1e-4, share std 3e-3: the discrete Gaussian's σ = 30 in integer units).

    python benchmarks/ddg_encode_threads.py [--repeats 7] [--rows 5] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo import hardware, native  # noqa: E402
from fedevo.privacy.distributed import DDGEncoder  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="default: the CPUs this process may use")
    a = ap.parse_args(argv)
    if native.load() is None:
        raise SystemExit("no native kernels here (a C compiler is needed): the numpy sampler runs row by row")
    threads = a.threads or hardware.cores()
    rows = np.random.default_rng(0).normal(0.0, 0.01, (a.rows, 199_210))

    def run(t):
        enc = DDGEncoder(gamma=1e-4, share_std=lambda m: 3e-3, bits=32, seed=1)
        enc.begin_round(a.rows)
        t0 = time.perf_counter()
        out = enc.encode_rows(rows, list(range(a.rows)), threads=t)
        return time.perf_counter() - t0, out

    run(1)  # warm-up: the kernels built and loaded
    times = {1: [], threads: []}
    outs = {}
    for _ in range(a.repeats):  # alternating, so drift hits both
        for t in (1, threads):
            s, outs[t] = run(t)
            times[t].append(s)
    same = all(np.array_equal(x, y) for x, y in zip(outs[1], outs[threads]))
    print(f"CPU: {cpu()}; DDG encoding of {a.rows} rows x 199,210 coordinates, median of {a.repeats} (alternating)")
    one, many = statistics.median(times[1]), statistics.median(times[threads])
    print(f"row after row, 1 thread   {one:.4f} s")
    print(f"rows in {threads} threads        {many:.4f} s   {one / many:.2f}x   outputs equal: {same}")


if __name__ == "__main__":
    main()
