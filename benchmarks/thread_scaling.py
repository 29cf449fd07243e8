"""How well the engine's work scales from one to two cores: threads (what the engine uses) against processes.

For each op the engine calls per local step (bf16 batched matmuls of the reference MLP, a ReLU) and for whole
chunks of the engine (`train_clients`, 5 clients of the reference workload), the same work is timed once alone and
then twice at once, in two threads of one process and in two processes; the speedup is 2 × alone / together
(2.00 = perfect). Shows where the engine's two-core round loses against one core.

    python benchmarks/thread_scaling.py [--chunks 6]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import threading
import time

import numpy as np
import torch

B, E, LR, PER_CLIENT, C = 64, 5, 0.05, 600, 5


def _ops():
    bf = torch.bfloat16
    x, w1 = torch.randn(C, B, 784).to(bf), torch.randn(C, 784, 200).to(bf)
    h, w2, d = torch.randn(C, B, 200).to(bf), torch.randn(C, 200, 200).to(bf), torch.randn(C, B, 200).to(bf)
    o1, o2, g1 = torch.empty(C, B, 200, dtype=bf), torch.empty(C, B, 200, dtype=bf), torch.empty(C, 784, 200, dtype=bf)
    return {
        "bmm 5×(64×784 @ 784×200)": (lambda: torch.bmm(x, w1, out=o1), 400),
        "bmm 5×(784×64 @ 64×200) (weight grad)": (lambda: torch.bmm(x.transpose(1, 2), d, out=g1), 400),
        "bmm 5×(64×200 @ 200×200)": (lambda: torch.bmm(h, w2, out=o2), 1500),
        "relu_ 5×64×200 bf16": (lambda: h.relu_(), 10000),
    }


def _engine():
    from fedevo.config import MLPArch
    from fedevo.data.datasets import synthetic
    from fedevo.fl.engine import train_clients
    from fedevo.models import build_model

    data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    model.compute_dtype = torch.bfloat16
    params = model.init(torch.Generator().manual_seed(0))

    def chunk(i):
        clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) % 60000 for k in range(i * C, (i + 1) * C)]
        train_clients(model, params, {}, data.x_train, data.y_train, clients, epochs=E, batch_size=B, lr=LR,
                      gen=torch.Generator().manual_seed(i))
    return chunk


def _repeat(fn, n):
    for _ in range(n):
        fn()


def _repeat_1thread(fn, n):
    torch.set_num_threads(1)  # per thread: a new thread's OpenMP team is otherwise all cores (fl/engine.py)
    _repeat(fn, n)


def _proc(name, n, start, q):
    torch.set_num_threads(1)
    if name == "engine":
        chunk, chunks = _engine(), n
        fn, n = (lambda: [chunk(i) for i in range(chunks)]), 1
    else:
        fn = _ops()[name][0]
    _repeat(fn, 3 if name != "engine" else 1)  # warm-up
    while time.time() < start:
        time.sleep(0.001)
    t = time.perf_counter()
    _repeat(fn, n)
    q.put(time.perf_counter() - t)


def _two_procs(name, n) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    start = time.time() + 15  # after both have imported torch and warmed up
    ps = [ctx.Process(target=_proc, args=(name, n, start, q)) for _ in range(2)]
    for p in ps:
        p.start()
    ts = [q.get() for _ in ps]
    for p in ps:
        p.join()
    return max(ts)


def _two_threads(fns, n) -> float:
    """fns: one function per thread, each with its own tensors (shared outputs would bounce cache lines)."""
    ts = [threading.Thread(target=_repeat_1thread, args=(fn, n)) for fn in fns]
    t = time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=6, help="engine chunks (of 5 clients) per side")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}; one intra-op thread everywhere; speedup = 2 × alone / two at once")
    print(f"{'work':<42}{'alone s':>9}{'2 threads':>11}{'speedup':>9}{'2 procs':>10}{'speedup':>9}")
    ops, ops2 = _ops(), _ops()
    chunk = _engine()  # chunks of different clients; the model's buffers are per thread
    lines = [(name, fn, ops2[name][0], n) for name, (fn, n) in ops.items()]
    engine = lambda: [chunk(i) for i in range(a.chunks)]  # noqa: E731
    lines.append(("engine", engine, engine, 1))
    for name, fn, fn2, n in lines:
        _repeat(fn, 1 if name == "engine" else 3)
        _repeat(fn2, 1 if name == "engine" else 3)
        t = time.perf_counter()
        _repeat(fn, n)
        alone = time.perf_counter() - t
        thr = _two_threads((fn, fn2), n)
        procs = _two_procs(name, n if name != "engine" else a.chunks)
        label = f"engine, {a.chunks} chunks × 5 clients" if name == "engine" else name
        print(f"{label:<42}{alone:9.3f}{thr:11.3f}{2 * alone / thr:9.2f}{procs:10.3f}{2 * alone / procs:9.2f}",
              flush=True)


if __name__ == "__main__":
    main()
