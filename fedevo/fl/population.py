"""A generation as one batched program: several evaluations' round loops in lockstep, their local training stacked.

`simulate_population(configs, seeds)` gives the results of `simulate(config, seed=seed)` for each pair, in order.
Each evaluation keeps its own round loop (`rounds.round_program`: its own seeded sampling, losses, chunks and
seeds, upload transform, aggregation, server noise, SET prune/regrow and accounting, the same code as alone);
the loops advance one round at a time together, and at each round the local training of every evaluation's
arrived clients runs as one stacked program (`stacked.train_members`: MLPs of one depth and width class in one
set of batched matmuls, different widths padded with zero weights, learning rates and SET masks per client;
CNNs of one layout and width class in one vmapped step, fl/stacked_cnn.py; each run's per-step hook, where its
mechanism has one, on its own clients).
Each run's side of the round (its uploads, aggregation, server and next round's sampling) starts in a thread as
soon as its bucket is queued, on a GPU on the thread's own stream after that bucket's training only: it overlaps
the later buckets' training, largest buckets first; and a bucket's next round is queued as soon as its own runs'
sides are done (a run's bucket is fixed: its depth, width class, batch size, epochs), so no bucket waits for the
slowest side of the round.
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
from . import stacked, stacked_settings, tf32
from .finite import all_finite
from .engine import intra_op_threads
from .aggregate import weighted_mean
from .rounds import RoundWork, aggregate_uploads, round_program, stacked_member, uploads_on_device
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
    member: object = None  # the stacked.Member of `work`, its schedule drawn ahead (_member_of)
    result: object = None  # the EvaluationResult once known (diverged: before the loop ends)
    result_out: object = None  # the RoundsOutcome of a loop that ended
    device: Optional[torch.device] = None  # where its clients train (its per-step hook's noise is drawn there)


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
            opted = stacked_settings.opt_ins(su.cfg, d, hooked=stacked.hooked(su.privatizer), cnn=not _mlp(su))
            engine = {**su.engine.info(), **opted, "population": len(configs)}
            runs.append(_Run(index=i, cfg=su.cfg, seed=int(seeds[i]), su=su, engine=engine, prog=prog, t0=t0,
                             device=torch.device(d)))
        results: list = [None] * len(configs)
        clock.lap("prepare_s")
        if runs:
            d = dev or runs[0].su.engine.device
            # the runs' CPU work goes in `threads` threads, so each torch op in one thread (16 runs' ops each
            # spreading over 16 cores would oversubscribe them)
            # each run's ε where its settings alone decide it (central trust), computed by the accountant's
            # workers while the batch trains: the results phase finds it done (the same call, remembered)
            with intra_op_threads(1) if threads > 1 else contextlib.nullcontext(), \
                    offload.prefetch(r.su.mech.planned_eps for r in runs):
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
    _train(runs, d, exact, clock, threads, overlap, on_done=result)
    for r, res in zip(runs, _map(result, runs, threads)):
        results[r.index] = res
    clock.lap("measure_s")


PHASES = {  # simulate_population's `timings`: wall seconds of its phases, in order, and the sums over runs
    "prepare_s": "data, partitions, models, mechanisms of every evaluation (in threads)",
    "train_s": "the stacked local training, every round (the main thread; on a GPU, its launches and waits; "
               "the first buckets' runs' CPU side runs meanwhile in threads)",
    "plan_s": "of train_s: the buckets' plans (the runs' draws, made ahead, copied; the layout) and stacked state "
              "built on the host",
    "rounds_s": "the main thread's waits for runs' CPU sides (uploads, aggregation, server noise, SET): "
                "overlapping, whenever no bucket's runs are all ready; else each round's after its last bucket",
    "rounds_sum_s": "the runs' CPU side of every round, summed over the runs (much of it during train_s)",
    "rounds_uploads_sum_s": "of rounds_sum_s: the uploads' transform and aggregation (on the device where it can)",
    "rounds_next_sum_s": "of rounds_sum_s: the server's side (noise, model update, SET, accounting) and the next "
                         "round's sampling and chunks",
    "plan_ahead_sum_s": "of rounds_sum_s (and before the first round): each run's next batch schedule drawn in its "
                        "thread, summed over the runs",
    "measure_s": "each run's result not measured yet: the accountant's ε and the test accuracies (in threads; "
                 "overlapping, a run ending in an early bucket is measured in its thread during train_s)",
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
           threads: Optional[int] = None, overlap: bool = True, on_done=None) -> None:
    """Advance every run's round loop to its end, local training stacked; each run's CPU side of a round in a
    thread of `threads` (default `cpu_threads`). Overlapping (the default, with more than one thread: `_pipelined`)
    a bucket's runs' sides start as soon as the bucket is queued, and a bucket's next round is queued as soon as
    its own runs' sides are done, not the whole round's; overlap=False or one thread: round after round, every
    run's side after all of the round's buckets are queued. The same numbers either way. on_done(run): called in
    the run's thread when its loop ends there (overlapping: its result measured while other buckets train)."""
    clock = clock or _Clock(None)
    threads = threads or cpu_threads()
    busy = _Busy(hardware.cores() - 1)  # the process's CPUs but the queueing thread's, over the sides running
    finish = clock.each("rounds_sum_s")(lambda job: busy.run(_finish_round, *job, clock))

    def side(job):  # a run's side of the round in a thread of the pool; its result where its loop ended
        finish(job)
        r = job[0]
        if on_done is not None and r.work is None and r.result is None and r.result_out is not None:
            on_done(r)
    xs: dict = {}

    def x_of(data):  # the training set on the device, once per data set
        x = xs.get(id(data.x_train))
        if x is None:
            x = xs[id(data.x_train)] = data.x_train.to(device).reshape(len(data.x_train), -1)
        return x
    for r in runs:
        r.work = _advance(r, None, first=True)
    live = [r for r in runs if r.work is not None]
    _map(clock.each("plan_ahead_sum_s")(_member_of), live, threads)
    clock.lap("rounds_s")
    with hardware.sharing(busy.share):  # a side's encoding takes the cores the other runs' sides leave
        if overlap and threads > 1:
            _pipelined(live, device, exact, clock, threads, side, x_of)
        else:
            _rounds(live, device, exact, clock, threads, finish, x_of)


def _rounds(live: list[_Run], device: torch.device, exact: bool, clock: _Clock, threads: int, finish,
            x_of) -> None:
    """Round after round: each round's buckets queued, then every run's side of it (`_train` without overlap)."""
    while live:
        by_data: dict = {}
        for r in live:
            by_data.setdefault(id(r.su.data.x_train), []).append(r)
        for group in by_data.values():
            data = group[0].su.data
            later: list = []
            stacked.train_members([r.member for r in group], x_of(data), data.y_train, device=device, exact=exact,
                                  timings=clock.timings, on_bucket=lambda idx, flats, group=group, later=later:
                                  later.extend((group[i], f) for i, f in zip(idx, flats)))
            clock.lap("train_s")
            _map(finish, later, threads)  # each run's own objects only: the numbers do not depend on the threads
            clock.lap("rounds_s")
        live = [r for r in live if r.work is not None]


def _pipelined(live: list[_Run], device: torch.device, exact: bool, clock: _Clock, threads: int, side,
               x_of) -> None:
    """The runs' rounds with no barrier between them: the runs that share a bucket (one data set, one
    `stacked.bucket_key`, fixed for a run) advance together, and a bucket's next round is queued as soon as its own
    runs' sides of the last one are done (the ready buckets largest first), while other buckets' sides still run.
    A bucket holds the same runs, in the same order, as when every bucket of a round is queued together, hence the
    same numbers; only the order of the device's work changes. A side's exception: every side in flight waited for,
    then the first raised (`_wait`)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    buckets: dict = {}
    for r in live:
        buckets.setdefault((id(r.su.data.x_train), stacked.bucket_key(r.member, exact)), []).append(r)
    last: dict = {key: [] for key in buckets}  # each bucket's runs' side futures of its last round
    inflight: set = set()
    pool = ThreadPoolExecutor(threads)
    try:
        while buckets:
            ready = []
            for key, group in list(buckets.items()):
                if not all(f.done() for f in last[key]):
                    continue
                if any(f.exception() is not None for f in last[key]):
                    _wait(last[key] + list(inflight))  # raises the first, once every side has ended
                group = [r for r in group if r.work is not None]
                if group:
                    buckets[key] = group
                    ready.append(key)
                else:
                    del buckets[key]
            ready.sort(key=lambda k: -sum(stacked.work_of(r.member) for r in buckets[k]))
            for key in ready:
                group = buckets[key]
                data = group[0].su.data
                futures: list = []

                def on_bucket(idx, flats, group=group, futures=futures):
                    ready_at = _Queued(device)
                    futures.extend(pool.submit(ready_at.then, side, (group[i], f)) for i, f in zip(idx, flats))
                stacked.train_members([r.member for r in group], x_of(data), data.y_train, device=device,
                                      exact=exact, timings=clock.timings, on_bucket=on_bucket,
                                      before_capture=lambda: _wait(list(inflight)))
                last[key] = futures
                inflight.update(futures)
                clock.lap("train_s")
            inflight = {f for f in inflight if not f.done()}
            if not ready and inflight:
                wait(inflight, return_when=FIRST_COMPLETED)
                clock.lap("rounds_s")
    finally:  # after an error, the sides not started yet are not started
        pool.shutdown(wait=True, cancel_futures=True)


class _Busy:
    """How many runs' sides are running, so that each may take its share of `cores` (`hardware.sharing`)."""

    def __init__(self, cores: int):
        self.cores = max(1, int(cores))
        self.n = 0
        self.lock = threading.Lock()

    def share(self) -> int:
        return max(1, self.cores // max(1, self.n))

    def run(self, fn, *args):
        with self.lock:
            self.n += 1
        try:
            return fn(*args)
        finally:
            with self.lock:
                self.n -= 1


def _wait(futures: list) -> None:
    """Wait for every future; the first one's exception raised (after all have ended). An interrupt of the
    waiting thread itself (KeyboardInterrupt) is not a future's: it propagates at once."""
    first = None
    for f in futures:
        e = f.exception()  # waits; raises only for the waiting thread's own interrupt (or a cancelled future)
        if e is not None and first is None:
            first = e
    if first is not None:
        raise first


class _Queued:
    """The point in the device's queue where a bucket's updates are computed (CUDA: an event on the current
    stream, recorded when made). `then(fn, job)` runs fn(job) in the calling thread, its device work on that
    thread's own stream after that point: a run's uploads and server side wait for its bucket's training only,
    not for the buckets queued after it. On the CPU, fn(job)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.event = None
        if device.type == "cuda":
            self.event = torch.cuda.Event()
            self.event.record(torch.cuda.current_stream(device))

    def then(self, fn, job):
        if self.event is None:
            return fn(job)
        stream = _thread_stream(self.device)
        stream.wait_event(self.event)
        if job[1].numel():
            job[1].record_stream(stream)  # made on the training's stream, used (and freed) on this one
        with torch.cuda.stream(stream):
            return fn(job)


_STREAMS = threading.local()


def _thread_stream(device: torch.device):
    """This thread's own CUDA stream on `device` (made once)."""
    streams = getattr(_STREAMS, "by_device", None)
    if streams is None:
        streams = _STREAMS.by_device = {}
    key = str(device)
    if key not in streams:
        streams[key] = torch.cuda.Stream(device)
    return streams[key]


def _finish_round(r: _Run, flat: torch.Tensor, clock: Optional["_Clock"] = None) -> None:
    """A run's uploads, aggregation and server side of the round just trained, then its next RoundWork."""
    clock = clock or _Clock(None)
    pv = r.su.privatizer

    @clock.each("rounds_uploads_sum_s")
    def uploads():
        f = flat if uploads_on_device(pv) else flat.cpu()
        return aggregate_uploads(r.work, stacked.split(f, r.work.chunks), pv, r.su.part.sizes, mean=_fp32_mean)
    try:
        answer = uploads()
    except DivergedError as e:
        _stop(r, str(e))
        return
    r.work = clock.each("rounds_next_sum_s")(_advance)(r, answer)
    if r.work is not None:
        clock.each("plan_ahead_sum_s")(_member_of)(r)


def _fp32_mean(updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """weighted_mean launched outside any bucket's TF32 window (a run's side runs beside the buckets' training)."""
    with tf32.fp32():
        return weighted_mean(updates, weights)


def _member_of(r: _Run) -> None:
    """r.member: the stacked trainer's Member for r's next round, its batch schedule drawn now (in the run's
    thread: the thread that queues the GPU's work only copies it)."""
    r.member = stacked.predraw(stacked_member(r.work, r.cfg, r.su.model, r.su.privatizer, r.device))


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
                        exact: bool = False, contain: bool = False, timings: Optional[dict] = None,
                        overlap: bool = True) -> list:
    """[evaluate(problem, p, seed=s, rounds=rounds) for p, s in zip(params_list, seeds)], a generation trained as
    one batched program where it can (`simulate_population`; contain, timings and overlap: its own)."""
    configs = [problem.sim_config(p, rounds=rounds, data_dir=data_dir, download=download) for p in params_list]
    return simulate_population(configs, list(seeds), device=device, exact=exact, contain=contain, timings=timings,
                               overlap=overlap)


__all__ = ["batch_evaluator", "batchable", "batchable_config", "device_accuracies", "evaluate_population",
           "simulate_population"]
