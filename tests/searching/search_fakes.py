"""Cheap deterministic stand-ins for fedevo.evaluation.evaluate, importable by Ray workers and subprocesses
(as tests.searching.search_fakes, with the repository root on the path).

Each has the evaluator signature `(problem, params, *, seed, rounds=None, data_dir=None) -> EvaluationResult`.
Environment knobs (inherited by Ray workers started after they are set):
  FAKE_SLEEP=S       sleep a seed-dependent time in [0, S) (scrambles completion order)
  FAKE_CALL_LOG=F    append "<seed>" to F when an evaluation starts
  FAKE_KILL_MARKER=F fake_killer: the first call that finds no F creates it and SIGKILLs its own process
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from fedevo.result import EvaluationResult


def _unit(problem, params):
    """Each gene mapped to [0, 1]."""
    out = []
    for g in problem.genes:
        v = params[g.name]
        if g.type == "choice":
            out.append(g.choices.index(v) / max(1, len(g.choices) - 1))
        else:
            lo, hi = (math.log(g.low), math.log(g.high)) if g.log else (g.low, g.high)
            x = math.log(v) if g.log else v
            out.append(0.0 if hi == lo else (x - lo) / (hi - lo))
    return np.array(out)


def _start(seed):
    log = os.environ.get("FAKE_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{seed}\n")
    sleep = float(os.environ.get("FAKE_SLEEP", "0") or 0)
    if sleep:
        time.sleep(sleep * np.random.default_rng(seed).random())


def fake_evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    """Three conflicting objectives of the genes, plus a little seed noise."""
    _start(seed)
    u = _unit(problem, params)
    noise = np.random.default_rng(seed).random()
    n = len(u)
    size = u[: max(1, n // 3)].mean()  # "model size" genes
    privacy = u[-1]
    error = float(0.9 - 0.5 * size - 0.2 * u.mean() + 0.3 * privacy ** 2 + 0.01 * noise)
    comm = float(100.0 * (1.0 + 9.0 * size) * (0.1 + u[min(1, n - 1)]))
    eps = float(0.5 + 20.0 * (1.0 - privacy) ** 2 + u[n // 2])
    return EvaluationResult(error=error, comm=comm, eps=eps, eps_paper=2 * eps, accuracy_global=1 - error,
                            omega=int(comm), status="ok", wall_s=0.0, rounds=rounds or 1,
                            privacy={"mechanism": "fake"}, message="")


def fake_flaky(problem, params, *, seed, rounds=None, data_dir=None):
    """Like fake_evaluate, but some evaluations raise, some give NaN, some diverge."""
    r = fake_evaluate(problem, params, seed=seed, rounds=rounds)
    k = seed % 5
    if k == 0:
        raise ValueError(f"fake failure for seed {seed}\nsecond line")
    if k == 1:
        return EvaluationResult(error=math.nan, comm=r.comm, eps=math.inf, eps_paper=None, accuracy_global=math.nan,
                                omega=r.omega, status="diverged", message="fake divergence")
    if k == 2:
        return EvaluationResult(error=r.error, comm=r.comm, eps=None, eps_paper=None,
                                accuracy_global=r.accuracy_global, omega=r.omega, status="ok")
    return r


def fake_killer(problem, params, *, seed, rounds=None, data_dir=None):
    """Kills its own (Ray worker) process once, the first time it runs."""
    marker = os.environ["FAKE_KILL_MARKER"]
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return fake_evaluate(problem, params, seed=seed, rounds=rounds)
    os.write(fd, f"{os.getpid()} {seed}\n".encode())
    os.close(fd)
    time.sleep(0.2)
    os.kill(os.getpid(), 9)


_CALLS = [0]


def fake_kill_after(problem, params, *, seed, rounds=None, data_dir=None):
    """fake_evaluate, but SIGKILLs its own process at its (N+1)-th call when FAKE_SIGKILL_AFTER=N (a kill -9
    at a chosen point of an in-process search)."""
    _CALLS[0] += 1
    n = os.environ.get("FAKE_SIGKILL_AFTER")
    if n is not None and _CALLS[0] > int(n):
        os.kill(os.getpid(), 9)
    return fake_evaluate(problem, params, seed=seed, rounds=rounds)


def fake_threads(problem, params, *, seed, rounds=None, data_dir=None):
    """Reports the torch threads and OMP setting it runs with."""
    import torch

    r = fake_evaluate(problem, params, seed=seed, rounds=rounds)
    return EvaluationResult(**{**r.to_dict(), "accuracy_curve": (),
                               "privacy": {"torch_threads": torch.get_num_threads(),
                                           "omp": os.environ.get("OMP_NUM_THREADS")}})


def fake_data_missing(problem, params, *, seed, rounds=None, data_dir=None):
    from fedevo.errors import DataNotFoundError

    raise DataNotFoundError("dataset 'fake' not found under /nowhere; pass --data-dir")


def fake_always_fails(problem, params, *, seed, rounds=None, data_dir=None):
    """Every evaluation raises (as a configuration the simulator rejects would)."""
    _start(seed)
    raise ValueError(f"fake failure of seed {seed}")


class CostedFake:
    """fake_evaluate as an evaluator object that offers `check` and `cost`, as fedevo's simulator does
    (fedevo.searching.evaluator); `checked` records the check's calls (in-process searches only)."""

    checked: list = []

    def __call__(self, problem, params, *, seed, rounds=None, data_dir=None):
        return fake_evaluate(problem, params, seed=seed, rounds=rounds)

    def check(self, problem, rounds):
        self.checked.append((problem.name, rounds))

    def cost(self, problem, params, rounds):
        return float(params["units"])  # any gene: the scheduler gets what the evaluator says


COSTED = CostedFake()


# ---------------------------------------------------------------------------------------------- continuation
class Killed(BaseException):
    """Stands for a kill -9 of the search process: raised by a fake evaluator it ends the search where it is
    (serial runner), not recorded as a failed evaluation, where the test lets it through (`let_kills_through`:
    user code's BaseExceptions are otherwise that evaluation's failure)."""


def let_kills_through(monkeypatch) -> None:
    """A Killed raised inside user code passes fedevo's containment (usercode.call_user, which fails that
    evaluation for any other BaseException), as no containment survives a kill -9."""
    from fedevo.searching import containment

    contained = containment.call_user

    def call_user(fn, *args, **kwargs):
        killed = []

        def watched(*a, **k):
            try:
                return fn(*a, **k)
            except Killed as e:
                killed.append(e)
                raise

        try:
            return contained(watched, *args, **kwargs)
        except Exception:
            if killed:
                raise killed[0] from None
            raise

    monkeypatch.setattr(containment, "call_user", call_user)


@dataclass(frozen=True)
class StatefulResult(EvaluationResult):
    """EvaluationResult with the training `state` a lower rung returns (the simulator's own result has the field)."""

    state: Optional[bytes] = field(default=None, repr=False, compare=False)


class ContinuingFake:
    """An evaluator that continues a training from a lower rung, as fedevo's simulator does (`continues`,
    `planned`, `until`, `resume_from`): the error falls with the rounds trained, plus a seeded noise drawn per round
    and accumulated, so a training continued r1 -> r2 -> T equals one T-round run only if the state carries the
    history; a state of another individual (seed, genes) or of another rung is refused. ε grows as √(r/T) of the
    planned full-T ε (what `planned` says); comm is the same at every rung.

    Environment: FAKE_RUNG_LOG=F appends "<seed> <until> <from>" per call; FAKE_RAISE_AFTER=N raises `Killed` at
    the (N+1)-th call of this process; FAKE_SIGKILL_AFTER=N SIGKILLs this process at its (N+1)-th call."""

    continues = True
    calls = 0

    def planned(self, problem, params, rounds):
        base = fake_evaluate(problem, params, seed=0, rounds=rounds)
        return {"eps": base.eps, "comm": base.comm}

    def __call__(self, problem, params, *, seed, rounds=None, data_dir=None, until=None, resume_from=None):
        import pickle

        ContinuingFake.calls += 1
        for var, act in (("FAKE_RAISE_AFTER", "raise"), ("FAKE_SIGKILL_AFTER", "kill")):
            n = os.environ.get(var)
            if n is not None and ContinuingFake.calls > int(n):
                if act == "raise":
                    raise Killed(f"killed at call {ContinuingFake.calls}")
                os.kill(os.getpid(), 9)
        total = int(rounds or 9)
        upto = total if until is None else int(until)
        key = (seed, tuple(sorted((k, repr(v)) for k, v in params.items())))
        done, acc = 0, 0.0
        if resume_from is not None:
            st = pickle.loads(resume_from)
            if st["key"] != key or st["total"] != total:
                raise ValueError("resume_from holds another individual's training")
            done, acc = st["done"], st["acc"]
        if not done < upto <= total:
            raise ValueError(f"cannot train from round {done} to {upto} of {total}")
        log = os.environ.get("FAKE_RUNG_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{seed} {upto} {done}\n")
        for j in range(done + 1, upto + 1):
            acc += 0.002 * np.random.default_rng([seed, j]).standard_normal()
        base = fake_evaluate(problem, params, seed=seed, rounds=total)
        error = float(min(1.0, base.error + 0.3 / upto + acc))
        eps = float(base.eps * math.sqrt(upto / total))
        state = pickle.dumps({"key": key, "total": total, "done": upto, "acc": acc}) if upto < total else None
        return StatefulResult(error=error, comm=base.comm, eps=eps, eps_paper=2 * eps, accuracy_global=1 - error,
                              omega=base.omega, status="ok", wall_s=0.0, rounds=upto, privacy={"mechanism": "fake"},
                              state=state)


CONTINUING = ContinuingFake()


class GeneRoundsFake(ContinuingFake):
    """ContinuingFake whose planned T is the individual's own `rounds` gene (as the simulator's, without
    --rounds), not 9."""

    def planned(self, problem, params, rounds):
        return super().planned(problem, params, rounds or params.get("rounds"))

    def __call__(self, problem, params, *, seed, rounds=None, **kw):
        return super().__call__(problem, params, seed=seed, rounds=rounds or params.get("rounds"), **kw)


GENE_ROUNDS = GeneRoundsFake()
