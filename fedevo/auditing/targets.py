"""What to audit: a run's picked evaluations (same genes, seed, rounds and data as the search), or one
configuration of a problem. Every configuration is built (and so validated) before any training."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..config import SimConfig
from ..errors import FedevoError
from .run import check_supported


@dataclass(frozen=True)
class Target:
    label: str
    cfg: SimConfig
    seed: int
    params: dict
    eps_search: Optional[float] = None


def simulated(problem) -> None:
    """An audit inserts canaries into fedevo's own training: a problem that a user's evaluator trains is refused in
    one line that says so (it said 'no simulator configuration')."""
    if not problem.simulated:
        raise FedevoError(f"fedevo audit needs fedevo's own simulator (it trains the configuration with canary users "
                          f"inserted); problem {problem.name!r} is trained by its own evaluator {problem.evaluator!r}")


def from_run(run_dir: Path | str, spec: str, data_dir: Optional[str] = None,
             rounds: Optional[int] = None) -> list[Target]:
    """The picks of a run as searched; `data_dir`: where the run's data are now, if they moved; `rounds`: at that
    many rounds instead of the search's (a pick as `fedevo retrain --rounds R` trains it: the ε published after a
    retraining is then the one audited; the search's ε, at its own rounds, is not set beside it)."""
    from ..searching.inputs import check_inputs
    from ..searching.rundata import load_run

    data = load_run(run_dir)  # FedevoError: not a run, or no evaluations
    simulated(data.problem)
    check_inputs(data.meta, Path(run_dir), action="audit")  # its data and code files are those it searched
    out = []
    for p in data.pick(spec):  # the one resolver (its chance bar): the same ids as front, retrain, plot, the API
        params = data.params(p.row)
        cfg = data.problem.sim_config(params, rounds=data.settings.rounds if rounds is None else rounds,
                                      data_dir=data_dir if data_dir is not None else data.settings.data_dir)
        check_supported(cfg)
        label = f"id {p.id}" + ("" if p.label == f"id {p.id}" else f" ({p.label})")  # not "id 9 (id 9)"
        out.append(Target(label=label, cfg=cfg, seed=int(p.row["seed"]), params=params,
                          eps_search=p.row.get("eps") if rounds is None else None))
    return out


def from_problem(problem, params: Optional[dict[str, Any]] = None, *, seed: int = 0,
                 rounds: Optional[int] = None, data_dir: Optional[str] = None) -> list[Target]:
    """`problem`: a fedevo Problem, or a bundled name / .toml path."""
    from ..problem import Problem, load_problem

    prob = problem if isinstance(problem, Problem) else load_problem(problem)
    simulated(prob)
    cfg = prob.sim_config(params, rounds=rounds, data_dir=data_dir)
    check_supported(cfg)
    return [Target(label=prob.name, cfg=cfg, seed=seed, params=prob.resolve(params))]


__all__ = ["Target", "from_problem", "from_run"]
