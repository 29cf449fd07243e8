"""One FedAvg round with balanced vs long-tailed (natural, unbalanced) clients, side by side in one process.

Reference workload (issue 26): MLP 784-200-200-10, K = 100 clients, 60 000 samples in all (600 a client on
average), B = 64, E = 5, lr 0.05, every client trains, the engine's chunks of `chunk_clients` = 5 in parallel
threads as fl/rounds.py runs them. Lines:

- balanced: 100 × 600;
- unbalanced: sizes from a log-normal (σ = --sigma), scaled to the same total, at least --min-size each, chunks
  in client-id order (the partition's order, as fl/rounds.py chunks a round's clients);
- unbalanced, sorted: the same clients chunked largest first, as fl/rounds.py chunks natural clients
  (data/partition.py `chunk_order`: a chunk's clients have similar sizes, so few idle steps, and the longest
  chunks start first on the chunk threads).

Target (issue 26): unbalanced within 1.5× of balanced. Synthetic random data (values do not affect speed).
Rounds are interleaved (balanced, unbalanced, sorted, balanced, ...) and each line's best and median are given,
with the ratios of the medians.

    python benchmarks/unbalanced_round.py [--repeats 3] [--sigma 1.0] [--min-size 5] [--precision fp32]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from fedevo import hardware
from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.data.partition import chunk_order
from fedevo.fl.engine import chunk_threads, train_chunks
from fedevo.models import build_model

B, E, LR, K, TOTAL, CHUNK = 64, 5, 0.05, 100, 60_000, 5


def long_tailed_sizes(rng: np.random.Generator, sigma: float, min_size: int) -> np.ndarray:
    """K sizes, log-normal shape, summing to TOTAL, each >= min_size."""
    raw = rng.lognormal(0.0, sigma, K)
    sizes = np.maximum(min_size, np.floor(raw / raw.sum() * TOTAL)).astype(int)
    while sizes.sum() != TOTAL:  # fix rounding on the largest clients
        i = int(np.argmax(sizes))
        sizes[i] += int(np.sign(TOTAL - sizes.sum()))
    return sizes


def clients_of(sizes: np.ndarray) -> list[np.ndarray]:
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    return [np.arange(offsets[i], offsets[i + 1]) for i in range(len(sizes))]


def engine_round(model, params, data, clients: list[np.ndarray], order: np.ndarray) -> float:
    """One round's local training as fl/rounds.py runs it: chunks of CHUNK clients in `order`, in threads."""
    ids = list(order)
    chunks = [[clients[k] for k in ids[s:s + CHUNK]] for s in range(0, len(ids), CHUNK)]
    t0 = time.perf_counter()
    for _ in train_chunks(model, params, {}, data.x_train, data.y_train, chunks, epochs=E, batch_size=B, lr=LR,
                          seeds=list(range(len(chunks))), deltas=True):
        pass
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sigma", type=float, default=1.0, help="log-normal σ of the client sizes")
    ap.add_argument("--min-size", type=int, default=5)
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)

    rng = np.random.default_rng(a.seed)
    sizes = long_tailed_sizes(rng, a.sigma, a.min_size)
    q = np.percentile(sizes, [0, 10, 50, 90, 100]).astype(int)
    steps_bal = E * K * -(-600 // B)
    steps_unb = E * int(sum(-(-n // B) for n in sizes))
    print(f"threads: {chunk_threads()} chunk threads; precision {hardware.precision(a.precision).name}")
    print(f"unbalanced sizes (log-normal σ={a.sigma}, min {a.min_size}): min {q[0]}, p10 {q[1]}, median {q[2]}, "
          f"p90 {q[3]}, max {q[4]}; total {sizes.sum()}; client steps {steps_unb} vs balanced {steps_bal}")

    data = synthetic(n_train=TOTAL, n_test=10, shape=(1, 28, 28), seed=0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    model.compute_dtype = hardware.precision(a.precision).dtype if model.supports_bf16 else torch.float32
    params = model.init(torch.Generator().manual_seed(0))
    balanced = clients_of(np.full(K, TOTAL // K))
    unbalanced = clients_of(sizes)
    lines = {
        "balanced": (balanced, np.arange(K)),
        "unbalanced": (unbalanced, np.arange(K)),
        "unbalanced, sorted": (unbalanced, chunk_order(np.arange(K), sizes, scheme="natural")),
    }
    engine_round(model, params, data, balanced[:10], np.arange(10))  # warm-up: native kernels, allocator
    times: dict[str, list[float]] = {k: [] for k in lines}
    for _ in range(a.repeats):
        for name, (clients, order) in lines.items():
            times[name].append(engine_round(model, params, data, clients, order))
    base = statistics.median(times["balanced"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:>20}: best {min(ts):.2f} s, median {med:.2f} s over {len(ts)} rounds; "
              f"{med / base:.2f}x balanced")


if __name__ == "__main__":
    main()
