"""A generation as one batched program (fl/population.py) on the CPU: the same code as on a GPU, against each
individual evaluated alone. Members of equal widths (exact=True) give bit for bit the numbers of evaluating them
alone through the same path; padded members (other widths in one bucket) within fp32 rounding, which on these
small runs leaves every objective equal; and the CPU engine's ε, comm and Ω exactly, its error within
docs/engine.md's 0.02."""

from __future__ import annotations

import contextlib

import pytest
import torch

from fedevo.evaluation import evaluate, evaluate_population
from fedevo.problem import load_problem

DP = """
name = "tiny_dp"
dataset = "synthetic"
model = "mlp"
eps_objective = "eps"
[data]
partition = "iid"
clients = 4
[train]
rounds = 3
epochs = 3
batch_size = 16
upload_loss = 0.25
[privacy]
mechanism = "update"
sampling = "poisson"
recall = false
delta = 1e-7
secagg_bits = 32
secagg_threshold = 0.5
[deployment]
population = 1000000
cohort = 10000
[genes]
trust = { type = "choice", choices = ["central", "secagg"], default = "central" }
layers = { type = "int", low = 1, high = 3, default = 2 }
units = { type = "int", low = 8, high = 40, default = 24 }
lr = { type = "real", low = 0.01, high = 0.3, default = 0.3 }
participation = { type = "real", low = 0.1, high = 1.0, default = 0.6 }
alpha = { type = "real", low = 1, high = 16, default = 4 }
xi = { type = "real", low = 0.01, high = 0.55, default = 0.1 }
sigma = { type = "real", low = 0.3, high = 30.0, default = 1.0, log = true }
clip = { type = "real", low = 0.1, high = 5.0, default = 1.0, log = true }
"""

# fashion_mlp_dp's mechanisms on a small problem: central and secagg trust, SET, other widths, depths, rates
# (fp32: 'auto' is bf16 on a CPU with native bf16, which the batched path leaves to the CPU engine)
GENERATION = [dict(p, precision="fp32") for p in (
    dict(layers=2, units=24, lr=0.1), dict(layers=2, units=24, lr=0.2, alpha=8, trust="secagg"),
    dict(layers=1, units=30, sigma=0.3), dict(layers=2, units=20, participation=1.0, clip=0.5),
    dict(layers=2, units=24, participation=0.2), dict(layers=3, units=17, lr=0.15, xi=0.4))]
SEEDS = [1, 2, 3, 4, 5, 6]
KEYS = ("status", "error", "accuracy_global", "comm", "eps", "omega", "rounds")


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("pop") / "dp.toml"
    path.write_text(DP)
    return load_problem(str(path))


def _untimed(d):
    """The privacy report without its wall-clock timings (secure aggregation's setup_s, mask_s ...)."""
    return {k: _untimed(v) if isinstance(v, dict) else v for k, v in d.items() if not k.endswith("_s")}


def batched_and_alone(problem, generation, seeds, *, device: str, exact: bool = False) -> list[tuple]:
    """The generation evaluated as one batch on `device` (each result checked batched, not sent alone), and each
    individual alone the same way (a population of one): (params, seed, batched result, alone result) each."""
    together = evaluate_population(problem, generation, seeds, device=device, exact=exact)
    assert all(r.engine.get("population") == len(generation) for r in together)
    return [(p, s, got, evaluate_population(problem, [p], [s], device=device, exact=exact)[0])
            for p, s, got in zip(generation, seeds, together)]


def _objectives(r):
    return tuple(getattr(r, k) for k in KEYS)


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_generation_equals_each_alone(problem, exact):
    pairs = batched_and_alone(problem, GENERATION, SEEDS, device="cpu", exact=exact)
    for p, s, got, alone in pairs:
        assert _objectives(got) == _objectives(alone), p
        assert _untimed(got.privacy) == _untimed(alone.privacy)
    assert len({got.error for _, _, got, _ in pairs}) > 3  # they trained, each its own way


def test_generation_equals_the_cpu_engine(problem):
    together = evaluate_population(problem, GENERATION, SEEDS, device="cpu")
    for p, s, got in zip(GENERATION, SEEDS, together):
        cpu = evaluate(problem, p, seed=s)
        assert (got.status, got.comm, got.eps, got.omega) == (cpu.status, cpu.comm, cpu.eps, cpu.omega), p
        assert abs(got.error - cpu.error) <= 0.02, (p, got.error, cpu.error)


def test_unbatchable_individuals_are_evaluated_alone(problem):
    """bf16 precision falls back to `simulate` alone (here: the CPU engine), in the same order."""
    gen = [dict(GENERATION[0]), dict(GENERATION[2], precision="bf16")]
    got = evaluate_population(problem, gen, [1, 3], device="cpu")
    assert "population" in got[0].engine and "population" not in got[1].engine
    assert got[1].engine["precision"] == "bf16"
    assert _objectives(got[1]) == _objectives(evaluate(problem, gen[1], seed=3))


def test_batch_evaluator_is_evaluate_population(problem):
    from fedevo.fl.population import batch_evaluator

    run = batch_evaluator(problem, device="cpu")
    got = run([(GENERATION[0], SEEDS[0]), (GENERATION[2], SEEDS[2])])
    want = evaluate_population(problem, [GENERATION[0], GENERATION[2]], [SEEDS[0], SEEDS[2]], device="cpu")
    assert [_objectives(r) for r in got] == [_objectives(r) for r in want]


def test_timings_say_where_the_wall_time_went(problem):
    """`timings` (for benchmarks): every phase, each >= 0, the phases summing to the call's wall time; the results
    are those of a call without it."""
    import time

    from fedevo.fl.population import PHASES, evaluate_population as batched

    gen = [GENERATION[0], GENERATION[2], dict(GENERATION[3], precision="bf16")]
    timings = {}
    t = time.perf_counter()
    got = batched(problem, gen, [1, 3, 4], device="cpu", timings=timings)
    wall = time.perf_counter() - t
    assert set(PHASES) <= set(timings) and all(timings[k] >= 0 for k in PHASES)
    assert (timings["members"], timings["alone"]) == (2, 1) and timings["threads"] >= 1
    assert timings["train_s"] > 0 and timings["rounds_sum_s"] > 0 and timings["measure_sum_s"] > 0
    assert timings["alone_s"] > 0
    assert 0 < timings["plan_s"] <= timings["train_s"]  # a part of train_s
    parts = timings["rounds_uploads_sum_s"] + timings["rounds_next_sum_s"]  # parts of rounds_sum_s
    assert timings["rounds_uploads_sum_s"] > 0 and timings["rounds_next_sum_s"] > 0
    assert timings["plan_ahead_sum_s"] > 0  # the runs' next schedules, drawn in their threads
    assert parts <= timings["rounds_sum_s"]
    phases = sum(timings[k] for k in PHASES if not k.endswith("_sum_s") and k != "plan_s")
    assert phases <= wall and phases >= 0.9 * wall - 0.05  # only the argument handling is outside them
    assert [_objectives(r) for r in got] == [_objectives(r) for r in batched(problem, gen, [1, 3, 4],
                                                                             device="cpu")]


def test_overlapped_run_sides_equal_one_thread(problem, monkeypatch):
    """Each run's side of a round in threads, started bucket by bucket while the later buckets train: the same
    numbers as after the round's training (overlap=False) and as one thread, one run after another
    (FEDEVO_POPULATION_THREADS=1)."""
    from fedevo.fl.population import evaluate_population as batched

    got = {}
    for threads, overlap in (("1", True), ("2", True), ("2", False)):
        monkeypatch.setenv("FEDEVO_POPULATION_THREADS", threads)
        got[threads, overlap] = batched(problem, GENERATION, SEEDS, device="cpu", overlap=overlap)
    want = got["1", True]
    for key in (("2", True), ("2", False)):
        for a, b in zip(want, got[key]):
            assert _objectives(a) == _objectives(b), key
            assert _untimed(a.privacy) == _untimed(b.privacy), key


def test_planned_eps_is_computed_while_the_batch_trains(problem, monkeypatch):
    """With the accountant's workers, each run's planned ε (central trust: its settings alone decide it) starts
    in them before the batch trains; the report's ε is that call's number, remembered: the results equal each
    run alone, where nothing is prefetched."""
    from fedevo.fl import population
    from fedevo.privacy import offload

    started = []
    real = offload.prefetch

    def recorded(calls):
        calls = list(calls)
        handle = real(calls)
        started.append(([c.__self__ for c in calls], handle._threads is not None))
        return handle
    monkeypatch.setattr(offload, "prefetch", recorded)
    monkeypatch.setenv("FEDEVO_ACCOUNTANT_PROCESSES", "2")
    offload.forget()
    gen = [GENERATION[0], GENERATION[1], GENERATION[2]]  # central, secagg, central
    together = population.evaluate_population(problem, gen, [1, 2, 3], device="cpu")
    ((mechs, threads),) = started
    assert threads  # started in the background
    assert [type(m).__name__ for m in mechs] == ["CentralGaussian", "DistributedDiscreteGaussian",
                                                 "CentralGaussian"]
    offload.forget()
    monkeypatch.setenv("FEDEVO_ACCOUNTANT_PROCESSES", "1")
    for p, s, got in zip(gen, [1, 2, 3], together):
        (alone,) = population.evaluate_population(problem, [p], [s], device="cpu")
        assert _objectives(got) == _objectives(alone), p
    assert [threads for _, threads in started[1:]] == [False] * 3  # inline (one process): nothing started
    assert all(r.eps < float("inf") for r in together)


def test_planned_eps_is_prefetched_on_the_cpu_only(monkeypatch):
    """On a GPU each run's ε is computed in its thread as its loop ends, during the training: prefetching it only
    competed with the batch there (0.90x, H100), so a batch on a GPU starts none; on the CPU it does."""
    from types import SimpleNamespace

    from fedevo.fl import population
    from fedevo.privacy import offload

    asked = []
    monkeypatch.setattr(offload, "prefetch", lambda calls: asked.append(list(calls)) or contextlib.nullcontext())
    runs = [SimpleNamespace(su=SimpleNamespace(mech=SimpleNamespace(planned_eps=lambda: 1.0)))] * 2
    with population._prefetch_eps(runs, torch.device("cuda")):
        pass
    assert asked == []
    with population._prefetch_eps(runs, "cpu"):
        pass
    assert len(asked) == 1 and len(asked[0]) == 2


def test_a_bucket_goes_on_while_another_buckets_sides_run(problem, monkeypatch):
    """No barrier between rounds: with one run's side slowed down, the buckets it is not in train their next
    rounds meanwhile (the 3-layer member's bucket goes on while the 1-layer member's first side sleeps), and every
    number is still the round-by-round path's (overlap=False)."""
    import threading
    import time

    from fedevo.fl import lockstep, stacked
    from fedevo.fl.population import evaluate_population as batched

    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "3")
    want = batched(problem, GENERATION, SEEDS, device="cpu", overlap=False)
    slow_dims = {(64, 30, 10)}  # GENERATION[2]: one hidden layer of 30 (synthetic 1×8×8 inputs), a bucket alone
    events, lock = [], threading.Lock()
    finish, train = lockstep.finish_round, stacked.train_members

    def slow_finish(r, flat, clock=None):
        slow = r.member.dims in slow_dims and ("slow side done",) not in events  # its first side only
        if slow:
            time.sleep(1.0)  # ample for the other buckets on a loaded machine
        out = finish(r, flat, clock)
        if slow:
            with lock:
                events.append(("slow side done",))
        return out

    def logged_train(members, *args, **kwargs):
        with lock:
            events.append(("train", tuple(m.dims for m in members)))
        return train(members, *args, **kwargs)
    monkeypatch.setattr(lockstep, "finish_round", slow_finish)
    monkeypatch.setattr(stacked, "train_members", logged_train)
    got = batched(problem, GENERATION, SEEDS, device="cpu")
    assert [_objectives(r) for r in got] == [_objectives(r) for r in want]
    before = events[:events.index(("slow side done",))]
    deep = [e for e in before if e[0] == "train" and len(e[1][0]) == 5]  # the 3-layer member's bucket
    assert len(deep) >= 2, events  # its second round was queued while the slow side still ran


def test_wait_raises_the_first_failure_after_all_and_the_waiters_own_interrupt_at_once():
    """lockstep.wait_all: every future waited for, then the first one's exception; an interrupt of the waiting
    thread itself is not stored as a future's (it used to be, and the wait went on through every other run side)."""
    from concurrent.futures import Future

    from fedevo.fl.lockstep import wait_all

    def done(exc=None):
        f = Future()
        f.set_exception(exc) if exc is not None else f.set_result(None)
        return f
    first, second = ValueError("first"), RuntimeError("second")
    with pytest.raises(ValueError, match="first"):
        wait_all([done(), done(first), done(second), done()])

    class Interrupted:  # a future whose wait the user interrupts (Ctrl-C in the main thread)
        def result(self):
            raise KeyboardInterrupt

        exception = result

    waited = []

    class Later:
        def result(self):
            waited.append(self)

        exception = result
    with pytest.raises(KeyboardInterrupt):
        wait_all([done(), Interrupted(), Later()])
    assert waited == []  # not waited for after the interrupt


STEP = """
name = "tiny_step"
dataset = "synthetic"
model = "mlp"
eps_objective = "eps"
[data]
partition = "iid"
clients = 4
[train]
rounds = 3
epochs = 2
batch_size = 16
upload_loss = 0.25
[privacy]
mechanism = "step"
delta = 1e-4
clip_rule = "median"
[genes]
layers = { type = "int", low = 1, high = 3, default = 2 }
units = { type = "int", low = 8, high = 40, default = 24 }
lr = { type = "real", low = 0.01, high = 0.3, default = 0.2 }
participation = { type = "real", low = 0.1, high = 1.0, default = 0.75 }
alpha = { type = "real", low = 1, high = 16, default = 4 }
sigma = { type = "real", low = 0.001, high = 0.5, default = 0.01, log = true }
"""

# seed 004's per-step LDP (clip each batch gradient to the median rule's S, add N(0, σ²) each step): the hook
# trains in the stacked program, each member with its own S and noise
STEP_GENERATION = [dict(p, precision="fp32") for p in (
    dict(layers=2, units=24), dict(layers=2, units=20, sigma=0.05, lr=0.1), dict(layers=1, units=30, sigma=0.002),
    dict(layers=2, units=24, participation=1.0, alpha=8))]


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_a_per_step_hook_generation_equals_each_alone(tmp_path, exact):
    path = tmp_path / "step.toml"
    path.write_text(STEP)
    prob = load_problem(str(path))
    pairs = batched_and_alone(prob, STEP_GENERATION, [1, 2, 3, 4], device="cpu", exact=exact)
    for p, s, got, alone in pairs:
        if exact:
            assert _objectives(got) == _objectives(alone), p
            assert _untimed(got.privacy) == _untimed(alone.privacy), p  # the S each round used, the clips
        else:  # padded: fp32 rounding, also in the gradient norms whose median is the next round's S (ε's)
            assert (got.status, got.comm, got.omega) == (alone.status, alone.comm, alone.omega), p
            assert got.eps == pytest.approx(alone.eps, rel=1e-5), p
            assert abs(got.error - alone.error) <= 0.02, (p, got.error, alone.error)
        # the CPU engine draws other noise, so its trajectory and hence the median rule's S (and ε) differ:
        # the same uploads and model size
        cpu = evaluate(prob, p, seed=s)
        assert (got.status, got.comm, got.omega) == (cpu.status, cpu.comm, cpu.omega), p
    assert len({got.error for _, _, got, _ in pairs}) > 2


ADAPTIVE = """
name = "tiny_adaptive"
dataset = "synthetic"
model = "mlp"
eps_objective = "eps"
[data]
partition = "dirichlet"
dirichlet_alpha = 0.5
clients = 6
[train]
rounds = 3
epochs = 2
batch_size = 16
upload_loss = 0.2
[privacy]
mechanism = "adaptive"
clip = 2.0
recall = false
delta = 1e-4
adaptive_levels = 4
adaptive_gamma = 1.0
adaptive_keep = 0.8
adaptive_threshold = 0.5
adaptive_level_eps = 1.0
[genes]
layers = { type = "int", low = 1, high = 3, default = 2 }
units = { type = "int", low = 8, high = 40, default = 24 }
lr = { type = "real", low = 0.01, high = 0.3, default = 0.2 }
participation = { type = "real", low = 0.1, high = 1.0, default = 0.8 }
alpha = { type = "real", low = 1, high = 16, default = 4 }
sigma = { type = "real", low = 0.01, high = 3.0, default = 0.05, log = true }
adaptive_kappa = { type = "real", low = 0.0, high = 0.9, default = 0.5 }
"""


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_an_adaptive_generation_equals_each_alone_and_the_cpu_engine(tmp_path, exact):
    """The adaptive mechanism (per-client learning rates lr·(1 + γ·d_i) as a per-step hook, its filter and level
    reports in each run's side) batched: each member as alone; ε, comm and Ω the CPU engine's, its error within
    docs/engine.md's 0.02."""
    path = tmp_path / "adaptive.toml"
    path.write_text(ADAPTIVE)
    prob = load_problem(str(path))
    gen = [dict(p, precision="fp32") for p in (dict(units=24), dict(units=20, lr=0.1, adaptive_kappa=0.2),
                                               dict(layers=1, units=30), dict(units=24, alpha=8))]
    pairs = batched_and_alone(prob, gen, [1, 2, 3, 4], device="cpu", exact=exact)
    for p, s, got, alone in pairs:
        assert (got.status, got.comm, got.eps, got.omega) == (alone.status, alone.comm, alone.eps, alone.omega), p
        assert abs(got.error - alone.error) <= (0.0 if exact else 0.02), p
        if exact:  # the controller's levels, filter and learning-rate factors as alone
            assert _untimed(got.privacy) == _untimed(alone.privacy), p
        cpu = evaluate(prob, p, seed=s)
        assert (got.status, got.comm, got.eps, got.omega) == (cpu.status, cpu.comm, cpu.eps, cpu.omega), p
        assert abs(got.error - cpu.error) <= 0.02, (p, got.error, cpu.error)
    assert len({got.error for _, _, got, _ in pairs}) > 2


def test_a_sides_encoding_takes_the_cores_the_other_sides_leave(problem, monkeypatch):
    """Secure aggregation's encoding in a batch takes `hardware.side_threads()`: the process's cores but one (the
    thread that queues the buckets) over the runs' sides running at that moment (a lone run's side, one side at a
    time: all of those), not the one intra-op thread the batch sets for torch; the numbers do not depend on it."""
    from fedevo import hardware
    from fedevo.fl import population
    from fedevo.privacy.distributed import DDGEncoder

    seen = []
    real = DDGEncoder.encode_rows

    def recorded(self, rows, clients, threads=1):
        seen.append(threads)
        return real(self, rows, clients, threads=threads)
    monkeypatch.setattr(DDGEncoder, "encode_rows", recorded)
    monkeypatch.setattr(hardware, "cores", lambda: 8)
    secagg = GENERATION[1]
    assert secagg.get("trust") == "secagg"
    (one,) = population.evaluate_population(problem, [secagg], [2], device="cpu")
    assert seen and set(seen) == {7}
    seen.clear()
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "1")  # the sides one after another: each takes all
    got = population.evaluate_population(problem, [GENERATION[0], secagg], [1, 2], device="cpu")
    assert seen and set(seen) == {7}
    assert _objectives(got[1]) == _objectives(one)


def test_busy_shares_the_cores_among_the_running_sides():
    import threading

    from fedevo import hardware
    from fedevo.fl.lockstep import _Busy

    busy = _Busy(8)
    assert busy.share() == 8
    inside, go = threading.Event(), threading.Event()

    def side():
        inside.set()
        go.wait(10)
    t = threading.Thread(target=busy.run, args=(side,))
    t.start()
    assert inside.wait(10)
    assert busy.run(busy.share) == 4  # two running: this one and the other
    go.set()
    t.join()
    assert busy.share() == 8 and hardware.side_threads() >= 1
    with hardware.sharing(lambda: 0):
        assert hardware.side_threads() == 1
        with hardware.sharing(lambda: 5):
            assert hardware.side_threads() == 5
        assert hardware.side_threads() == 1
