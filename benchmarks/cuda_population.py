"""The stacked trainer (fedevo/fl/stacked.py) and a whole generation as one batched program (fl/population.py) on a
GPU, against today's device path (fl/device.py, FEDEVO_STACKED=0) and the CPU engine.

1. The reference round (MLP 784-200-200-10, K=100 clients × 600 samples, B=64, E=5, lr 0.05, all clients train,
   chunks of 5; 264 GFLOP; synthetic data as benchmarks/cuda_round.py): seconds per round's local training on
   - the CPU engine (fp32, chunk threads = cores, best of --repeats), results on the CPU;
   - today's device path (train_groups, a round's clients in one group), results back on the CPU (best of);
   - the stacked trainer, eager (FEDEVO_CUDA_GRAPHS=0) and replaying its captured CUDA graph, the clients'
     updates and their FedAvg mean left on the GPU (median of --repeats, synchronised), and with the updates
     copied back to the CPU; with the opt-ins of docs/engine.md: --schedule-device (the batch schedule drawn on
     the GPU, FEDEVO_SCHEDULE=device: other batches than the CPU engine's, so the Δ columns are statistical),
     --tf32 (TF32 matmuls, FEDEVO_CUDA_TF32=1), both; --compile (the step's pointwise work torch.compile'd,
     FEDEVO_CUDA_COMPILE=1; compiling, seconds, is in the warm-up, not the times) with the CPU engine's schedule
     in fp32 (Δ: rounding), with it and TF32 (with --tf32), and with the device schedule and TF32 (all three
     opt-ins); --window K [K ...]: each of those with the first layer's updates once a window of K steps
     (FEDEVO_FIRST_LAYER_WINDOW=K, fl/stacked_window.py; Δ: rounding where the schedule is the CPU engine's);
     --bias-in-weights: each line without torch_compile, and the plain one, once more with the biases inside the
     weights (FEDEVO_BIAS_IN_WEIGHTS=1, fl/stacked_bias.py; the generation's batch too, after the default;
     --threads N [N ...]: the generation's batch with its runs' CPU sides in N threads, after the default;
     --width-classes depth: the generation's batch with every width of one depth in one bucket,
     FEDEVO_WIDTH_CLASSES=depth, fewer buckets and launches against more padding, after the default);
   - the same with 10%-density SET masks (no window lines: a masked first layer updates every step);
   with the largest relative differences to the CPU engine's updates (max and L2, as cuda_round.py).
2. A generation of fashion_mlp_dp (--problem P: another MLP problem; --generation N individuals drawn uniformly
   from its genes with --gen-seed;
   --rounds its planned 5): wall seconds of `evaluate_population` on the GPU (one batched program), of each
   individual alone through the same path (a population of one), by `simulate` (the product's own way to
   evaluate one: the stacked trainer, the CPU side on torch's intra-op threads, no accountant workers) and through
   today's device path (simulate, FEDEVO_STACKED=0), the slowest alone and the ratios (against the population of
   one and against simulate), and the largest |Δ error| and whether ε, comm and Ω are equal
   between the batch and alone (--trust central|secagg: every individual with that trust model), and where the
   batch's wall time went (fl/population.py's PHASES: preparation, stacked training, each round's CPU side, the
   results, the evaluations alone). The data set is loaded (and cached) before any timing; the whole generation
   for one round runs first as a warm-up; then, side by side, the batch with each round's run sides started only
   after all its buckets are queued (overlap=False, the way before) and the batch as it runs by default; on a GPU,
   after them, the batch with the fused masked update in its eager buckets too (FEDEVO_CUDA_FUSED_UPDATE=masked,
   fl/stacked_update.py; by default it runs only in buckets captured as CUDA graphs, since 2026-11-27 evening;
   the line compares the two defaults) and in buckets of equal widths only (exact=True: no padding, more
   buckets); with --busy, the batch once more under
   torch.profiler (how busy the GPU was: its kernels' time against the wall).
3. --profile I: member I of that generation alone under cProfile, its round sides in the main thread (where its
   host time goes).

    python benchmarks/cuda_population.py [--repeats 5] [--generation 20] [--gen-seed 0] [--rounds R]
        [--data-dir D] [--no-round] [--no-generation] [--no-today] [--tf32] [--schedule-device] [--compile] [--busy]
        [--profile I] [--problem P] [--device cpu] [--clients 100] [--precision fp32|bf16|auto]

--device cpu runs everything on the CPU (a smoke test without GPU numbers). Exits before any work where torch
sees no GPU (unless --device cpu).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Optional

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fedevo import hardware, native  # noqa: E402
from fedevo.config import MLPArch  # noqa: E402
from fedevo.data.datasets import synthetic  # noqa: E402
from fedevo.fl import stacked, stacked_graphs, stacked_update  # noqa: E402
from fedevo.fl.device import train_groups  # noqa: E402
from fedevo.fl.engine import chunk_threads, flat_deltas, train_chunks  # noqa: E402
from fedevo.models import build_model  # noqa: E402
from fedevo.privacy import offload  # noqa: E402
from round_speed import B, CHUNK, E, LR, PER_CLIENT, masks_at  # noqa: E402

GFLOP = 264.0  # the reference round's local training (benchmarks/README.md)


def header(dev: torch.device) -> None:
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        try:
            drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            drv = "?"
        print(f"GPU: {torch.cuda.get_device_name(dev)} ({props.total_memory / 2**30:.0f} GiB, "
              f"{props.multi_processor_count} SMs, compute capability {props.major}.{props.minor}), "
              f"driver {drv}; torch {torch.__version__}, CUDA {torch.version.cuda}; "
              f"TF32 matmul {torch.backends.cuda.matmul.allow_tf32}")
    else:
        print("GPU: none: --device cpu (a smoke test; no GPU numbers)")
    cpu = hardware.detect()
    print(f"CPU: {cpu.model or '?'} ({cpu.arch}), {os.cpu_count()} logical CPUs, CPU engine chunk threads "
          f"{chunk_threads()}, native kernels: {native.status()}")


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def timed(fn, repeats: int, dev) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeats):
        sync(dev)
        offload.forget()  # each repeat computes its ε afresh, as a new individual would (privacy/offload.py)
        t = time.perf_counter()
        out = fn()
        sync(dev)
        times.append(time.perf_counter() - t)
    return times, out


def rel(a: torch.Tensor, b: torch.Tensor) -> str:
    a, b = a.cpu(), b.cpu()
    mx = float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)
    l2 = float((a - b).norm()) / max(float(b.norm()), 1e-30)
    return f"{mx:10.1e}{l2:10.1e}"


def reference_round(a, dev) -> None:
    K = a.clients
    data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
    clients = [np.arange(k * PER_CLIENT, (k + 1) * PER_CLIENT) % 60000 for k in range(K)]
    chunks = [clients[s:s + CHUNK] for s in range(0, K, CHUNK)]
    seeds = list(range(len(chunks)))
    gen = torch.Generator().manual_seed(0)
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    params = model.init(gen)
    masks10 = masks_at(model, 0.10, gen)
    mparams = [p * masks10[i] if i in masks10 else p for i, p in enumerate(params)]
    x_dev = data.x_train.to(dev)
    print(f"\n1. Reference round: MLP 784-200-200-10, K={K} × {PER_CLIENT} samples, B={B}, E={E}, chunks of {CHUNK}, "
          f"{GFLOP * K / 100:.0f} GFLOP; seconds per round's local training (CPU engine and today's path: best of "
          f"{a.repeats}; stacked: median of {a.repeats}, min–max); max/L2 rel Δ: the clients' updates against the "
          "CPU engine's")
    print(f"{'line':<58}{'s/round':>9}{'min':>8}{'max':>8}{'vs today':>9}{'TFLOP/s':>8}{'max rel Δ':>10}"
          f"{'L2 rel Δ':>10}")

    def line(name, times, ref, got, today=None, best=False):
        t = min(times) if best else statistics.median(times)
        speed = f"{today / t:8.1f}x" if today else f"{'-':>9}"
        diff = rel(got, ref) if got is not None else f"{'-':>10}{'-':>10}"
        print(f"{name:<58}{t:9.4f}{min(times):8.4f}{max(times):8.4f}{speed}{GFLOP * K / 100 / t / 1e3:8.2f}{diff}",
              flush=True)
        return t

    for label, p, m in (("", params, {}), (", SET masks 10%", mparams, masks10)):
        model.compute_dtype = torch.float32
        t_cpu, ref = timed(lambda: torch.cat([flat_deltas(c, p) for c in train_chunks(
            model, p, m, data.x_train, data.y_train, chunks, epochs=E, batch_size=B, lr=LR, seeds=seeds)]),
            a.repeats, torch.device("cpu"))
        line(f"CPU engine{label}", t_cpu, ref, None, best=True)
        if a.schedule_device:  # what other batches alone do to the updates: the scale of the device schedule's Δ
            other = torch.cat([flat_deltas(c, p) for c in train_chunks(
                model, p, m, data.x_train, data.y_train, chunks, epochs=E, batch_size=B, lr=LR,
                seeds=[s + 1000 for s in seeds])])
            line(f"CPU engine, other seeds (its batches: Δ scale){label}", t_cpu, ref, other, best=True)
        today = None
        if not a.no_today:
            run = lambda: torch.cat([flat_deltas(c, p) for c in train_groups(  # noqa: E731
                model, p, m, x_dev, data.y_train, chunks, epochs=E, batch_size=B, lr=LR, seeds=seeds, device=dev)])
            run()
            t_today, got = timed(run, a.repeats, dev)
            today = line(f"today's device path (fl/device.py){label}", t_today, ref, got, best=True)
        def member(schedule):
            return stacked.Member(dims=model.dims, params=p, masks=m, lr=LR, chunks=chunks, seeds=seeds, epochs=E,
                                  batch_size=B, schedule=schedule)

        def new(back=False, schedule="engine"):
            (flat,) = stacked.train_members([member(schedule)], x_dev, data.y_train, device=dev)
            mean = flat.mean(0)  # the round's FedAvg of equal clients, on the GPU
            return (flat.cpu(), mean.cpu()) if back else (flat, mean)
        variants = [("eager", "0", False), ("CUDA graph", "1", False), ("CUDA graph, updates to the CPU", "1", True)]
        for name, graphs, back in variants:
            os.environ["FEDEVO_CUDA_GRAPHS"] = graphs
            new(back), new(back)  # warm-up; a recurring shape is captured at its second sight
            tt, (flat, _) = timed(lambda: new(back), a.repeats, dev)
            line(f"stacked, {name}{label}", tt, ref, flat, today)
        os.environ["FEDEVO_CUDA_GRAPHS"] = "1"
        # the opt-ins (docs/engine.md): the schedule drawn on the GPU (other batches: Δ to the CPU engine is
        # statistical, not rounding), TF32 matmuls and the compiled pointwise work; a fixed cohort's recurring
        # shape replays its graph
        opt_ins = [("device schedule", "device", False, False, 1)] if a.schedule_device else []
        opt_ins += [("TF32", "engine", True, False, 1)] if a.tf32 else []
        opt_ins += [("device schedule, TF32", "device", True, False, 1)] if a.tf32 and a.schedule_device else []
        opt_ins += [("compiled", "engine", False, True, 1)] if a.compile else []
        opt_ins += [("TF32, compiled", "engine", True, True, 1)] if a.compile and a.tf32 else []
        opt_ins += [("device schedule, TF32, compiled", "device", True, True, 1)] \
            if a.compile and a.tf32 and a.schedule_device else []
        # the first layer's updates once a window of k steps (FEDEVO_FIRST_LAYER_WINDOW, fl/stacked_window.py):
        # alone (fp32, the CPU engine's schedule: Δ is rounding) and with each opt-in asked for
        # (not where the first layer is SET-masked: it trains as without)
        plain = [("", "engine", False, False, 1)] + opt_ins
        for k in (a.window if 0 not in m else []):
            opt_ins += [(f"{name}, window {k}".lstrip(", "), schedule, tf32, compiled, k)
                        for name, schedule, tf32, compiled, _ in plain]
        # the biases inside the weights (FEDEVO_BIAS_IN_WEIGHTS, fl/stacked_bias.py): each line without
        # torch_compile (whose functions add the biases apart) once more with them
        opt_ins = [(*o, False) for o in opt_ins]
        if a.bias_in_weights:
            opt_ins += [(f"{name}, bias in weights".lstrip(", "), schedule, tf32, False, window, True)
                        for name, schedule, tf32, compiled, window, _ in [("", "engine", False, False, 1, False)]
                        + opt_ins if not compiled]
        for name, schedule, tf32, compiled, window, aug in opt_ins:
            if dev.type != "cuda" and (tf32 or compiled):
                continue
            os.environ["FEDEVO_CUDA_TF32"] = "1" if tf32 else "0"
            os.environ["FEDEVO_CUDA_COMPILE"] = "1" if compiled else "0"
            os.environ["FEDEVO_FIRST_LAYER_WINDOW"] = str(window)
            os.environ["FEDEVO_BIAS_IN_WEIGHTS"] = "1" if aug else "0"
            stacked_graphs.CACHES.clear()
            run = lambda: new(schedule=schedule)  # noqa: E731
            run(), run()  # compiled at the first, captured at the second
            tt, (flat, _) = timed(run, a.repeats, dev)
            line(f"stacked, CUDA graph, {name}{label}", tt, ref, flat, today)
            for v in ("FEDEVO_CUDA_TF32", "FEDEVO_CUDA_COMPILE", "FEDEVO_FIRST_LAYER_WINDOW", "FEDEVO_BIAS_IN_WEIGHTS"):
                os.environ.pop(v)
            stacked_graphs.CACHES.clear()
        os.environ.pop("FEDEVO_CUDA_GRAPHS", None)


def draw_generation(problem, n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        p = {}
        for g in problem.genes:
            if g.type == "choice":
                p[g.name] = g.choices[int(rng.integers(len(g.choices)))]
            elif g.type == "int":
                p[g.name] = int(rng.integers(int(g.low), int(g.high) + 1))
            elif g.log:
                p[g.name] = float(math.exp(rng.uniform(math.log(g.low), math.log(g.high))))
            else:
                p[g.name] = float(rng.uniform(g.low, g.high))
        out.append(p)
    return out


def generation(a, dev) -> None:
    from fedevo.data import load_data
    from fedevo.evaluation import evaluate_population
    from fedevo.fl.simulate import simulate
    from fedevo.problem import load_problem

    problem = load_problem(a.problem)
    gen = draw_generation(problem, a.generation, a.gen_seed)
    if a.trust:
        gen = [dict(p, trust=a.trust) for p in gen]
    if a.precision:
        gen = [dict(p, precision=a.precision) for p in gen]
    seeds = list(range(1, a.generation + 1))
    configs = [problem.sim_config(p, rounds=a.rounds, data_dir=a.data_dir) for p in gen]
    load_data(configs[0].data)  # read and cached before any timing
    print(f"\n2. A generation of {a.problem}: {a.generation} individuals drawn uniformly from its genes (seed "
          f"{a.gen_seed}{', trust = ' + a.trust + ' for all' if a.trust else ''}), {configs[0].rounds} rounds each, "
          f"seeds 1..{a.generation}; wall seconds")
    from fedevo.fl.population import PHASES, evaluate_population as batched

    # warm-up: the whole generation for one round (every bucket's shapes; the accountant's pool at its full size)
    batched(problem, gen, seeds, rounds=1, data_dir=a.data_dir, device=dev)
    sync(dev)
    offload.forget()
    t = time.perf_counter()  # the way before 2026-11-26's evening: each round's run sides after all its training
    before = batched(problem, gen, seeds, rounds=a.rounds, data_dir=a.data_dir, device=dev, overlap=False)
    sync(dev)
    t_before = time.perf_counter() - t
    timings: dict = {}
    offload.forget()
    t = time.perf_counter()
    together = batched(problem, gen, seeds, rounds=a.rounds, data_dir=a.data_dir, device=dev, timings=timings)
    sync(dev)
    t_pop = time.perf_counter() - t
    same_before = all((b.error, b.eps, b.comm, b.omega) == (g.error, g.eps, g.comm, g.omega)
                      for b, g in zip(before, together))
    def again(env: Optional[dict] = None, **kw) -> tuple:
        """The same batch once more (with `env`'s variables set, then unset, or batched's keywords): its seconds,
        the largest |Δ error| against the default's and whether ε, comm and Ω are equal."""
        os.environ.update(env or {})
        try:
            offload.forget()
            t = time.perf_counter()
            other = batched(problem, gen, seeds, rounds=a.rounds, data_dir=a.data_dir, device=dev, **kw)
            sync(dev)
            return (time.perf_counter() - t, max(abs(p.error - g.error) for p, g in zip(other, together)),
                    all((p.eps, p.comm, p.omega) == (g.eps, g.comm, g.omega) for p, g in zip(other, together)))
        finally:
            for k in env or {}:
                os.environ.pop(k)

    def unset(name: str) -> bool:
        return not os.environ.get(name, "").strip()
    # the kernel in every bucket, eager ones too (by default only in buckets captured as CUDA graphs, which a
    # 5-round generation has none of; before 2026-11-27 evening the default was this)
    unfused = (again({"FEDEVO_CUDA_FUSED_UPDATE": "masked"})
               if dev.type == "cuda" and unset("FEDEVO_CUDA_FUSED_UPDATE") and stacked_update.usable(dev) else None)
    # the biases inside the weights (fl/stacked_bias.py): 6 of a step's ~27 kernels fewer, where an eager batch is
    # bound by its host's launches
    layout = (again({"FEDEVO_BIAS_IN_WEIGHTS": "1"}) if a.bias_in_weights and unset("FEDEVO_BIAS_IN_WEIGHTS")
              else None)
    # the runs' CPU sides in fewer threads (FEDEVO_POPULATION_THREADS): less contention for the GIL
    scan = ([(n, *again({"FEDEVO_POPULATION_THREADS": str(n)})) for n in a.threads]
            if unset("FEDEVO_POPULATION_THREADS") else [])
    # every width of one depth in one bucket: 3 buckets instead of 9 for the drawn generation, 1.68x its dense
    # arithmetic instead of 1.11x (generation_arithmetic.py), where the host's launches hold an eager batch up
    widths = (again({"FEDEVO_WIDTH_CLASSES": a.width_classes}) if a.width_classes
              and unset("FEDEVO_WIDTH_CLASSES") else None)
    # buckets of equal widths only: no padding (11 % of the arithmetic), more buckets
    exact = again(exact=True) if dev.type == "cuda" else None
    print(f"{'#':>3} {'trust':<8}{'L':>2}{'units':>6}{'part':>6}{'alpha':>7}{'lr':>7}{'alone s':>9}{'simulate s':>11}"
          f"{'today s':>9}{'error':>8}{'Δerror':>9}{'ε,comm,Ω equal':>16}  status")
    # one evaluation alone, untimed, before the timed ones: on 2026-11-26's H200 the first alone evaluation after
    # the batch took twice any similar member's time (results-2026-11-26-cuda-h100-h200.txt) and was the "slowest"
    evaluate_population(problem, gen[:1], seeds[:1], rounds=1, data_dir=a.data_dir, device=dev)
    sync(dev)
    alone_t, sim_t, today_t, derr, same = [], [], [], [], []
    for i, (p, s, got) in enumerate(zip(gen, seeds, together)):
        sync(dev)
        offload.forget()
        t = time.perf_counter()
        (alone,) = evaluate_population(problem, [p], [s], rounds=a.rounds, data_dir=a.data_dir, device=dev)
        sync(dev)
        alone_t.append(time.perf_counter() - t)
        # the product's own way to evaluate it alone (simulate: the stacked trainer with one member, torch's
        # intra-op threads for its CPU side, no accountant workers)
        cfg = problem.sim_config(p, rounds=a.rounds, data_dir=a.data_dir).with_(device=dev.type)
        sync(dev)
        offload.forget()
        t = time.perf_counter()
        simulate(cfg, seed=s)
        sync(dev)
        sim_t.append(time.perf_counter() - t)
        td = math.nan
        if not a.no_today:
            os.environ["FEDEVO_STACKED"] = "0"
            sync(dev)
            offload.forget()
            t = time.perf_counter()
            simulate(cfg, seed=s)
            sync(dev)
            td = time.perf_counter() - t
            os.environ.pop("FEDEVO_STACKED")
        today_t.append(td)
        derr.append(abs(got.error - alone.error))
        eq = (got.eps, got.comm, got.omega) == (alone.eps, alone.comm, alone.omega)
        same.append(eq)
        trust = p.get('trust', p.get('mechanism', '-'))
        print(f"{i:>3} {trust:<8}{p['layers']:>2}{p['units']:>6}{p['participation']:>6.2f}{p['alpha']:>7.1f}"
              f"{p['lr']:>7.3f}{alone_t[-1]:9.3f}{sim_t[-1]:11.3f}{td:9.3f}{got.error:8.4f}{derr[-1]:9.1e}"
              f"{str(eq):>16}  {got.status}/{alone.status}", flush=True)
    slow = int(np.argmax(alone_t))
    print(f"generation of {a.generation} as one batched program: {t_pop:.3f} s; slowest individual alone (#{slow}, "
          f"same path): {alone_t[slow]:.3f} s -> ratio {t_pop / alone_t[slow]:.2f} (target <= 2); sum alone "
          f"{sum(alone_t):.3f} s ({sum(alone_t) / t_pop:.1f}x the batch)")
    slow_s = int(np.argmax(sim_t))
    print(f"slowest individual alone by simulate (#{slow_s}, the product's own way): {sim_t[slow_s]:.3f} s -> ratio "
          f"{t_pop / sim_t[slow_s]:.2f} (target <= 2); sum {sum(sim_t):.3f} s ({sum(sim_t) / t_pop:.1f}x the batch)")
    if not a.no_today:
        slow_t = int(np.nanargmax(today_t))
        print(f"today's path: slowest alone (#{slow_t}) {today_t[slow_t]:.3f} s (ratio of the batch to it "
              f"{t_pop / today_t[slow_t]:.2f}); the generation one by one {np.nansum(today_t):.3f} s "
              f"({np.nansum(today_t) / t_pop:.1f}x the batch)")
    print(f"batch vs alone: max |Δ error| {max(derr):.1e}; ε, comm and Ω equal for {sum(same)}/{len(same)}")
    from generation_arithmetic import member_rows

    rows = member_rows(problem, gen, a.rounds)
    T, big = configs[0].rounds, max(rows, key=lambda r: r["macs"])
    flop, flop_big = 2 * T * sum(r["padded"] for r in rows), 2 * T * big["macs"]
    print(f"arithmetic (counts at the expected arrivals, benchmarks/generation_arithmetic.py): the batch's local "
          f"training {flop / 1e12:.2f} TFLOP as bucketed, {flop / 1e12 / t_pop:.2f} TFLOP/s over its wall time; the "
          f"largest member (#{big['i']}) {flop_big / 1e12:.2f} TFLOP, alone {flop_big / 1e12 / alone_t[big['i']]:.2f} "
          f"TFLOP/s; the batch holds {flop / flop_big:.2f}x its arithmetic")
    print(f"the same batch with each round's run sides only after all its buckets are queued (overlap=False, the "
          f"way before), just before it: {t_before:.3f} s ({t_before / t_pop:.2f}x the batch's time); results "
          f"equal: {same_before}")
    if unfused is not None:
        print(f"the same batch with the fused masked update in eager buckets too (FEDEVO_CUDA_FUSED_UPDATE=masked; "
              f"by default only where captured), just after it: {unfused[0]:.3f} s ({unfused[0] / t_pop:.2f}x the "
              f"batch's time); "
              f"max |Δ error| {unfused[1]:.1e}, ε, comm and Ω equal: {unfused[2]}")
    if layout is not None:
        print(f"the same batch with the biases inside the weights (FEDEVO_BIAS_IN_WEIGHTS=1), just after it: "
              f"{layout[0]:.3f} s ({layout[0] / t_pop:.2f}x the batch's time); max |Δ error| {layout[1]:.1e}, "
              f"ε, comm and Ω equal: {layout[2]}")
    for n, secs, d_err, same in scan:
        print(f"the same batch with its runs' CPU sides in {n} threads (FEDEVO_POPULATION_THREADS; default "
              f"{timings['threads']}): {secs:.3f} s ({secs / t_pop:.2f}x the batch's time); max |Δ error| "
              f"{d_err:.1e}, ε, comm and Ω equal: {same}")
    if widths is not None:
        print(f"the same batch with every width of one depth in one bucket (FEDEVO_WIDTH_CLASSES={a.width_classes}), "
              f"just after it: {widths[0]:.3f} s ({widths[0] / t_pop:.2f}x the batch's time); max |Δ error| "
              f"{widths[1]:.1e}, ε, comm and Ω equal: {widths[2]}")
    if exact is not None:
        print(f"the same batch in buckets of equal widths only (exact=True: no padding, more buckets), after it: "
              f"{exact[0]:.3f} s ({exact[0] / t_pop:.2f}x the batch's time); max |Δ error| {exact[1]:.1e}, ε, comm "
              f"and Ω equal: {exact[2]}")
    print(f"where the batch's {t_pop:.3f} s went ({timings['members']} batched, {timings['alone']} alone, "
          f"{timings['threads']} CPU threads):")
    for k, what in PHASES.items():
        print(f"  {k:<14}{timings[k]:8.3f}  {what}")
    if a.busy:
        busy(lambda: batched(problem, gen, seeds, rounds=a.rounds, data_dir=a.data_dir, device=dev), dev)


def profile_member(a, dev, top: int = 22) -> None:
    """Member a.profile of the generation alone (as its 'alone s' column), once as a warm-up, then under cProfile:
    the host functions its evaluation spends its time in (by own time, then by cumulative time)."""
    import cProfile
    import pstats

    from fedevo.evaluation import evaluate_population
    from fedevo.problem import load_problem

    problem = load_problem(a.problem)
    p = draw_generation(problem, a.generation, a.gen_seed)[a.profile]
    if a.trust:
        p = dict(p, trust=a.trust)
    if a.precision:
        p = dict(p, precision=a.precision)
    seed = a.profile + 1
    os.environ["FEDEVO_POPULATION_THREADS"] = "1"  # its round sides in this thread, which cProfile sees
    evaluate_population(problem, [p], [seed], rounds=a.rounds, data_dir=a.data_dir, device=dev)
    sync(dev)
    prof = cProfile.Profile()
    offload.forget()
    t = time.perf_counter()
    prof.enable()
    evaluate_population(problem, [p], [seed], rounds=a.rounds, data_dir=a.data_dir, device=dev)
    sync(dev)
    prof.disable()
    os.environ.pop("FEDEVO_POPULATION_THREADS")
    print(f"\n3. Member #{a.profile} of the generation alone ({p}), under cProfile with its round sides in the "
          f"main thread (FEDEVO_POPULATION_THREADS=1): {time.perf_counter() - t:.3f} s (the profiler's overhead "
          "included; the accountant's worker processes are not seen)")
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof).sort_stats(key).print_stats(top)


def busy(run, dev, top: int = 8) -> None:
    """run() once more under torch.profiler: how busy the device was (its kernels' summed time against the wall
    time, the profiler's overhead inflating the wall: a lower bound on the busy share), and the top kernels."""
    from torch.profiler import ProfilerActivity, profile

    cuda = dev.type == "cuda"
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        run()
        sync(dev)
        wall = time.perf_counter() - t
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    events = [e for e in prof.key_averages() if getattr(e, key, 0) > 0]
    events.sort(key=lambda e: -getattr(e, key))
    total = sum(getattr(e, key) for e in events) / 1e6
    what = "device kernels and copies" if cuda else "CPU ops (self time, all threads)"
    print(f"the batch once more under torch.profiler: wall {wall:.3f} s, {what} {total:.3f} s "
          f"({total / wall:.0%} of the wall; where streams overlap it may exceed 100 %)")
    for e in events[:top]:
        print(f"  {getattr(e, key) / 1e6:8.3f} s {e.count:7d} calls  {e.key[:90]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--problem", default="fashion_mlp_dp",
                    help="the generation's problem (an MLP one: fashion_mlp_dp, fashion_mlp_step, ...)")
    ap.add_argument("--generation", type=int, default=20)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--no-round", action="store_true")
    ap.add_argument("--no-generation", action="store_true")
    ap.add_argument("--no-today", action="store_true")
    ap.add_argument("--tf32", action="store_true", help="also with TF32 matmuls (FEDEVO_CUDA_TF32=1)")
    ap.add_argument("--schedule-device", action="store_true",
                    help="also with the batch schedule drawn on the GPU (FEDEVO_SCHEDULE=device)")
    ap.add_argument("--compile", action="store_true",
                    help="also with the step's pointwise work torch.compile'd (FEDEVO_CUDA_COMPILE=1): with the CPU "
                         "engine's schedule, and with the device schedule and TF32")
    ap.add_argument("--threads", type=int, nargs="+", default=[], metavar="N",
                    help="also the generation's batch with its runs' CPU sides in N threads "
                         "(FEDEVO_POPULATION_THREADS=N), side by side after the default")
    ap.add_argument("--bias-in-weights", action="store_true",
                    help="also each round line without torch_compile, and the generation's batch, with the biases "
                         "inside the weights (FEDEVO_BIAS_IN_WEIGHTS=1, fl/stacked_bias.py)")
    ap.add_argument("--width-classes", choices=("depth",), default=None,
                    help="also the generation's batch with every width of one depth in one bucket "
                         "(FEDEVO_WIDTH_CLASSES=depth: fewer buckets, more padding), side by side after the default")
    ap.add_argument("--window", type=int, nargs="+", default=[], metavar="K",
                    help="also with the first layer's updates once a window of K steps (FEDEVO_FIRST_LAYER_WINDOW=K, "
                         "fl/stacked_window.py), alone and with each opt-in asked for; not for the SET-masked round "
                         "(a masked first layer trains as without)")
    ap.add_argument("--trust", choices=("central", "secagg"), default=None,
                    help="every individual with this trust model (default: the drawn gene)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--profile", type=int, default=None, metavar="I",
                    help="member I of the generation alone under cProfile: where its host time goes")
    ap.add_argument("--busy", action="store_true",
                    help="after the generation's timings, the batch once more under torch.profiler: how busy the "
                         "GPU was, its top kernels")
    ap.add_argument("--precision", choices=("fp32", "bf16", "auto"), default=None,
                    help="every individual's precision (default: the problem's, 'auto'; on a CPU with native bf16 "
                         "'auto' is bf16, which the batched path leaves to the CPU engine: --precision fp32 batches)")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("cuda_population.py: torch sees no GPU; run it on a machine with an NVIDIA GPU, or pass --device cpu")
    dev = hardware.device(a.device)  # CUDA: TF32 off (hardware.cuda_setup)
    header(dev)
    if not a.no_round:
        reference_round(a, dev)
    if not a.no_generation:
        generation(a, dev)
    if a.profile is not None:
        profile_member(a, dev)


if __name__ == "__main__":
    main()
