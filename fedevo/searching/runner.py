"""Running a batch of evaluations: in-process (serial) or on Ray, reporting each one as it finishes.

A *runner* gets a list of :class:`Task` (individual id, genes, seed) and calls ``on_done(task, result)`` for
each task the moment its result is known (``ray.wait``), in completion order. The evaluation function is
injected: any callable ``evaluator(problem, params, *, seed, rounds, data_dir) -> EvaluationResult``
(:mod:`fedevo.searching.evaluator`; by default fedevo's simulator).

Faults: an evaluation that raises becomes a ``failed`` result carrying its traceback (the search goes on);
a Ray worker that dies mid-task is retried by Ray (``max_retries``) and, if it keeps dying, recorded as
``failed``. A :class:`~fedevo.errors.DataNotFoundError` (or a :class:`~fedevo.errors.SetupError`: device
'cuda' where torch sees no GPU, a FEDEVO_* choice, on/off or count with a value it does not take) is a setup
problem, not an individual's fault: it stops the search (resumable once the data, the GPU or the variable is
right).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from ..envvars import env_set
from ..errors import DataNotFoundError, FedevoError, SetupError, arg
from ..hardware import cores, gpu_share
from ..result import EvaluationResult, NotAResult, measured
from .evaluator import Evaluator

OnDone = Callable[["Task", EvaluationResult], None]


@dataclass(frozen=True)
class Task:
    id: int  # individual id: position in the run's sequence of evaluations (0, 1, ...)
    generation: int  # 1 = initial population
    index: int  # position within its generation's batch
    params: Mapping[str, Any]
    seed: int
    cost: float = 1.0  # relative compute estimate (the evaluator's `cost`); Ray submits the most expensive first
    # multi-fidelity rungs (fedevo.searching.rungs): the rung, its fraction of the rounds, the rounds to train up to
    # (None: all) and the saved training state to continue from (bytes: they travel with the task to any node)
    rung: int = 0
    fidelity: float = 1.0
    until: Optional[int] = None
    state: Optional[bytes] = field(default=None, repr=False, compare=False)

    @property
    def rung_kwargs(self) -> dict[str, Any]:
        """The evaluator's keyword arguments of this task's rung (none for a full-fidelity, from-scratch one)."""
        out: dict[str, Any] = {}
        if self.until is not None:
            out["until"] = self.until
        if self.state is not None:
            out["resume_from"] = self.state
        return out


def longest_first(tasks: Sequence[Task]) -> list[Task]:
    """LPT order: with a generation barrier, starting the longest evaluations first leaves the fewest workers
    idle at the end of the batch (cost estimates, ties in id order)."""
    return sorted(tasks, key=lambda t: (-t.cost, t.id))


@dataclass
class RunnerStats:
    running: int = 0  # evaluations being computed (at most the number of slots)
    queued: int = 0  # submitted, waiting for a slot
    done: int = 0


def failed_result(message: str, wall_s: float = 0.0) -> EvaluationResult:
    nan = math.nan
    return EvaluationResult(error=nan, comm=nan, eps=nan, eps_paper=nan, accuracy_global=nan, omega=0,
                            status="failed", wall_s=wall_s, message=message)


class _Abort(Exception):
    """Raised by a runner when an evaluation hit a setup error that every evaluation would hit."""


def deliver(t: Task, reply: tuple, user_log, stats, on_done: OnDone) -> None:
    """One evaluation's reply (kind, value, what it printed) handed on, as every runner does: its output to the
    run's user.log, an "abort" raised as _Abort (the search stops, resumable), else counted done and given to
    on_done."""
    kind, value, out = reply
    user_log.write(task_label(t), out)
    if kind == "abort":
        raise _Abort(value)
    stats.done += 1
    on_done(t, value)


def run_one(evaluator: Evaluator, problem, params: Mapping[str, Any], seed: int,
            eval_kwargs: Mapping[str, Any], timeout: Optional[float] = None,
            code: Optional[Mapping[str, str]] = None) -> tuple[str, Any, str]:
    """Call the evaluator, contained (fedevo.searching.containment), never raising for an evaluation's own failure.

    Returns ("ok", EvaluationResult, output) -- also for status failed/diverged -- or ("abort", message, output)
    when the search itself cannot go on (data missing, no GPU for device = "cuda"); output: what the evaluation
    printed. timeout: seconds it may take (it then runs in a child process, killed when it overruns). code: path →
    SHA-256 of the run's code files as run.json records them, which the child's imports are held to (`_in_child`).
    """
    if timeout is None:
        return _run_here(evaluator, problem, params, seed, eval_kwargs)
    from .containment import ChildDied, Timeout, fd1_file, in_child_fd1
    from .evaluator import warm_up

    t0 = time.perf_counter()
    with fd1_file() as below:  # what the evaluation writes below Python, read also when it is stopped
        try:
            kind, value, out = in_child_fd1(_in_child, (evaluator, problem, dict(params), seed, dict(eval_kwargs),
                                                        dict(code or {})),
                                            below.path, timeout, warm_up(evaluator, problem, params, eval_kwargs))
        except (Timeout, ChildDied) as e:
            kind, value, out = "ok", failed_result(str(e), time.perf_counter() - t0), ""
    # (put before what the evaluation printed from Python, as in-process, where fd 1 is user.log itself)
    return kind, value, below.text + out


def _in_child(evaluator: Evaluator, problem, params: Mapping[str, Any], seed: int, eval_kwargs: Mapping[str, Any],
              code: Mapping[str, str]) -> tuple[str, Any, str]:
    """`_run_here` in the time limit's child process, then its imports held to the text run.json records (`code`):
    a child started after a code file was saved while the search ran (the one before was killed at the limit, or
    died) imports the new text, and its rows would be logged under the old record. The search stops then,
    resumable, its result not logged."""
    kind, value, out = _run_here(evaluator, problem, params, seed, eval_kwargs)
    path = _held_otherwise(code)
    if path is not None:
        return ("abort", f"{path} changed while the search ran, and the process that runs evaluations under the "
                "time limit, started since, imported the new text: the search stops rather than log its rows "
                "under the text run.json records; put the file's text back and resume, or start a new search", out)
    return kind, value, out


def _held_otherwise(code: Optional[Mapping[str, str]]) -> Optional[str]:
    """The first of the run's code files (`code`: path → SHA-256, as run.json records them) that this process holds
    with another text (plugins.held_sha; one it has not imported counts as held rightly), or None."""
    from ..plugins import held_sha

    return next((path for path, sha in (code or {}).items() if held_sha(path) not in (None, sha)), None)


def _run_here(evaluator: Evaluator, problem, params: Mapping[str, Any], seed: int,
              eval_kwargs: Mapping[str, Any]) -> tuple[str, Any, str]:
    from .containment import UserExit, call_user, captured_stdout, evaluation_output, out_of_range
    from .evaluator import SimulatorEvaluator

    t0 = time.perf_counter()
    # the user's evaluator: its sys.stderr to user.log as well (fedevo's simulator: its warnings stay on stderr)
    with captured_stdout(stderr=not isinstance(evaluator, SimulatorEvaluator)) as out, evaluation_output():
        try:
            raw = call_user(evaluator, problem, dict(params), seed=seed, **eval_kwargs)
            r = measured(raw, time.perf_counter() - t0, eval_kwargs.get("until") or eval_kwargs.get("rounds") or 0)
            bad = out_of_range(r) if r.status == "ok" else None
            if bad:
                r = failed_result(bad, r.wall_s)
            kind, value = "ok", r
        except (DataNotFoundError, SetupError) as e:
            kind, value = "abort", str(e)
        except (UserExit, NotAResult) as e:  # NotAResult: what was returned is wrong, not where: no traceback
            kind, value = "ok", failed_result(str(e), time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001 - any failure of one individual is recorded, the search goes on
            tb = traceback.format_exc()
            kind, value = "ok", failed_result(f"{type(e).__name__}: {e}\n{tb}", time.perf_counter() - t0)
    return kind, value, out.getvalue()


# ---------------------------------------------------------------------------------------------- serial
class SerialRunner:
    """Evaluates in this process, one at a time (``--workers 0``): for debugging and tests."""

    kind = "serial"

    def __init__(self, evaluator: Evaluator, problem, eval_kwargs: Optional[Mapping[str, Any]] = None, *,
                 timeout: Optional[float] = None, log_dir: Optional[os.PathLike] = None,
                 code: Optional[Mapping[str, str]] = None):
        from .containment import UserLog

        self.evaluator, self.problem, self.eval_kwargs = evaluator, problem, dict(eval_kwargs or {})
        self.timeout = timeout
        self.code = dict(code or {})  # the run's files as run.json records them (run_one's child is held to them)
        self.user_log, self.log_dir = UserLog(log_dir), log_dir
        self.stats = RunnerStats()
        self.describe = "in-process (serial)" + (f", each evaluation in a child process (limit {timeout:g} s)"
                                                 if timeout is not None else "")

    @contextlib.contextmanager
    def evaluating(self, label: str):
        """Around an evaluation (or a batch's) run from this process: its output, below Python (C, os.write) too, to
        user.log under `label`; RUN/.evaluating naming it should this process die in it (not with a time limit:
        the evaluation runs in a child process then, whose death ends it alone)."""
        from .inflight import in_flight

        with in_flight(self.log_dir if self.timeout is None else None, label), self.user_log.evaluation(label):
            yield

    def run(self, tasks: Sequence[Task], on_done: OnDone, tick: Optional[Callable[[], None]] = None) -> None:
        from .containment import watch_interrupts

        with watch_interrupts():  # a KeyboardInterrupt from the user's code is not Ctrl-C
            for t in tasks:
                self.stats.running = 1
                if tick:
                    tick()
                with self.evaluating(task_label(t)):
                    kind, value, out = run_one(self.evaluator, self.problem, t.params, t.seed,
                                               {**self.eval_kwargs, **t.rung_kwargs}, self.timeout, self.code)
                self.stats.running = 0
                deliver(t, (kind, value, out), self.user_log, self.stats, on_done)

    def close(self) -> None:
        if self.timeout is not None:
            from .containment import close_child

            close_child()


def task_label(t: Task) -> str:
    """How user.log names an evaluation."""
    return f"evaluation {t.id} (generation {t.generation}{f', rung {t.rung}' if t.rung else ''}, seed {t.seed})"


# ---------------------------------------------------------------------------------------------- ray
def _set_threads(n: int) -> None:
    """Torch intra-op threads for this worker (and BLAS/OpenMP for whatever is imported later)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(n)
    torch = sys.modules.get("torch")  # not imported yet: torch reads OMP_NUM_THREADS when it is
    if torch is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)


def _ray_task(problem, evaluator, params, seed, eval_kwargs, threads, gpus=0.0, timeout=None, run=None, code=None):
    """run_one on a Ray worker (`run`: another function of these arguments, e.g. a batch's, batched.py; `code`: path
    → SHA-256 of the run's code files as run.json records them, `_stale_code`)."""
    from .containment import fd1_captured

    run = run or run_one
    _set_threads(threads)
    stale = _stale_code(code)
    if stale:  # a worker of a Ray session the caller keeps holds the problem's code as it first imported it
        reply = ("abort", stale, "")
        return reply if run is run_one else [reply] * len(params)  # (a batch's: one reply per item, batched.py)
    with _gpus_seen(gpus), fd1_captured() as below:  # output below Python: to user.log, not Ray's worker log
        got = (run_one(evaluator, problem, params, seed, eval_kwargs, timeout, code) if run is run_one
               else run(evaluator, problem, params, seed, eval_kwargs, timeout))
    if isinstance(got, list):  # a batch's replies: its output goes with its first evaluation (batched.py)
        return output_first(got, below.text)
    return output_first([got], below.text)[0]


def _stale_code(code: Optional[Mapping[str, str]]) -> Optional[str]:
    """The one line saying that this Ray worker runs one of the run's code files (`code`: path → SHA-256, as run.json
    records them) with another text than the run records, or None: a worker of a Ray session the caller keeps
    (ray.init before fedevo) outlives a search, and holds a file as it imported it for an earlier one (a module
    beside the model file edited and reloaded in the notebook since, which the search's process takes). Its search
    stops, resumable, rather than mix two versions. A worker that imported the file as recorded goes on, whatever
    the file holds now (saved while the search runs: the search runs the code run.json records)."""
    path = _held_otherwise(code)
    if path is None:
        return None
    return (f"{path} changed since a worker of the Ray session imported it: it would run the old code beside the text "
            "the run records; shut that Ray session down (ray.shutdown()) so that its workers import it anew, and go "
            "on (where the session is fedevo's own, the file was saved while the search ran and a worker started "
            "since imported it: put its text back and resume)")


def output_first(replies: list, text: str) -> list:
    """(kind, value, output) replies with `text` (what was written below Python meanwhile) put before the first
    one's output: a batch's goes with its first evaluation, as what it printed from Python does."""
    if not text or not replies:
        return replies
    kind, value, out = replies[0]
    return [(kind, value, text + out), *replies[1:]]


def _gpus_seen(gpus: float):
    """What a task sees of the GPUs, set for its run and put back after. No GPU reserved: none
    (CUDA_VISIBLE_DEVICES=""; Ray used to do this for such tasks, Ray 2.60 (ray-project/ray#54868) leaves the
    variable alone, so the task would see every GPU of its node and `device = "auto"` would train on one that other
    tasks were given; set before torch first asks CUDA, in `hardware.device`). Otherwise Ray set
    CUDA_VISIBLE_DEVICES to the task's GPUs and `device = "auto"` trains there; with part of one (--gpus-per-task
    0.25) the task plans for that share of its memory, the GPU's other tasks taking the rest (`hardware.gpu_share`:
    an MLP bucket's members, a CNN batch's groups)."""
    if not gpus:
        return env_set("CUDA_VISIBLE_DEVICES", "")
    if gpus < 1:
        return gpu_share(gpus)
    return contextlib.nullcontext()


def _module_root(module_name: str) -> Optional[str]:
    """The sys.path entry a worker needs to import `module_name` (None if it is not a plain file)."""
    mod = sys.modules.get(module_name)
    f = getattr(mod, "__file__", None)
    if not f:
        return None
    root = os.path.dirname(os.path.abspath(f))
    if os.path.basename(f) == "__init__.py":
        root = os.path.dirname(root)
    for _ in range(module_name.count(".")):
        root = os.path.dirname(root)
    return root


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _lost_cluster_errors(ray) -> tuple:
    """Ray's errors that mean the cluster (this process's node, its object store, the node a task ran on) went
    away, not that an evaluation failed: such a task is not logged as failed (a `ray stop` mid-search wrote its
    running evaluations as failed, and the resumed search then differed from an uninterrupted one: the 2026-11-27
    audit); the search stops resumable instead."""
    e = ray.exceptions
    return (e.LocalRayletDiedError, e.NodeDiedError, e.ObjectLostError, e.OutOfDiskError)


def _plain(e: BaseException) -> str:
    """An exception's text without terminal colour codes (Ray's task errors carry them)."""
    from .ray_session import strip_ansi

    return strip_ansi(str(e))


def _first_line(e: BaseException) -> str:
    return next((ln.strip() for ln in _plain(e).splitlines() if ln.strip()), "no message")


def _check_reachable(address: str, timeout: float) -> None:
    if address == "auto":
        return
    _, sep, port = address.rpartition(":")
    if address.startswith("ray://"):
        raise FedevoError(f"{arg('ray_address', repr(address))}: Ray Client addresses (ray://) are not supported; "
                          "pass the cluster's GCS address HOST:PORT (as printed by `ray start --head`)")
    if not sep or not port.isdigit():
        raise FedevoError(f"{arg('ray_address', repr(address))} must be HOST:PORT (as printed by `ray start --head`) "
                          "or 'auto'")
    from .ray_session import connect

    try:
        connect(address, timeout)
    except OSError as e:
        raise FedevoError(f"cannot reach a Ray cluster at {address} ({e.strerror or e}); "
                          f"start one with `ray start --head --port {port}` or drop {arg('ray_address')} "
                          "to use a local Ray") from None


class RayRunner:
    """Evaluates on Ray: a local instance started here (``workers`` concurrent tasks) or a cluster.

    Local: ``ray.init(address="local", num_cpus=workers * cpus_per_task)`` -- always a fresh instance, never
    an unrelated cluster found on the machine; each task sets torch threads to max(1, cores // workers).
    Cluster (``address``): the cluster's resources decide the concurrency; torch threads per task =
    max(1, cpus_per_task). fedevo (and a custom evaluator's module) must be importable on the cluster's nodes;
    the driver's source directories are added to the workers' PYTHONPATH, which covers a one-machine cluster.
    """

    kind = "ray"
    _head = None  # a HeadWatch of the cluster fedevo connected to (--ray-address HOST:PORT)

    def __init__(self, evaluator: Evaluator, problem, eval_kwargs: Optional[Mapping[str, Any]] = None, *,
                 workers: Optional[int] = None, address: Optional[str] = None, cpus_per_task: float = 1.0,
                 gpus_per_task: float = 0.0, max_retries: int = 2, connect_timeout: float = 5.0,
                 log_dir: Optional[os.PathLike] = None, timeout: Optional[float] = None,
                 known_digests: Optional[Mapping[str, str]] = None):
        import ray

        from .containment import UserLog

        from .ray_session import (RAY_LOG, HeadWatch, RayLog, check_schedulable, keep_signal_handlers, local_temp_root,
                                  node_resources)

        if cpus_per_task <= 0:
            raise FedevoError(f"{arg('cpus_per_task')} must be > 0, got {cpus_per_task}")
        if gpus_per_task < 0:
            raise FedevoError(f"{arg('gpus_per_task')} must be >= 0, got {gpus_per_task}")
        from ..plugins import ray_by_value

        ray_by_value()  # the user's file modules travel by value with Ray's own cloudpickle too
        self.stats = RunnerStats()
        self.timeout = timeout  # each task runs its evaluation in a child process of its worker, killed on overrun
        self.user_log = UserLog(log_dir)
        self._owns_ray = False
        self._temp_root: Optional[str] = None
        self._ray = ray
        self.log = RayLog(os.path.join(log_dir, RAY_LOG) if log_dir is not None else None)
        paths = list(dict.fromkeys(p for p in (_module_root("fedevo"), _module_root(evaluator.__module__)) if p))
        env_path = os.pathsep.join(paths + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
        # Ray's own messages go to the log file (RayLog), never to fedevo's stdout; workers' output stays in Ray's
        # session logs (log_to_driver=False)
        quiet = dict(log_to_driver=False, logging_level=logging.WARNING, configure_logging=True)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if ray.is_initialized():  # the caller manages Ray (Python API)
            self.describe = "existing Ray session"
            where = "the existing Ray session"
            threads = max(1, int(cpus_per_task))
        elif address:
            _check_reachable(address, connect_timeout)
            try:
                with self.log.capture(), keep_signal_handlers():
                    ray.init(address=address, **quiet, runtime_env={
                        "env_vars": {"PYTHONPATH": os.pathsep.join(paths + ["${PYTHONPATH}"])}})
            except Exception as e:  # noqa: BLE001 - ConnectionError, RuntimeError, TimeoutError...
                detail = _last_line(self.log.text)
                hint = ""
                if "Authentication" in detail or "auth" in str(e).lower():
                    hint = (" -- the cluster uses token authentication: set RAY_AUTH_MODE=token (the token is read "
                            "from RAY_AUTH_TOKEN or ~/.ray/auth_token)")
                raise FedevoError(f"cannot connect to the Ray cluster at {address}: {type(e).__name__}: "
                                  f"{_last_line(str(e))}" + (f" ({detail})" if detail else "") + hint) from None
            self._owns_ray = True
            self._head = HeadWatch(address) if address != "auto" else None
            self.describe = f"Ray cluster at {address}"
            where = f"the Ray cluster at {address}"
            threads = max(1, int(cpus_per_task))
        else:
            workers = workers or cores()
            self._temp_root = local_temp_root()  # removed by close(): no session folder left behind
            try:  # PYTHONPATH inherited by the raylet, hence by its workers
                with env_set("PYTHONPATH", env_path), self.log.capture(), keep_signal_handlers():
                    ray.init(address="local", num_cpus=workers * cpus_per_task, include_dashboard=False,
                             _temp_dir=self._temp_root, **quiet)
            except Exception as e:  # noqa: BLE001 - a broken Ray install, no room in /tmp, ...
                self.close()
                raise FedevoError(f"could not start a local Ray ({type(e).__name__}: {_last_line(str(e))}); "
                                  f"use {arg('workers', 0)} to evaluate in-process") from None
            except BaseException:  # Ctrl-C or SIGTERM while it started: what it started goes too
                self._owns_ray = True
                self.close()
                raise
            self._owns_ray = True
            threads = max(1, cores() // workers)
            where = f"the local Ray ({workers} worker{'s' if workers != 1 else ''})"
            self.describe = f"local Ray, {workers} worker{'s' if workers != 1 else ''} × {threads} torch thread{'s' if threads != 1 else ''}"
        self.log.attach()
        self.threads = threads
        try:  # a task no node can hold would wait forever: refuse it now
            nodes = node_resources(ray)
        except Exception:  # noqa: BLE001 - an old or unusual Ray: no check
            nodes = None
        if nodes is not None:
            try:
                check_schedulable(nodes, cpus_per_task, gpus_per_task, where)
            except FedevoError:
                self.close()
                raise
        if address:  # a cluster's nodes may run another install than this machine: another fedevo is refused
            from .inputs import files_read_by_path
            from .versions import check_nodes

            try:
                with self.log.capture():
                    note = check_nodes(ray, where, inputs=files_read_by_path(problem), known=known_digests)
            except FedevoError:
                self.close()
                raise
            if note:
                self.log.write(f"fedevo: note: {note}\n")
                print(f"fedevo: note: {note}", file=sys.stderr)
        try:
            cpus = ray.cluster_resources().get("CPU", 0)
            self.slots = max(1, int(cpus // cpus_per_task)) if cpus else None
        except Exception:  # noqa: BLE001 - only for the progress display
            self.slots = None
        if gpus_per_task:  # concurrency: also what the GPUs hold (--gpus-per-task 0.25: four tasks a GPU)
            try:
                gpus = ray.cluster_resources().get("GPU", 0)
                self.slots = min(self.slots or math.inf, max(1, int(gpus // gpus_per_task)))
            except Exception:  # noqa: BLE001 - only for the progress display
                pass
        self.gpus_per_task = gpus_per_task
        self.options = dict(num_cpus=cpus_per_task, num_gpus=gpus_per_task, max_retries=max_retries,
                            retry_exceptions=False)  # a task's resources (batched.py's batches take the same)
        self._fn = ray.remote(_ray_task).options(**self.options)
        self.code = dict(known_digests or {})  # the run's files as run.json records them (_stale_code)
        self._problem_ref = ray.put(problem)
        self._evaluator = evaluator
        self._eval_kwargs = dict(eval_kwargs or {})

    def run(self, tasks: Sequence[Task], on_done: OnDone, tick: Optional[Callable[[], None]] = None) -> None:
        self.drain({self.submit(t): [t] for t in longest_first(tasks)}, on_done, tick)

    def submit(self, t: Task):
        """One Ray task evaluating `t`; its ref."""
        return self._fn.remote(self._problem_ref, self._evaluator, dict(t.params), t.seed,
                               {**self._eval_kwargs, **t.rung_kwargs}, self.threads, self.gpus_per_task,
                               self.timeout, None, self.code)

    def drain(self, jobs: Mapping[Any, Sequence[Task]], on_done: OnDone,
              tick: Optional[Callable[[], None]] = None) -> None:
        """Wait for submitted jobs (ref -> the tasks it evaluates: one, or a batch's, whose value is then a list of
        one (kind, value, output) per task), reporting each task as its job finishes. When this stops (an abort,
        Ctrl-C, SIGTERM), the pending ones are cancelled on a Ray session the caller manages; a Ray fedevo started
        or connected to is left to close(), whose ray.shutdown ends them (see below)."""
        ray = self._ray
        pending = list(jobs)
        try:
            while pending:
                self.stats.running = min(len(pending), self.slots or len(pending))
                self.stats.queued = len(pending) - self.stats.running
                if tick:
                    tick()
                ready, pending = ray.wait(pending, num_returns=1, timeout=0.5)
                lost = self._head.lost() if self._head is not None and not ready else None
                if lost:  # Ray's driver would end this process in 60 s, without fedevo's line: stop now, resumable
                    raise _Abort(lost)
                for ref in ready:
                    tasks = jobs[ref]
                    try:
                        got = ray.get(ref)
                    except _lost_cluster_errors(ray) as e:  # not the evaluation's failure: the search stops, resumable
                        raise _Abort(f"the Ray cluster went away under the search ({type(e).__name__}: "
                                     f"{_first_line(e)})") from None
                    except ray.exceptions.RayError as e:  # worker died more than max_retries times, ...
                        got = [("ok", failed_result(f"{type(e).__name__}: {_plain(e)}"), "")] * len(tasks)
                    for t, reply in zip(tasks, got if isinstance(got, list) else [got]):
                        deliver(t, reply, self.user_log, self.stats, on_done)
            self.stats.running = self.stats.queued = 0
        except BaseException:
            # ray.cancel races with a task's reply in Ray's core: a task whose reply is being handled (on Ray's io
            # thread) when it is cancelled is failed by the cancel, then completed by the reply, and the check
            # "Tried to complete task that was not pending" ends this process with exit 1 (its message went to
            # close()'s capture of stderr, now the run's ray.log itself). A SIGTERM to a search of 2 local workers ended so
            # about 1 time in 5. A Ray fedevo owns is shut down by close() right after this (every caller closes
            # the runner on an error): the job and its tasks end with it, so nothing is cancelled there; the
            # caller's own Ray session goes on, and what this started on it must stop (the race remains, Ray's).
            if not self._owns_ray:
                for ref in pending:
                    try:
                        ray.cancel(ref, force=True)
                    except Exception:  # noqa: BLE001 - best effort
                        pass
            self.stats.running = 0
            raise

    def close(self) -> None:
        from .ray_session import remove_temp_root

        if self._owns_ray and self._ray.is_initialized():
            with self.log.capture():
                self._ray.shutdown()
        self._owns_ray = False
        self.log.detach()
        remove_temp_root(self._temp_root)  # the local Ray fedevo started: its session folders go with it
        self._temp_root = None


def make_runner(evaluator: Evaluator, problem, eval_kwargs: Mapping[str, Any], *, workers,
                address: Optional[str] = None, cpus_per_task: float = 1.0, gpus_per_task: float = 0.0,
                log_dir=None, timeout: Optional[float] = None, pop: Optional[int] = None,
                known_digests: Optional[Mapping[str, str]] = None):
    """workers == 0 (and no address): serial, in-process; otherwise Ray (its log: `log_dir`/ray.log; what user
    code prints: `log_dir`/user.log). timeout: seconds an evaluation may take (None: no limit). workers "auto" (or
    None): fedevo.searching.workers decides from the cores and the batch size `pop`, and says why on stderr.
    known_digests: path → SHA-256 of the problem's files already digested (run.json's `inputs`), which a
    cluster's check of its nodes (versions.check_nodes) then does not read again here."""
    from ..guards import check_workers
    from .workers import announce, decide

    workers, why = decide(workers, cores=cores(), pop=pop, address=address)
    announce(why)
    check_workers(workers)
    if workers == 0 and not address:
        return SerialRunner(evaluator, problem, eval_kwargs, timeout=timeout, log_dir=log_dir, code=known_digests)
    if not gpus_per_task and getattr(problem, "fixed", {}).get("device") == "cuda":
        raise FedevoError(f"problem {getattr(problem, 'name', '?')!r} sets device = \"cuda\", but its Ray tasks "
                          f"reserve no GPU and see none: pass {arg('gpus_per_task')} (e.g. 1, or 0.25 for four "
                          f"evaluations a GPU), or {arg('workers', 0)} to evaluate in this process")
    return RayRunner(evaluator, problem, eval_kwargs, workers=workers, address=address,
                     cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task, log_dir=log_dir, timeout=timeout,
                     known_digests=known_digests)
