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


def evaluate_population(problem: Problem, params_list, seeds, *, rounds: Optional[int] = None,
                        data_dir: Optional[str] = None, download: bool = False, device=None,
                        exact: bool = False) -> list[EvaluationResult]:
    """`[evaluate(problem, p, seed=s, rounds=rounds) for p, s in zip(params_list, seeds)]`, a generation trained as
    one batched program on one device (fl/population.py): every individual keeps its own seeded round loop, their
    local training runs stacked (MLPs; the others are evaluated alone). Each result equals its evaluation alone
    on that device up to fp32 rounding (exact=True: bit for bit, stacking only equal widths). device: 'cuda',
    'cpu' (the same code, for tests) or None (the problem's resolved device)."""
    from .fl.population import evaluate_population as batched

    return batched(problem, params_list, seeds, rounds=rounds, data_dir=data_dir, download=download,
                   device=device, exact=exact)


def planned_objectives(problem: Problem, params: Optional[Mapping[str, Any]] = None, *,
                       rounds: Optional[int] = None, data_dir: Optional[str] = None) -> dict[str, float]:
    """The objectives of `evaluate(problem, params, rounds=rounds)` that are known before any training (equal to
    what training measures, not estimates). Reads no data, trains nothing.

    - the ε objective (``problem.eps_objective``) where the mechanism's accountant needs only the settings: no
      privacy, central trust (σ or the target, q, T, δ — ``Mechanism.planned_eps``);
    - ``comm`` where every round's uploads are fixed by the settings: p sampled clients each upload
      ``Mechanism.upload_words(Ω)`` words (a lost upload too) with Ω from the architecture and α alone
      (``models.sparse.planned_omega``; SET keeps it every round), so comm = p·words/K per client and round.

    Left out: ε under local or distributed trust (it depends on arrivals, recalls, budgets or Ω); comm with
    recall, secure aggregation, the adaptive mechanism, a participation cap (fewer clients are sampled once
    clients reach it) or data whose shape is known only by reading it (the user's files)."""
    from .privacy.mechanism import build_mechanism

    config = problem.sim_config(params, rounds=rounds, data_dir=data_dir)
    mech = build_mechanism(config)
    out: dict[str, float] = {}
    planned = mech.planned_eps()
    if planned and problem.eps_objective in planned:
        out[problem.eps_objective] = float(planned[problem.eps_objective])
    comm = planned_comm(config, mech)
    if comm is not None:
        out["comm"] = comm
    return out


def planned_comm(config, mech) -> Optional[float]:
    """comm of a run of `config` (per client and round) from the settings alone, or None (planned_objectives)."""
    from .data.catalog import SHAPES

    dataset = config.data.dataset
    if config.privacy.max_participations is not None or config.data.source is not None or dataset not in SHAPES:
        return None
    from .models import build_model
    from .models.sparse import planned_omega

    shape, classes = SHAPES[dataset]
    model = build_model(config.arch, shape, classes)  # shapes only: no parameters are made before `init`
    words = mech.upload_words(planned_omega(model.shapes, model.fc_weight_ids, config.alpha))
    if words is None:
        return None
    return config.sampled_per_round * words / config.data.clients
