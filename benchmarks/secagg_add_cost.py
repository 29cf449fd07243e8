"""Where secure aggregation's client side goes, per coordinate (issue #37): a round's `SecureAggregator.add` with the
distributed discrete Gaussian (`privacy/distributed.py` DDGEncoder, `secagg/aggregator.py`, the ideal sum) on
one thread, as a batched generation runs it (its runs already go in threads), split into its parts, each timed
alone in the same process: the active coordinates gathered and brought to the CPU as float64 (from CPU tensors,
and from CUDA ones where a GPU is present), the DDG encoding (native/ddg.c), the rest (the unwrapped diagnostic
sum, the modular words, the ideal sum's additions). On the GPU hosts of 2026-11-26 a secure-aggregation member
alone took roughly 35 ns a coordinate and client more than a central one (an estimate from counts,
results-2026-11-26-cuda-h100-h200.txt: #12 alone 3.4 s against ~0.4 s for central members, its ~62 arrived
clients × ~273k active coordinates × 5 rounds): this says which part that is on a host.

Workload: about #12's scale: 12 chunks of 5 clients, 400,000 coordinates of which 330,000 active, values
N(0, 0.01²), γ = 1e-4, share std 3e-3.

    python benchmarks/secagg_add_cost.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo import native  # noqa: E402
from fedevo.privacy.distributed import DDGEncoder  # noqa: E402
from fedevo.secagg.aggregator import SecureAggregator  # noqa: E402

P, ACTIVE, ROWS, CHUNKS = 400_000, 330_000, 5, 12


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"CPU: {cpu()}; native kernels: {native.status()}; one thread; {CHUNKS} chunks x {ROWS} clients x "
          f"{ACTIVE:,} active of {P:,} coordinates; median of {a.repeats}; ns a coordinate and client")
    g = torch.Generator().manual_seed(0)
    active = torch.zeros(P)
    active[torch.randperm(P, generator=g)[:ACTIVE]] = 1
    clients = np.arange(ROWS * CHUNKS)
    flats = [torch.randn(ROWS, P, generator=g) * 0.01 for _ in range(CHUNKS)]
    coords = ROWS * CHUNKS * ACTIVE
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    def med(fn) -> float:
        fn()
        ts = []
        for _ in range(a.repeats):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return statistics.median(ts) / coords * 1e9

    enc = DDGEncoder(gamma=1e-4, share_std=lambda m: 3e-3, bits=32, seed=0)
    agg = SecureAggregator(sizes=np.full(len(clients), 600), bits=32, encoder=enc, seed=0, threshold=0.5)

    def round_on(fl):
        agg.begin_round(1, clients, clients, active)
        for k, f in enumerate(fl):
            agg.add(f, clients[k * ROWS:(k + 1) * ROWS])
        agg.finish()
    agg.begin_round(1, clients, clients, active)
    idx = agg.idx
    rows = [f.index_select(1, idx).to(torch.float64).numpy() for f in flats]

    def encode():
        enc.begin_round(len(clients))
        for k, r in enumerate(rows):
            enc.encode_rows(r, list(clients[k * ROWS:(k + 1) * ROWS]), threads=1)
    t_enc = med(encode)
    for dev in devices:
        fl = [f.to(dev) for f in flats]
        ix = idx.to(dev)

        def gather():
            for f in fl:
                f.index_select(1, ix).cpu().to(torch.float64).numpy()
            if dev == "cuda":
                torch.cuda.synchronize()
        t_gather = med(gather)
        t_all = med(lambda: round_on(fl))
        print(f"updates on {dev:<5} whole add+finish {t_all:6.2f}   gather, to the CPU, float64 {t_gather:6.2f}   "
              f"DDG encoding {t_enc:6.2f}   the rest {t_all - t_gather - t_enc:6.2f}")


if __name__ == "__main__":
    main()
