"""The stacked trainer's host-side plan (the CPU engine's batch schedules of a bucket's clients and their compaction,
`fl/stacked.py`), side by side in one process: the previous way (a thread task per chunk, a member at a time, the
compaction as one slice per step) against today's (`schedule_members_into`: the bucket's chunks in one contiguous
run per thread; the compaction as one boolean index), each in one thread and in FEDEVO_PLAN_THREADS's previous
default (up to 8 cores; today's default is 1).
The members look like a fashion_mlp_dp generation's round (20 members of 8-95 clients of 600 samples, chunks of 5,
E = 5, B = 64, in the buckets `bucket_key` forms); the outputs are checked equal.

    python benchmarks/stacked_plan.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo.fl import stacked  # noqa: E402


def members(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(20):
        K = int(rng.integers(8, 96))
        clients = [np.sort(rng.choice(60000, 600, replace=False)) for _ in range(K)]
        L, w = int(rng.integers(1, 4)), int(rng.integers(16, 400))
        dims = (784,) + (w,) * L + (10,)
        out.append(stacked.Member(dims=dims, params=[], masks={}, lr=0.05, chunks=[clients[s:s + 5] for s in
                                  range(0, K, 5)], seeds=list(range(1000 * len(out), 1000 * len(out) + K, 5)),
                                  epochs=5, batch_size=64, schedule="engine"))
    return out


def previous(group, threads):
    """The plan as it was before 2026-11-26's change: a task per chunk, member by member; a slice per step."""
    C, S, B = sum(m.clients for m in group), max(stacked.steps_of(m) for m in group), group[0].batch_size
    rows, ws = np.zeros((C, S, B), dtype=np.int64), np.zeros((C, S, B), dtype=np.float32)
    k = 0
    pool = ThreadPoolExecutor(threads) if threads > 1 else None
    for m in group:
        r, w = rows[k:k + m.clients], ws[k:k + m.clients]
        jobs = stacked._chunk_jobs([m])
        if pool is None:
            for job in jobs:
                stacked._draw_chunk(job, r, w)
        else:
            list(pool.map(lambda job: stacked._draw_chunk(job, r, w), jobs))
        k += m.clients
    if pool is not None:
        pool.shutdown()
    used = tuple(int(u) for u in (ws > 0).sum(-1).max(0))
    return used, tuple(np.concatenate([t[:, s, :b].reshape(-1) for s, b in enumerate(used)]) for t in (rows, ws))


def today(group, threads):
    C, S, B = sum(m.clients for m in group), max(stacked.steps_of(m) for m in group), group[0].batch_size
    rows, ws = np.zeros((C, S, B), dtype=np.int64), np.zeros((C, S, B), dtype=np.float32)
    stacked.schedule_members_into(group, rows, ws, threads)
    return stacked._compact(rows, ws)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)  # as the population's CPU work
    groups: dict = {}
    for m in members():
        groups.setdefault(stacked.bucket_key(m), []).append(m)
    was = min(8, os.cpu_count() or 1)  # FEDEVO_PLAN_THREADS's default before 2026-11-26: up to 8 cores
    print(f"CPU: {cpu()}; {len(groups)} buckets, {sum(m.clients for g in groups.values() for m in g)} clients; "
          f"FEDEVO_PLAN_THREADS's default: {stacked.plan_threads()} (before: {was})")
    ways = [(f"previous, {was} threads (its default)", previous, was), ("previous, 1 thread", previous, 1),
            (f"today, {was} threads", today, was), ("today, 1 thread (its default)", today, 1)]
    outs = {}
    for name, fn, th in ways:  # warm-up, and the outputs compared
        outs[name] = [fn(g, th) for g in groups.values()]
    ref = outs[ways[0][0]]
    same = all(u == ru and all(np.array_equal(x, y) for x, y in zip(t, rt))
               for out in outs.values() for (u, t), (ru, rt) in zip(out, ref))
    times: dict = {name: [] for name, _, _ in ways}
    for r in range(a.repeats):  # alternating, the order turned each repeat
        for name, fn, th in (ways if r % 2 == 0 else ways[::-1]):
            t = time.perf_counter()
            for g in groups.values():
                fn(g, th)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times[ways[0][0]])
    print(f"{'plan of one round (all buckets)':<40}{'median s':>10}{'min':>9}{'max':>9}{'vs previous':>13}")
    for name, _, _ in ways:
        t = times[name]
        print(f"{name:<40}{statistics.median(t):10.4f}{min(t):9.4f}{max(t):9.4f}{base / statistics.median(t):12.2f}x")
    print(f"outputs equal: {same}")


if __name__ == "__main__":
    main()
