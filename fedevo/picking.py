"""Picking solutions of a search run: pure functions over evaluation rows (dicts as read from evaluations.csv).

Grammar of a pick (comma-separated terms; spaces ignored; result in the order written, duplicates removed)::

    SPEC      := TERM ("," TERM)*
    TERM      := ID | SELECTOR | FILTER
    ID        := 12 | id:12          that evaluation (any evaluated id, on the front or not; filters do not apply)
    SELECTOR  := knee                the knee of the (filtered) Pareto set, among the solutions clearly
                                     better than chance (see `knee_bar`, `knee_candidates`, `knee_index`)
               | knee:CAP[:CAP...]   the knee re-picked within caps on it alone, e.g. knee:eps<=2,
                                     knee:eps<=2:comm<=5000, knee:NAME<=X (a CAP is written like a FILTER); the
                                     caps remove candidates but do not rescale the space the knee is measured
                                     in, so a cap the knee meets leaves it in place (unlike a FILTER)
               | lowest-NAME[:N]     the N (default 1) Pareto solutions with the lowest NAME: an objective of
                                     the run (lowest-error, lowest-comm, lowest-eps, lowest-worst_client_error,
                                     ...) or eps / eps_paper
               | highest-NAME[:N]    the N with the highest NAME (a maximised objective's best)
               | front               every solution of the (filtered) Pareto set
    FILTER    := KEY OP NUMBER       KEY: an objective of the run, or error, comm, eps, eps_paper,
                                     accuracy_global; OP: <=, <, >=, >
                                     e.g. eps<=8, comm<=2000: restricts the Pareto set that every selector
                                     picks from (all filters together, wherever they are written)

A spec of filters only picks the whole filtered Pareto set (as if `front` were added). Ties are broken by the
other objectives, then by id. A pick that matches nothing (unknown id, filters that leave no Pareto solution,
an empty front) is a FedevoError, and so is a term that ranks or bounds by a value no Pareto solution has (None or
NaN in all). ε = inf (no privacy) is larger than every number.

The knee is never a solution no better than chance: with ``chance`` the bar a candidate's error must stay
below — `RunData.knee_bar`: the error of guessing (1 − 1/classes) minus a margin for the test set's size,
`knee_bar` — solutions with error ≥ the bar, and any whose status is not ok (diverged, failed), are left out
before the knee is chosen; a front with nothing left has no knee (a FedevoError for ``knee``).

The Pareto set is the run's front (status ok, within the problem's constraints, non-dominated in the run's
objectives: fedevo.objectives, by default error, comm and the problem's `eps_objective`), as written to front.csv.
Every function takes the run's ObjectiveSet as ``objectives`` (or, as before the objectives list, an ε key:
error, comm and that ε).
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from .errors import FedevoError

FILTER_KEYS = ("error", "comm", "eps", "eps_paper", "accuracy_global")  # besides the run's objectives
LOWEST_KEYS = ("error", "comm", "eps", "eps_paper")
OPS = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, ">": lambda a, b: a > b}
GRAMMAR = ("a pick is comma-separated terms: an evaluation id (12), knee, lowest-NAME[:N] for an objective NAME "
           "(lowest-error, lowest-comm, lowest-eps, ...), front, or a filter on the Pareto set like eps<=8, "
           "comm<=2000, error<=0.2")

_FILTER_RE = re.compile(r"^([a-z_][a-z0-9_]*)(<=|>=|<|>)([-+\u22120-9.eE]+[kKMGBT]?|[-+\u2212]?(?:inf|∞))$")  # (\u2212: the minus the tables print)
# a bound as tables and pages write numbers (fedevo.viz.numfmt): 0.05, 1e-3, 1000, 1k, 1.3k, 2.5M, 1G or 1B, 1T, inf, ∞
_BOUND_RE = re.compile(r"^([-+]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([-+]?\d+))?([kKMGBT])?$")
_SUFFIX = {"k": 3, "K": 3, "M": 6, "G": 9, "B": 9, "T": 12}
_LOWEST_RE = re.compile(r"^(lowest|highest)-([a-z_][a-z0-9_]*)(?::(-?\d+))?$")  # N < 1: refused by its check
_ID_RE = re.compile(r"^(?:id[:=]|#)?(\d+)$")


# ============================================================================================ terms
@dataclass(frozen=True)
class Term:
    kind: str  # "id" | "knee" | "lowest" | "highest" | "front" | "filter"
    text: str
    id: Optional[int] = None
    key: Optional[str] = None
    n: int = 1
    op: Optional[str] = None
    value: Optional[float] = None
    caps: tuple = ()  # knee:CAP...: filter Terms that apply to this knee alone
    maximize: bool = False  # a filter on a maximised objective: a missing value is below every bound


def _keys(objectives, base: Sequence[str]) -> dict[str, str]:
    """{lower-case key: key} of the run's objective names and `base`."""
    from .objectives import as_set

    return {k.lower(): k for k in dict.fromkeys([*as_set(objectives).names, *base])}


def _maximised(objectives) -> frozenset:
    from .objectives import as_set

    return frozenset(o.name for o in as_set(objectives) if o.maximize)


def _lower(raw: str) -> str:
    """A pick term without spaces, in lower case but for a number's suffix (2.5M: mega, as the tables write it)."""
    t = "".join(raw.split())

    def word(m: re.Match) -> str:
        w = m.group(0)
        suffix = w in _SUFFIX and m.start() > 0 and (t[m.start() - 1].isdigit() or t[m.start() - 1] == ".")
        return w if suffix else w.lower()

    return re.sub(r"[A-Za-z]+", word, t)


def parse_spec(spec: str, objectives=None) -> list[Term]:
    """Parse a pick for a run with `objectives` (its ObjectiveSet; None: error, comm, eps); FedevoError (naming the
    bad term) on anything not in the grammar."""
    filter_keys, lowest_keys = _keys(objectives, FILTER_KEYS), _keys(objectives, LOWEST_KEYS)
    up = _maximised(objectives)
    if spec is None or not spec.strip():
        raise FedevoError(f"empty pick; {GRAMMAR}")
    terms = []
    for raw in spec.split(","):
        t = _lower(raw)
        if not t:
            raise FedevoError(f"pick {spec!r} has an empty term; {GRAMMAR}")
        if m := _ID_RE.match(t):
            terms.append(Term("id", t, id=int(m.group(1))))
        elif t == "knee":
            terms.append(Term("knee", t))
        elif t.startswith("knee:"):
            caps = []
            for c in t[len("knee:"):].split(":"):
                m = _FILTER_RE.match(c)
                if not m or m.group(3) in ("nan",) or m.group(1) not in filter_keys:
                    raise FedevoError(f"pick term {raw.strip()!r}: {c!r} is not a cap like eps<=2 or comm<=5000 "
                                      f"(on {', '.join(filter_keys.values())}); {GRAMMAR}")
                caps.append(_filter(t, m, filter_keys, up))
            terms.append(Term("knee", t, caps=tuple(caps)))
        elif t in ("front", "pareto", "all"):
            terms.append(Term("front", t))
        elif (m := _LOWEST_RE.match(t)) and m.group(2) in lowest_keys:
            n = int(m.group(3)) if m.group(3) is not None else 1
            if n < 1:
                raise FedevoError(f"pick term {t!r}: N must be >= 1")
            terms.append(Term("lowest" if m.group(1) == "lowest" else "highest", t, key=lowest_keys[m.group(2)], n=n))
        elif m:
            raise FedevoError(f"cannot understand pick term {raw.strip()!r}: {m.group(2)!r} is not an objective of this run "
                              f"({', '.join(lowest_keys.values())})")
        elif (m := _FILTER_RE.match(t)) and m.group(1) in filter_keys:
            terms.append(_filter(t, m, filter_keys, up))
        elif m:
            raise FedevoError(f"cannot understand pick term {raw.strip()!r}: cannot filter on {m.group(1)!r}; filters take "
                              f"{', '.join(filter_keys.values())}")
        else:
            raise FedevoError(f"cannot understand pick term {raw.strip()!r}; {GRAMMAR}")
    return terms


def bound(text: str) -> float:
    """A filter's or cap's number as fedevo's tables and pages write it (1.3k is 1300, as the page's caps read it);
    ValueError if it is none."""
    t = text.strip().replace("\u2212", "-")
    if t.lstrip("+-") in ("inf", "∞"):
        return -math.inf if t.startswith("-") else math.inf
    m = _BOUND_RE.match(t)
    if m is None or (m.group(2) is not None and m.group(3) is not None):  # 1e3k: one or the other
        raise ValueError(text)
    exp = int(m.group(2) or 0) + _SUFFIX.get(m.group(3) or "", 0)
    return float(f"{m.group(1)}e{exp}")  # decimal: 1.1k is 1100, not 1100.0000000000002


def _filter(t: str, m: re.Match, keys: Mapping[str, str], maximised=frozenset()) -> Term:
    try:
        v = bound(m.group(3))
    except ValueError:
        raise FedevoError(f"pick term {t!r}: {m.group(3)!r} is not a number (0.05, 1e-3, 1000, 1k, 1.3k, 2.5M, "
                          "inf)") from None
    if math.isnan(v):
        raise FedevoError(f"pick term {t!r}: NaN is not a bound")
    key = keys[m.group(1)]
    return Term("filter", m.group(0), key=key, op=m.group(2), value=v, maximize=key in maximised)


# ============================================================================================ helpers
def _num(v: Any) -> float:
    """A row value as a float for comparisons: None/NaN -> inf (worst)."""
    if v is None:
        return math.inf
    v = float(v)
    return math.inf if math.isnan(v) else v


def objective_matrix(rows: Sequence[Mapping[str, Any]], objectives="eps") -> np.ndarray:
    """(n, objectives) array of the rows' values with the worst-value rule applied (ObjectiveSet.sanitized_matrix),
    each minimised (a maximised objective negated)."""
    from .objectives import as_set

    objs = as_set(objectives)
    sign = np.array([-1.0 if o.maximize else 1.0 for o in objs])
    return objs.sanitized_matrix(rows) * sign


LOG_DECADES = 2.0  # an objective spanning this many decades (or more) is compared on a log scale


def knee_index(F: np.ndarray, allowed: Optional[Sequence[bool]] = None) -> tuple[int, str]:
    """Index of the knee of a non-dominated set F (rows minimised) and the method that found it.

    An objective whose values on the set are positive and span two decades or more (typically ε: 5 and 5000
    differ in kind, 5000 and 10000 hardly) is replaced by its log10 — the rule front.html uses for its log axes;
    then each objective is normalised to [0, 1] over the set. pymoo's ``HighTradeoffPoints`` (the points whose
    least improvement per unit of deterioration towards their neighbours is an upper-tail outlier) gives the
    candidates; among several, the one closest to the ideal point (0, ..., 0) is taken. When it finds none (a
    smooth front, or fewer than 3 points) the fallback is the point closest (Euclidean) to the ideal point on
    the normalised objectives. Ties go to the first row.

    allowed: the rows the knee may be (caps, ``knee:eps<=X``); the space — the log rule, the normalisation and the
    high trade-off points — stays that of the whole set F, so caps remove candidates without rescaling it: a cap
    the uncapped knee meets leaves it in place. Among the allowed high trade-off points the one closest to the
    ideal point is taken; with none allowed, the allowed row closest to the ideal point.
    """
    F = np.array(F, dtype=float)
    n = len(F)
    ok = np.ones(n, dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)
    if n == 0 or not ok.any():
        raise ValueError("knee of an empty set")
    if n == 1:
        return 0, "the only solution"
    for j in range(F.shape[1]):
        col = F[:, j]
        if np.all(col > 0) and col.max() / col.min() >= 10 ** LOG_DECADES:
            F[:, j] = np.log10(col)
    lo, hi = F.min(axis=0), F.max(axis=0)
    span = hi - lo
    span[span <= 0] = 1.0
    N = (F - lo) / span
    dist = np.linalg.norm(N, axis=1)
    idx = None
    if n >= 3:
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # pymoo's import of scipy.spatial.ckdtree is deprecated
                from pymoo.mcdm.high_tradeoff import HighTradeoffPoints

                idx = HighTradeoffPoints().do(N)
        except Exception:  # noqa: BLE001 - degenerate sets (duplicates, NaN tradeoffs) make pymoo raise
            idx = None
    idx = np.array([], dtype=int) if idx is None else np.atleast_1d(np.asarray(idx, dtype=int))
    idx = idx[ok[idx]]
    if np.size(idx) == 0:
        cand = np.flatnonzero(ok)
        why = "no high trade-off point" + (" within the caps" if allowed is not None else "")
        return int(cand[np.argmin(dist[cand])]), f"closest to the ideal point (fallback: {why})"
    return int(idx[np.argmin(dist[idx])]), "pymoo HighTradeoffPoints"


def chance_error(num_classes: Optional[int]) -> Optional[float]:
    """The error of guessing a class at random (1 − 1/classes); None when the number of classes is unknown."""
    return None if not num_classes or num_classes < 2 else 1.0 - 1.0 / num_classes


KNEE_Z = 2.326  # one-sided 99 %: a knee candidate's error is below chance by more than seed/test-set noise


def knee_bar(chance: Optional[float], n_test: Optional[int], z: float = KNEE_Z) -> Optional[float]:
    """The error a knee candidate must stay below: chance − z·√(chance·(1 − chance)/n_test), the one-sided 99 %
    binomial margin of an error measured on n_test test examples (a classifier at chance still scores up to
    that much below it by luck). The error is a mean of per-client accuracies whose test sets together are the
    n_test examples, so its spread is at least this pooled one's: the margin is a floor. Unknown chance: None;
    unknown n_test: chance itself."""
    if chance is None:
        return None
    if not n_test:
        return chance
    return chance - z * math.sqrt(chance * (1.0 - chance) / n_test)


def better_than_chance(r: Mapping[str, Any], chance: Optional[float]) -> bool:
    """Status ok, a finite error, and (when `chance` is known) error < chance."""
    if r.get("status", "ok") != "ok":
        return False
    e = _num(r.get("error"))
    return math.isfinite(e) and (chance is None or e < chance)


def knee_candidates(front: Sequence[Mapping[str, Any]], chance: Optional[float] = None) -> list[Mapping[str, Any]]:
    """The solutions a knee may be chosen from: those better than chance (and not diverged or failed)."""
    return [r for r in front if better_than_chance(r, chance)]


def knee(front: Sequence[Mapping[str, Any]], objectives=None,
         chance: Optional[float] = None, *, eps_key: str = "eps") -> tuple[Mapping[str, Any], str]:
    """The knee of `front` among its `knee_candidates` over the run's objectives; ValueError when none is better
    than chance."""
    cand = knee_candidates(front, chance)
    if not cand:
        raise ValueError("no solution better than chance")
    i, how = knee_index(objective_matrix(cand, objectives if objectives is not None else eps_key))
    return cand[i], how


def lowest(front: Sequence[Mapping[str, Any]], key: str, n: int, objectives=None,
           highest: bool = False, *, eps_key: str = "eps") -> list[Mapping[str, Any]]:
    """The n rows with the lowest `key` (the highest with highest=True; None/NaN last either way); ties broken by
    the other objectives, each towards its better end, then id."""
    from .objectives import as_set

    def rank(v: Any, high: bool) -> float:  # None/NaN last in either direction
        if not high:
            return _num(v)
        return math.inf if v is None or math.isnan(float(v)) else -float(v)

    others = [o for o in as_set(objectives, eps_key) if o.name != key]
    return sorted(front, key=lambda r: (rank(r[key], highest), *(rank(r[o.name], o.maximize) for o in others),
                                        r["id"]))[:n]


def apply_filters(front: Sequence[Mapping[str, Any]], filters: Sequence[Term]) -> list[Mapping[str, Any]]:
    """The rows within every filter; a missing (None/NaN) value is at its objective's worst end: above every bound,
    below every bound for a maximised objective."""
    def value(v, f):
        x = _num(v)
        return -math.inf if f.maximize and (v is None or math.isnan(float(v))) else x

    return [r for r in front if all(OPS[f.op](value(r[f.key], f), f.value) for f in filters)]


def _fmt_range(rows, key) -> str:
    vals = [_num(r[key]) for r in rows]
    show = lambda v: "∞" if v == math.inf else f"{v:.4g}"  # noqa: E731
    if vals and min(vals) == max(vals):
        return show(vals[0])
    return f"{show(min(vals))}–{show(max(vals))}" if vals else "–"


# ============================================================================================ picking
@dataclass(frozen=True)
class Pick:
    row: Mapping[str, Any]
    reasons: tuple[str, ...]  # why it was picked, e.g. ("lowest-error #1", "knee")

    @property
    def id(self) -> int:
        return int(self.row["id"])

    @property
    def label(self) -> str:
        return " + ".join(self.reasons)


def pick(spec: str, rows: Sequence[Mapping[str, Any]], front: Sequence[Mapping[str, Any]], *,
         eps_key: str = "eps", chance: Optional[float] = None, objectives=None) -> list[Pick]:
    """The solutions `spec` selects among `rows` (every evaluation) and `front` (the Pareto set).

    `chance`: the error at or above which a solution is no better than chance (never the knee). `objectives`: the
    run's ObjectiveSet (RunData.objectives); None: error, comm and `eps_key`.

    Returns them in the order the terms are written, each id once (its reasons merged).
    """
    from .objectives import as_set

    objectives = as_set(objectives, eps_key)
    terms = parse_spec(spec, objectives)
    filters = [t for t in terms if t.kind == "filter"]
    selectors = [t for t in terms if t.kind != "filter"]
    if not selectors:
        selectors = [Term("front", "front")]
    from .searching.front_math import is_full

    _refuse_undefined(terms, front)
    by_id = {int(r["id"]): r for r in rows if is_full(r)}  # a multi-fidelity search's lower rungs are never picked
    lower = {int(r["id"]): r for r in rows if not is_full(r)}
    needs_front = any(t.kind in ("knee", "lowest", "highest", "front") for t in selectors)
    cand = list(front)
    if needs_front:
        if not cand:
            raise FedevoError("the run has no Pareto solution (no evaluation finished with status ok within the "
                              "constraints, so far); pick evaluations by id instead")
        cand = apply_filters(cand, filters)
        if not cand:
            fs = ", ".join(f.text for f in filters)
            ranges = ", ".join(f"{k} {_fmt_range(front, k)}" for k in dict.fromkeys(f.key for f in filters))
            raise FedevoError(f"no Pareto solution satisfies {fs} (on the front of {len(front)}: {ranges})")
    out: dict[int, list[str]] = {}
    order: list[Mapping[str, Any]] = []

    def add(r, reason):
        i = int(r["id"])
        if i not in out:
            out[i] = []
            order.append(r)
        if reason not in out[i]:
            out[i].append(reason)

    knees: dict[tuple, Mapping[str, Any]] = {}
    for t in selectors:
        if t.kind == "id":
            r = by_id.get(t.id)
            if r is None and t.id in lower:
                low = lower[t.id]
                n = low["rounds_trained"]
                raise FedevoError(f"id {t.id} was trained for {n} round{'s' if n != 1 else ''} only (a lower rung of the "
                                  "multi-fidelity search, not promoted to the full rounds); only full-fidelity "
                                  "evaluations can be picked")
            if r is None:
                lo, hi = (min(by_id), max(by_id)) if by_id else (None, None)
                have = f"ids {lo}–{hi}" if by_id else "no evaluations"
                raise FedevoError(f"no evaluation with id {t.id} in this run ({have})")
            add(r, f"id {t.id}")
        elif t.kind == "knee":
            if t.caps not in knees:
                knees[t.caps] = _capped_knee(cand, t.caps, objectives, chance)
            add(knees[t.caps], t.text if t.caps else "knee")
        elif t.kind in ("lowest", "highest"):
            for rank, r in enumerate(lowest(cand, t.key, t.n, objectives, highest=t.kind == "highest"), start=1):
                add(r, f"{t.kind}-{t.key} #{rank}")
        elif t.kind == "front":
            for r in cand:
                add(r, "Pareto")
    if chance is not None:  # picked all the same (the spec asked for it), but never without saying so
        for r in order:
            if r.get("status") == "ok" and _num(r.get("error")) >= chance:
                out[int(r["id"])].append(f"not clearly better than chance (error ≥ {chance:.3g})")
    return [Pick(row=r, reasons=tuple(out[int(r["id"])])) for r in order]


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _refuse_undefined(terms: Sequence[Term], front: Sequence[Mapping[str, Any]]) -> None:
    """FedevoError for a term that ranks or bounds by a value no Pareto solution has (None or NaN in every one:
    ε paper under central or distributed trust, an evaluator's accuracy it did not report): it would pick by the
    tie-breaks, or filter on nothing, and call that a choice by the value (front.html leaves such a column out)."""
    keyed = [(t, t.key) for t in terms if t.kind in ("lowest", "highest", "filter")]
    keyed += [(t, c.key) for t in terms if t.kind == "knee" for c in t.caps]
    for t, key in keyed:
        if front and all(_missing(r.get(key)) for r in front):
            raise FedevoError(f"pick term {t.text!r}: no Pareto solution has a value of {key} (it is undefined for "
                              f"all {len(front)}); pick by another objective")
        # ∞ in every one (ε without privacy): a ranking by it would be the tie-breaks' (filters say their range)
        if t.kind in ("lowest", "highest") and front and len({_num(r.get(key)) for r in front}) == 1 \
                and math.isinf(_num(front[0].get(key))):
            inf = "∞" if _num(front[0].get(key)) > 0 else "-∞"
            raise FedevoError(f"pick term {t.text!r}: every Pareto solution has {key} = {inf}"
                              + (" (no privacy)" if key.startswith("eps") and inf == "∞" else "")
                              + f", all {len(front)}: it ranks none above another; pick by another objective")


def _beyond(r: Mapping[str, Any], caps: Sequence[Term], rows: Sequence[Mapping[str, Any]]) -> float:
    """How far `r` is outside `caps`: per cap, the distance past its bound (below it for >= and >), in units of the
    key's finite range over `rows` (1 where it has none); a missing value is infinitely far."""
    total = 0.0
    for c in caps:
        v = _num(r[c.key])
        if c.maximize and (r[c.key] is None or math.isnan(float(r[c.key]))):
            v = -math.inf
        past = c.value - v if c.op in (">=", ">") else v - c.value
        vals = [x for x in (_num(q[c.key]) for q in rows) if math.isfinite(x)]
        span = (max(vals) - min(vals)) if vals else 0.0
        total += max(0.0, past) / (span if span > 0 else 1.0)
    return total


def _capped_knee(cand, caps: Sequence[Term], objectives, chance: Optional[float]) -> Mapping[str, Any]:
    """The knee of `cand` within `caps`; FedevoError naming the caps (and the closest solution) when none fits."""
    within = apply_filters(cand, caps)
    bar = f" (error < {chance:.3g})" if chance is not None else ""
    if caps and not within:
        fs = ", ".join(c.text for c in caps)
        good = knee_candidates(cand, chance) or list(cand)
        near = min(good, key=lambda r: (_beyond(r, caps, good), int(r["id"])))
        have = ", ".join(f"{c.key} {_num(near[c.key]):.4g}" for c in caps)
        raise FedevoError(f"no knee within {fs}: no Pareto solution satisfies it; the closest is id {near['id']} "
                          f"({have})")
    if not knee_candidates(within, chance):
        where = f" within {', '.join(c.text for c in caps)}" if caps else ""
        raise FedevoError(f"no knee{where}: none of the {len(within)} Pareto solution(s) considered is clearly "
                          f"better than chance{bar}; pick by id or lowest-error instead")
    # the caps remove candidates; the space the knee is measured in stays that of every candidate (knee_index)
    every = knee_candidates(cand, chance)
    inside = {id(r) for r in within}
    i, _ = knee_index(objective_matrix(every, objectives), allowed=[id(r) in inside for r in every] if caps else None)
    return every[i]


def marks(front: Sequence[Mapping[str, Any]], objectives=None, n_lowest: int = 2,
          chance: Optional[float] = None, *, eps_key: str = "eps") -> dict[int, list[str]]:
    """Marks for displaying a front: the knee (if one is better than chance) and the `n_lowest` lowest-error
    solutions (seed 004's picks)."""
    from .objectives import as_set

    objectives = as_set(objectives, eps_key)
    out: dict[int, list[str]] = {}
    if not front:
        return out
    for rank, r in enumerate(lowest(front, "error", n_lowest, objectives), start=1):
        out.setdefault(int(r["id"]), []).append(f"lowest-error #{rank}")
    if knee_candidates(front, chance):
        out.setdefault(int(knee(front, objectives, chance)[0]["id"]), []).append("knee")
    return out
