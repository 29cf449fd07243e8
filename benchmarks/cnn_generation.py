"""A CNN generation as one batched program (fl/stacked_cnn.py through fl/population.py) against its individuals
one after another the way before 2026-11-27 (FEDEVO_STACKED_CNN=0: `simulate` each; on a GPU fl/device.py's
grouped convolutions, on the CPU the CPU engine), side by side in one process, and each individual alone through
the batched path (a population of one): the issue's ratio of the batch to its slowest member alone.

fashion_cnn by default (--problem P: another CNN problem); --generation N individuals drawn uniformly from its
genes (--gen-seed), --rounds R (its planned 5), --clients K (its 100; fewer for a CPU smoke run). The data set is
loaded before any timing and the whole generation runs one round as a warm-up; then --repeats alternating runs of
the two ways (median seconds), then each individual alone (seconds), with the largest |Δ error| between the batch
and alone and whether ε, comm and Ω are equal; on a GPU, the batch's peak memory (against the half its groups are
cut at). --tf32 (on a GPU): the batch with TF32 convolutions and matmuls too
(FEDEVO_CUDA_TF32=1, the `tf32` opt-in), in the same alternation, with its largest |Δ error| from the fp32 batch.

    python benchmarks/cnn_generation.py [--device cuda|cpu] [--generation 20] [--rounds R] [--clients K]
        [--repeats 3] [--gen-seed 0] [--data-dir D] [--problem fashion_cnn] [--precision fp32|bf16|auto] [--tf32]

Exits before any work where torch sees no GPU (unless --device cpu).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_population import draw_generation, sync  # noqa: E402
from machine import cpu  # noqa: E402
from side_by_side import alternate, outcome  # noqa: E402

from fedevo import hardware  # noqa: E402
from fedevo.data import load_data  # noqa: E402
from fedevo.fl.population import simulate_population  # noqa: E402
from fedevo.privacy import offload  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--problem", default="fashion_cnn")
    ap.add_argument("--generation", type=int, default=20)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--clients", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--precision", choices=("fp32", "bf16", "auto"), default="fp32")
    ap.add_argument("--tf32", action="store_true", help="also the batch with TF32 (FEDEVO_CUDA_TF32=1; GPU only)")
    a = ap.parse_args(argv)
    if a.device == "cuda" and not torch.cuda.is_available():
        print("cnn_generation.py: torch sees no GPU; nothing measured (--device cpu runs it on the CPU)",
              file=sys.stderr)
        return 1
    dev = hardware.device(a.device)
    print(f"CPU: {cpu()}")
    if dev.type == "cuda":
        hardware.cuda_setup()
        print(f"GPU: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}, CUDA {torch.version.cuda}")
    problem = load_problem(a.problem)
    if problem.model != "cnn":
        raise SystemExit(f"--problem {a.problem} is not a CNN problem (model = {problem.model!r})")
    gen = [dict(p, precision=a.precision) for p in draw_generation(problem, a.generation, a.gen_seed)]
    seeds = list(range(1, a.generation + 1))

    def config(p, rounds=a.rounds):
        c = problem.sim_config(p, rounds=rounds, data_dir=a.data_dir)
        return c if a.clients is None else c.with_(data=dataclasses.replace(c.data, clients=a.clients))
    configs = [config(p) for p in gen]
    cfg = configs[0]
    load_data(cfg.data)

    def run():
        out = simulate_population(configs, seeds, device=dev)
        sync(dev)
        return out

    def batched():
        os.environ.pop("FEDEVO_STACKED_CNN", None)
        os.environ.pop("FEDEVO_CUDA_TF32", None)

    def one_by_one():
        os.environ["FEDEVO_STACKED_CNN"] = "0"
        os.environ.pop("FEDEVO_CUDA_TF32", None)

    def tf32():
        os.environ.pop("FEDEVO_STACKED_CNN", None)
        os.environ["FEDEVO_CUDA_TF32"] = "1"
    variants = {"batched": batched, "one by one (before)": one_by_one}
    if a.tf32 and dev.type == "cuda":
        variants["batched, TF32"] = tf32
    print(f"A generation of {a.problem}: {a.generation} individuals drawn from its genes (seed {a.gen_seed}), "
          f"{cfg.rounds} rounds, {cfg.data.clients} clients, precision {a.precision}, on {dev}; wall seconds")
    simulate_population([config(p, 1) for p in gen], seeds, device=dev)  # warm-up
    sync(dev)
    times: dict = {}
    med, last = alternate(variants, run, a.repeats, times=times)
    batched()
    together = last["batched"]
    for name, t in med.items():
        print(f"  {name:<22} median {t:8.3f} s  (min {min(times[name]):.3f}, max {max(times[name]):.3f})")
    print(f"  one by one / batched: {med['one by one (before)'] / med['batched']:.2f}x")
    if dev.type == "cuda":  # the groups' memory cap (stacked_cnn.group_clients: half the GPU by an estimate)
        torch.cuda.reset_peak_memory_stats(dev)
        run()
        peak, total = torch.cuda.max_memory_allocated(dev), torch.cuda.get_device_properties(dev).total_memory
        print(f"  the batch once more: peak GPU memory allocated {peak / 2**30:.1f} GiB of {total / 2**30:.0f} GiB "
              f"({peak / total:.0%}; the groups are cut at half by stacked_cnn.client_bytes' estimate)")
    if "batched, TF32" in med:
        d = max(abs(p.error - g.error) for p, g in zip(last["batched, TF32"], together))
        print(f"  batched / batched with TF32: {med['batched'] / med['batched, TF32']:.2f}x; max |Δ error| {d:.1e}")
    print(f"{'#':>3}{'conv':>5}{'ch':>4}{'k':>3}{'L':>3}{'units':>6}{'part':>6}{'alone s':>9}{'error':>8}"
          f"{'Δerror':>9}{'ε,comm,Ω equal':>16}  status")
    alone_t, derr, same = [], [], []
    for i, (p, s, got) in enumerate(zip(gen, seeds, together)):
        offload.forget()
        sync(dev)
        t = time.perf_counter()
        (alone,) = simulate_population([configs[i]], [s], device=dev)
        sync(dev)
        alone_t.append(time.perf_counter() - t)
        derr.append(abs(got.error - alone.error))
        same.append(outcome(got)[1:4] == outcome(alone)[1:4])
        print(f"{i:>3}{p['conv_layers']:>5}{p['channels']:>4}{p['kernel']:>3}{p['layers']:>3}{p['units']:>6}"
              f"{p['participation']:>6.2f}{alone_t[-1]:9.3f}{got.error:8.4f}{derr[-1]:9.1e}{str(same[-1]):>16}  "
              f"{got.status}/{alone.status}", flush=True)
    slow = int(np.argmax(alone_t))
    print(f"batched generation {med['batched']:.3f} s; slowest individual alone (#{slow}, the batched path): "
          f"{alone_t[slow]:.3f} s -> ratio {med['batched'] / alone_t[slow]:.2f} (issue #37's target for "
          f"fashion_mlp_dp: <= 2); sum alone {sum(alone_t):.3f} s")
    print(f"batch vs alone: max |Δ error| {max(derr):.1e}; ε, comm and Ω equal for {sum(same)}/{len(same)}; "
          f"engines {sorted({r.engine.get('population', 'alone') for r in together}, key=str)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
