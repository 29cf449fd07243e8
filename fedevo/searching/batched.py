"""A generation's evaluations in batches: one task per batch instead of one per evaluation (issue #37).

`--batch-generation` (``batch_generation=True``): the search hands the runner's tasks to :class:`BatchedRunner`,
which keeps the runner's contract (``run(tasks, on_done, tick)``: every evaluation reported, hence logged to
evaluations.csv and checkpointed, as it is today) and evaluates the batchable ones a batch at a time through
:func:`fedevo.evaluation.evaluate_population` (fl/population.py: the individuals' round loops in lockstep, their
local training stacked on one device). Each result equals the evaluation alone on that device up to fp32 rounding
(docs/engine.md), so a batched search logs the same ids, seeds and genes as an unbatched one, its values within
docs/engine.md's tolerance.

* **Default** (``None``, "auto"): on where the evaluations would train on a GPU — Ray tasks that reserve one
  (``--gpus-per-task`` > 0), or in this process when the problem's device resolves to CUDA — and the problem does
  not set ``device = "cpu"``; off on the CPU, where the CPU engine (native kernels, a chunk per core) is the fast
  path. Never for an evaluator other than fedevo's simulator, nor for a multi-fidelity search (asked for
  explicitly: one line, :func:`check`).
* **Batches**: the generation's batchable tasks in id order, cut into equal consecutive batches: of at most
  ``--batch-size-per-gpu`` N each, else one per slot of the runner (Ray: as many as its GPUs, or CPUs, run at
  once; in-process: one). A batch is one Ray task reserving ``--gpus-per-task`` GPUs (and ``--cpus-per-task``
  CPUs); Ray spreads the batches over the cluster's GPUs and nodes, queueing the ones that do not fit.
* **Alone**: what the stacked program cannot train (:func:`fedevo.fl.population.batchable_config`: user
  models, an MLP in bf16) goes to the runner one task each, as today; what only the
  evaluation's preparation shows is evaluated alone inside its batch, after the stacked members.
* **Containment**: a batch that raises is evaluated again one evaluation at a time in the same task, so only the
  evaluation at fault fails (with its own traceback) and the search goes on; an evaluation the batch ran alone
  that raises (its preparation failed) is run again on its own for its message, the batch's other results kept; missing data or no GPU stops the
  search (resumable) as it does unbatched. ``--eval-timeout S`` limits a batch of n evaluations to n·S seconds as
  a whole (it then runs in a child process, killed past that; every evaluation of a batch killed fails).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import DataNotFoundError, FedevoError, SetupError, arg
from .evaluator import SIMULATOR, Evaluator
from .runner import OnDone, Task, deliver, failed_result, output_first, run_one


def check(runtime, evaluator: Evaluator, *, multi_fidelity: bool) -> None:
    """Refuse, in one line, a batched generation asked for where there is nothing it could batch."""
    n = runtime.batch_size_per_gpu
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise FedevoError(f"{arg('batch_size_per_gpu')} must be an integer >= 1, got {n!r}")
    if not runtime.batch_generation:
        return
    batch = arg("batch_generation", True)
    if evaluator is not SIMULATOR:
        raise FedevoError(f"{batch} batches fedevo's simulator only; the evaluator {evaluator!r} evaluates one "
                          f"individual at a time: drop {batch}")
    if multi_fidelity:
        raise FedevoError(f"{batch} does not batch a multi-fidelity search's rungs (they continue saved trainings "
                          f"one by one): drop {batch} or {arg('fidelity')}")


def wanted(runtime, evaluator: Evaluator, problem, runner, *, multi_fidelity: bool) -> bool:
    """Whether the search batches its generations: the explicit choice (checked: `check`), else where the
    evaluations would train on a GPU (the module's docstring)."""
    if runtime.batch_generation is not None:
        return bool(runtime.batch_generation)
    if evaluator is not SIMULATOR or multi_fidelity:
        return False
    return on_gpu(problem, runner)


def on_gpu(problem, runner) -> bool:
    """Whether the search's evaluations train on a GPU: Ray tasks that reserve one (--gpus-per-task > 0), or in this
    process where the problem's device resolves to CUDA; never where the problem sets device = "cpu"."""
    setting = str(getattr(problem, "fixed", {}).get("device", "auto"))
    if setting == "cpu":
        return False
    if runner.kind == "ray":
        return runner.gpus_per_task > 0
    from .. import hardware

    try:
        return hardware.device_choice(setting)[0].type == "cuda"
    except FedevoError:  # 'cuda' without a GPU: each evaluation says so (and stops the search)
        return False


def on_the_cpu() -> str:
    """Said once where batch_generation is asked for and the evaluations train on the CPU (the argument spelt as
    its caller spells it: errors.arg)."""
    return (f"fedevo: {arg('batch_generation', True)} on the CPU: each batch trains as one single-threaded program, "
            "measured 0.4-1.3x the speed of one evaluation at a time on the CPU engine (benchmarks/README.md); it is "
            f"meant for GPUs ({arg('batch_generation', False)}, the default here, is the fast path)")


def split(tasks: Sequence[Task], batches: int) -> list[list[Task]]:
    """`tasks` in id order as `batches` consecutive batches of sizes differing by at most one."""
    tasks = sorted(tasks, key=lambda t: t.id)
    batches = max(1, min(batches, len(tasks)))
    size, extra = divmod(len(tasks), batches)
    out, k = [], 0
    for b in range(batches):
        n = size + (b < extra)
        out.append(tasks[k:k + n])
        k += n
    return [b for b in out if b]


def run_batch(evaluator: Evaluator, problem, items: Sequence[tuple[Mapping[str, Any], int]],
              eval_kwargs: Mapping[str, Any], timeout: Optional[float] = None) -> list[tuple[str, Any, str]]:
    """Evaluate (params, seed) items as one batched program: one (kind, value, output) per item, as
    `runner.run_one` gives for one. timeout: seconds per evaluation; the batch may take len(items) times that
    (in a child process, killed past it: then every item failed)."""
    if timeout is None:
        return _batch_here(evaluator, problem, items, eval_kwargs)
    from .containment import ChildDied, Timeout, fd1_file, in_child_fd1
    from .evaluator import warm_up

    t0 = time.perf_counter()
    limit = timeout * len(items)
    with fd1_file() as below:  # what the batch writes below Python (C, os.write), as run_one's: to user.log
        try:
            got = in_child_fd1(_batch_here, (evaluator, problem, [(dict(p), s) for p, s in items], dict(eval_kwargs)),
                               below.path, limit, warm_up(evaluator, problem, items[0][0], eval_kwargs))
        except (Timeout, ChildDied) as e:
            msg = f"{e} (a batch of {len(items)} evaluations: {timeout:g} s each, {limit:g} s together)"
            got = [("ok", failed_result(msg, time.perf_counter() - t0), "")] * len(items)
    return output_first(got, below.text)  # with the batch's first evaluation, as _batch_here puts its prints


def _batch_here(evaluator: Evaluator, problem, items, eval_kwargs) -> list[tuple[str, Any, str]]:
    from ..fl.population import evaluate_population
    from .containment import captured_stdout, evaluation_output, out_of_range

    with captured_stdout() as out, evaluation_output():
        try:
            results = evaluate_population(problem, [p for p, _ in items], [s for _, s in items], contain=True,
                                          rounds=eval_kwargs.get("rounds"), data_dir=eval_kwargs.get("data_dir"))
        except (DataNotFoundError, SetupError) as e:
            return [("abort", str(e), "")] * len(items)
        except Exception:  # noqa: BLE001 - one evaluation at a time: only the one at fault fails
            results = None
    if results is None:
        return [run_one(evaluator, problem, p, s, eval_kwargs) for p, s in items]
    abort = next((r for r in results if isinstance(r, (DataNotFoundError, SetupError))), None)
    if abort is not None:
        return [("abort", str(abort), "")] * len(items)
    got = []
    for (p, s), r in zip(items, results):
        if isinstance(r, BaseException):  # an evaluation alone that raised: again, as unbatched (its own message)
            got.append(run_one(evaluator, problem, p, s, eval_kwargs))
            continue
        bad = out_of_range(r) if r.status == "ok" else None
        got.append(("ok", failed_result(bad, r.wall_s) if bad else r, ""))
    if got:  # what the batch printed (nothing, from fedevo's simulator) goes with its first evaluation
        got[0] = (got[0][0], got[0][1], out.getvalue())
    return got


def _ray_batch(problem, evaluator, items, eval_kwargs, threads, gpus=0.0, timeout=None, code=None):
    from .runner import _ray_task

    return _ray_task(problem, evaluator, items, None, eval_kwargs, threads, gpus, timeout, run=_run_items, code=code)


def _run_items(evaluator, problem, items, _seed, eval_kwargs, timeout):
    return run_batch(evaluator, problem, items, eval_kwargs, timeout)


class BatchedRunner:
    """A runner (serial or Ray, `inner`) whose batchable tasks go a batch at a time (the module's docstring)."""

    def __init__(self, inner, problem, eval_kwargs: Mapping[str, Any], *, batch_size: Optional[int] = None):
        self.inner, self.problem, self.eval_kwargs = inner, problem, dict(eval_kwargs)
        self.batch_size = batch_size
        self.kind = inner.kind
        self.stats = inner.stats
        per = (f"at most {batch_size} a batch" if batch_size else "one batch per slot" if inner.kind == "ray"
               else "one batch a generation")
        self.describe = f"{inner.describe}; generations in batches ({per}, fl/population.py)"
        self._batch_fn = None
        if inner.kind == "ray":
            self._batch_fn = inner._ray.remote(_ray_batch).options(**inner.options)

    def batches(self, tasks: Sequence[Task]) -> tuple[list[list[Task]], list[Task]]:
        """(the batches, the tasks evaluated alone)."""
        from ..fl.population import batchable_config

        batched, alone = [], []
        for t in tasks:
            try:
                ok = not t.rung_kwargs and batchable_config(self.problem.sim_config(t.params, **self.eval_kwargs))
            except FedevoError:  # genes that build no configuration: their evaluation fails alone, as today
                ok = False
            (batched if ok else alone).append(t)
        if not batched:
            return [], alone
        if self.batch_size:
            n = math.ceil(len(batched) / self.batch_size)
        else:  # Ray: as many as run at once (its GPUs, else its CPUs); in this process: one
            n = (getattr(self.inner, "slots", None) or 1) if self.kind == "ray" else 1
        return split(batched, n), alone

    def run(self, tasks: Sequence[Task], on_done: OnDone, tick: Optional[Callable[[], None]] = None) -> None:
        batches, alone = self.batches(tasks)
        inner = self.inner
        if self.kind == "ray":
            jobs = {self._batch_fn.remote(inner._problem_ref, inner._evaluator, [(dict(t.params), t.seed) for t in b],
                                          self.eval_kwargs, inner.threads, inner.gpus_per_task, inner.timeout,
                                          inner.code): b
                    for b in batches}
            jobs.update({inner.submit(t): [t] for t in alone})
            inner.drain(jobs, on_done, tick)
            return
        from .containment import watch_interrupts

        with watch_interrupts():
            for b in batches:
                self.stats.running = len(b)
                if tick:
                    tick()
                label = f"batch of evaluations {b[0].id}..{b[-1].id} (generation {b[0].generation})"
                with inner.evaluating(label):
                    got = run_batch(inner.evaluator, self.problem, [(t.params, t.seed) for t in b],
                                    self.eval_kwargs, inner.timeout)
                self.stats.running = 0
                for t, reply in zip(b, got):
                    deliver(t, reply, inner.user_log, self.stats, on_done)
        inner.run(alone, on_done, tick)

    def close(self) -> None:
        self.inner.close()


def batched(runner, runtime, evaluator: Evaluator, problem, eval_kwargs: Mapping[str, Any], *,
            multi_fidelity: bool):
    """`runner` itself, or a BatchedRunner around it where the search batches its generations (`wanted`)."""
    if not wanted(runtime, evaluator, problem, runner, multi_fidelity=multi_fidelity):
        return runner
    if runtime.batch_generation and not on_gpu(problem, runner):  # asked for (auto batches on a GPU only)
        print(on_the_cpu(), file=sys.stderr)
    return BatchedRunner(runner, problem, eval_kwargs, batch_size=runtime.batch_size_per_gpu)


__all__ = ["BatchedRunner", "batched", "check", "on_gpu", "on_the_cpu", "run_batch", "split", "wanted"]
