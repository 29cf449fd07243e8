"""Seconds per FedAvg round: a user model (issue 26 item 2, models/user.py) against the built-in engine, side by side
in one process.

Reference workload (issue #2): MLP 784-200-200-10 written as a plain nn.Module (its own `forward`), K=100 clients ×
600 samples, B=64, E=5, lr 0.05, all clients train, fp32; and the experiments' CNN (conv 5×5 32→64, each ReLU and
2×2 max-pool, FC 128, 10 classes, 28×28 inputs) written as an nn.Module, on K=10 clients (as round_speed.py's CNN
line). Each model three ways, interleaved: the built-in model (MLPArch / CNNArch), the user module lowered onto the
built-in kernels (what `build_model` picks for these recognisable stacks), and the user module through the generic
path (FEDEVO_LOWER=0): its default on the CPU (an MLP: the clients' forward passes vmapped, one backward pass;
a CNN: a loop of per-client grads) and vmap(grad(functional_call)) over a chunk's clients (the device path's).
Random data (values do not affect speed). Ratios are user / built-in (1.00x: as fast; the targets: generic MLP
within 2x, CNN within 1.2x).

    python benchmarks/user_model_round.py [--clients 100] [--cnn-clients 10] [--repeats 2] [--epochs 5] [--no-cnn]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import torch
from torch import nn

B, LR, PER_CLIENT, CHUNK = 64, 0.05, 600, 5


class PlainMLP(nn.Module):
    """MLP 784-200-200-10 as a user would write it."""

    def __init__(self, d_in: int, hidden: int, classes: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = x.flatten(1)
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.out(x)


def make_mlp(input_shape, num_classes, hidden=200):
    return PlainMLP(math.prod(input_shape), hidden, num_classes)


class PlainCNN(nn.Module):
    """The experiments' CNN (experiments/exp1_noise.py: CNNArch(2, 32, 5, 1, 128)) as a user would write it."""

    def __init__(self, c: int, hw: int, classes: int, channels: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(c, channels, 5, padding=2)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 5, padding=2)
        self.fc = nn.Linear(2 * channels * (hw // 4) ** 2, 128)
        self.out = nn.Linear(128, classes)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc(torch.flatten(x, 1)))
        return self.out(x)


def make_cnn(input_shape, num_classes):
    return PlainCNN(input_shape[0], input_shape[1], num_classes)


def engine_round(model, params, data, clients, epochs: int) -> None:
    from fedevo.fl.engine import train_chunks

    model.compute_dtype = torch.float32
    chunks = [clients[s:s + CHUNK] for s in range(0, len(clients), CHUNK)]
    for _ in train_chunks(model, params, {}, data.x_train, data.y_train, chunks, epochs=epochs, batch_size=B, lr=LR,
                          seeds=list(range(len(chunks))), deltas=True):
        pass


def timed(fn) -> tuple[float, float]:
    """(wall-clock seconds, this process's CPU seconds: robust to other processes time-slicing the cores)."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def compare(label: str, builtin, factory: str, shape: tuple, data, clients, repeats: int, epochs: int) -> None:
    from fedevo.config import UserArch
    from fedevo.models import build_model
    from fedevo.models.user import GenericModel

    arch = UserArch(spec=f"python:{os.path.abspath(__file__)}:{factory}", init="fedevo")
    lowered = build_model(arch, shape, 10)
    os.environ["FEDEVO_LOWER"] = "0"
    generic, other = build_model(arch, shape, 10), build_model(arch, shape, 10)
    os.environ.pop("FEDEVO_LOWER")
    assert isinstance(generic, GenericModel) and not isinstance(lowered, GenericModel)
    gen = torch.Generator().manual_seed(0)
    models = {"built-in": (builtin, builtin.init(gen)), f"user lowered ({type(lowered).__name__})":
              (lowered, lowered.init(torch.Generator().manual_seed(0))),
              f"user generic ({'loop' if generic.has_conv else 'autograd'}, default)":
              (generic, generic.init(torch.Generator().manual_seed(0)))}
    other.cpu_grads = "vmap"  # the same generic model, vmap(grad(...)) over the clients
    models["user generic (vmap grad)"] = (other, generic.init(torch.Generator().manual_seed(0)))
    for m, p in models.values():  # warm-up: allocator, oneDNN kernels, vmap's tracing
        engine_round(m, p, data, clients[:CHUNK], 1)
    wall = {k: math.inf for k in models}
    cpu = dict(wall)
    for r in range(repeats):
        for k, (m, p) in (list(models.items()) if r % 2 == 0 else list(models.items())[::-1]):  # order alternates
            w, c = timed(lambda: engine_round(m, p, data, clients, epochs))
            wall[k], cpu[k] = min(wall[k], w), min(cpu[k], c)
    print(f"{label}: seconds per round (best of {repeats}, interleaved), K={len(clients)} × {PER_CLIENT}, B={B}, "
          f"E={epochs}, fp32; wall-clock and CPU time, each as a ratio to the built-in model's")
    for k in models:
        print(f"  {k:<34}wall {wall[k]:8.3f} s {wall[k] / wall['built-in']:6.2f}x   "
              f"CPU {cpu[k]:8.3f} s {cpu[k] / cpu['built-in']:6.2f}x", flush=True)


def main(argv=None) -> None:
    from fedevo import native
    from fedevo.config import CNNArch, MLPArch
    from fedevo.data.datasets import synthetic
    from fedevo.fl.engine import chunk_threads
    from fedevo.models import build_model

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--cnn-clients", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--no-cnn", action="store_true")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) % 60000 for k in range(a.clients)]
    print(f"torch {torch.__version__}, {chunk_threads()} chunk threads, native kernels: {native.status()}")
    compare("MLP 784-200-200-10", build_model(MLPArch(2, 200), (1, 28, 28), 10), "make_mlp", (1, 28, 28), data,
            clients, a.repeats, a.epochs)
    if not a.no_cnn:
        compare("CNN 32-64ch 5x5, FC 128", build_model(CNNArch(2, 32, 5, 1, 128), (1, 28, 28), 10), "make_cnn",
                (1, 28, 28), data, clients[:a.cnn_clients], a.repeats, a.epochs)


if __name__ == "__main__":
    main()
