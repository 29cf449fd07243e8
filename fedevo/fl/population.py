"""A generation as one batched program: several evaluations' round loops in lockstep, their local training stacked.

`simulate_population(configs, seeds)` gives the results of `simulate(config, seed=seed)` for each pair, in order.
Each evaluation keeps its own round loop (`rounds.round_program`: its own seeded sampling, losses, chunks and
seeds, upload transform, aggregation, server noise, SET prune/regrow and accounting, the same code as alone);
the loops advance one round at a time together, and at each round the local training of every evaluation's
arrived clients runs as one stacked program (`stacked.train_members`: MLPs of one depth and width class in one
set of batched matmuls, different widths padded with zero weights, learning rates and SET masks per client).
The updates stay on the device through clipping (central and distributed trust's `ClipUpload`) and the weighted
mean; the aggregate comes back to the CPU for the server's noise, the model update and SET, as alone. The test
accuracies are computed on the device too.

Hence each result equals its evaluation alone on the same device (`simulate` with that device: the same stacked
trainer with one member) up to fp32 rounding where padding changes a GEMM's blocking (bit for bit for members of
equal widths: `exact=True` buckets only those), and the CPU engine's within docs/engine.md's tolerance.

Evaluated alone instead (`simulate`), after the batch: CNNs and the user's models, per-step privacy hooks
(mechanism `step`, the adaptive controller), `precision = "bf16"`, and a config whose preparation fails (its
error is then the one `simulate` raises). A batch mixing data sets trains one stacked program per training set.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .. import hardware
from ..data import load_data
from ..envvars import env_count
from ..errors import DivergedError
from ..privacy import offload
from . import stacked, stacked_fused
from .finite import all_finite
from .engine import intra_op_threads
from .rounds import RoundWork, aggregate_uploads, round_program, uploads_on_device
from .simulate import Setup, _diverged, measure, prepare, simulate


@dataclass
class _Run:
    index: int
    cfg: object
    seed: int
    su: Setup
    engine: dict
    prog: object
    t0: float = 0.0
    work: Optional[RoundWork] = None
    result: object = None  # the EvaluationResult once known (diverged: before the loop ends)
    result_out: object = None  # the RoundsOutcome of a loop that ended


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
    pv = su.privatizer
    hooks = pv.for_chunk is not None or getattr(pv, "for_group", None) is not None
    dtype = su.engine.precision.dtype if getattr(su.model, "supports_bf16", False) else torch.float32
    return stacked.applies(su.model, hooks, dtype)


def batchable_config(cfg) -> bool:
    """Whether an evaluation of `cfg` trains in the stacked program as far as its settings tell before any data
    is read (the search sends the others to be evaluated alone, fedevo/searching/batched.py): a built-in MLP, no
    `precision = "bf16"`, a mechanism with no per-step hook (`step`) and no round controller (the adaptive one).
    What only its preparation shows (bf16 from precision 'auto' on a CPU with native bf16, a failure) the batch
    finds (`batchable`) and evaluates alone after its stacked members."""
    from ..config import MLPArch
    from ..privacy.mechanism import Mechanism, build_mechanism

    if not isinstance(cfg.arch, MLPArch) or cfg.precision == "bf16":
        return False
    try:
        mech = build_mechanism(cfg)
        if type(mech).controller is not Mechanism.controller:
            return False
        hook, _ = mech.client_transforms(None, 0)
    except Exception:  # noqa: BLE001 - a hook that needs its run's pieces: not batched
        return False
    return hook is None


def device_accuracies(device: torch.device):
    """rounds.client_accuracies with the model and the test set on `device` (the same per-client means)."""
    cache: dict = {}

    def accuracies(model, params, data, part):
        x = cache.get(id(data.x_test))
        if x is None:
            x = cache[id(data.x_test)] = data.x_test.to(device)
        with torch.no_grad():
            logits = model.logits([p.to(device) for p in params], x)
            if not all_finite(logits):  # as client_accuracies: an argmax of NaN is no accuracy
                raise DivergedError("the model's output is not finite (NaN or inf) on the test set")
            correct = (logits.argmax(1).cpu() == data.y_test).numpy()
        per_client = np.array([correct[ix].mean() if len(ix) else np.nan for ix in part.test])
        return per_client, float(correct.mean())
    return accuracies


def simulate_population(configs: Sequence, seeds: Sequence[int], *, device=None, exact: bool = False,
                        contain: bool = False, timings: Optional[dict] = None) -> list:
    """[simulate(cfg, seed=s) for cfg, s in zip(configs, seeds)], the batchable ones trained together on `device`
    (None: each config's resolved device, which must then be one for the batch; CPU devices run the same stacked
    code, for tests). exact: stack only members of equal widths (bit-for-bit results, less batching). contain: an
    evaluation alone that raises leaves its exception in its place (the others' results kept) instead of raising.
    timings: a dict filled with where the wall time went (`PHASES`; for benchmarks)."""
    if len(configs) != len(seeds):
        raise ValueError("one seed per config")
    clock = _Clock(timings)
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
        runs: list[_Run] = []
        alone: list[int] = []
        setups = _map(setup, range(len(configs)), threads)
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
            engine = {**su.engine.info(), **stacked.opt_ins(su.cfg, d), "population": len(configs)}
            runs.append(_Run(index=i, cfg=su.cfg, seed=int(seeds[i]), su=su, engine=engine, prog=prog, t0=t0))
        results: list = [None] * len(configs)
        clock.lap("prepare_s")
        if runs:
            d = dev or runs[0].su.engine.device
            # the runs' CPU work goes in `threads` threads, so each torch op in one thread (16 runs' ops each
            # spreading over 16 cores would oversubscribe them)
            with intra_op_threads(1) if threads > 1 else contextlib.nullcontext():
                _measure_batch(runs, d, exact, clock, threads, results, t0)
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


def _measure_batch(runs, d, exact, clock, threads, results, t0) -> None:
    """Train the runs' round loops together, then each run's result into results[its index]."""
    _train(runs, d, exact, clock, threads)
    acc = device_accuracies(d) if d.type != "cpu" else None

    @clock.each("measure_sum_s")
    def result(r):  # the accountant's ε (in worker processes: offload) and the test accuracies, in threads
        if r.result is None:
            r.result = measure(r.cfg, r.seed, r.su, r.result_out, t0=t0, stop=r.cfg.rounds,
                               engine=stacked_fused.engine_label(r.engine), accuracies=acc)
        return r.result
    for r, res in zip(runs, _map(result, runs, threads)):
        results[r.index] = res
    clock.lap("measure_s")


PHASES = {  # simulate_population's `timings`: wall seconds of its phases, in order, and the sums over runs
    "prepare_s": "data, partitions, models, mechanisms of every evaluation (in threads)",
    "train_s": "the stacked local training, every round (the main thread; on a GPU, its launches and waits)",
    "plan_s": "of train_s: the buckets' batch schedules and stacked state built on the host (the GPU waits)",
    "rounds_s": "each round's CPU side of every run after its training (uploads, aggregation, server noise, SET)",
    "rounds_sum_s": "the same, summed over the runs (rounds_sum_s / rounds_s: how many ran at once)",
    "rounds_uploads_sum_s": "of rounds_sum_s: the uploads' transform and aggregation (on the device where it can)",
    "rounds_next_sum_s": "of rounds_sum_s: the server's side (noise, model update, SET, accounting) and the next "
                         "round's sampling and chunks",
    "measure_s": "each run's result: the accountant's ε and the test accuracies (in threads)",
    "measure_sum_s": "the same, summed over the runs",
    "alone_s": "the evaluations that are not batched, one after another",
}


class _Clock:
    """Fills a `timings` dict (PHASES) when one is given; does nothing otherwise."""

    def __init__(self, timings: Optional[dict]):
        self.timings = timings
        self.t = time.perf_counter()
        if timings is not None:
            timings.update({k: 0.0 for k in PHASES})

    def lap(self, key: str) -> None:
        now = time.perf_counter()
        if self.timings is not None:
            self.timings[key] += now - self.t
        self.t = now

    def each(self, key: str):
        """A decorator: the wrapped call's seconds added to `key` (under a lock: the runs' threads add to it)."""
        def wrap(fn):
            if self.timings is None:
                return fn

            def timed(*args):
                t = time.perf_counter()
                try:
                    return fn(*args)
                finally:
                    with _LOCK:
                        self.timings[key] += time.perf_counter() - t
            return timed
        return wrap


_LOCK = threading.Lock()


def _map(fn, items, threads: int) -> list:
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        return list(pool.map(fn, items))


def cpu_threads() -> int:
    """Runs whose CPU work (preparation, each round's uploads, secure aggregation, server noise and SET, the
    accountant and the test accuracies at the end) go at once:
    FEDEVO_POPULATION_THREADS, else the CPUs this process may run on (`hardware.cores`: its affinity)."""
    n = env_count("FEDEVO_POPULATION_THREADS")
    return n if n is not None else hardware.cores()


def _train(runs: list[_Run], device: torch.device, exact: bool, clock: Optional[_Clock] = None,
           threads: Optional[int] = None) -> None:
    """Advance every run's round loop to its end, one round at a time, local training stacked; each run's CPU
    side of a round in a thread of its own (`threads`, default `cpu_threads`)."""
    clock = clock or _Clock(None)
    threads = threads or cpu_threads()
    finish = clock.each("rounds_sum_s")(lambda job: _finish_round(*job, clock))
    xs: dict = {}
    for r in runs:
        r.work = _advance(r, None, first=True)
    clock.lap("rounds_s")
    live = [r for r in runs if r.work is not None]
    while live:
        by_data: dict = {}
        for r in live:
            by_data.setdefault(id(r.su.data.x_train), []).append(r)
        for group in by_data.values():
            data = group[0].su.data
            x = xs.get(id(data.x_train))
            if x is None:
                x = xs[id(data.x_train)] = data.x_train.to(device).reshape(len(data.x_train), -1)
            members = [stacked.Member(dims=r.su.model.dims, params=r.work.params, masks=r.work.masks,
                                      lr=r.cfg.lr, chunks=r.work.local_data, seeds=r.work.seeds, epochs=r.cfg.epochs,
                                      batch_size=r.cfg.batch_size, **stacked.settings_of(r.cfg)) for r in group]
            flats = stacked.train_members(members, x, data.y_train, device=device, exact=exact,
                                          timings=clock.timings)
            clock.lap("train_s")
            # each run's own objects only: the numbers do not depend on the threads
            _map(finish, list(zip(group, flats)), threads)
            clock.lap("rounds_s")
        live = [r for r in live if r.work is not None]


def _finish_round(r: _Run, flat: torch.Tensor, clock: Optional["_Clock"] = None) -> None:
    """A run's uploads, aggregation and server side of the round just trained, then its next RoundWork."""
    clock = clock or _Clock(None)
    pv = r.su.privatizer

    @clock.each("rounds_uploads_sum_s")
    def uploads():
        f = flat if uploads_on_device(pv) else flat.cpu()
        return aggregate_uploads(r.work, stacked.split(f, r.work.chunks), pv, r.su.part.sizes)
    try:
        answer = uploads()
    except DivergedError as e:
        _stop(r, str(e))
        return
    r.work = clock.each("rounds_next_sum_s")(_advance)(r, answer)


def _advance(r: _Run, answer, first: bool = False) -> Optional[RoundWork]:
    """The run's next RoundWork, or None when its loop has ended (its outcome in r.result_out) or diverged."""
    try:
        return next(r.prog) if first else r.prog.send(answer)
    except StopIteration as stop:
        r.result_out = stop.value
        r.su.noise.close()
        return None
    except DivergedError as e:
        _stop(r, str(e))
        return None


def _stop(r: _Run, message: str) -> None:
    r.prog.close()
    r.su.noise.close()
    r.work = None
    r.result = _diverged(r.cfg, r.t0, message, engine=r.engine, rounds=r.cfg.rounds)


def evaluate_population(problem, params_list: Sequence, seeds: Sequence[int], *, rounds: Optional[int] = None,
                        data_dir: Optional[str] = None, download: bool = False, device=None,
                        exact: bool = False, contain: bool = False, timings: Optional[dict] = None) -> list:
    """[evaluate(problem, p, seed=s, rounds=rounds) for p, s in zip(params_list, seeds)], a generation trained as
    one batched program where it can (`simulate_population`; contain and timings: its own)."""
    configs = [problem.sim_config(p, rounds=rounds, data_dir=data_dir, download=download) for p in params_list]
    return simulate_population(configs, list(seeds), device=device, exact=exact, contain=contain, timings=timings)


__all__ = ["batch_evaluator", "batchable", "batchable_config", "device_accuracies", "evaluate_population",
           "simulate_population"]
