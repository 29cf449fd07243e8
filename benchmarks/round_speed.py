"""Seconds per FedAvg round: fedevo's batched engine vs a per-client PyTorch loop, side by side in one process.

Reference workload (issue #2): MLP 784-200-200-10, K=100 clients × 600 samples, B=64, E=5, lr 0.05, all
clients train. Lines: plain, 10%-density SET masks, per-step LDP (clip the batch gradient to S, then add
N(0, 0.01²) to every parameter after each step), the ULDP-FED `update` mechanism with recall (its overhead over
plain, both with the server's aggregation, the mechanism past its first round), and a CNN line (10 clients; then
the CNN's fused 2×2 max-pool + ReLU against torch's ReLU and max_pool2d, interleaved, with paired floor ratios).
Data values do not affect speed, so synthetic 28×28 data is used.

    python benchmarks/round_speed.py [--clients 100] [--repeats 1] [--skip-baseline] [--scaling] [--density-sweep]
                                     [--floor-only] [--no-cnn]

First it prints the CPU (model, the flags that decide the kernels' code paths), the precision `precision = "auto"`
picks on it and why (fedevo/hardware.py), and the machine's matmul floor, measured in this process: the
throughput of one large fp32 matmul (1536³, torch/MKL, as many threads as the engine's chunk threads), and the
reference round's FLOPs over it; then the fp32 round (native kernels and torch's ops, interleaved) and its
ratio to that floor, in wall-clock time and in CPU time (robust to other processes time-slicing the cores), best
round over best floor and, paired, each round over the floor at the mean matmul rate of the half-second windows
right before and after it (median and range over the repeats: robust to a machine whose speed drifts between
repeats, as a shared cloud VM's does by up to 1.5x);
bf16 likewise where the CPU has native bf16. --floor-only stops after that block.

--density-sweep: the engine's SET-sparse kernel (fl/sparse.py) against its dense path at several mask densities,
both compute dtypes, side by side (the basis of sparse.MAX_DENSITY).
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import time

import numpy as np
import torch

from fedevo import hardware, native
from fedevo.config import CNNArch, MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl.aggregate import weighted_mean
from fedevo.fl.engine import batch_schedule, chunk_threads, intra_op_threads, train_chunks
from fedevo.fl.reference import train_clients_reference
from fedevo.models import build_model
from fedevo.privacy.mechanisms import StepLDP
from fedevo.privacy.noise import NoiseSource

B, E, LR, PER_CLIENT, CHUNK = 64, 5, 0.05, 600, 5
REF_CHUNK = 10


def masks_at(model, density: float, gen) -> dict:
    out = {}
    for i in model.fc_weight_ids:
        s = model.shapes[i]
        out[i] = (torch.rand(s, generator=gen) < density).float()
    return out


def engine_round(model, params, masks, data, clients, hook_factory=None, upload=None, dtype=torch.float32,
                 aggregate=False):
    """One round through the simulator's own path (chunks of 5 clients in parallel threads). The training set
    stays fp32, as in fl/rounds.py: each chunk gathers and casts its own samples. aggregate: also the server's
    weighted mean of the uploads, as fl/rounds.py (the loop lines train only, like the per-client loop)."""
    model.compute_dtype = dtype if getattr(model, "supports_bf16", False) else torch.float32
    chunks = [clients[s:s + CHUNK] for s in range(0, len(clients), CHUNK)]
    hook = hook_factory() if hook_factory else None
    trained = train_chunks(model, params, masks, data.x_train, data.y_train, chunks, epochs=E, batch_size=B, lr=LR,
                           seeds=list(range(len(chunks))), hook_for=hook.for_chunk if hook else None, deltas=True)
    deltas = []
    for i, flat in enumerate(trained):
        if upload is not None:
            ids = np.arange(i * CHUNK, i * CHUNK + len(chunks[i]))
            flat, _ = upload(flat, ids, 1)
        deltas.append(flat)
    if aggregate:
        agg = weighted_mean(torch.cat(deltas), torch.full((len(clients),), float(PER_CLIENT)))
        if upload is not None:
            upload.end_round(agg)
    if hook is not None:
        hook.end_round()
    return deltas


def reference_round(model, params, masks, data, clients, clip=None, sigma=0.0):
    gen = torch.Generator().manual_seed(1)
    for start in range(0, len(clients), REF_CHUNK):
        chunk = clients[start:start + REF_CHUNK]
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


def round_flops(model, samples: int) -> float:
    """FLOPs of one round of plain SGD on `samples` client-samples (all epochs): per sample and layer the
    forward product, the weight gradient and (past the first layer) the input gradient, 2 FLOPs a MAC."""
    dims = model.dims
    macs = sum(a * b for a, b in zip(dims[:-1], dims[1:]))
    return 2.0 * samples * (2 * macs + sum(a * b for a, b in zip(dims[1:-1], dims[2:])))


def cnn_flops(model, samples: int, hw: tuple = (28, 28)) -> float:
    """`round_flops` for a StackedCNN on hw-pixel images ('same' convolutions, 2×2 pools): per sample and conv
    layer the forward product, the weight gradient and (past the first layer) the input gradient, then its FC
    layers as `round_flops` counts them (pooling and ReLU not counted)."""
    (h, w), macs, grads = hw, 0, 0
    for i, ((co, ci, kh, kw), pool) in enumerate(zip(model.conv_shapes, model.pool)):
        m = h * w * co * ci * kh * kw
        macs, grads = macs + m, grads + (m if i else 0)
        h, w = (h // 2, w // 2) if pool else (h, w)
    return 2.0 * samples * (2 * macs + grads) + round_flops(model, samples)


def timed_both(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: all its threads) of one call."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def matmul_rate(dtype, threads: int, n: int = 1536, repeats: int = 5) -> tuple[float, float]:
    """FLOP per wall second and per CPU second of one large n³ matmul in `dtype` on `threads` threads (best of
    `repeats` each): the machine's GEMM peak as torch reaches it, the floor's denominator."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    with intra_op_threads(threads):
        torch.mm(a, b, out=out)
        ts = [timed_both(lambda: torch.mm(a, b, out=out)) for _ in range(repeats)]
    return 2.0 * n ** 3 / min(t[0] for t in ts), 2.0 * n ** 3 / min(t[1] for t in ts)


def window_rate(dtype, threads: int, seconds: float = 0.5, n: int = 1536) -> float:
    """FLOP per wall second of back-to-back n³ matmuls over at least `seconds` (their mean, not the best): the
    floor's rate over a window long enough to see the same machine state as the round beside it."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    out = torch.empty(n, n, dtype=dtype)
    with intra_op_threads(threads):
        torch.mm(a, b, out=out)
        calls, t0 = 0, time.perf_counter()
        while calls == 0 or time.perf_counter() - t0 < seconds:
            torch.mm(a, b, out=out)
            calls += 1
        return 2.0 * n ** 3 * calls / (time.perf_counter() - t0)


def paired_run(fn, flops: float, dtype, threads: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, paired floor ratio) of one call of fn: the ratio is its wall time over the floor
    at the mean `window_rate` of the windows right before and after it (a shared VM's speed drifts by up to 1.5x
    between repeats; best-of-N compares a fast spell's floor with another spell's round)."""
    before = window_rate(dtype, threads)
    w, c = timed_both(fn)
    after = window_rate(dtype, threads)
    return w, c, w * (before + after) / 2 / flops


def floor_block(model, params, data, clients, repeats: int) -> None:
    """CPU, precision choice, matmul floor and the plain round's ratio to it. Wall-clock ratios need an idle
    machine; the CPU-time ratios (this process's CPU seconds for the round over those the large matmul needs for
    the same FLOPs) are what a machine shared with other work can still measure: time-slicing by other
    processes drops out of both (their cache and memory traffic does not)."""
    cpu = hardware.detect()
    prec = hardware.precision("auto")
    threads = chunk_threads()
    print(f"CPU: {cpu.model or '?'} ({cpu.arch}), flags: {' '.join(cpu.relevant_flags()) or '-'}; "
          f"{os.cpu_count()} logical CPUs, engine chunk threads {threads}; load average before: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"precision = 'auto' here: {prec.name} ({prec.reason})")
    flops = round_flops(model, len(clients) * PER_CLIENT * E)
    dts = [("fp32", torch.float32)] + ([("bf16", torch.bfloat16)] if prec.name == "bf16" else [])
    for label, dt in dts:
        modes = ("native", "torch ops") if dt == torch.float32 else ("engine",)  # native_f32 acts on fp32 only
        wall, cput = {m: math.inf for m in modes}, {m: math.inf for m in modes}
        walls = {m: [] for m in modes}  # every round's wall time: the median compares with pfl_round.py's
        paired = {m: [] for m in modes}  # each round's `paired_run` ratio
        rates, crates = [], []
        for _ in range(repeats):  # floor and round interleaved: a slow spell of the machine hits both
            r, cr = matmul_rate(dt, threads)
            rates.append(r), crates.append(cr)
            for mode in modes:
                model.native_f32 = mode != "torch ops"
                w, c, ratio = paired_run(lambda: engine_round(model, params, {}, data, clients, dtype=dt), flops,
                                         dt, threads)
                wall[mode], cput[mode] = min(wall[mode], w), min(cput[mode], c)
                walls[mode].append(w)
                paired[mode].append(ratio)
        model.native_f32 = True
        floor, cfloor = flops / max(rates), flops / max(crates)
        print(f"{label} matmul floor: {max(rates) / 1e9:.1f} GFLOP/s (1536³ on {threads} threads, best of "
              f"{repeats}; all: {', '.join(f'{r / 1e9:.1f}' for r in rates)}) -> {floor:.3f} s for the round's "
              f"{flops / 1e9:.1f} GFLOP; per CPU second {max(crates) / 1e9:.1f} GFLOP -> {cfloor:.3f} CPU s")
        for mode in modes:
            print(f"  MLP plain round, engine {label} ({mode}): {wall[mode]:.3f} s (median "
                  f"{statistics.median(walls[mode]):.3f} s) = {wall[mode] / floor:.2f}x the "
                  f"floor ({flops / wall[mode] / 1e9:.1f} GFLOP/s); {cput[mode]:.3f} CPU s = "
                  f"{cput[mode] / cfloor:.2f}x the CPU-time floor; paired (each round over the floor at the "
                  f"matmul rate around it): median {statistics.median(paired[mode]):.2f}x, range "
                  f"{min(paired[mode]):.2f}-{max(paired[mode]):.2f}x", flush=True)


def update_mechanism(model, params, K):
    from fedevo.privacy.mechanisms import UpdateLDP
    from fedevo.privacy.recall import RecallStore

    P = sum(p.numel() for p in params)
    return UpdateLDP(sigma=1.0, clip=2.0, beta=0.02, clients=K, active=torch.ones(P), noise=NoiseSource(3),
                     recall=RecallStore(num_params=P), tau=0.5, similarity="sign")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--scaling", action="store_true", help="also time K = 250, 500, 1000 (cost per client, peak RSS)")
    ap.add_argument("--no-cnn", action="store_true")
    ap.add_argument("--density-sweep", action="store_true", help="sparse kernel vs dense path over mask densities")
    ap.add_argument("--floor-only", action="store_true", help="only the CPU, precision and matmul-floor block")
    ap.add_argument("--bf16", action="store_true", help="bf16 columns also where the CPU lacks native bf16 (slow)")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    K = a.clients
    data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
    # K clients × 600 samples drawn from one 60k-sample set (K > 100: samples shared, as seed 000's 1000 users)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) % 60000 for k in range(K)]
    gen = torch.Generator().manual_seed(0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    params = model.init(gen)
    masks10 = masks_at(model, 0.10, gen)
    step = lambda: StepLDP(sigma=0.01, clip=1.0, seed=7)  # noqa: E731
    bf16 = torch.bfloat16
    # bf16 columns where the CPU has native bf16 (emulated: ~17x slower than fp32 on a Zen 3, issue #16)
    with_bf16 = a.bf16 or hardware.precision("auto").name == "bf16"
    auto_dt = bf16 if with_bf16 else torch.float32
    mparams = [p * masks10[i] if i in masks10 else p for i, p in enumerate(params)]  # inactive weights are 0
    print(f"torch {torch.__version__}, native kernels: {native.status()}")
    floor_block(model, params, data, clients, max(3, a.repeats))
    if a.floor_only:
        return
    if not a.skip_baseline:  # warm-up (allocator, oneDNN kernels) so the first timed line pays nothing extra
        reference_round(model, params, {}, data, clients[:5])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, K={K} clients × {PER_CLIENT} samples, "
          f"B={B}, E={E}; seconds per round (best of {a.repeats} interleaved, both sides); "
          f"native kernels: {native.status()}")
    print(f"{'line':<22}{'loop':>8}{'loop 1 thr':>11}{'engine fp32':>13}{'ratio':>8}{'engine bf16':>13}{'ratio':>8}")
    for name, params_, masks, hook, ref_kw in [("MLP plain", params, {}, None, {}),
                                               ("MLP masks 10%", mparams, masks10, None, {}),
                                               ("MLP per-step LDP", params, {}, step, {"clip": 1.0, "sigma": 0.01})]:
        refs, e32, e16 = [math.inf, math.inf], math.inf, math.inf
        # interleaved repeats, best of each column: a slow spell of the machine hits all columns alike
        for _ in range(a.repeats):
            if not a.skip_baseline:  # torch's default threads, then one thread (often faster for such small ops)
                for j, threads in enumerate((torch.get_num_threads(), 1)):
                    with intra_op_threads(threads):
                        refs[j] = min(refs[j], timed(lambda: reference_round(
                            model, params_, masks, data, clients, ref_kw.get("clip"), ref_kw.get("sigma", 0.0)), 1))
            e32 = min(e32, timed(lambda: engine_round(model, params_, masks, data, clients, hook), 1))
            if with_bf16:
                e16 = min(e16, timed(lambda: engine_round(model, params_, masks, data, clients, hook, dtype=bf16),
                                     1))
        refs = [math.nan if r == math.inf else r for r in refs]
        e16 = math.nan if e16 == math.inf else e16
        ref = min(refs)  # the ratio is against the faster loop
        r = (lambda e: f"{ref / e:7.2f}x" if e == e else "      -") if ref == ref else (lambda e: "      -")
        print(f"{name:<22}{refs[0]:8.3f}{refs[1]:11.3f}{e32:13.3f}{r(e32):>8}{e16:13.3f}{r(e16):>8}", flush=True)
    for label, dt in (("fp32", torch.float32), ("bf16", bf16))[:2 if with_bf16 else 1]:  # plain again, interleaved
        ts = {"plain": math.inf, "update": math.inf}
        # steady state, as in a search's T rounds: the recall store's first round allocates its history once
        mech = update_mechanism(model, params, K)
        engine_round(model, params, {}, data, clients, upload=mech, dtype=dt, aggregate=True)
        for _ in range(max(2, a.repeats)):
            ts["plain"] = min(ts["plain"], timed(lambda: engine_round(model, params, {}, data, clients, dtype=dt,
                                                                      aggregate=True), 1))
            ts["update"] = min(ts["update"], timed(lambda: engine_round(
                model, params, {}, data, clients, upload=mech, dtype=dt, aggregate=True), 1))
        print(f"MLP update+recall {label} (both aggregating): {ts['update']:.3f} s/round vs plain "
              f"{ts['plain']:.3f}, overhead "
              f"{100 * (ts['update'] / ts['plain'] - 1):+.1f}%", flush=True)
    if not a.no_cnn:
        cnn = build_model(CNNArch(conv_layers=2, channels=32, kernel=5, layers=1, units=128), (1, 28, 28), 10)
        cparams = cnn.init(gen)
        few = clients[:10]
        ref = None if a.skip_baseline else timed(lambda: reference_round(cnn, cparams, {}, data, few), a.repeats)
        e32 = timed(lambda: engine_round(cnn, cparams, {}, data, few), a.repeats)
        e16 = timed(lambda: engine_round(cnn, cparams, {}, data, few, dtype=bf16), a.repeats) if with_bf16 else math.nan
        r = (lambda e: f"{ref / e:7.2f}x") if ref else (lambda e: "      -")
        print(f"{'CNN 32-64ch, K=10':<22}{(ref or float('nan')):8.3f}{'-':>11}{e32:13.3f}{r(e32):>8}{e16:13.3f}{r(e16):>8}")
        # the fused 2×2 max-pool + ReLU (models/cnn_ops.py) against torch's ReLU and max_pool2d, interleaved, each
        # round also over the fp32 matmul floor at the rate around it (paired, as in the floor block)
        flops, threads, t, paired = cnn_flops(cnn, len(few) * PER_CLIENT * E), chunk_threads(), {}, {}
        for _ in range(max(2, a.repeats)):
            for fused in (False, True):
                cnn.fused_pool = fused
                w, _, ratio = paired_run(lambda: engine_round(cnn, cparams, {}, data, few), flops, torch.float32,
                                         threads)
                t.setdefault(fused, []).append(w)
                paired.setdefault(fused, []).append(ratio)
        cnn.fused_pool = True
        pairs = [u / f for u, f in zip(t[False], t[True])]
        print(f"CNN fp32 pool+ReLU fused vs torch's ops (interleaved, {len(pairs)} pairs, {flops / 1e9:.0f} GFLOP a "
              f"round): median {statistics.median(t[True]):.3f} vs {statistics.median(t[False]):.3f} s, "
              f"speed-up per pair {statistics.median(pairs):.2f}x (range {min(pairs):.2f}-{max(pairs):.2f}); paired "
              f"floor ratio {statistics.median(paired[True]):.2f}x vs {statistics.median(paired[False]):.2f}x",
              flush=True)
    if a.density_sweep:
        print("SET masks on every FC layer: engine dense path vs sparse kernel (seconds per round)")
        for d in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5):
            md = masks_at(model, d, gen)
            pd = [p * md[i] if i in md else p for i, p in enumerate(params)]
            row = []
            for dt in (torch.float32, bf16)[:2 if with_bf16 else 1]:
                t = {}
                for mode in ("0", "1"):
                    os.environ["FEDEVO_SPARSE"] = mode
                    t[mode] = timed(lambda: engine_round(model, pd, md, data, clients, dtype=dt), a.repeats)
                row.append(f"{str(dt).split('.')[-1]}: dense {t['0']:.3f} sparse {t['1']:.3f} ({t['0'] / t['1']:.2f}x)")
            os.environ.pop("FEDEVO_SPARSE")
            print(f"density {d:<5} " + "   ".join(row), flush=True)
    if a.scaling:
        for k in (100, 250, 500, 1000):
            cl = [np.arange(i * PER_CLIENT, (i + 1) * PER_CLIENT) % 60000 for i in range(k)]
            t = timed(lambda: engine_round(model, params, {}, data, cl, dtype=auto_dt), 1)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
            print(f"scaling K={k:<5} {t:8.2f} s/round  {1000 * t / k:6.2f} ms/client  peak RSS so far {rss:.2f} GB",
                  flush=True)


if __name__ == "__main__":
    main()
