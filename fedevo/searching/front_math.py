"""The scale the search sees ε on, and the hypervolume of a front in that space.

ε spans orders of magnitude (0.5 and 5,000 are both common on one front); NSGA-III normalises each objective
linearly between its ideal and nadir points, so on raw ε the whole front crowds at the low end and one
no-privacy point decides the scale. The search therefore minimises **log10 ε** (`search_eps`), while every file,
table and plot reports ε itself:

* ε ≤ 10⁻³ (ε = 0 included) counts as 10⁻³ (log10 = −3): below that, no privacy difference matters here;
* ε = ∞ (no privacy: mechanism none), NaN or missing → the worst value log10(10⁹) = 9, as every ε ≥ 10⁹ is;
* a constraint ``eps = 8`` is compared on the same scale (log10 ε ≤ log10 8: the same feasible set).

log is monotone, so the Pareto front (front.csv, computed on ε itself) is the same set on either scale; only the
algorithm's normalisation, niching and hypervolume change. run.json records the choice (``search_objectives``).

The hypervolume (`hypervolume_table`) is measured in the same space: (error, comm, log10 ε), each normalised by
the ideal point and range of generation 1's ok evaluations with a finite ε (fixed for the run), reference point
1.1 in every coordinate. No-privacy points (ε = ∞) lie beyond the reference point in ε and add nothing.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .objectives import OBJECTIVES, WORST, sanitize

EPS_FLOOR = 1e-3
EPS_SCALE = "log10"  # how new searches see ε ("linear": runs made before this choice)
HV_REF = 1.1  # reference point (in every normalised objective) for the hypervolume

SEARCH_OBJECTIVES = {
    "error": "error",
    "comm": "comm",
    "eps": "log10(max(eps, 1e-3)); eps = inf (no privacy), NaN or >= 1e9 -> 9 (= log10 1e9, the worst value)",
    "eps_scale": EPS_SCALE,
    "why": "eps spans orders of magnitude; NSGA-III's linear normalisation would crowd the front at low eps. "
           "Files and plots report eps itself; the Pareto set is the same on either scale (log is monotone).",
}

HYPERVOLUME = {
    "space": "(error, comm, log10 eps) as the search sees them",
    "normalisation": "f' = (f - lo) / scale with lo, scale = min, max - min of the generation-1 ok evaluations "
                     "(finite eps only); eps = inf adds nothing",
    "ref_point": [HV_REF] * 3,
    "indicator": "pymoo.indicators.hv.HV",
}


def search_eps(v: Optional[float]) -> float:
    """ε as the search sees it: log10(max(ε, 1e-3)); inf / NaN / None / ≥ 1e9 → log10(1e9) = 9."""
    worst = math.log10(WORST["eps"])
    if v is None:
        return worst
    v = float(v)
    if not math.isfinite(v):
        return worst
    return min(math.log10(max(v, EPS_FLOOR)), worst)


def to_search_space(F: np.ndarray, eps_scale: str = EPS_SCALE) -> np.ndarray:
    """Sanitised (error, comm, ε) rows (see `sanitize`; one row or a matrix) with ε on the search's scale."""
    F = np.array(F, dtype=float, copy=True)
    if eps_scale == "log10":
        flat = F.reshape(-1, 3)
        flat[:, 2] = [search_eps(v) for v in flat[:, 2]]
        F = flat.reshape(F.shape)
    return F


def bound_in_search_space(key: str, bound: float, eps_scale: str = EPS_SCALE) -> float:
    return search_eps(bound) if key == "eps" and eps_scale == "log10" else float(bound)


def _matrix(rows: Sequence[Mapping[str, Any]], eps_key: str) -> np.ndarray:
    return to_search_space(objective_matrix(rows, eps_key))


def hv_normalisation(rows, eps_key: str) -> tuple[np.ndarray, np.ndarray]:
    """(lo, scale) in the search space: ideal point and range of generation 1's ok evaluations with finite ε."""
    first = [r for r in rows if r["generation"] == 1 and r["status"] == "ok"
             and r[eps_key] is not None and math.isfinite(r[eps_key])]
    if first:
        F = _matrix(first, eps_key)
        lo, hi = F.min(axis=0), F.max(axis=0)
    else:
        lo = np.array([0.0, 0.0, math.log10(EPS_FLOOR)])
        hi = np.array([WORST["error"], WORST["comm"], math.log10(WORST["eps"])])
    scale = hi - lo
    scale[scale <= 0] = np.maximum(np.abs(hi[scale <= 0]), 1e-12)
    return lo, scale


def hypervolume_table(rows, generations: int, eps_key: str, constraints) -> list[dict[str, Any]]:
    """Hypervolume after each generation of the front of all evaluations so far (see the module doc).

    The columns lo_eps / scale_eps are in log10 ε. Only full-fidelity rows count (`is_full`): the normalisation,
    the front and the `evaluations` column (a multi-fidelity search's lower rungs are left out).
    """
    from pymoo.indicators.hv import HV

    rows = [r for r in rows if is_full(r)]

    lo, scale = hv_normalisation(rows, eps_key)
    ref = np.full(3, HV_REF)
    ind = HV(ref_point=ref)
    table = []
    for g in range(1, generations + 1):
        upto = [r for r in rows if r["generation"] <= g]
        front = front_rows(upto, eps_key, constraints)
        F = (_matrix(front, eps_key) - lo) / scale if front else np.zeros((0, 3))
        F = F[np.all(F < ref, axis=1)]
        hv = float(ind(F)) if len(F) else 0.0
        table.append({"generation": g, "evaluations": len(upto), "front_size": len(front), "hypervolume": hv,
                      **{f"lo_{k}": float(lo[j]) for j, k in enumerate(OBJECTIVES)},
                      **{f"scale_{k}": float(scale[j]) for j, k in enumerate(OBJECTIVES)}})
    return table


# ---------------------------------------------------------------- the front
def objective_matrix(rows: Sequence[Mapping[str, Any]], eps_key: str) -> np.ndarray:
    return np.array([sanitize((r["error"], r["comm"], r[eps_key])) for r in rows]).reshape(len(rows), 3)


def is_full(row: Mapping[str, Any]) -> bool:
    """True for a full-fidelity evaluation: trained for all the rounds (a multi-fidelity search's lower rungs have
    `fidelity` < 1, fedevo.searching.fidelity; a plain search's rows have no `fidelity`: all are full). Only these
    enter the front, the hypervolume and what reads the front (picks, retrain, audit)."""
    f = row.get("fidelity")
    return f is None or float(f) == 1.0


def feasible_ok(rows: Sequence[Mapping[str, Any]], eps_key: str, constraints: Mapping[str, float]):
    """Full-fidelity rows with status ok that satisfy the problem's constraints (objective <= bound)."""
    out = []
    for r in rows:
        if r["status"] != "ok" or not is_full(r):
            continue
        F = sanitize((r["error"], r["comm"], r[eps_key]))
        if all(F[OBJECTIVES.index(k)] <= float(b) for k, b in constraints.items()):
            out.append(r)
    return out


def non_dominated(F: np.ndarray) -> np.ndarray:
    """Indices of the rows of F (minimised) that no other row dominates."""
    if len(F) == 0:
        return np.array([], dtype=int)
    le = np.all(F[:, None, :] <= F[None, :, :], axis=2)
    lt = np.any(F[:, None, :] < F[None, :, :], axis=2)
    dominated = np.any(le & lt, axis=0)  # [i, j]: i dominates j
    return np.flatnonzero(~dominated)


def front_rows(rows, eps_key: str, constraints) -> list[dict[str, Any]]:
    cand = feasible_ok(rows, eps_key, constraints)
    idx = non_dominated(objective_matrix(cand, eps_key))
    return sorted((cand[i] for i in idx), key=lambda r: r["id"])
