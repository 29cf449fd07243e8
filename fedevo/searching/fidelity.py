"""Multi-fidelity search: the rung ladder and the promotion rule (pure functions; the loop is in
:mod:`fedevo.searching.rungs`).

**The ladder.** ``--fidelity F`` (or ``fidelity = F`` at the top of a problem file) is either one fraction F in
(0, 1) — two rungs, F·T rounds and the full T — or a ladder of fractions, strictly increasing and ending at 1
(``--fidelity 1/9,1/3,1``, ``fidelity = [0.111, 0.333, 1]``). ``--fidelity 1`` is the plain search (one rung).
Rung k trains its individuals for r_k = ⌊f_k·T + ½⌋ rounds (f·T rounded half up) of the planned T — with a
``rounds`` gene, of the most rounds any individual plans, the same for all (an individual planning fewer stops at
its own T, at full fidelity: :func:`fedevo.searching.rungs.equal_rung_rounds`); a rung that gives fewer than one
round, or as many rounds as the rung below it, is refused (one line, exit 2).

**The promotion rule.** Every offspring of a generation is trained to rung 0. Of the n individuals evaluated at
rung k below their full T, ⌈n/η⌉ (η = 3) continue to rung k + 1 — by *continuing* their training (the simulator's saved state),
never by restarting — chosen among those with status ok by

1. the objectives they are ranked on: the error measured at rung k **together with the exact ε and
   communication at the full T** where the evaluator knows them before training (``planned``,
   fedevo.evaluation.planned_objectives: the accountant's ε from σ, q, T and δ under central trust or with no
   privacy; the communication p·words/K where every upload's words are fixed by the settings and Ω), else that
   objective's rung-k value; ε on the search's log10 scale;
2. non-dominated rank (pymoo's ``NonDominatedSorting``) with **ε-box dominance on the error** (Laumanns et al.
   2002): the error counts by its box ⌊error / MARGIN⌋, MARGIN = 0.01, so two errors in one box of one
   percentage point count as equal — the seed noise of an error measured early is of that order, and ε and comm
   (exact, not noisy) get no margin;
3. within the front that does not fit whole: the largest crowding distance first (pymoo's
   ``calc_crowding_distance`` on the objectives normalised over the rung's candidates: the spread of the
   front), ties by id.

Individuals not promoted keep their lower-rung row (never a full-fidelity one); the algorithm (NSGA-III's
survival) gets them with the objectives they were ranked on (the rung's error, the full-T ε and comm where
known). An error measured after fewer rounds is mostly *higher* than the full-T one, so such an individual is
ranked pessimistically in survival and may still be a parent; it never enters the front, the hypervolume,
picks, retrain or audit (those read full-fidelity rows only: :func:`is_full`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..errors import FedevoError, arg
from ..objectives import as_set
from .front_math import is_full

EPS_KEYS = ("eps", "eps_paper")  # objectives that only grow with the rounds trained (a rung's is a lower bound)
ETA = 3  # 1/ETA of a rung's individuals are promoted (rounded up): matches a 1/9, 1/3, 1 ladder
MARGIN = 0.01  # ε-box width on the error (seed noise of an early error), see the module doc

PROMOTION = {
    "eta": ETA,
    "promoted": "ceil(n / eta) of the n individuals evaluated at a rung below their full T, among those with status "
                "ok",
    "objectives": "the rung's error; eps and comm at the full T where the evaluator plans them before training "
                  "(else the rung's value); eps on the search's log10 scale",
    "rank": "pymoo NonDominatedSorting, epsilon-box dominance on the error: floor(error / margin)",
    "margin": MARGIN,
    "spread": "pymoo calc_crowding_distance within the last front (objectives normalised over the candidates), "
              "largest first, ties by id",
    "not_promoted": "their rung row stays; NSGA-III survival gets the objectives they were ranked on; never in the "
                    "front",
    "constraints": "the problem's [constraints] on the values ranked that tell the full-T one (planned, or an eps: "
                   "it only grows with the rounds): feasible rows take the slots first, the rest by least total "
                   "violation (search scale), ties by id",
}


# ============================================================================================ the ladder
def _fraction(v: Any, key: str) -> float:
    if isinstance(v, bool):
        raise FedevoError(f"{key}: {v!r} is not a fraction of the rounds")
    if isinstance(v, (int, float)):
        f = float(v)
    elif isinstance(v, str):
        try:
            f = float(Fraction(v.strip()))
        except (ValueError, ZeroDivisionError):
            raise FedevoError(f"{key}: {v!r} is not a fraction of the rounds (e.g. 0.33 or 1/3)") from None
    else:
        raise FedevoError(f"{key}: {v!r} is not a fraction of the rounds (e.g. 0.33 or 1/3)")
    if not (math.isfinite(f) and 0 < f <= 1):
        raise FedevoError(f"{key}: fidelity {v!r} is outside (0, 1] (a fraction of the rounds)")
    return f


def parse_ladder(value: Any, key: str = "") -> Optional[tuple[float, ...]]:
    """The rung ladder of a fidelity setting: None -> None; one fraction F < 1 -> (F, 1.0); 1 -> (1.0,); a list
    (or comma-separated text) of fractions, strictly increasing and ending at 1 -> that tuple. FedevoError (one
    line naming `key`, by default the `fidelity` argument as its caller spells it) otherwise."""
    if value is None:
        return None
    key = key or arg("fidelity")
    if isinstance(value, str) and "," in value:
        value = [p for p in value.split(",")]
    if isinstance(value, (list, tuple)):
        if not value:
            raise FedevoError(f"{key}: an empty rung ladder; give a fraction (0.33) or a ladder ending at 1 (1/9,1/3,1)")
        ladder = tuple(_fraction(v, key) for v in value)
        for a, b in zip(ladder, ladder[1:]):
            if not b > a:
                raise FedevoError(f"{key}: the rung ladder {_show(ladder)} is not strictly increasing")
        if ladder[-1] != 1.0:
            raise FedevoError(f"{key}: the rung ladder {_show(ladder)} must end at 1 (the full rounds: only "
                              "full-fidelity evaluations enter the front)")
        return ladder
    f = _fraction(value, key)
    return (1.0,) if f == 1.0 else (f, 1.0)


def _show(ladder: Sequence[float]) -> str:
    return ",".join(f"{f:.4g}" for f in ladder)


def rung_rounds(ladder: Sequence[float], total: int, key: str = "") -> tuple[int, ...]:
    """Rounds of each rung for a planned total T: ⌊f·T + ½⌋ (half up); FedevoError if one gives fewer than one
    round or as many as the rung below it (naming `key`, by default the `fidelity` argument)."""
    key = key or arg("fidelity")
    out: list[int] = []
    for f in ladder:
        r = total if f == 1.0 else int(math.floor(f * total + 0.5))
        if r < 1:
            raise FedevoError(f"{key}: fidelity {f:.4g} of {total} rounds is {f * total:.3g} rounds, fewer than one "
                              f"(use at least {1 / (2 * total):.3g}, or more {arg('rounds')})")
        if out and r <= out[-1]:
            raise FedevoError(f"{key}: rungs {_show(ladder)} of {total} rounds give {out[-1]} and {r} rounds: two "
                              f"rungs with the same rounds (use fewer rungs or more {arg('rounds')})")
        out.append(r)
    return tuple(out)


def n_promoted(n: int, eta: int = ETA) -> int:
    """How many of n individuals at a rung continue to the next one: ⌈n / η⌉."""
    return -(-n // eta) if n > 0 else 0


def expected_per_generation(pop: int, rungs: int, eta: int = ETA) -> int:
    """Evaluations (rows) of one generation of `pop` offspring when nothing fails: pop + ⌈pop/η⌉ + ..."""
    n, total = pop, 0
    for _ in range(rungs):
        total += n
        n = n_promoted(n, eta)
    return total


# ============================================================================================ promotion
def ranking_objectives(row: Mapping[str, Any], planned: Mapping[str, float], objectives="eps") -> tuple:
    """The objective values an individual at a rung is ranked on (the run's objectives, or an ε key: error, comm
    and that ε): those known at the full T from `planned` (comm, ε), the rung's values for the rest."""
    return tuple(planned.get(n, row.get(n)) if n != "error" else row.get(n) for n in as_set(objectives).names)


def select_promoted(F: np.ndarray, ids: Sequence[int], slots: int, margin: float = MARGIN) -> list[int]:
    """The ids of the `slots` candidates (rows of F: error, comm, ε as the search sees them, minimised) promoted
    by the module's rule: ε-box non-dominated rank on the error, then crowding distance, then id. Fewer
    candidates than slots: all of them. Returns ids in increasing order."""
    from pymoo.operators.survival.rank_and_crowding.metrics import calc_crowding_distance
    from pymoo.util.nds.non_dominated_sorting import NonDominatedSorting

    F = np.asarray(F, dtype=float).reshape(len(ids), -1)
    ids = [int(i) for i in ids]
    if slots >= len(ids):
        return sorted(ids)
    if slots <= 0:
        return []
    boxed = F.copy()
    if margin > 0:
        boxed[:, 0] = np.floor(F[:, 0] / margin + 1e-9)  # 1e-9: 0.3 / 0.01 is 29.999... in floating point
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    norm = (F - lo) / span
    chosen: list[int] = []
    for front in NonDominatedSorting().do(boxed):
        front = sorted(int(i) for i in front)
        if len(chosen) + len(front) <= slots:
            chosen.extend(front)
        else:
            cd = calc_crowding_distance(norm[front]) if len(front) > 2 else np.full(len(front), np.inf)
            order = sorted(range(len(front)), key=lambda j: (-cd[j], ids[front[j]]))
            chosen.extend(front[j] for j in order[: slots - len(chosen)])
        if len(chosen) >= slots:
            break
    return sorted(ids[i] for i in chosen)


def promote(rows: Sequence[Mapping[str, Any]], planned: Mapping[int, Mapping[str, float]], objectives="eps",
            eta: int = ETA, margin: float = MARGIN, constraints: Optional[Mapping[str, float]] = None) -> list[int]:
    """The ids promoted from one rung: `rows` are the rung's evaluations (id, status, a value per objective),
    `planned[id]` what the evaluator knows at the full T before training; `objectives`: the run's ObjectiveSet (or
    an ε key: error, comm and that ε). ⌈len(rows)/η⌉ slots, filled from the rows with status ok (all of them when
    fewer). `constraints` (the problem's [constraints]): the feasible rows, on the values ranked, take the slots
    first, as NSGA-III ranks feasibility first; the slots left go to the others, least violation first."""
    objectives = as_set(objectives)
    slots = n_promoted(len(rows), eta)
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        return []
    ranked = [dict(zip(objectives.names, ranking_objectives(r, planned.get(r["id"], {}), objectives))) for r in ok]
    F = objectives.search_matrix(ranked)
    ids = [r["id"] for r in ok]
    violation = np.zeros(len(ok))
    for k, (j, b) in enumerate(objectives.constraint_items(constraints)):  # on the search's scale, as the optimiser's G
        # only where the value ranked already tells the full-T one: planned at the full T, or an ε (it only grows
        # with the rounds); a rung's error is far above its full-T value, and would bar nearly everyone
        known = np.array([objectives[j].name in planned.get(r["id"], {}) or objectives[j].name in EPS_KEYS
                          for r in ok])
        G = np.array([objectives.violations(v, constraints)[k] for v in ranked])
        violation += np.where(known, np.maximum(G, 0.0), 0.0)
    if "error" in objectives.names and objectives.index("error") != 0:  # the margin boxes the first column
        j = objectives.index("error")
        F = F[:, [j] + [i for i in range(F.shape[1]) if i != j]]
    box = margin if "error" in objectives.names else 0.0
    feasible = np.flatnonzero(violation <= 0.0)
    if len(feasible) >= slots or len(feasible) == len(ok):
        if len(feasible) == len(ok):
            return select_promoted(F, ids, slots, box)
        return select_promoted(F[feasible], [ids[i] for i in feasible], slots, box)
    others = sorted(np.flatnonzero(violation > 0.0), key=lambda i: (violation[i], ids[i]))
    return sorted([ids[i] for i in feasible] + [ids[i] for i in others[:slots - len(feasible)]])


__all__ = ["EPS_KEYS", "ETA", "MARGIN", "PROMOTION", "expected_per_generation", "is_full", "n_promoted", "parse_ladder",
           "promote", "ranking_objectives", "rung_rounds", "select_promoted"]
