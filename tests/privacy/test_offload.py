"""The accountant in worker processes (fedevo/privacy/offload.py): the same numbers and errors as inline, no
re-run of the caller's script in the workers, no worker outliving its parent."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from fedevo.errors import FedevoError
from fedevo.privacy import accounting, offload

CASES = [dict(noise_multiplier=z, sample_rate=q, steps=n, delta=1e-6)
         for z, q, n in ((0.8, 0.01, 50), (1.3, 0.1, 5), (3.0, 0.5, 20), (0.6, 1.0, 7))]


def test_in_processes_gives_the_inline_numbers_from_threads(monkeypatch):
    inline = [accounting.eps_gaussian.__wrapped__(**c) for c in CASES]
    offload.forget()  # else the calls below would be answered from the memo
    with offload.in_processes(2):
        pool = offload._active()
        assert pool is not None
        submitted, submit = [], pool.submit
        monkeypatch.setattr(pool, "submit", lambda fn, *a, **kw: submitted.append(fn) or submit(fn, *a, **kw))
        with ThreadPoolExecutor(4) as threads:  # as the population measures: runs in threads
            got = list(threads.map(lambda c: accounting.eps_gaussian(**c), CASES))
        assert submitted == [accounting.eps_gaussian] * len(CASES)  # each call went to the pool,
        assert offload._active() is pool  # which did not break (a broken one: the calls inline)
        pids = {pool.submit(os.getpid).result() for _ in range(6)}
    assert got == inline
    assert os.getpid() not in pids  # the pool's workers are other processes
    assert offload._active() is None  # outside: inline again


def test_an_error_in_a_worker_is_raised_here_as_inline():
    offload.forget()
    with pytest.raises(FedevoError) as inline:
        accounting.eps_gaussian(noise_multiplier=-1.0, sample_rate=0.1, steps=3, delta=1e-5)
    with offload.in_processes(2), pytest.raises(FedevoError) as there:
        accounting.eps_gaussian(noise_multiplier=-1.0, sample_rate=0.1, steps=3, delta=1e-5)
    assert str(there.value) == str(inline.value)


def test_processes_setting(monkeypatch):
    monkeypatch.setenv("FEDEVO_ACCOUNTANT_PROCESSES", "3")
    assert offload.processes(20) == 3 and offload.processes(2) == 2 and offload.processes(1) == 1
    monkeypatch.setenv("FEDEVO_ACCOUNTANT_PROCESSES", "1")
    assert offload.processes(20) == 1
    monkeypatch.delenv("FEDEVO_ACCOUNTANT_PROCESSES")
    assert offload.processes(20) == min(16, len(os.sched_getaffinity(0)))
    with offload.in_processes(1):  # one: inline, no pool
        assert offload._active() is None


def test_a_smaller_batch_keeps_the_pool():
    """Batches of 3 and 2 (a generation split in batches of sizes differing by one) share one pool: no workers
    started, and dp-accounting imported, again at every batch; a larger batch gets a larger pool."""
    with offload.in_processes(3):
        first = offload._active()
    with offload.in_processes(2):
        assert offload._active() is first
        assert accounting.eps_gaussian(**CASES[0]) == accounting.eps_gaussian.__wrapped__(**CASES[0])
    with offload.in_processes(3):
        assert offload._active() is first
    with offload.in_processes(4):
        assert offload._active() is not first


def test_the_default_counts_the_cpus_this_process_may_use(monkeypatch):
    """A process pinned to one CPU (taskset, a cpuset, a Slurm allocation) on a 64-core machine computes inline:
    not 16 workers importing dp-accounting on the core the batch trains on."""
    monkeypatch.delenv("FEDEVO_ACCOUNTANT_PROCESSES", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert offload.processes(20) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)))
    assert offload.processes(20) == 6


SCRIPT = textwrap.dedent("""
    import os, sys, time
    print("top level ran", flush=True)  # no __main__ guard: a worker that re-ran this script would print it again
    from fedevo.privacy import accounting, offload
    with offload.in_processes(2):
        eps = accounting.eps_gaussian(noise_multiplier=1.0, sample_rate=0.1, steps=3, delta=1e-5)
        pids = sorted({offload._active().submit(os.getpid).result() for _ in range(4)})
    print("eps", eps, flush=True)
    print("workers", *pids, flush=True)
    if sys.argv[1:] == ["kill"]:
        os.kill(os.getpid(), 9)
""")


def _alive(pid: int) -> bool:
    """Running (a zombie that no init reaped has ended)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


def test_a_script_without_main_guard_runs_once_and_its_workers_end_with_it(tmp_path):
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    p = subprocess.run([sys.executable, str(script), "kill"], capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr  # the pipes closed: no worker held them open
    assert p.stdout.count("top level ran") == 1, p.stdout
    eps = float(p.stdout.split("eps ")[1].split()[0])
    assert eps == accounting.eps_gaussian(noise_multiplier=1.0, sample_rate=0.1, steps=3, delta=1e-5)
    pids = [int(x) for x in p.stdout.split("workers ")[1].split()]
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)


# ---------------------------------------------------------------- the memo and prefetch

CALLS: list = []


@offload.offloadable
def _counted(*, x, y=1.0):
    """A pure function whose calls (in this process) are counted."""
    CALLS.append((x, y))
    if x < 0:
        raise FedevoError(f"x must be >= 0, got {x}")
    time.sleep(0.05)
    return x * y


@pytest.fixture
def counted():
    offload.forget()
    CALLS.clear()
    yield CALLS
    offload.forget()


def test_a_call_with_the_same_arguments_is_computed_once(counted):
    assert _counted(x=2.0, y=3.0) == 6.0 and _counted(y=3.0, x=2.0) == 6.0
    assert counted == [(2.0, 3.0)]
    assert _counted(x=2, y=3.0) == 6.0  # another type: another call (an int may take another path than a float)
    assert _counted(x=2.0) == 2.0
    assert counted == [(2.0, 3.0), (2, 3.0), (2.0, 1.0)]


def test_threads_asking_the_same_call_at_once_compute_it_once(counted):
    with ThreadPoolExecutor(8) as threads:
        got = list(threads.map(lambda _: _counted(x=5.0, y=2.0), range(8)))
    assert got == [10.0] * 8 and counted == [(5.0, 2.0)]


def test_errors_are_not_remembered(counted):
    for _ in range(2):
        with pytest.raises(FedevoError, match="x must be >= 0"):
            _counted(x=-1.0)
    assert counted == [(-1.0, 1.0), (-1.0, 1.0)]


def test_unhashable_arguments_are_computed_each_time(counted):
    @offload.offloadable
    def total(*, xs):
        CALLS.append(tuple(xs))
        return sum(xs)
    assert total(xs=[1, 2]) == 3 and total(xs=[1, 2]) == 3
    assert counted == [(1, 2), (1, 2)]


def test_the_memo_keeps_the_latest_calls(counted, monkeypatch):
    monkeypatch.setattr(offload, "MEMO_SIZE", 2)
    for x in (1.0, 2.0, 3.0):
        _counted(x=x)
    _counted(x=3.0)
    _counted(x=1.0)  # the oldest was dropped
    assert counted == [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (1.0, 1.0)]


def test_the_accountant_is_remembered(monkeypatch):
    """The real accountant: the second call returns the first one's number without computing it again."""
    offload.forget()
    c = dict(noise_multiplier=0.9, sample_rate=0.05, steps=40, delta=1e-6)
    first = accounting.eps_gaussian(**c)
    assert first == accounting.eps_gaussian.__wrapped__(**c)

    def broken(*a, **kw):
        raise AssertionError("computed again")
    monkeypatch.setattr(accounting, "_pld_interval_of", broken)
    assert accounting.eps_gaussian(**c) == first
    with pytest.raises(AssertionError, match="computed again"):  # other arguments are computed
        accounting.eps_gaussian(**{**c, "steps": 41})
    offload.forget()


def test_prefetch_computes_in_the_pool_ahead_of_need(counted):
    with offload.in_processes(2):
        pool = offload._active()
        sent = []
        submit = pool.submit
        pool.submit = lambda fn, *a, **kw: sent.append(kw) or submit(fn, *a, **kw)
        try:
            c = dict(noise_multiplier=1.1, sample_rate=0.2, steps=6, delta=1e-6)
            with offload.prefetch([lambda: accounting.eps_gaussian(**c), lambda: _counted(x=-1.0)]):
                deadline = time.monotonic() + 60
                while len(sent) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                value = accounting.eps_gaussian(**c)  # waits for the prefetched call, or finds it done
        finally:
            pool.submit = submit
    assert sent.count(c) == 1  # computed once, in the pool
    assert value == accounting.eps_gaussian.__wrapped__(**c)
    assert counted == []  # the failing call ran in a worker (not counted here) and was dropped quietly


def test_prefetch_starts_nothing_without_a_pool(counted):
    with offload.prefetch([lambda: _counted(x=1.0)]) as p:
        assert p._threads is None
    assert counted == []


def test_a_prefetch_whose_pool_is_gone_computes_nothing_and_a_waiter_computes_itself(counted, monkeypatch):
    """A prefetching thread never computes inline (pure Python beside the caller's work: benchmarks/gil_convoy.py):
    with the pool gone (for it) it leaves the call, and a thread that was waiting for it computes it (in the
    pool, which it still sees)."""
    import threading

    started, release = threading.Event(), threading.Event()
    real_active = offload._active

    def gone():  # the pool vanishes once the waiter is waiting
        if threading.current_thread().name.startswith("fedevo-prefetch"):
            started.set()
            release.wait(10)
            return None
        return real_active()
    with offload.in_processes(2):
        monkeypatch.setattr(offload, "_active", gone)
        with offload.prefetch([lambda: _counted(x=7.0)]):
            assert started.wait(10)
            with ThreadPoolExecutor(1) as waiter:
                value = waiter.submit(lambda: _counted(x=7.0))  # waits for the prefetch's entry
                time.sleep(0.1)
                release.set()
                assert value.result(timeout=30) == 7.0
    assert counted == []  # nothing inline in the prefetching thread; the waiter's own call went to the pool
