"""evaluate(problem, params, seed) -> EvaluationResult: the function every search worker runs."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .problem import Problem
from .result import EvaluationResult


def evaluate(problem: Problem, params: Optional[Mapping[str, Any]] = None, *, seed: int = 0,
             rounds: Optional[int] = None, data_dir: Optional[str] = None, download: bool = False,
             eval_every: int = 0, progress=None, until: Optional[int] = None,
             resume_from: Optional[bytes] = None) -> EvaluationResult:
    """Train one configuration of `problem` (gene defaults overridden by `params`) and measure its objectives.

    Bad input raises FedevoError before any training; NaN/inf during training gives status 'diverged' with
    worst objectives; the same seed gives the same numbers. eval_every=k records (round, mean client accuracy,
    global accuracy) every k rounds in `accuracy_curve` (retrain curves); 0 evaluates only at the end.
    `engine`: the device and compute precision the simulator used and why (CPU features, a GPU), the CPU, the
    native kernels, the GPU's name on CUDA.

    until (1..rounds): train only the first `until` of the planned `rounds` (everything that depends on the
    planned rounds — σ calibrated for a target ε, schedules — uses `rounds`) and measure there: the result's
    `rounds` is `until`, its ε what those rounds spent, its comm per round run; it carries `state` (bytes), and
    `evaluate(..., resume_from=state)` continues that training exactly: r₁ → r₂ → `rounds` gives the numbers of
    one uninterrupted run with the same seed. A state continues only the evaluation that saved it (same
    problem, params, seed, rounds).
    """
    from .fl.simulate import simulate  # heavy imports (torch) only when training

    config = problem.sim_config(params, rounds=rounds, data_dir=data_dir, download=download)
    return simulate(config, seed=seed, eval_every=eval_every, progress=progress, until=until,
                    resume_from=resume_from)  # its `engine`: resolved once


def planned_objectives(problem: Problem, params: Optional[Mapping[str, Any]] = None, *,
                       rounds: Optional[int] = None, data_dir: Optional[str] = None) -> dict[str, float]:
    """The objectives of `evaluate(problem, params, rounds=rounds)` that are known before any training: the ε
    objective (``problem.eps_objective``) where the mechanism's accountant needs only the settings (no privacy;
    central trust: σ or the target, q, T, δ — see ``Mechanism.planned_eps``). Left out: ε under local or
    distributed trust (it depends on arrivals, recalls, budgets or Ω) and the communication (it depends on the
    upload losses and the uploads drawn in training; being a per-round mean, the value measured after fewer
    rounds estimates it). Reads no data, trains nothing."""
    from .privacy.mechanism import build_mechanism

    config = problem.sim_config(params, rounds=rounds, data_dir=data_dir)
    planned = build_mechanism(config).planned_eps()
    if not planned or problem.eps_objective not in planned:
        return {}
    return {problem.eps_objective: float(planned[problem.eps_objective])}
