"""The stacked trainer's fused masked weight update (fl/stacked_update.py) against the plain update, side by side in
one process on one GPU (issue #37):

1. one layer's update a step (the kernel at its default tiling and at --tiles' others), at the reference round's
   shapes (100 clients, B = 64: 784x200, 200x200, 200x10) and at the fashion_mlp_dp generation's widest bucket (~190 clients of 784x399 and 399x399, benchmarks/
   generation_arithmetic.py), SET-masked and dense: cuBLAS's in-place GEMM then the mask product (fp32 mask, as
   before; a byte mask), against the one-pass kernel; CUDA-event medians, the weights' memory traffic as GB/s;
2. the reference round's local training (median of --repeats graph replays), dense and with 10 %-density SET masks,
   with FEDEVO_CUDA_FUSED_UPDATE = off, masked (the default) and all, in fp32 and with the opt-ins (schedule drawn
   on the GPU, TF32; --window K: those with the first layer once a window of K steps as well, the best round on
   the H100 on 2026-11-27); the updates' max/L2 relative difference to the 'off' line.

    python benchmarks/cuda_fused_update.py                 # on a GPU
    TRITON_INTERPRET=1 FEDEVO_CUDA_FUSED_UPDATE=masked python benchmarks/cuda_fused_update.py --device cpu --small
                                                            # a smoke test of the script (the kernel interpreted)
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
from cuda_population import header, rel, sync  # noqa: E402
from round_speed import B, CHUNK, E, LR, PER_CLIENT, masks_at  # noqa: E402

from fedevo import hardware  # noqa: E402
from fedevo.config import MLPArch  # noqa: E402
from fedevo.data.datasets import synthetic  # noqa: E402
from fedevo.fl import stacked, stacked_graphs, stacked_update  # noqa: E402
from fedevo.models import build_model  # noqa: E402


def event_median(fn, dev, reps: int) -> float:
    """Seconds of fn() on the device, median over reps (CUDA events; wall time on the CPU)."""
    fn()
    sync(dev)
    times = []
    for _ in range(reps):
        if dev.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        else:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def layers(a, dev) -> None:
    shapes = [("reference", 100, 784, 200), ("reference", 100, 200, 200), ("reference", 100, 200, 10),
              ("generation's widest bucket", 190, 784, 399), ("generation's widest bucket", 190, 399, 399)]
    if a.small:
        shapes = [("small", 4, 30, 20), ("small", 4, 20, 10)]
    print(f"\n1. One layer's weight update a step (B = {a.batch}), median of {a.reps}; GB/s: the weights' traffic "
          "(W read and written, the mask read) over the time")
    print(f"{'shape':<36}{'update':<40}{'us':>9}{'GB/s':>8}{'max rel Δ':>11}")
    g = torch.Generator().manual_seed(0)
    for label, C, K, N in shapes:
        W0 = (torch.randn(C, K, N, generator=g) * 0.05).to(dev)
        h = torch.randn(C, a.batch, K, generator=g).relu_().to(dev)
        d = (torch.randn(C, a.batch, N, generator=g) * 1e-3).to(dev)
        M8 = (torch.rand(C, K, N, generator=g) < 0.3).to(torch.uint8).to(dev)
        Mf = M8.float()
        W = W0.clone()
        nbytes = C * K * N * 4
        for masked in (True, False):
            ref = stacked_update.plain_(W0.clone(), h, d, Mf if masked else None)
            variants = [("cuBLAS GEMM, then x fp32 mask" if masked else "cuBLAS GEMM (in place)",
                         lambda: stacked_update.plain_(W, h, d, Mf if masked else None),
                         nbytes * (5 if masked else 2))]
            if masked:
                variants.append(("cuBLAS GEMM, then x byte mask", lambda: stacked_update.plain_(W, h, d, M8),
                                 nbytes * 4.25))
            variants.append(("fused kernel" + (" (byte mask)" if masked else ""),
                             lambda: stacked_update.update_(W, h, d, M8 if masked else None),
                             nbytes * (2.25 if masked else 2)))
            for blocks in a.tiles:  # other tilings (BK, BN, BB, warps): which one a GPU prefers
                variants.append((f"  tiles {'x'.join(map(str, blocks))}",
                                 lambda blocks=blocks: stacked_update.update_(W, h, d, M8 if masked else None,
                                                                              blocks=blocks),
                                 nbytes * (2.25 if masked else 2)))
            for name, fn, traffic in variants:
                t = event_median(fn, dev, a.reps)  # W drifts over the repeats: the time does not depend on it
                once = fn_once(fn, W, W0)
                print(f"{f'{label} {C}x{K}x{N}' + (', SET' if masked else ', dense'):<36}{name:<40}{t * 1e6:9.1f}"
                      f"{traffic / t / 1e9:8.0f}{_max_rel(once, ref):>11.1e}", flush=True)


def fn_once(fn, W, W0):
    W.copy_(W0)
    fn()
    return W.clone()


def _max_rel(a, b) -> float:
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)


def reference(a, dev) -> None:
    K = a.clients
    n_train = K * PER_CLIENT
    data = synthetic(n_train=n_train, n_test=10, shape=(1, 28, 28), seed=0)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) for k in range(K)]
    chunks = [clients[s:s + CHUNK] for s in range(0, K, CHUNK)]
    seeds = list(range(len(chunks)))
    gen = torch.Generator().manual_seed(0)
    model = build_model(MLPArch(layers=2, units=a.units), (1, 28, 28), 10)
    params = model.init(gen)
    masks10 = masks_at(model, 0.10, gen)
    mparams = [p * masks10[i] if i in masks10 else p for i, p in enumerate(params)]
    x = data.x_train.to(dev)
    print(f"\n2. Reference round's local training: MLP 784-{a.units}-{a.units}-10, {K} clients x {PER_CLIENT}, B={B}, "
          f"E={E}; seconds, median of {a.repeats} (CUDA graph replays on a GPU); Δ: the updates against mode 'off'")
    print(f"{'round':<52}{'mode':<8}{'s':>9}{'vs off':>8}{'max rel Δ':>10}{'L2 rel Δ':>10}")
    opt = [("fp32", "engine", False, 1)] + ([("device schedule, TF32", "device", True, 1)] if dev.type == "cuda" else [])
    gpu = dev.type == "cuda"
    opt += [(f"{'device schedule, TF32' if gpu else 'fp32'}, window {k}", "device" if gpu else "engine", gpu, k)
            for k in a.window]  # the first layer once a window of k steps (dense first layers only)
    for label, p, m in (("dense", params, {}), ("SET masks 10%", mparams, masks10)):
        for oname, schedule, tf32, k in opt:
            os.environ["FEDEVO_CUDA_TF32"] = "1" if tf32 else "0"
            os.environ["FEDEVO_FIRST_LAYER_WINDOW"] = str(k)
            base = None
            for mode in ("off", "masked", "all"):
                os.environ["FEDEVO_CUDA_FUSED_UPDATE"] = mode
                stacked_graphs.CACHES.clear()
                member = stacked.Member(dims=model.dims, params=p, masks=m, lr=LR, chunks=chunks, seeds=seeds,
                                        epochs=E, batch_size=B, schedule=schedule)

                def run():
                    return stacked.train_members([member], x, data.y_train, device=dev)[0]
                run(), run()  # eager, then captured (a recurring shape)
                times = []
                for _ in range(a.repeats):
                    sync(dev)
                    t = time.perf_counter()
                    flat = run()
                    sync(dev)
                    times.append(time.perf_counter() - t)
                t = statistics.median(times)
                if base is None:
                    base = (t, flat.cpu())
                print(f"{label + ', ' + oname:<52}{mode:<8}{t:9.4f}{base[0] / t:7.2f}x{rel(flat, base[1])}",
                      flush=True)
    for k in ("FEDEVO_CUDA_TF32", "FEDEVO_CUDA_FUSED_UPDATE", "FEDEVO_FIRST_LAYER_WINDOW"):
        os.environ.pop(k, None)
    stacked_graphs.CACHES.clear()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--reps", type=int, default=50, help="repeats of each layer update")
    ap.add_argument("--repeats", type=int, default=7, help="repeats of each round")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--small", action="store_true", help="tiny shapes (a smoke test under Triton's interpreter)")
    ap.add_argument("--tiles", nargs="*", default=["128x64x16x8", "64x64x16x4", "64x32x32x4", "128x32x16x4"],
                    help="other tilings of the kernel to time beside its default, as BKxBNxBBxWARPS")
    ap.add_argument("--no-round", action="store_true", help="the layer updates only")
    ap.add_argument("--window", type=int, nargs="*", default=[], metavar="K",
                    help="also the round with the first layer updated once a window of K steps "
                         "(FEDEVO_FIRST_LAYER_WINDOW; with the device schedule and TF32 on a GPU)")
    a = ap.parse_args(argv)
    a.tiles = [tuple(int(v) for v in t.split("x")) for t in a.tiles]
    a.clients, a.units = (6, 16) if a.small else (100, 200)
    if a.small:
        a.reps, a.repeats, a.tiles = min(a.reps, 2), min(a.repeats, 2), a.tiles[:1]
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("cuda_fused_update.py: torch sees no GPU; run it on a machine with an NVIDIA GPU, or pass "
                 "--device cpu with TRITON_INTERPRET=1 FEDEVO_CUDA_FUSED_UPDATE=masked")
    dev = hardware.device(a.device)
    header(dev)
    if not stacked_update.usable(dev):
        sys.exit(f"cuda_fused_update.py: the fused kernel cannot run on {dev}: {stacked_update.status(dev)} "
                 "(on the CPU: TRITON_INTERPRET=1 FEDEVO_CUDA_FUSED_UPDATE=masked)")
    print(f"fused update check on {dev}: {stacked_update.status(dev)}")
    layers(a, dev)
    if not a.no_round:
        reference(a, dev)


if __name__ == "__main__":
    main()
