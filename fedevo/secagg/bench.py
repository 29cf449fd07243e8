"""Measure secure aggregation's overhead: `python -m fedevo.secagg.bench [--n 10 100] [--params 200000]`.

Times one full round (key setup, masking of every surviving client, unmasking with 30 % of the uploads lost)
through `SecureAggregator`, against the plain weighted mean of the same updates, and prints the per-client
communication in parameter-equivalents.

`--neighbours 16 auto`: also runs SecAgg+ (Bell et al. 2020) with each given graph degree, in the same process
and on the same updates, and prints a table of milliseconds per client: complete graph vs SecAgg+.

`--abort-rate 2000`: no cryptography; for each n and degree, the fraction of that many rounds (random graph,
each upload lost independently with probability --loss) that SecAgg+ must abort because a neighbourhood kept
fewer than t survivors or the survivors' graph fell apart, next to the union bound `graph.failure_bound`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from .aggregator import SecureAggregator
from .graph import connected, failure_bound, shortfalls
from .protocol import RoundParams, client_words


def measure(n: int, P: int, *, bits: int = 32, loss: float = 0.3, seed: int = 0, neighbours=None,
            threshold: float = 0.5) -> dict:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(400, 800, size=n)
    lost = rng.random(n) < loss
    arrived = np.flatnonzero(~lost)
    flat = torch.randn(len(arrived), P) * 0.01
    t0 = time.perf_counter()
    plain = (torch.as_tensor(sizes[arrived], dtype=torch.float32) @ flat) / float(sizes[arrived].sum())
    t_plain = time.perf_counter() - t0
    agg = SecureAggregator(sizes=sizes, bits=bits, value_range=16.0, threshold=threshold, seed=seed,
                           neighbours=neighbours, simulation="protocol")
    d = agg.degree_for(n)
    t0 = time.perf_counter()
    agg.begin_round(1, np.arange(n), arrived, torch.ones(P))
    for start in range(0, len(arrived), 10):
        agg.add(flat[start:start + 10], arrived[start:start + 10])
    out = agg.finish()
    t_sec = time.perf_counter() - t0
    s = agg.summary()
    words = client_words(n=n, length=P + 1, bits=bits, responded=True, neighbours=d)
    return {"n": n, "P": P, "bits": bits, "neighbours": n - 1 if d is None else d, "threshold": agg.threshold_for(n),
            "arrived": len(arrived), "plain_s": round(t_plain, 4),
            "secagg_s": round(t_sec, 3), "ms_per_client": round(1000 * t_sec / n, 2),
            "setup_s": s["setup_s"], "mask_s": s["mask_s"], "unmask_s": s["unmask_s"],
            "client_expansions": s["client_expansions"], "server_expansions": s["server_expansions"],
            "aborted": out is None, "max_abs_err": None if out is None else float((out - plain).abs().max()),
            "step": s["step_max"],
            "words_per_client": words, "words_overhead_pct": 100 * (words / P - 1)}


def abort_rate(n: int, neighbours, *, loss: float, threshold: float, trials: int, seed: int = 0) -> dict:
    """Monte Carlo of the abort rules alone (`SecAggServer.unmask_request`'s checks) over random rounds."""
    agg = SecureAggregator(sizes=np.ones(n), threshold=threshold, seed=seed, neighbours=neighbours,
                           simulation="protocol")
    d, t = agg.degree_for(n), agg.threshold_for(n)
    rng = np.random.default_rng(seed)
    ids = list(range(n))
    counts = {"too_few": 0, "neighbourhood": 0, "disconnected": 0}
    for r in range(trials):
        lost = rng.random(n) < loss
        surv = [c for c in ids if not lost[c]]
        if len(surv) < t:
            counts["too_few"] += 1
            continue
        if d is None:
            continue
        g = RoundParams(round=r, clients=tuple(ids), threshold=t, length=1, bits=32, neighbours=d,
                        graph_seed=agg.graph_seed(r)).graph
        if shortfalls(g, surv, [c for c in ids if lost[c]], t):
            counts["neighbourhood"] += 1
        elif not connected(surv, g):
            counts["disconnected"] += 1
    k = n - 1 if d is None else d
    return {"n": n, "d": k, "t": t, "loss": loss, "trials": trials, "abort_rate": sum(counts.values()) / trials,
            **counts, "union_bound": failure_bound(n, k, t, loss) if d is not None else None}


def _degree(v: str):
    return v if v == "auto" else int(v)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--params", type=int, default=200_000)
    ap.add_argument("--bits", type=int, nargs="+", default=[32, 64])
    ap.add_argument("--neighbours", type=_degree, nargs="+", default=None,
                    help="SecAgg+ graph degrees (even ints or 'auto') to compare with the complete graph")
    ap.add_argument("--loss", type=float, default=0.3, help="fraction of uploads lost")
    ap.add_argument("--threshold", type=float, default=0.5, help="Shamir threshold θ (t = ⌈θ·n⌉; ⌈θ·(d+1)⌉ for SecAgg+)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds per cell (different seeds); the table shows "
                    "the median")
    ap.add_argument("--abort-rate", type=int, default=0, metavar="TRIALS",
                    help="instead of timing: how often SecAgg+ rounds abort, over TRIALS random rounds")
    a = ap.parse_args()
    if a.abort_rate:
        for n in a.n:
            for k in [None] + (a.neighbours or []):
                print(abort_rate(n, k, loss=a.loss, threshold=a.threshold, trials=a.abort_rate), flush=True)
        return
    if not a.neighbours:
        for bits in a.bits:
            for n in a.n:
                print(measure(n, a.params, bits=bits, loss=a.loss, threshold=a.threshold))
        return
    cols = ["complete"] + [f"k={k}" for k in a.neighbours]
    for bits in a.bits:
        print(f"# ms per client for one round, P={a.params}, bits={bits}, {a.loss:.0%} of uploads lost, "
              f"θ={a.threshold:g}, median of {a.repeat}; (d, t): graph degree and Shamir threshold")
        print("n".rjust(5) + "".join(c.rjust(22) for c in cols))
        for n in a.n:
            cells, rows = [], []
            for k in [None] + a.neighbours:
                rs = [measure(n, a.params, bits=bits, loss=a.loss, threshold=a.threshold, neighbours=k, seed=s)
                      for s in range(a.repeat)]
                rows += rs
                ms = float(np.median([r["ms_per_client"] for r in rs]))
                aborted = sum(r["aborted"] for r in rs)
                cells.append(f"{ms:.1f} ({rs[0]['neighbours']}, {rs[0]['threshold']})"
                             + (f" {aborted} abort" if aborted else ""))
            print(str(n).rjust(5) + "".join(c.rjust(22) for c in cells), flush=True)
            for r in rows:
                print("   ", r, flush=True)

if __name__ == "__main__":
    main()
