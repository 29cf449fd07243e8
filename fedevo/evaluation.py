"""evaluate(problem, params, seed) -> EvaluationResult: the function every search worker runs."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .problem import Problem
from .result import EvaluationResult


def evaluate(problem: Problem, params: Optional[Mapping[str, Any]] = None, *, seed: int = 0,
             rounds: Optional[int] = None, data_dir: Optional[str] = None, download: bool = False,
             eval_every: int = 0, progress=None) -> EvaluationResult:
    """Train one configuration of `problem` (gene defaults overridden by `params`) and measure its objectives.

    Bad input raises FedevoError before any training; NaN/inf during training gives status 'diverged' with
    worst objectives; the same seed gives the same numbers. eval_every=k records (round, mean client accuracy,
    global accuracy) every k rounds in `accuracy_curve` (retrain curves); 0 evaluates only at the end.
    `engine`: the device and compute precision the simulator used and why (CPU features, a GPU), the CPU, the
    native kernels, the GPU's name on CUDA.
    """
    from .fl.simulate import simulate  # heavy imports (torch) only when training

    config = problem.sim_config(params, rounds=rounds, data_dir=data_dir, download=download)
    return simulate(config, seed=seed, eval_every=eval_every, progress=progress)  # its `engine`: resolved once
