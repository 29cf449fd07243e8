"""Measure secure aggregation's overhead: `python -m fedevo.secagg.bench [--n 10 100] [--params 200000]`.

Times one full round (key setup, masking of every surviving client, unmasking with 30 % of the uploads lost)
through `SecureAggregator`, against the plain weighted mean of the same updates, and prints the per-client
communication in parameter-equivalents.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from .aggregator import SecureAggregator
from .protocol import client_words


def measure(n: int, P: int, *, bits: int = 32, loss: float = 0.3, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(400, 800, size=n)
    lost = rng.random(n) < loss
    arrived = np.flatnonzero(~lost)
    flat = torch.randn(len(arrived), P) * 0.01
    t0 = time.perf_counter()
    plain = (torch.as_tensor(sizes[arrived], dtype=torch.float32) @ flat) / float(sizes[arrived].sum())
    t_plain = time.perf_counter() - t0
    agg = SecureAggregator(sizes=sizes, bits=bits, value_range=16.0, threshold=0.5, seed=seed)
    t0 = time.perf_counter()
    agg.begin_round(1, np.arange(n), arrived, torch.ones(P))
    for start in range(0, len(arrived), 10):
        agg.add(flat[start:start + 10], arrived[start:start + 10])
    out = agg.finish()
    t_sec = time.perf_counter() - t0
    s = agg.summary()
    return {"n": n, "P": P, "bits": bits, "arrived": len(arrived), "plain_s": round(t_plain, 4),
            "secagg_s": round(t_sec, 3), "setup_s": s["setup_s"], "mask_s": s["mask_s"], "unmask_s": s["unmask_s"],
            "client_expansions": s["client_expansions"], "server_expansions": s["server_expansions"],
            "max_abs_err": float((out - plain).abs().max()), "step": s["step_max"],
            "words_per_client": client_words(n=n, length=P + 1, bits=bits, responded=True),
            "words_overhead_pct": 100 * (client_words(n=n, length=P + 1, bits=bits, responded=True) / P - 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--params", type=int, default=200_000)
    ap.add_argument("--bits", type=int, nargs="+", default=[32, 64])
    a = ap.parse_args()
    for bits in a.bits:
        for n in a.n:
            print(measure(n, a.params, bits=bits))


if __name__ == "__main__":
    main()
