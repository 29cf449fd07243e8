"""The front and the hypervolume of a search's evaluations, on the objectives of the run
(:class:`fedevo.objectives.ObjectiveSet`: its order, worst values and transforms; every function here takes the
set, or for callers from before the objectives list an ε key meaning the default three).

ε spans orders of magnitude (0.5 and 5,000 are both common on one front); NSGA-III normalises each objective
linearly between its ideal and nadir points, so on raw ε the whole front crowds at the low end and one
no-privacy point decides the scale. The search therefore minimises **log10 ε** (the objective's ``log``), while
every file, table and plot reports ε itself:

* ε ≤ 10⁻³ (ε = 0 included) counts as 10⁻³ (log10 = −3): below that, no privacy difference matters here;
* ε = ∞ (no privacy: mechanism none), NaN or missing → the worst value log10(10⁹) = 9, as every ε ≥ 10⁹ is;
* a constraint ``eps = 8`` is compared on the same scale (log10 ε ≤ log10 8: the same feasible set).

log is monotone, so the Pareto front (front.csv, computed on the raw values) is the same set on either scale; only
the algorithm's normalisation, niching and hypervolume change. run.json records the choice (``search_objectives``).

The hypervolume (`hypervolume_table`) is measured in the search space (each objective as the optimiser sees it),
normalised by the ideal point and range of the first generations' ok evaluations whose values are all finite
(generation 1's, and the next ones' until they number more than the objectives; fixed for the run once it has
them), reference point 1.1 in every coordinate. No-privacy points (ε = ∞) lie beyond the reference point in ε
and add nothing. An objective that none of those evaluations measures (ε = ∞ in every one: a search without privacy,
or a user's objective that is never read) is normalised by its own best and worst values and "all finite" asks only
the others (before, no evaluation counted, and comm normalised by 10⁹ moved the hypervolume by 1e-8: run.json's
``hypervolume.unmeasured`` says a run does this; a run made before keeps its numbers). `common_hypervolume` measures several runs under one normalisation (fedevo.hypervolume).
"""

from __future__ import annotations

import bisect
import math
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

import numpy as np

from ..objectives import ObjectiveSet, as_set, get
from ..objectives.builtin import EPS_FLOOR  # noqa: F401  (re-exported: importance.py, tests)

EPS_SCALE = "log10"  # how new searches see ε ("linear": runs made before this choice)
HV_REF = 1.1  # reference point (in every normalised objective) for the hypervolume

Skip = Union[bool, frozenset]  # skip_unmeasured: every objective may be unmeasured, none, or those named

SEARCH_OBJECTIVES = {
    "error": "error",
    "comm": "comm",
    "eps": "log10(max(eps, 1e-3)); eps = inf (no privacy), NaN or >= 1e9 -> 9 (= log10 1e9, the worst value)",
    "eps_scale": EPS_SCALE,
    "why": "eps spans orders of magnitude; NSGA-III's linear normalisation would crowd the front at low eps. "
           "Files and plots report eps itself; the Pareto set is the same on either scale (log is monotone).",
}

HYPERVOLUME = {
    "space": "the objectives as the search sees them (log10 eps; a maximised objective negated)",
    "normalisation": "f' = (f - lo) / scale with lo, scale = min, max - min of the first generations' ok evaluations (at least n_obj + 1) "
                     "(all objectives finite only); eps = inf adds nothing",
    # recorded from the version that does it (hv_skips_unmeasured): a run made before keeps its numbers
    "unmeasured": "an objective no ok evaluation of those generations gives a finite value (eps = inf in all: no "
                  "privacy) takes its own best and worst values, and 'all finite' asks only the others",
    "ref_point": HV_REF,
    "indicator": "pymoo.indicators.hv.HV",
}


def search_eps(v: Optional[float]) -> float:
    """ε as the search sees it: log10(max(ε, 1e-3)); inf / NaN / None / ≥ 1e9 → log10(1e9) = 9."""
    return get("eps").search_value(v)


def to_search_space(F: np.ndarray, eps_scale: str = EPS_SCALE) -> np.ndarray:
    """Sanitised (error, comm, ε) rows (one row or a matrix) with ε on the search's scale (the default three
    objectives; an ObjectiveSet's own rows: `ObjectiveSet.search_matrix`)."""
    F = np.array(F, dtype=float, copy=True)
    if eps_scale == "log10":
        flat = F.reshape(-1, 3)
        flat[:, 2] = [search_eps(v) for v in flat[:, 2]]
        F = flat.reshape(F.shape)
    return F


def bound_in_search_space(key: str, bound: float, eps_scale: str = EPS_SCALE) -> float:
    return search_eps(bound) if key == "eps" and eps_scale == "log10" else float(bound)


def _matrix(rows: Sequence[Mapping[str, Any]], objectives: ObjectiveSet) -> np.ndarray:
    return objectives.search_matrix(rows)


def hv_normalisation(rows, objectives, *, skip_unmeasured: Skip = True) -> tuple[np.ndarray, np.ndarray]:
    """(lo, scale) in the search space: ideal point and range of the first generations' ok evaluations whose
    objectives are all finite: generation 1's, and the next ones' while they are fewer than the objectives + 1 (a
    simplex: enough to span a range in each; a model-based optimiser's batches of one were normalised by a single
    point, whose magnitude then stood for every range: 'HV 1.33 → 50.5'); none: the objectives' own best and worst
    values. Fixed for the run once it has them: an NSGA-III run's generation 1 always does.

    skip_unmeasured (new runs; run.json's ``hypervolume.unmeasured``, `hv_skips_unmeasured`): an objective that no
    ok evaluation of those generations gives a finite value (ε = ∞ in every one: no privacy) takes its own best and
    worst values, and "all finite" asks only the others: else no evaluation counted and error and comm were
    normalised by their own ranges too (comm by 10⁹: its gains moved the hypervolume by 1e-8, below --patience's
    tolerance). False: runs made before, whose hypervolume.csv keeps its numbers."""
    objectives = as_set(objectives)
    first, measured = _first_rows(rows, objectives, skip_unmeasured)
    return _lo_scale(_matrix(first, objectives) if first else None, objectives, measured)


def hv_skips_unmeasured(meta: Optional[Mapping[str, Any]]) -> Skip:
    """Whether a run's hypervolume normalises around an objective no evaluation measured (`hv_normalisation`):
    run.json records it (``hypervolume.unmeasured``) from the version that does; a run made before does not. Where
    it names objectives the rule is not for (``hypervolume.unmeasured_except``: ε where fedevo's simulator
    evaluates), the names of the others."""
    hv = (meta or {}).get("hypervolume") or {}
    if not hv.get("unmeasured"):
        return False
    except_ = set(hv.get("unmeasured_except") or ())
    return frozenset(n for n in (meta or {}).get("objectives", ()) if n not in except_) if except_ else True


def unmeasured_except(objectives, *, simulated: bool) -> list[str]:
    """The objectives a new run's `unmeasured` rule is not for: where fedevo's simulator evaluates, ε (an ε it can
    never make finite is not among the objectives: finite_eps), so that an ε = ∞ in every first evaluation — by
    chance, a gene's no-privacy choice drawn for each — does not fix the run's normalisation with ε at its own best
    and worst values (every later no-privacy point then added hypervolume); another evaluator's ε may be ∞ in all."""
    return [n for n in as_set(objectives).names if n in ("eps", "eps_paper")] if simulated else []


def _finite(v: Any) -> bool:
    return v is not None and math.isfinite(v)


def measured_rows(ok: Sequence[Mapping[str, Any]], objectives,
                  skip_unmeasured: Skip = True) -> tuple[list, tuple[bool, ...]]:
    """(the rows of `ok` finite in every objective one of them measured, which objectives those are): an objective
    no row gives a finite value (ε = ∞ in all: no privacy) is not asked; every objective where not
    `skip_unmeasured` (runs made before: `hv_skips_unmeasured`); where it is a set, only its objectives may be
    unmeasured."""
    names = as_set(objectives).names
    may_skip = (lambda n: n in skip_unmeasured) if isinstance(skip_unmeasured, frozenset) else (  # noqa: E731
        lambda n: bool(skip_unmeasured))
    measured = tuple(not may_skip(n) or any(_finite(r[n]) for r in ok) for n in names)
    return [r for r in ok if all(_finite(r[n]) for n, m in zip(names, measured) if m)], measured


def _first_rows(rows, objectives: ObjectiveSet,
                skip_unmeasured: Skip = True) -> tuple[list, tuple[bool, ...]]:
    """The ok evaluations the normalisation is taken from (see hv_normalisation) and the objectives they measured
    (`measured_rows`)."""
    ok = [r for r in rows if r["status"] == "ok"]
    first: list = []
    measured = (True,) * len(objectives)
    seen: list = []
    for g in sorted({r["generation"] for r in ok}):
        if len(first) > len(objectives):
            break
        seen += [r for r in ok if r["generation"] == g]
        first, measured = measured_rows(seen, objectives, skip_unmeasured)
    return first, measured


def hv_settled(rows, objectives, *, skip_unmeasured: Skip = True) -> bool:
    """True once the hypervolume's normalisation is fixed for the run (it holds the objectives + 1 evaluations
    hv_normalisation needs): until then each new evaluation can rescale every hypervolume so far (a model-based
    optimiser's batches of one: 1.33 after its first evaluation, 0.131 after its second, the same front grown)."""
    objectives = as_set(objectives)
    return len(_first_rows([r for r in rows if is_full(r)], objectives, skip_unmeasured)[0]) > len(objectives)


def _lo_scale(F: Optional[np.ndarray], objectives: ObjectiveSet,
              measured: Optional[Sequence[bool]] = None) -> tuple[np.ndarray, np.ndarray]:
    own_lo, own_hi = objectives.fallback_bounds()
    if F is not None and len(F):
        lo, hi = F.min(axis=0), F.max(axis=0)
        if measured is not None:  # an objective none of them measured: its own best and worst values
            never = ~np.asarray(measured, dtype=bool)
            lo[never], hi[never] = own_lo[never], own_hi[never]
    else:
        lo, hi = own_lo, own_hi
    scale = hi - lo
    # an objective with one value (zero range): its magnitude, or where that is 0 (every ε = 1, log10 ε = 0; every
    # error 0) its own range, best to worst: a scale of 1e-12 put a later ε = 0.5 at -3e11 (HV 1.4e11)
    flat = scale <= 0
    scale[flat] = np.abs(hi[flat])
    tiny = flat & (scale <= 1e-12)
    scale[tiny] = np.maximum(own_hi[tiny] - own_lo[tiny], 1e-12)
    return lo, scale


def hv_columns(objectives) -> list[str]:
    """hypervolume.csv's columns: the table's, then lo_NAME and scale_NAME per objective (the search space)."""
    names = as_set(objectives).names
    return (["generation", "evaluations", "front_size", "hypervolume"] + [f"lo_{k}" for k in names]
            + [f"scale_{k}" for k in names])


def _hv(F: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> float:
    from pymoo.indicators.hv import HV

    ref = np.full(len(lo), HV_REF)
    F = (F - lo) / scale if len(F) else np.zeros((0, len(lo)))
    F = F[np.all(F < ref, axis=1)]
    return float(HV(ref_point=ref)(F)) if len(F) else 0.0


class HvMemo:
    """What `hypervolume_table` computed for a search's log, kept for its next call on the same log grown: per
    generation (evaluations so far, front, hypervolume) under one normalisation. The log only grows (a row, once
    logged, never changes or goes), so a generation whose count of evaluations is unchanged has the same rows, front
    and hypervolume; a search that rewrites its table after every generation thereby computes each generation's
    front once, not once per later generation.

    Once the normalisation is settled (`hv_settled`), a call whose rows are those of the call before (the same
    objects, in the same places) followed by rows of later generations only adds the new generations' records: no
    pass over the rows before (a search of thousands of batches of one spent the most of its own seconds per batch
    filtering, sorting and tabulating every row and generation again). `unchanged`: how many of the table's first
    records the last call left as they were (a writer appends the rest: hypervolume.csv)."""

    def __init__(self) -> None:
        self.key: Optional[tuple[bytes, bytes]] = None
        self.steps: list[tuple[int, list, float]] = []
        self.table: list[dict[str, Any]] = []  # the records of the last call
        self.unchanged = 0
        self.settled = False  # the normalisation is fixed for the run (the rows hold what it is taken from)
        self.seen: tuple = (0, None, 0)  # the last call's rows: (how many, the last one, their highest generation)


def _record(g: int, n: int, front: list, hv: float, lo: np.ndarray, scale: np.ndarray,
            names: Sequence[str]) -> dict[str, Any]:
    return {"generation": g, "evaluations": n, "front_size": len(front), "hypervolume": hv,
            **{f"lo_{k}": float(lo[j]) for j, k in enumerate(names)},
            **{f"scale_{k}": float(scale[j]) for j, k in enumerate(names)}}


def _grown(rows: Sequence[Mapping[str, Any]], generations: int, memo: HvMemo) -> Optional[list]:
    """The rows `rows` adds to those of `memo`'s last call, when it holds them in the same places, adds only rows of
    later generations (in generation order) and the normalisation is settled; else None."""
    n, last, top = memo.seen
    if not (memo.settled and n and len(rows) >= n and rows[n - 1] is last and top <= len(memo.table) <= generations):
        return None
    new = rows[n:]
    prev = top
    for r in new:
        g = r["generation"]
        if g <= top or g < prev:
            return None
        prev = g
    return list(new)


def hypervolume_table(rows, generations: int, objectives, constraints,
                      memo: Optional[HvMemo] = None, *,
                      skip_unmeasured: Skip = True) -> list[dict[str, Any]]:
    """Hypervolume after each generation of the front of all evaluations so far (see the module doc).

    The columns lo_NAME / scale_NAME are in the search space (log10 ε). Only full-fidelity rows count (`is_full`):
    the normalisation, the front and the `evaluations` column (a multi-fidelity search's lower rungs are left out).
    `objectives`: the run's ObjectiveSet (or an ε key: the default three). `memo`: an `HvMemo` of earlier calls on
    this same log, fewer rows then (a running search's), reused where it still holds and updated.
    `skip_unmeasured`: see `hv_normalisation` (False for a run made before: `hv_skips_unmeasured`).
    """
    objectives = as_set(objectives)
    given = rows
    memo = memo if memo is not None else HvMemo()
    new = _grown(given, generations, memo)
    if new is not None:
        return _extend(memo, given, new, generations, objectives, constraints)
    rows = [r for r in rows if is_full(r)]
    first, measured = _first_rows(rows, objectives, skip_unmeasured)
    lo, scale = _lo_scale(_matrix(first, objectives) if first else None, objectives, measured)
    unchanged = len(memo.table)
    if memo.key != (lo.tobytes(), scale.tobytes()):
        memo.key, memo.steps, unchanged = (lo.tobytes(), scale.tobytes()), [], 0
    by_gen = sorted(rows, key=lambda r: r["generation"])
    cuts = [bisect.bisect_right(by_gen, g, key=lambda r: r["generation"]) for g in range(1, generations + 1)]
    kept = 0  # the generations whose memo still holds: a prefix
    while kept < min(len(cuts), len(memo.steps)) and memo.steps[kept][0] == cuts[kept]:
        kept += 1
    if kept < len(cuts):
        del memo.steps[kept:]  # from the first generation that has grown since (or was never computed)
    start = memo.steps[-1][:2] if memo.steps else (0, [])
    grown = _growing(by_gen, cuts[kept:], objectives, constraints, start=start)
    for n, front, F in grown:
        memo.steps.append((n, front, _same_or_hv(memo.steps, front, F, lo, scale)))
    table = [_record(g, n, front, hv, lo, scale, objectives.names)
             for g, (n, front, hv) in enumerate(memo.steps[:len(cuts)], start=1)]
    memo.unchanged = min(unchanged, kept, len(table))
    memo.table = table
    memo.settled = len(first) > len(objectives)
    memo.seen = (len(given), given[-1] if len(given) else None, max((r["generation"] for r in given), default=0))
    return list(table)


def _same_or_hv(steps: list, front: list, F: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> float:
    """The hypervolume of `front` (its objective matrix `F`): the generation before's where it is that same front
    (growing_fronts yields the same list while no row joins it: most batches of one), else computed."""
    if steps and steps[-1][1] is front:
        return steps[-1][2]
    return _hv(F, lo, scale)


def _extend(memo: HvMemo, given, new: list, generations: int, objectives: ObjectiveSet, constraints) -> list:
    """hypervolume_table's records from `memo`'s, for the rows `new` of later generations (see `_grown`)."""
    lo, scale = (np.frombuffer(k) for k in memo.key)
    full = [r for r in new if is_full(r)]
    k = len(memo.table)
    base = memo.steps[k - 1][0] if k else 0  # every row so far (their generations are all <= k)
    gens = range(k + 1, generations + 1)
    cuts = [base + bisect.bisect_right(full, g, key=lambda r: r["generation"]) for g in gens]
    j = 0  # the new generations the memo still holds (computed by an earlier call with more rows)
    while j < len(cuts) and k + j < len(memo.steps) and memo.steps[k + j][0] == cuts[j]:
        j += 1
    if j < len(cuts):
        del memo.steps[k + j:]
    n0, front0 = memo.steps[k + j - 1][:2] if k + j else (0, [])
    grown = _growing(full, [c - base for c in cuts[j:]], objectives, constraints, start=(n0 - base, front0))
    for n, front, F in grown:
        memo.steps.append((base + n, front, _same_or_hv(memo.steps, front, F, lo, scale)))
    memo.table += [_record(g, n, front, hv, lo, scale, objectives.names)
                   for g, (n, front, hv) in zip(gens, memo.steps[k:k + len(cuts)])]
    memo.unchanged = k
    memo.seen = (len(given), given[-1] if len(given) else None,
                 max([memo.seen[2]] + [r["generation"] for r in new]))
    return list(memo.table)


def common_hypervolume(runs: Sequence[tuple[Sequence[Mapping[str, Any]], Mapping[str, float]]], objectives,
                       at: Optional[Sequence[int]] = None) -> tuple[list[list[dict[str, Any]]], np.ndarray, np.ndarray]:
    """The hypervolume of several runs' fronts under ONE normalisation (what fedevo.hypervolume and compare.html
    give): `runs` is (rows, constraints) per run. The normalisation is the ideal point and range, in the search
    space, of the ok full-fidelity evaluations of all runs together whose objectives are all finite (an objective
    none of them measured, ε = ∞ in every one, takes its own best and worst values and is not asked); reference
    point 1.1 in every objective. Per run, a record per generation (`at` None) or per evaluation count in `at` (the
    front of the run's first n full-fidelity evaluations in id order; n beyond the run's evaluations: all of them):
    generation (None for `at`), evaluations, front_size, hypervolume. Returns (records per run, lo, scale)."""
    objectives = as_set(objectives)
    full = [(sorted((r for r in rows if is_full(r)), key=lambda r: r["id"]), cons) for rows, cons in runs]
    pooled, measured = measured_rows([r for rows, _ in full for r in rows if r["status"] == "ok"], objectives)
    lo, scale = _lo_scale(_matrix(pooled, objectives) if pooled else None, objectives, measured)
    out = []
    for rows, cons in full:
        if at is None:
            rows = sorted(rows, key=lambda r: r["generation"])
            gens = list(range(1, max((r["generation"] for r in rows), default=0) + 1))
            lengths = [bisect.bisect_right(rows, g, key=lambda r: r["generation"]) for g in gens]
        else:
            gens = [None] * len(at)
            lengths = [len(rows[:int(n)]) for n in at]
        cuts = sorted(set(lengths))
        grown = list(_growing(rows, cuts, objectives, cons))
        fronts = dict(zip(cuts, (front for _, front, _ in grown)))
        hvs = {n: _hv(F, lo, scale) for n, (_, _, F) in zip(cuts, grown)}
        out.append([{"generation": g, "evaluations": n, "front_size": len(fronts[n]), "hypervolume": hvs[n]}
                    for g, n in zip(gens, lengths)])
    return out, lo, scale


# ---------------------------------------------------------------- the front
def objective_matrix(rows: Sequence[Mapping[str, Any]], objectives) -> np.ndarray:
    """The rows' raw objective values with the worst-value rule applied (n x objectives)."""
    return as_set(objectives).sanitized_matrix(rows)


def is_full(row: Mapping[str, Any]) -> bool:
    """True for a full-fidelity evaluation: trained for all the rounds (a multi-fidelity search's lower rungs have
    `fidelity` < 1, fedevo.searching.fidelity; a plain search's rows have no `fidelity`: all are full). Only these
    enter the front, the hypervolume and what reads the front (picks, retrain, audit)."""
    f = row.get("fidelity")
    return f is None or float(f) == 1.0


def feasible_ok(rows: Sequence[Mapping[str, Any]], objectives, constraints: Mapping[str, float]):
    """Full-fidelity rows with status ok that satisfy the problem's constraints (objective <= bound; >= for a
    maximised one)."""
    objectives = as_set(objectives)
    return [r for r in rows if r["status"] == "ok" and is_full(r) and objectives.feasible(r, constraints)]


def dominated_by(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """For each row of A, whether a row of B dominates it (<= in every objective, < in one; minimised), comparing
    a chunk of B at a time (at most _ND_CELLS cells). A NaN compares false: it neither dominates nor is dominated."""
    dom = np.zeros(len(A), dtype=bool)
    if not len(A) or not len(B):
        return dom
    step = max(1, _ND_CELLS // (len(A) * A.shape[1]))
    for a in range(0, len(B), step):
        P = B[a:a + step, None, :]
        dom |= (np.all(P <= A[None], axis=2) & np.any(P < A[None], axis=2)).any(axis=0)
    return dom


_ND_CELLS = 1 << 22  # comparisons (front × block × objectives) non_dominated holds at once: ~8 MiB of booleans


def non_dominated(F: np.ndarray) -> np.ndarray:
    """Indices of the rows of F (minimised) that no other row dominates, ascending.

    The rows are swept in lexicographic order (a row can only be dominated by one before it), a block at a time,
    against the non-dominated rows found so far: time O(n · front · objectives), memory O(n) — comparing every
    pair at once held n² booleans per objective (a peak of 477 MiB at 10,000 evaluations of 3 objectives, 5.4 MiB
    now: benchmarks/results-2026-11-27-search-scale.txt). A row with a NaN neither dominates nor is dominated (as
    the pairwise comparison had it)."""
    F = np.asarray(F, dtype=float)
    n = len(F)
    if n == 0:
        return np.array([], dtype=int)
    F = F.reshape(n, -1)
    m = F.shape[1]
    nan = np.isnan(F).any(axis=1)
    rest = np.flatnonzero(~nan)
    order = rest[np.lexsort(F[rest].T[::-1])]  # the first objective first, ties broken by the next
    front = np.empty((n, m))
    keep: list[np.ndarray] = []
    k = 0
    i = 0
    while i < len(order):
        block = order[i:i + max(16, min(1024, _ND_CELLS // (max(k, 1) * m)))]
        i += len(block)
        G = F[block]
        if k:  # dominated by a row kept so far
            dom = dominated_by(G, front[:k])
            block, G = block[~dom], G[~dom]
        if len(block) > 1:  # dominated within its block
            dom = dominated_by(G, G)
            block, G = block[~dom], G[~dom]
        front[k:k + len(block)] = G
        k += len(block)
        keep.append(block)
    return np.sort(np.concatenate(keep + [np.flatnonzero(nan)]).astype(int))


def growing_fronts(rows, cuts: Sequence[int], objectives, constraints,
                   start: tuple[int, list] = (0, [])) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """(n, front_rows(rows[:n])) for each n of the non-decreasing `cuts`, each front from the one before and the
    rows added since (a row dominated among the first n is dominated by a member of their front): every prefix's
    front at the cost of one front of all the rows, where computing each afresh cost one per prefix. `start`:
    (n0, front_rows(rows[:n0])) already known, n0 <= cuts[0]."""
    for n, front, _ in _growing(rows, cuts, objectives, constraints, start):
        yield n, front


def _growing(rows, cuts: Sequence[int], objectives, constraints,
             start: tuple[int, list] = (0, [])) -> Iterator[tuple[int, list[dict[str, Any]], np.ndarray]]:
    """growing_fronts, each front with its matrix of objective values in the search space (what its hypervolume is
    computed from: kept as the fronts grow, not taken from every front's rows again)."""
    objectives = as_set(objectives)
    done, front = start
    F = _matrix(front, objectives)
    for n in cuts:
        if n > done:
            cand = feasible_ok(rows[done:n], objectives, constraints)
            done = n
            C = _matrix(cand, objectives)
            keep = non_dominated(C)  # the new rows that none of the new rows dominates ...
            keep = keep[~dominated_by(C[keep], F)]  # ... nor the front so far
            if len(keep):
                C = C[keep]
                stay = ~dominated_by(F, C)  # the front's rows that none of those dominates (nor any new row then)
                joined = [r for r, s in zip(front, stay) if s] + [cand[i] for i in keep]
                J = np.concatenate([F[stay], C])
                order = sorted(range(len(joined)), key=lambda i: joined[i]["id"])
                front, F = [joined[i] for i in order], J[order]
        yield done, front, F


def front_rows(rows, objectives, constraints) -> list[dict[str, Any]]:
    """The Pareto set (ok, full fidelity, feasible, non-dominated on the objectives as the search sees them), in
    id order."""
    objectives = as_set(objectives)
    cand = feasible_ok(rows, objectives, constraints)
    idx = non_dominated(_matrix(cand, objectives))
    return sorted((cand[i] for i in idx), key=lambda r: r["id"])
