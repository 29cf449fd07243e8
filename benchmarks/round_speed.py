"""Seconds per FedAvg round: fedevo's batched engine vs a per-client PyTorch loop, side by side in one process.

Reference workload (issue #2): MLP 784-200-200-10, K=100 clients × 600 samples, B=64, E=5, lr 0.05, all
clients train. Lines: plain, 10%-density SET masks, per-step LDP (clip the batch gradient to S, then add
N(0, 0.01²) to every parameter after each step), the ULDP-FED `update` mechanism with recall (its overhead over
plain), and a CNN line. Data values do not affect speed, so synthetic 28×28 data is used.

    python benchmarks/round_speed.py [--clients 100] [--repeats 1] [--skip-baseline] [--scaling]
"""

from __future__ import annotations

import argparse
import math
import resource
import time

import numpy as np
import torch

from fedevo.config import CNNArch, MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl.engine import batch_schedule, train_clients
from fedevo.fl.reference import train_clients_reference
from fedevo.models import build_model
from fedevo.privacy.mechanisms import StepLDP
from fedevo.privacy.noise import NoiseSource

B, E, LR, PER_CLIENT, CHUNK = 64, 5, 0.05, 600, 10


def masks_at(model, density: float, gen) -> dict:
    out = {}
    for i in model.fc_weight_ids:
        s = model.shapes[i]
        out[i] = (torch.rand(s, generator=gen) < density).float()
    return out


def engine_round(model, params, masks, data, clients, hook_factory=None, upload=None):
    gen = torch.Generator().manual_seed(1)
    hook = hook_factory() if hook_factory else None
    deltas = []
    for start in range(0, len(clients), CHUNK):
        chunk = clients[start:start + CHUNK]
        local = train_clients(model, params, masks, data.x_train, data.y_train, chunk, epochs=E, batch_size=B,
                              lr=LR, gen=gen, hook=hook)
        flat = torch.cat([(lp - gp).reshape(len(chunk), -1) for lp, gp in zip(local, params)], dim=1)
        if upload is not None:
            ids = np.arange(start, start + len(chunk))
            flat, _ = upload(flat, ids, 1)
        deltas.append(flat)
    if upload is not None:
        upload.end_round(torch.cat(deltas).mean(0))
    return deltas


def reference_round(model, params, masks, data, clients, clip=None, sigma=0.0):
    gen = torch.Generator().manual_seed(1)
    for start in range(0, len(clients), CHUNK):
        chunk = clients[start:start + CHUNK]
        pos, wts = batch_schedule([len(c) for c in chunk], epochs=E, batch_size=B, gen=gen)
        train_clients_reference(model, params, masks, data.x_train, data.y_train, chunk, pos=pos, wts=wts, lr=LR,
                                clip=clip, sigma=sigma, noise_gen=gen)


def timed(fn, repeats):
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def update_mechanism(model, params, K):
    from fedevo.privacy.mechanisms import UpdateLDP
    from fedevo.privacy.recall import RecallStore

    P = sum(p.numel() for p in params)
    return UpdateLDP(sigma=1.0, clip=2.0, beta=0.02, clients=K, active=torch.ones(P), noise=NoiseSource(3),
                     recall=RecallStore(num_params=P), tau=0.45, similarity="sign")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="also time K = 250, 500, 1000 (cost per client, peak RSS)")
    ap.add_argument("--no-cnn", action="store_true")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    K = a.clients
    data = synthetic(n_train=K * PER_CLIENT, n_test=10, shape=(1, 28, 28), seed=0)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) for k in range(K)]
    gen = torch.Generator().manual_seed(0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    params = model.init(gen)
    masks10 = masks_at(model, 0.10, gen)
    noise = NoiseSource(7)
    step = lambda: StepLDP(sigma=0.01, clip=1.0, noise=noise)  # noqa: E731
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, K={K} × {PER_CLIENT}, B={B}, E={E}")
    print(f"{'line':<28}{'engine s/round':>16}{'per-client s':>14}{'ratio':>8}")
    rows = []
    plain_s = None
    for name, kw, ref_kw in [("MLP plain", {}, {}),
                             ("MLP masks 10%", {"masks": masks10}, {"masks": masks10}),
                             ("MLP per-step LDP", {"hook": step}, {"clip": 1.0, "sigma": 0.01})]:
        m = kw.get("masks", {})
        eng = timed(lambda: engine_round(model, params, m, data, clients, kw.get("hook")), a.repeats)
        plain_s = plain_s or eng
        ref = None if a.skip_baseline else timed(
            lambda: reference_round(model, params, ref_kw.get("masks", {}), data, clients,
                                    ref_kw.get("clip"), ref_kw.get("sigma", 0.0)), 1)
        ratio = f"{ref / eng:7.2f}x" if ref else "      -"
        print(f"{name:<28}{eng:16.3f}{(ref or float('nan')):14.3f}{ratio:>8}", flush=True)
        rows.append((name, eng, ref))
    try:
        upd = timed(lambda: engine_round(model, params, {}, data, clients, upload=update_mechanism(model, params, K)),
                    a.repeats)
        print(f"{'MLP update+recall':<28}{upd:16.3f}{'':>14}  overhead vs plain {100 * (upd / plain_s - 1):+.1f}%")
    except ImportError as e:
        print(f"MLP update+recall: skipped ({e})")
    if not a.no_cnn:
        cnn = build_model(CNNArch(conv_layers=2, channels=32, kernel=5, layers=1, units=128), (1, 28, 28), 10)
        cparams = cnn.init(gen)
        few = clients[:20]
        eng = timed(lambda: engine_round(cnn, cparams, {}, data, few), a.repeats)
        ref = None if a.skip_baseline else timed(lambda: reference_round(cnn, cparams, {}, data, few), 1)
        ratio = f"{ref / eng:7.2f}x" if ref else "      -"
        print(f"{'CNN 32-64ch (20 clients)':<28}{eng:16.3f}{(ref or float('nan')):14.3f}{ratio:>8}")
    if a.scaling:
        for k in (250, 500, 1000):
            d = synthetic(n_train=k * PER_CLIENT, n_test=10, shape=(1, 28, 28), seed=0)
            cl = [np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT) for i in range(k)]
            t = timed(lambda: engine_round(model, params, {}, d, cl), 1)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
            print(f"scaling K={k:<5} {t:8.2f} s/round  {1000 * t / k:6.2f} ms/client  peak RSS {rss:.2f} GB")
    noise.close()


if __name__ == "__main__":
    main()
