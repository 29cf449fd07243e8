"""Many evaluations' round loops advanced together, their local training stacked (fl/population.py's engine).

Each run keeps its own round loop (`rounds.round_program`); `train_runs` advances every run's loop to its end: each
round's local training of the runs' arrived clients as one stacked program (`stacked.train_members`), each run's
side of the round (its uploads, aggregation, server and next round's sampling: `finish_round`) in a thread of a
pool. Overlapping (the default, `_pipelined`): a run's side starts in a thread as soon as its bucket is queued, on
a GPU on the thread's own stream after that bucket's training only (`_Queued`), so it overlaps the later buckets'
training, largest buckets first; and a bucket's next round is queued as soon as its own runs' sides are done (a
run's bucket is fixed: its depth, width class, batch size, epochs), so no bucket waits for the slowest side of the
round. The same numbers either way: a bucket holds the same runs in the same order; only the order of the device's
work changes. `Clock` fills a `timings` dict with where the wall time went (PHASES; for benchmarks).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import torch

from .. import hardware
from ..envvars import env_count
from ..errors import DivergedError
from . import stacked, tf32
from .aggregate import weighted_mean
from .rounds import RoundWork, aggregate_uploads, stacked_member, uploads_on_device
from .simulate import Setup, _diverged


@dataclass
class Run:
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


class Clock:
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


def map_threads(fn, items, threads: int) -> list:
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


def train_runs(runs: list[Run], device: torch.device, exact: bool, clock: Optional[Clock] = None,
           threads: Optional[int] = None, overlap: bool = True, on_done=None) -> None:
    """Advance every run's round loop to its end, local training stacked; each run's CPU side of a round in a
    thread of `threads` (default `cpu_threads`). Overlapping (the default, with more than one thread: `_pipelined`)
    a bucket's runs' sides start as soon as the bucket is queued, and a bucket's next round is queued as soon as
    its own runs' sides are done, not the whole round's; overlap=False or one thread: round after round, every
    run's side after all of the round's buckets are queued. The same numbers either way. on_done(run): called in
    the run's thread when its loop ends there (overlapping: its result measured while other buckets train)."""
    clock = clock or Clock(None)
    threads = threads or cpu_threads()
    busy = _Busy(hardware.cores() - 1)  # the process's CPUs but the queueing thread's, over the sides running
    finish = clock.each("rounds_sum_s")(lambda job: busy.run(finish_round, *job, clock))

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
    map_threads(clock.each("plan_ahead_sum_s")(_member_of), live, threads)
    clock.lap("rounds_s")
    with hardware.sharing(busy.share):  # a side's encoding takes the cores the other runs' sides leave
        if overlap and threads > 1:
            _pipelined(live, device, exact, clock, threads, side, x_of)
        else:
            _rounds(live, device, exact, clock, threads, finish, x_of)


def _rounds(live: list[Run], device: torch.device, exact: bool, clock: Clock, threads: int, finish,
            x_of) -> None:
    """Round after round: each round's buckets queued, then every run's side of it (`train_runs` without overlap)."""
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
            map_threads(finish, later, threads)  # each run's own objects only: the numbers do not depend on the threads
            clock.lap("rounds_s")
        live = [r for r in live if r.work is not None]


def _pipelined(live: list[Run], device: torch.device, exact: bool, clock: Clock, threads: int, side,
               x_of) -> None:
    """The runs' rounds with no barrier between them: the runs that share a bucket (one data set, one
    `stacked.bucket_key`, fixed for a run) advance together, and a bucket's next round is queued as soon as its own
    runs' sides of the last one are done (the ready buckets largest first), while other buckets' sides still run.
    A bucket holds the same runs, in the same order, as when every bucket of a round is queued together, hence the
    same numbers; only the order of the device's work changes. A side's exception: every side in flight waited for,
    then the first raised (`wait_all`)."""
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
                    wait_all(last[key] + list(inflight))  # raises the first, once every side has ended
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
                                      before_capture=lambda: wait_all(list(inflight)))
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


def wait_all(futures: list) -> None:
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


def finish_round(r: Run, flat: torch.Tensor, clock: Optional["Clock"] = None) -> None:
    """A run's uploads, aggregation and server side of the round just trained, then its next RoundWork."""
    clock = clock or Clock(None)
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


def _member_of(r: Run) -> None:
    """r.member: the stacked trainer's Member for r's next round, its batch schedule drawn now (in the run's
    thread: the thread that queues the GPU's work only copies it)."""
    r.member = stacked.predraw(stacked_member(r.work, r.cfg, r.su.model, r.su.privatizer, r.device))


def _advance(r: Run, answer, first: bool = False) -> Optional[RoundWork]:
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


def _stop(r: Run, message: str) -> None:
    r.prog.close()
    r.su.noise.close()
    r.work = None
    r.result = _diverged(r.cfg, r.t0, message, engine=r.engine, rounds=r.cfg.rounds)


__all__ = ["Clock", "PHASES", "Run", "cpu_threads", "finish_round", "map_threads", "train_runs", "wait_all"]
