"""Seconds per FedAvg round on a GPU (the device path, fedevo/fl/device.py) and on the CPU (the CPU engine),
side by side in one process, with the largest parameter difference between the two.

Workloads: the reference round (MLP 784-200-200-10, K=100 clients × 600 samples, B=64, E=5, lr 0.05, all
clients train, chunks of 5 as fl/rounds.py makes them: see benchmarks/round_speed.py) plain, with 10%-density SET
masks and with per-step LDP (σ = 0.01, S = 1); the experiments' CNN (conv 32→64, 5×5 kernels, FC 128, 28×28
inputs; fedevo/problems/*_cnn.toml) on --cnn-clients clients (default 10: the CPU side is slow). Synthetic data (values
do not affect speed). Local training only: the server's side runs on the CPU either way.

    python benchmarks/cuda_round.py [--clients 100] [--cnn-clients 10] [--repeats 3] [--no-cnn] [--bf16]
                                    [--device cpu]

Each line: CPU engine seconds per round (fp32, best of --repeats, as many chunk threads as torch has), CUDA
seconds per round (best of --repeats after one warm-up round, synchronised), the speed-up, and
the largest relative differences to the CPU's parameters (max|cuda − cpu| / max|cpu| and ‖cuda − cpu‖ / ‖cpu‖ over the
parameter tensors; fp32 training drifts apart with the steps, docs/engine.md: these are the round's drift, not a
pass/fail; the per-step LDP line draws other noise on the GPU: shown as "noise"). "MLP plain, per chunk"
trains each chunk of 5 clients alone on the GPU (FEDEVO_GPU_CLIENTS=5) instead of a round's 100 clients at once:
what grouping the chunks buys. --bf16: also the reference round with bf16 matmuls on the GPU. --device cpu: run
the device path on the CPU instead (a smoke test of this script where there is no GPU; no GPU numbers).

Exits with a message, before any work, where torch sees no GPU (unless --device cpu).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
import torch

from fedevo import hardware, native
from fedevo.config import CNNArch, MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl.device import train_groups
from fedevo.fl.engine import chunk_threads, train_chunks
from fedevo.models import build_model
from fedevo.privacy.mechanisms import StepLDP
from round_speed import B, CHUNK, E, LR, PER_CLIENT, masks_at  # the reference workload, as round_speed.py times it


def no_gpu_message() -> str:
    return (f"cuda_round.py: torch sees no GPU (torch.cuda.is_available() is False; torch {torch.__version__}, "
            f"built for CUDA {torch.version.cuda or 'none'}, CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}): run it on a machine with an NVIDIA GPU, "
            "or pass --device cpu for a smoke test without GPU numbers")


def one_round(model, params, masks, data, clients, *, device, hook=None, dtype=torch.float32, cap=None):
    """One round's local training: the CPU engine (device None) or the device path; each chunk's trained
    parameters, on the CPU."""
    model.compute_dtype = dtype
    chunks = [clients[s:s + CHUNK] for s in range(0, len(clients), CHUNK)]
    seeds = list(range(len(chunks)))
    if device is None:
        out = list(train_chunks(model, params, masks, data.x_train, data.y_train, chunks, epochs=E, batch_size=B,
                                lr=LR, seeds=seeds, hook_for=hook.for_chunk if hook else None))
    else:
        out = list(train_groups(model, params, masks, data.x_train, data.y_train, chunks, epochs=E, batch_size=B,
                                lr=LR, seeds=seeds, device=device, group_hook_for=hook.for_group if hook else None,
                                cap=cap))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    if hook is not None:
        hook.end_round()
    return out


def best_of(fn, repeats: int) -> tuple[float, object]:
    best, out = math.inf, None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def rel_diffs(a_chunks, b_chunks) -> str:
    """max over parameter tensors of max|a − b| / max|b| and of ‖a − b‖ / ‖b‖ (all chunks of a tensor together),
    as tests/fl/test_cuda.py measures them."""
    mx = l2 = 0.0
    for i in range(len(a_chunks[0])):
        a = torch.cat([c[i] for c in a_chunks])
        b = torch.cat([c[i] for c in b_chunks])
        mx = max(mx, float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30))
        l2 = max(l2, float((a - b).norm()) / max(float(b.norm()), 1e-30))
    return f"{mx:12.1e}{l2:10.1e}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--cnn-clients", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-cnn", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="also the reference round with bf16 matmuls on the GPU")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: the device path on the CPU (a smoke test of this script, no GPU numbers)")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit(no_gpu_message())
    dev = hardware.device(a.device)  # CUDA: TF32 off, deterministic cuDNN (hardware.cuda_setup)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        print(f"GPU: {torch.cuda.get_device_name(dev)} ({props.total_memory / 2**30:.0f} GiB, compute capability "
              f"{props.major}.{props.minor}); torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
              f"{torch.backends.cudnn.version()}; TF32 matmul {torch.backends.cuda.matmul.allow_tf32}, TF32 cuDNN "
              f"{torch.backends.cudnn.allow_tf32}, cuDNN deterministic {torch.backends.cudnn.deterministic}")
    else:
        print("GPU: none: --device cpu runs the device path on the CPU (a smoke test; no GPU numbers)")
    cpu = hardware.detect()
    print(f"CPU: {cpu.model or '?'} ({cpu.arch}), {os.cpu_count()} logical CPUs, CPU engine chunk threads "
          f"{chunk_threads()}, native kernels: {native.status()}; both sides fp32 unless marked")
    K = a.clients
    data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) % 60000 for k in range(K)]
    if dev.type == "cuda":
        data = type(data)(data.name, data.x_train.to(dev), data.y_train, data.x_test, data.y_test, data.num_classes)
        cpu_data = type(data)(data.name, data.x_train.cpu(), data.y_train, data.x_test, data.y_test, data.num_classes)
    else:
        cpu_data = data
    gen = torch.Generator().manual_seed(0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    params = model.init(gen)
    masks10 = masks_at(model, 0.10, gen)
    mparams = [p * masks10[i] if i in masks10 else p for i, p in enumerate(params)]
    step = lambda: StepLDP(sigma=0.01, clip=1.0, seed=7)  # noqa: E731
    print(f"MLP 784-200-200-10, K={K} clients × {PER_CLIENT} samples, B={B}, E={E}, chunks of {CHUNK}; seconds per "
          f"round (best of {a.repeats}); max rel Δ: max|cuda − cpu| / max|cpu|, L2 rel Δ: ‖cuda − cpu‖ / ‖cpu‖, "
          "the largest over the parameter tensors (fp32 drifts apart with the steps: docs/engine.md)")
    print(f"{'line':<34}{'cpu s':>9}{'cuda s':>9}{'speed-up':>10}{'max rel Δ':>12}{'L2 rel Δ':>10}{'cuda peak GiB':>15}")
    lines = [("MLP plain", params, {}, None, None, torch.float32),
             ("MLP plain, per chunk (5 clients)", params, {}, None, CHUNK, torch.float32),
             ("MLP masks 10%", mparams, masks10, None, None, torch.float32),
             ("MLP per-step LDP σ=0.01 S=1", params, {}, step, None, torch.float32)]
    if a.bf16:
        lines.append(("MLP plain, bf16 on the GPU", params, {}, None, None, torch.bfloat16))
    cpu_out: dict = {}
    for name, p, m, hook, cap, dt in lines:
        key = (id(p), id(m), hook is None)
        if key not in cpu_out:  # the CPU side of "per chunk" and "bf16" is the plain line's
            cpu_out[key] = best_of(lambda: one_round(model, p, m, cpu_data, clients, device=None,
                                                     hook=hook() if hook else None), a.repeats)
        t_cpu, ref = cpu_out[key]
        one_round(model, p, m, data, clients, device=dev, hook=hook() if hook else None, dtype=dt, cap=cap)  # warm-up
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        t_dev, got = best_of(lambda: one_round(model, p, m, data, clients, device=dev, hook=hook() if hook else None,
                                               dtype=dt, cap=cap), a.repeats)
        peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else math.nan
        diff = f"{'noise':>12}{'noise':>10}" if hook else rel_diffs(got, ref)
        print(f"{name:<34}{t_cpu:9.3f}{t_dev:9.3f}{t_cpu / t_dev:9.2f}x{diff}{peak:15.2f}", flush=True)
    if not a.no_cnn:
        cnn = build_model(CNNArch(conv_layers=2, channels=32, kernel=5, layers=1, units=128), (1, 28, 28), 10)
        cparams = cnn.init(gen)
        few = clients[:a.cnn_clients]
        t_cpu, ref = best_of(lambda: one_round(cnn, cparams, {}, cpu_data, few, device=None), a.repeats)
        one_round(cnn, cparams, {}, data, few, device=dev)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        t_dev, got = best_of(lambda: one_round(cnn, cparams, {}, data, few, device=dev), a.repeats)
        peak = torch.cuda.max_memory_allocated(dev) / 2**30 if dev.type == "cuda" else math.nan
        name = f"CNN 32-64ch, K={len(few)}"
        print(f"{name:<34}{t_cpu:9.3f}{t_dev:9.3f}{t_cpu / t_dev:9.2f}x{rel_diffs(got, ref)}{peak:15.2f}", flush=True)
        if a.cnn_clients < K:  # the GPU alone on the reference round's client count
            allc = clients
            one_round(cnn, cparams, {}, data, allc, device=dev)
            t_all, _ = best_of(lambda: one_round(cnn, cparams, {}, data, allc, device=dev), a.repeats)
            name = f"CNN 32-64ch, K={K} (GPU only)"
            print(f"{name:<34}{'-':>9}{t_all:9.3f}{'-':>10}{'-':>12}{'-':>10}", flush=True)


if __name__ == "__main__":
    main()
