"""What a batched generation's run sides (fl/lockstep.py: each run's uploads, aggregation, server noise and SET in
threads, beside the thread that queues the GPU's buckets) cost that thread, on the CPU: a loop of small torch ops
(each releases and retakes the GIL, as a GPU launch does) timed alone and beside one other thread doing
  - pure Python (what dp-accounting's PLD accountant is; CPython's convoy: each retake waits for the other thread's
    switch interval),
  - a central-trust run's side of a round as the population runs it (a weighted mean of 60 clients' updates of the
    784-200-200-10 MLP, server noise, SET prune/regrow, a sampling permutation: torch ops that release the GIL),
  - a secure-aggregation run's side (60 clients' DDG encoding and sums, `secagg_side`),
at CPython's default switch interval (5 ms) and at 0.5 ms; one intra-op thread each, side by side in one process.
Why the accountant runs in worker processes (privacy/offload.py), and what to keep out of the run sides.

    python benchmarks/gil_convoy.py [--ops 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo.config import MLPArch  # noqa: E402
from fedevo.fl.aggregate import weighted_mean  # noqa: E402
from fedevo.models import build_model  # noqa: E402
from fedevo.models.sparse import erdos_renyi_masks, prune_regrow  # noqa: E402


def pure_python(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i


def run_side(stop: threading.Event) -> None:
    model = build_model(MLPArch(2, 200), (1, 28, 28), 10)
    g = torch.Generator().manual_seed(0)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 20.0, g)
    d = sum(p.numel() for p in params)
    uploads, weights = torch.randn(60, d), torch.ones(60)
    while not stop.is_set():
        agg = weighted_mean(uploads, weights)
        agg.add_(torch.randn(d, generator=g))
        off, parts = 0, []
        for s in model.shapes:
            n = int(np.prod(s))
            parts.append(agg[off:off + n].view(s))
            off += n
        prune_regrow(params, masks, parts, 0.1, g)
        torch.randperm(100, generator=g)


def secagg_side(stop: threading.Event) -> None:
    """A secure-aggregation run's side of a round (benchmarks/secagg_add_cost.py's workload at a tenth: 12 chunks
    of 5 clients, 33,000 active of 40,000 coordinates): the DDG encoding (native where built) and the sums."""
    from fedevo.privacy.distributed import DDGEncoder
    from fedevo.secagg.aggregator import SecureAggregator

    p, rows, chunks = 40_000, 5, 12
    g = torch.Generator().manual_seed(0)
    active = torch.zeros(p)
    active[torch.randperm(p, generator=g)[:33_000]] = 1
    clients = np.arange(rows * chunks)
    flats = [torch.randn(rows, p, generator=g) * 0.01 for _ in range(chunks)]
    enc = DDGEncoder(gamma=1e-4, share_std=lambda m: 3e-3, bits=32, seed=0)
    agg = SecureAggregator(sizes=np.full(len(clients), 600), bits=32, encoder=enc, seed=0, threshold=0.5)
    while not stop.is_set():
        agg.begin_round(1, clients, clients, active)
        for k, f in enumerate(flats):
            agg.add(f, clients[k * rows:(k + 1) * rows])
        agg.finish()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    x, y = torch.zeros(16), torch.ones(16)

    def loop() -> float:
        t = time.perf_counter()
        for _ in range(a.ops):
            x.add_(y)
        return time.perf_counter() - t
    print(f"CPU: {cpu()}; a loop of {a.ops} small torch ops (best of 3)")
    print(f"{'beside':<28}{'switch 5 ms':>22}{'switch 0.5 ms':>22}")
    default = sys.getswitchinterval()
    try:
        rows = {}
        for interval in (0.005, 0.0005):
            sys.setswitchinterval(interval)
            rows.setdefault("nothing", []).append(min(loop() for _ in range(3)))
            for name, fn in (("a pure-Python thread", pure_python), ("a run's side (central)", run_side),
                             ("a run's side (secagg)", secagg_side)):
                stop = threading.Event()
                th = threading.Thread(target=fn, args=(stop,))
                th.start()
                time.sleep(0.2)  # the side is running
                rows.setdefault(name, []).append(min(loop() for _ in range(3)))
                stop.set()
                th.join()
    finally:
        sys.setswitchinterval(default)
    base = rows["nothing"]
    for name, ts in rows.items():
        print(f"{name:<28}" + "".join(f"{1e3 * t:11.1f} ms {t / b:7.2f}x" for t, b in zip(ts, base)))


if __name__ == "__main__":
    main()
