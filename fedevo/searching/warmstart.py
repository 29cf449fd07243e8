"""Warm start (`fedevo search --init-from RUN`): a new search begins with an earlier run's front on the same
problem (NSGA-III: its initial population; the other optimisers: their first candidates, optimizers/base.py).

The earlier run is read as `fedevo front` reads it (a damaged log is refused); its front — full-fidelity,
feasible, ok evaluations, non-dominated — gives up to n individuals (the optimiser's ``warm_start_size``: --pop
for NSGA-III, else max(--pop, 10)): all of them when they fit, else the n that pymoo's crowding distance spreads
most evenly over the front (ties by id). NSGA-III draws the rest of its initial population uniformly from the
search space with the run's seed, as a search without `--init-from` draws all of it. Their genes are recorded in the new run's settings (run.json), so the run's identity, its
resume and its repetition with the same seed do not depend on the earlier directory staying as it was.

"The same problem": the same problem name and the same genes (names, types, bounds, scales, choices). Settings
outside the genes (rounds, data, mechanism) may differ — a front found with fewer rounds is a fine starting point
for more — and the earlier individuals are evaluated afresh under the new settings (nothing is copied from the
earlier rows but their genes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import FedevoError, arg
from ..problem import Problem
from .space import SearchSpace


def front_params(run_dir: Path | str, problem: Problem, pop: int) -> tuple[tuple[dict[str, Any], ...], tuple[int, ...]]:
    """(the genes of up to `pop` front members of the run in `run_dir`, their ids there), checked against
    `problem`; FedevoError (one line) for a directory that is no run, a damaged one, another problem or an empty
    front."""
    from .fidelity import select_promoted
    from .rundata import load_run

    run_dir = Path(run_dir)
    try:
        data = load_run(run_dir, reading=True)  # its front and genes: none of its files needed
    except FedevoError as e:
        raise FedevoError(f"{arg('init_from')}: {e}") from None
    if data.problem.name != problem.name:
        raise FedevoError(f"{arg('init_from', run_dir)}: that run searched problem {data.problem.name!r}, not "
                          f"{problem.name!r}; a warm start needs the same problem")
    mine, theirs = SearchSpace.from_problem(problem).describe(), SearchSpace.from_problem(data.problem).describe()
    if mine != theirs:
        diff = next((a["gene"] for a, b in zip(mine, theirs) if a != b), None) or "the gene list"
        raise FedevoError(f"{arg('init_from', run_dir)}: problem {problem.name!r} has other genes there than here "
                          f"({diff} differs); a warm start needs the same genes")
    front = sorted(data.front, key=lambda r: r["id"])
    if not front:
        raise FedevoError(f"{arg('init_from', run_dir)}: the run has no front yet (no full-fidelity evaluation "
                          f"finished ok); nothing to start from")
    ids = [int(r["id"]) for r in front]
    if len(front) > pop:
        F = data.objectives.search_matrix(front)
        keep = set(select_promoted(F, ids, pop, margin=0.0))
        front = [r for r in front if r["id"] in keep]
        ids = [int(r["id"]) for r in front]
    return tuple(data.params(r) for r in front), tuple(ids)


def initial_population(space: SearchSpace, init: Sequence[Mapping[str, Any]], pop: int, seed: int) -> np.ndarray:
    """The encoded initial population (pop × genes): `init`'s genes first, then uniform draws from the box with
    a generator of `seed` (repaired by the algorithm, as its own sampling is)."""
    X0 = np.array([space.encode(p) for p in init], dtype=float).reshape(len(init), space.n_var)
    rng = np.random.default_rng(seed)
    rest = rng.uniform(space.xl, space.xu, size=(max(0, pop - len(init)), space.n_var))
    return np.vstack([X0, rest])


__all__ = ["front_params", "initial_population"]
