"""A generation as one batched program: several evaluations' round loops in lockstep, their local training stacked.

`simulate_population(configs, seeds)` gives the results of `simulate(config, seed=seed)` for each pair, in order.
Each evaluation keeps its own round loop (`rounds.round_program`: its own seeded sampling, losses, chunks and
seeds, upload transform, aggregation, server noise, SET prune/regrow and accounting, the same code as alone);
the loops advance one round at a time together, and at each round the local training of every evaluation's
arrived clients runs as one stacked program (`stacked.train_members`: MLPs of one depth and width class in one
set of batched matmuls, different widths padded with zero weights, learning rates and SET masks per client;
CNNs of one layout and width class in one vmapped step, fl/stacked_cnn.py; each run's per-step hook, where its
mechanism has one, on its own clients).
Each run's side of the round (its uploads, aggregation, server and next round's sampling) runs in a thread,
overlapping the later buckets' training (fl/lockstep.py).
The updates stay on the device through clipping (central and distributed trust's `ClipUpload`) and the weighted
mean (secure aggregation: through clipping, then only the active coordinates come to the CPU to be encoded and
summed); the aggregate comes back to the CPU for the server's noise, the model update and SET, as alone. The test
accuracies are computed on the device too.

Hence each result equals its evaluation alone on the same device (`simulate` with that device: the same stacked
trainer with one member) up to fp32 rounding where padding changes a GEMM's blocking (bit for bit for MLP members
of equal widths: `exact=True` buckets only those), and the CPU engine's within docs/engine.md's tolerance.

Evaluated alone instead (`simulate`), after the batch: the user's models that are not lowered onto the built-in
ones, an MLP in `precision = "bf16"`, a per-step hook with no device path, and a config whose preparation fails
(its error is then the one `simulate` raises). A batch mixing data sets trains one stacked program per training set.
"""

from __future__ import annotations

import contextlib
import time
from typing import Optional, Sequence

import numpy as np
import torch

from .. import hardware
from ..data import load_data
from ..errors import DivergedError
from ..privacy import offload
from . import stacked, stacked_settings, tf32
from .engine import intra_op_threads
from .finite import all_finite
from .lockstep import PHASES, Clock, Run, cpu_threads, map_threads, train_runs
from .rounds import round_program
from .simulate import Setup, measure, prepare, simulate


def batch_evaluator(problem, *, rounds: Optional[int] = None, data_dir: Optional[str] = None, device=None,
                    exact: bool = False):
    """The search's hook: a callable [(params, seed), ...] -> [EvaluationResult, ...] that evaluates a batch of
    a generation's tasks as one program (`evaluate_population`). A runner on a GPU hands each GPU (a Ray task
    with `num_gpus=1`) one batch of the generation instead of one task per evaluation."""
    def evaluate_batch(tasks):
        tasks = list(tasks)
        return evaluate_population(problem, [p for p, _ in tasks], [s for _, s in tasks], rounds=rounds,
                                   data_dir=data_dir, device=device, exact=exact)
    return evaluate_batch


def batchable(su: Setup) -> bool:
    """Whether an evaluation trains in the stacked program (else it is evaluated alone)."""
    dtype = su.engine.precision.dtype if getattr(su.model, "supports_bf16", False) else torch.float32
    return stacked.applies(su.model, su.privatizer, dtype)


def _mlp(su: Setup) -> bool:
    """Whether a batchable evaluation trains in the MLP buckets (their opt-ins and kernels are its), not a CNN's."""
    return stacked.applies_mlp(su.model, su.privatizer, torch.float32)


def batchable_config(cfg) -> bool:
    """Whether an evaluation of `cfg` trains in the stacked program as far as its settings tell before any data
    is read (the search sends the others to be evaluated alone, fedevo/searching/batched.py): a built-in MLP, no
    `precision = "bf16"`, a mechanism with no per-step hook or one with the device path's (`step`: its clipping and
    noise in the stacked program; `adaptive`: its per-client learning rates, its round controller in the run's
    side); or a built-in CNN (fl/stacked_cnn.py, in any precision) with the same mechanisms.
    What only its preparation shows (bf16 from precision 'auto' on a CPU with native bf16, a failure) the batch
    finds (`batchable`) and evaluates alone after its stacked members."""
    from ..config import CNNArch, MLPArch
    from ..privacy.mechanism import build_mechanism
    from .stacked_cnn import enabled as cnn_enabled

    cnn = isinstance(cfg.arch, CNNArch)
    if cnn and not cnn_enabled():
        return False
    if not cnn and (not isinstance(cfg.arch, MLPArch) or cfg.precision == "bf16"):
        return False
    try:
        mech = build_mechanism(cfg)
        hook, _ = mech.client_transforms(None, 0)
    except Exception:  # noqa: BLE001 - a hook that needs its run's pieces: not batched
        return False
    return hook is None or getattr(hook, "for_group", None) is not None


def device_accuracies(device: torch.device):
    """rounds.client_accuracies with the model and the test set on `device` (the same per-client means)."""
    cache: dict = {}

    def accuracies(model, params, data, part):
        x = cache.get(id(data.x_test))
        if x is None:
            x = cache[id(data.x_test)] = data.x_test.to(device)
        ps = [p.to(device) for p in params]
        with torch.no_grad(), tf32.fp32():  # launched outside any bucket's TF32 window
            logits = model.logits(ps, x)
        if not all_finite(logits):  # as client_accuracies: an argmax of NaN is no accuracy
            raise DivergedError("the model's output is not finite (NaN or inf) on the test set")
        correct = (logits.argmax(1).cpu() == data.y_test).numpy()
        per_client = np.array([correct[ix].mean() if len(ix) else np.nan for ix in part.test])
        return per_client, float(correct.mean())
    return accuracies


def simulate_population(configs: Sequence, seeds: Sequence[int], *, device=None, exact: bool = False,
                        contain: bool = False, timings: Optional[dict] = None, overlap: bool = True) -> list:
    """[simulate(cfg, seed=s) for cfg, s in zip(configs, seeds)], the batchable ones trained together on `device`
    (None: each config's resolved device, which must then be one for the batch; CPU devices run the same stacked
    code, for tests). exact: stack only members of equal widths (bit-for-bit results, less batching). contain: an
    evaluation alone that raises leaves its exception in its place (the others' results kept) instead of raising.
    timings: a dict filled with where the wall time went (`PHASES`; for benchmarks). overlap=False: round after
    round, each round's run sides only after all its buckets are queued (the way before; benchmarks compare)."""
    if len(configs) != len(seeds):
        raise ValueError("one seed per config")
    clock = Clock(timings)
    t0 = time.perf_counter()
    dev = None if device is None else hardware.device(str(device)) if not isinstance(device, torch.device) \
        else device
    if dev is not None:  # each config resolved for that device (its precision 'auto' too)
        configs = [c.with_(device=dev.type) for c in configs]
    for cfg in configs:  # each data set read once, here (prepare in threads would race the cache)
        try:
            load_data(cfg.data)
        except Exception:  # noqa: BLE001 - its evaluation raises it, alone
            pass

    def setup(i):
        try:
            return prepare(configs[i], seed=int(seeds[i]))
        except Exception:  # noqa: BLE001 - simulate raises the same error for it, alone
            return None
    threads = cpu_threads()
    with offload.in_processes(offload.processes(len(configs))):  # the accountant's workers start now
        runs: list[Run] = []
        alone: list[int] = []
        setups = map_threads(setup, range(len(configs)), threads)
        for i, su in enumerate(setups):
            if su is None:
                alone.append(i)
                continue
            d = dev or su.engine.device
            if not batchable(su) or (dev is None and runs and su.engine.device != runs[0].su.engine.device):
                su.noise.close()
                alone.append(i)
                continue
            prog = round_program(su.cfg, su.model, su.data, su.part, gen=su.gen, privatizer=su.privatizer,
                                 engine=su.engine, device=d)
            opted = stacked_settings.opt_ins(su.cfg, d, hooked=stacked.hooked(su.privatizer), cnn=not _mlp(su),
                                            model=su.model)
            engine = {**su.engine.info(), **opted, "population": len(configs)}
            runs.append(Run(index=i, cfg=su.cfg, seed=int(seeds[i]), su=su, engine=engine, prog=prog, t0=t0,
                             device=torch.device(d)))
        results: list = [None] * len(configs)
        clock.lap("prepare_s")
        if runs:
            d = dev or runs[0].su.engine.device
            # the runs' CPU work goes in `threads` threads, so each torch op in one thread (16 runs' ops each
            # spreading over 16 cores would oversubscribe them)
            with intra_op_threads(1) if threads > 1 else contextlib.nullcontext(), _prefetch_eps(runs, d):
                _measure_batch(runs, d, exact, clock, threads, results, t0, overlap)
        for i in alone:
            try:
                results[i] = simulate(configs[i], seed=int(seeds[i]))
            except Exception as e:  # noqa: BLE001 - contained: the caller reports it as that evaluation's
                if not contain:
                    raise
                results[i] = e
        clock.lap("alone_s")
        if timings is not None:
            timings.update(members=len(runs), alone=len(alone), threads=threads)
        return results


def _prefetch_eps(runs, d):
    """On the CPU, each run's ε where its settings alone decide it (central trust) computed by the accountant's
    workers while the batch trains: the results phase finds it done (the same call, remembered); 1.13x a
    digits_mlp generation on 2 Zen 5 cores. Not on a GPU: there each run's ε is computed in its thread as its
    loop ends, during the training, and the results phase waited 0.003 s with or without it, while prefetching
    made a fashion_mlp_dp generation 0.90x as fast (H100, benchmarks/results-2026-11-27-cuda-h100.txt)."""
    if torch.device(d).type != "cpu":
        return contextlib.nullcontext()
    return offload.prefetch(r.su.mech.planned_eps for r in runs)


def _measure_batch(runs, d, exact, clock, threads, results, t0, overlap: bool = True) -> None:
    """Train the runs' round loops together and measure each run's result (as soon as its loop ends, in its
    thread, where the run sides overlap the training), into results[its index]."""
    acc = device_accuracies(d) if d.type != "cpu" else None

    @clock.each("measure_sum_s")
    def result(r):  # the accountant's ε (in worker processes: offload) and the test accuracies, in threads
        if r.result is None:
            r.result = measure(r.cfg, r.seed, r.su, r.result_out, t0=t0, stop=r.cfg.rounds,
                               engine=stacked_settings.engine_label(r.engine, _mlp(r.su)), accuracies=acc)
        return r.result
    train_runs(runs, d, exact, clock, threads, overlap, on_done=result)
    for r, res in zip(runs, map_threads(result, runs, threads)):
        results[r.index] = res
    clock.lap("measure_s")


def evaluate_population(problem, params_list: Sequence, seeds: Sequence[int], *, rounds: Optional[int] = None,
                        data_dir: Optional[str] = None, download: bool = False, device=None,
                        exact: bool = False, contain: bool = False, timings: Optional[dict] = None,
                        overlap: bool = True) -> list:
    """[evaluate(problem, p, seed=s, rounds=rounds) for p, s in zip(params_list, seeds)], a generation trained as
    one batched program where it can (`simulate_population`; contain, timings and overlap: its own)."""
    configs = [problem.sim_config(p, rounds=rounds, data_dir=data_dir, download=download) for p in params_list]
    return simulate_population(configs, list(seeds), device=device, exact=exact, contain=contain, timings=timings,
                               overlap=overlap)


__all__ = ["PHASES", "batch_evaluator", "batchable", "batchable_config", "device_accuracies",
           "evaluate_population", "simulate_population"]
