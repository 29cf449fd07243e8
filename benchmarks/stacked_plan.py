"""The stacked trainer's host-side plan of one round (`fl/stacked.py`, the CPU engine's batch schedules of a
bucket's clients), side by side in one process: the previous way (each chunk's `engine.batch_schedule` from
torch.randperm laid out per client on the host, compacted there, the labels gathered there: everything a GPU then
only copies) against today's (`engine_draws`: each client's rows shuffled by the native randperm, the layout
from the clients' sizes built (as for a new cohort: not from the cache) and the per-slot weights; the gathers
through that layout run on the device, not here). Both in one thread, as the population's run threads draw them.
The members look like a fashion_mlp_dp generation's round (20 members of 8-95 clients of 600 samples, chunks of 5,
E = 5, B = 64, in the buckets `bucket_key` forms); the plans are checked equal slot for slot. Then the same for
issue #37's reference round (one member, 100 clients of 600 samples, chunks of 5), whose layout recurs round after
round: today's host part is the draws and the weights alone (the layout from the cache).

    python benchmarks/stacked_plan.py [--repeats 7]
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

from fedevo.fl import local_round, stacked, stacked_schedule  # noqa: E402
from fedevo.fl.engine import _native_randperms, batch_schedule  # noqa: E402

Y = np.random.default_rng(1).integers(0, 10, 60000)


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


def neg_lr(group):
    return np.concatenate([np.full(m.clients, -float(m.lr), dtype=np.float32) for m in group])


def previous(group):
    """The plan as built before 2026-11-26's night session, on the host: rows, labels, weights (flat)."""
    C, S, B = sum(m.clients for m in group), max(local_round.steps_of(m) for m in group), group[0].batch_size
    rows, ws = np.zeros((C, S, B), dtype=np.int64), np.zeros((C, S, B), dtype=np.float32)
    k = 0
    for m in group:
        for ch, seed in zip(m.chunks, m.seeds):
            sizes = [len(ix) for ix in ch]
            pos, w = batch_schedule(sizes, epochs=m.epochs, batch_size=B, gen=torch.Generator().manual_seed(seed))
            pos, w = pos.numpy(), w.numpy()
            c, s = pos.shape[:2]
            rows_of = np.concatenate([np.asarray(ix, dtype=np.int64) for ix in ch])
            start = np.cumsum([0] + sizes[:-1]).reshape(-1, 1, 1)
            r = rows[k:k + c, :s]
            np.take(rows_of, np.minimum(start + pos, len(rows_of) - 1), out=r)
            r[w == 0] = 0
            ws[k:k + c, :s] = w
            k += c
    used, (rows, ws) = stacked_schedule.compact(rows, ws)
    ws *= stacked_schedule.per_slot(neg_lr(group), used)
    return used, rows, Y[rows], ws


def today_host(group, cached=False):
    """Today's host work: the draws, the layout (a new cohort's: uncached; cached: a recurring one's), the
    per-slot weights."""
    B = group[0].batch_size
    drawn = np.concatenate([stacked_schedule.engine_draws(m).reshape(-1) for m in group])
    shapes = tuple((tuple(len(ix) for ch in m.chunks for ix in ch), m.epochs) for m in group)
    layout = stacked_schedule.plan_layout if cached else stacked_schedule.plan_layout.__wrapped__
    used, src, ws, _active = layout(shapes, B, "cpu")
    return used, drawn, src, ws * torch.from_numpy(stacked_schedule.per_slot(neg_lr(group), used))


def today(group, cached=False):
    """today_host and the device's gathers (here on the CPU): the same plan as `previous`."""
    used, drawn, src, ws = today_host(group, cached)
    rows = drawn[src.numpy()]
    return used, rows, Y[rows], ws.numpy()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)  # as the population's CPU work
    groups: dict = {}
    for m in members():
        groups.setdefault(stacked.bucket_key(m), []).append(m)
    print(f"CPU: {cpu()}; {len(groups)} buckets, {sum(m.clients for g in groups.values() for m in g)} clients; "
          f"native randperm: {_native_randperms() is not None}")
    reference = stacked.Member(dims=(784, 200, 200, 10), params=[], masks={}, lr=0.05, chunks=[
        [np.arange(k * 600, (k + 1) * 600) for k in range(s, s + 5)] for s in range(0, 100, 5)],
        seeds=list(range(20)), epochs=5, batch_size=64, schedule="engine")
    compare("a generation's round (all buckets)", list(groups.values()), False, a.repeats)
    compare("the reference round (layout cached)", [[reference]], True, a.repeats)


def compare(title, groups, cached, repeats):
    same = True
    for g in groups:
        (u0, r0, y0, w0), (u1, r1, y1, w1) = previous(g), today(g, cached)
        real = w0 != 0
        same &= u0 == u1 and np.array_equal(w0, w1) and np.array_equal(r0[real], r1[real]) \
            and np.array_equal(y0[real], y1[real])
    ways = [("previous (host: draws, layout, labels)", previous), ("today, host part", today_host),
            ("today, with the gathers on the CPU", today)]
    times: dict = {name: [] for name, _ in ways}
    for r in range(repeats):  # alternating, the order turned each repeat
        for name, fn in (ways if r % 2 == 0 else ways[::-1]):
            t = time.perf_counter()
            for g in groups:
                fn(g) if fn is previous else fn(g, cached)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times[ways[0][0]])
    print(f"\n{title:<40}{'median s':>10}{'min':>9}{'max':>9}{'vs previous':>13}")
    for name, _ in ways:
        t = times[name]
        print(f"{name:<40}{statistics.median(t):10.4f}{min(t):9.4f}{max(t):9.4f}{base / statistics.median(t):12.2f}x")
    print(f"plans equal slot for slot (rows, labels, weights where a sample is): {same}")


if __name__ == "__main__":
    main()
