"""The accountant's heavy pure functions in worker processes while a batch of evaluations is measured.

dp-accounting's PLD accountant is pure Python: a generation's 20 ε computed in threads take as long as one after
another (the GIL), ~0.1 s each, which was a quarter of a batched generation's time on a GPU. Inside
`in_processes(n)`, a call to a function marked `@offloadable` from any thread runs in a pool of n worker processes
(joblib's loky executor: fresh interpreters, not copies of a process that holds a GPU, and unlike
multiprocessing's spawn and forkserver it does not re-run the user's `__main__` script in them, so a script needs
no `if __name__ == "__main__"` guard) and returns the same number it would inline: the functions are pure and
keyword-only, and their arguments and results are plain numbers. The executor is reused by the next batch that
needs no more workers than it has (a search's batches differ in size by one; loky stops idle workers after 5
minutes). Where no pool can be had (a worker that died, a platform loky does not run
on), the call runs inline: the same number, only slower.

The calls are remembered (pure functions: a value never goes stale), so that a calibration's bisection or a
search's repeated settings are not computed twice; `prefetch` starts calls in the pool ahead of need (a batched
generation's planned ε, computed in the workers while it trains, so its results phase finds them done).

FEDEVO_ACCOUNTANT_PROCESSES sets the pool's size (1: inline); default: the CPUs this process may run on (its
affinity: a `taskset`, a cpuset, a Slurm allocation), at most 16.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .. import hardware
from ..envvars import env_count

_LOCK = threading.Lock()
_POOL = None  # the loky executor (in use while _USERS > 0)
_SIZE = 0  # its workers
_USERS = 0
_LOG = logging.getLogger(__name__)


def processes(runs: int) -> int:
    """Worker processes for a batch of `runs` evaluations: FEDEVO_ACCOUNTANT_PROCESSES, else the CPUs this process
    may run on (at most 16), never more than the runs; 1 or less: inline."""
    n = env_count("FEDEVO_ACCOUNTANT_PROCESSES")
    n = n if n is not None else min(16, hardware.cores())
    return max(1, min(n, runs))


def _ready() -> bool:
    return True


def _init_worker(parent: int) -> None:
    """A worker's initializer: end the worker within half a second of its parent's end (a killed search leaves no
    workers behind, nor pipes of its own held open by them; `parent` is the caller's pid, passed in: a worker
    still starting when its parent died would find itself adopted already), then import the accountant now
    (dp-accounting takes ~0.5 s to import: in every worker at once while the caller trains, not in each one's
    first call). Its offloadable calls are not remembered there: the caller remembers them."""
    global _REMEMBER
    _REMEMBER = False

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)
    threading.Thread(target=watch, name="fedevo-offload-parent", daemon=True).start()
    for name in ("dp_accounting", "dp_accounting.pld.pld_privacy_accountant",
                 "dp_accounting.rdp.rdp_privacy_accountant", "fedevo.privacy.accounting"):
        importlib.import_module(name)


def _new_pool(n: int):
    """fedevo's own loky executor of n workers (not loky's process-wide reusable one, which a user's joblib code may
    hold with other settings); idle workers end after 5 minutes and start again on the next batch's warm-up."""
    try:
        from joblib.externals.loky import ProcessPoolExecutor
        return ProcessPoolExecutor(max_workers=n, timeout=300, initializer=_init_worker,
                                   initargs=(os.getpid(),))
    except Exception as e:  # noqa: BLE001 - no worker processes here: inline
        _LOG.info("accountant processes unavailable (%s): computed inline", e)
        return None


@contextlib.contextmanager
def in_processes(n: int):
    """Inside, `@offloadable` calls from every thread run in a pool of n worker processes (n <= 1: inline). The
    workers start at once (they import the accountant while the caller does other work). The pool is kept for the
    next batch of at most n (a smaller batch leaves some workers idle rather than starting a pool of its own)."""
    global _POOL, _SIZE, _USERS
    if n <= 1:
        yield
        return
    with _LOCK:
        if _USERS == 0 and (_POOL is None or _SIZE < n):
            old, _POOL, _SIZE = _POOL, _new_pool(n), n
            if old is not None:
                old.shutdown(wait=False)
        _USERS += 1
        pool = _POOL
    if pool is not None:
        try:
            for _ in range(n):
                pool.submit(_ready)
        except Exception:  # noqa: BLE001 - a broken or shut-down executor: inline
            _reset(pool)
    try:
        yield
    finally:
        with _LOCK:
            _USERS -= 1


def _reset(pool) -> None:
    global _POOL
    with _LOCK:
        if _POOL is pool:
            _POOL = None


def _active():
    return _POOL if _USERS > 0 else None


def offloadable(fn):
    """Mark a pure module-level function whose calls may run in `in_processes`'s pool (same arguments, same
    result; an exception it raises there is raised here). Its results are remembered (`MEMO_SIZE` calls, the
    latest used kept): a call with the same arguments (same values and types) returns the same number without
    computing it again, and a call while the same one is being computed in another thread waits for it instead of
    computing it twice. Exceptions are not remembered: the next call tries again."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        key = _key(fn, args, kwargs) if _REMEMBER else None
        if key is None:
            return _dispatch(fn, call, args, kwargs)
        with _MEMO_LOCK:
            pending = _MEMO.get(key)
            mine = pending is None
            if mine:
                pending = _MEMO[key] = Future()
                while len(_MEMO) > MEMO_SIZE:
                    _MEMO.popitem(last=False)
            else:
                _MEMO.move_to_end(key)
        if not mine:
            try:
                return pending.result()
            except Exception:
                raise
            except BaseException:  # the computing thread was interrupted (not the function's error): compute here
                return _dispatch(fn, call, args, kwargs)
        try:
            value = _dispatch(fn, call, args, kwargs)
        except BaseException as e:
            with _MEMO_LOCK:
                if _MEMO.get(key) is pending:
                    del _MEMO[key]
            pending.set_exception(e)
            raise
        pending.set_result(value)
        return value
    return call


#: how many calls of the offloadable functions are remembered (a generation's ε, a calibration's bisection)
MEMO_SIZE = 4096
_MEMO: OrderedDict = OrderedDict()  # key -> Future of the value
_REMEMBER = True  # False in the pool's workers: the caller remembers (and `forget` clears all there is)
_MEMO_LOCK = threading.Lock()


def _key(fn, args, kwargs):
    """The memo's key of a call: the function, each argument's type and value; None where one is unhashable."""
    key = (fn.__module__, fn.__qualname__, tuple((type(a), a) for a in args),
           tuple(sorted((k, type(v), v) for k, v in kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class _NotAhead(BaseException):
    """A prefetched call found no pool: it is not computed ahead (a thread waiting for it computes it itself).
    Not an Exception: the memo's waiters tell it from the function's own errors."""


_AHEAD = threading.local()  # .on: this thread runs `prefetch`'s calls


def _dispatch(fn, call, args, kwargs):
    """fn(*args, **kwargs), in the pool when one is active (there through `call`, the decorated function: the
    workers find it by name), else inline — except in a prefetching thread, where pure-Python work beside the
    caller's (a batch's launches: benchmarks/gil_convoy.py) is what prefetching must not add: _NotAhead."""
    pool = _active()
    if pool is None:
        return _inline(fn, args, kwargs)
    try:
        future = pool.submit(call, *args, **kwargs)
    except (BrokenProcessPool, RuntimeError):  # the pool broke or shut down: inline
        _reset(pool)
        return _inline(fn, args, kwargs)
    try:
        return future.result()
    except BrokenProcessPool:
        _reset(pool)
        return _inline(fn, args, kwargs)


def _inline(fn, args, kwargs):
    if getattr(_AHEAD, "on", False):
        raise _NotAhead()
    return fn(*args, **kwargs)


def forget() -> None:
    """Clear the remembered results (tests; a results cache is never stale: the functions are pure)."""
    with _MEMO_LOCK:
        _MEMO.clear()


def prefetch(calls) -> "Prefetch":
    """Start each zero-argument callable of `calls` in a background thread when a pool is active (their offloadable
    calls then compute in the workers, and are remembered, while the caller does other work: a batched generation's
    planned ε while it trains); without a pool nothing starts, and a pool that breaks meanwhile computes nothing
    more ahead, so that a Python-bound accountant never competes for the GIL with the caller. What a call raises is
    dropped: the later call that needs its value raises it (or computes it, where it was not computed ahead).
    Use as a context manager (leaving it does not wait for the calls)."""
    calls = list(calls)
    pool = _active()
    return Prefetch(calls if pool is not None else [], min(len(calls), _SIZE or 1))


class Prefetch:
    """Background calls started by `prefetch`; `close()` (or leaving the `with`) cancels those not yet started."""

    def __init__(self, calls, threads: int):
        self._threads = None
        if calls:
            self._threads = ThreadPoolExecutor(max(1, threads), thread_name_prefix="fedevo-prefetch")
            for c in calls:
                self._threads.submit(_quietly, c)

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _quietly(call) -> None:
    _AHEAD.on = True
    try:
        call()
    except (Exception, _NotAhead):  # noqa: BLE001 - the call that needs the value raises it (not remembered)
        pass
    finally:
        _AHEAD.on = False


__all__ = ["Prefetch", "forget", "in_processes", "offloadable", "prefetch", "processes"]
