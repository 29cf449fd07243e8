"""One column of a run as it is drawn: log or linear, ∞ capped, ticks with readable labels (`numfmt.num`).

Used by every view of front.html (3D, 2D, parallel coordinates, colour bars) so that a value reads the same
everywhere. A column is logarithmic when its gene is declared ``log = true``, when it is an ε and the search
saw ε on a log scale (or its values span two decades or more), or when any other objective's positive values
span two decades or more. On a log axis ε ≤ 10⁻³ (ε = 0 included) is drawn at 10⁻³, the floor the search uses.
Non-finite values (ε = ∞: no privacy) are drawn at a cap just beyond the largest finite value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from .numfmt import num

LOG_SPAN = 100.0  # positive values spanning this factor or more are drawn on a log axis
EPS_FLOOR = 1e-3  # as fedevo.searching.front_math
MAX_TICKS = 6
MAX_DECADES = 12  # a log axis labels every decade up to this many


def finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def nice_step(span: float, n: int = 5) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def linear_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    step = nice_step(hi - lo, n)
    k0 = math.ceil(lo / step - 1e-9)
    out = []
    k = k0
    while k * step <= hi + 1e-9 * step:
        out.append(round(k * step, 12))
        k += 1
    return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """Tick exponents (log10 values) between lo and hi (log10 space): every decade (every other one only beyond
    MAX_DECADES), with 2 and 5 when fewer than three decades show."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi - lo < 1e-9:
        return [lo]
    decades = list(range(math.floor(lo + 1e-9), math.ceil(hi - 1e-9) + 1))
    ticks = [float(d) for d in decades if lo - 1e-9 <= d <= hi + 1e-9]
    if len(ticks) < 3:
        ticks = [d + math.log10(m) for d in decades for m in (1, 2, 5)]
        ticks = [t for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
        while len(ticks) > MAX_TICKS:
            ticks = ticks[::2]
    while len(ticks) > MAX_DECADES:
        ticks = ticks[::2]
    if len(ticks) < 2:  # a narrow range inside one decade: its ends
        ticks = sorted({lo, hi, *ticks})
    return ticks


def decade_range(lo: float, hi: float) -> tuple[float, float]:
    """The drawn range (log10 space) of values from 10**lo to 10**hi: on an axis spanning two decades or more, the
    decades enclosing them (every value then lies between two labelled decades: 0.013 … 20 → 0.01 … 100);
    narrower, an end within 0.3 decade of a decade reaches it (9.17 → 10)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return lo, hi
    flo, chi = math.floor(lo + 1e-9), math.ceil(hi - 1e-9)
    if hi - lo >= 2:
        return float(flo), float(chi)
    return (float(flo) if lo - flo <= 0.3 else lo), (float(chi) if chi - hi <= 0.3 else hi)


@dataclass
class Column:
    key: str
    label: str  # short label (axis titles, selector, tables)
    raw: list[Any]  # the values as logged (None / inf / NaN kept)
    kind: str = "num"  # "num" | "int" | "choice"
    log: bool = False
    choices: tuple = ()
    draw: list[float] = field(default_factory=list)  # drawn coordinate: log10 on log columns, index for choices
    capped: list[bool] = field(default_factory=list)
    floored: list[bool] = field(default_factory=list)
    cap: Optional[float] = None  # the (data-space) value non-finite points are drawn at

    @property
    def data(self) -> list[float]:
        """Data-space coordinates for plotly axes of type 'log' (10**draw) or linear (draw)."""
        return [10 ** d if self.log else d for d in self.draw]

    def ticks(self) -> tuple[list[float], list[str]]:
        """(tickvals in draw space, labels)."""
        fin = [d for d, c in zip(self.draw, self.capped) if math.isfinite(d) and not c]
        if self.kind == "choice":
            return list(range(len(self.choices))), [str(c) for c in self.choices]
        if not fin and self.cap is not None:  # every value ∞ or missing: the cap's label alone (no '1' beneath
            return [math.log10(self.cap) if self.log else self.cap], [self.cap_label]  # '∞', as if ε = 1 were there)
        if not fin:
            fin = [d for d in self.draw if math.isfinite(d)] or [0.0]
        lo, hi = min(fin), max(fin)
        if self.log:
            vals = log_ticks(*decade_range(lo, hi))
            labels = [num(_clean(10 ** v)) for v in vals]
        elif self.kind == "int" and hi - lo <= 10:
            vals = [float(v) for v in range(math.ceil(lo), math.floor(hi) + 1)]
            labels = [str(int(v)) for v in vals]
        elif self.kind == "int":  # integer steps only (no 2.5 between 0 and 5)
            vals = [v for v in linear_ticks(lo, hi) if float(v).is_integer()]
            labels = [str(int(v)) for v in vals]
        else:
            vals = linear_ticks(lo, hi)
            labels = [num(v) for v in vals]
        if self.cap is not None:
            c = math.log10(self.cap) if self.log else self.cap
            vals, labels = vals + [c], labels + [self.cap_label]
        return vals, labels

    def axis_layout(self, title: Optional[str] = None) -> dict:
        """plotly cartesian / 3D axis settings (data-space tick values, readable labels)."""
        vals, labels = self.ticks()
        d = dict(title=dict(text=(title or self.label) + (" (log)" if self.log else "")),
                 tickvals=[10 ** v if self.log else v for v in vals], ticktext=labels)
        if self.log:
            d["type"] = "log"
            lo, hi = self.log_range()
            pad = 0.04 * (hi - lo or 1)
            d["range"] = [lo - pad, hi + pad]  # plotly: a log axis' range in log10
        return d

    def log_range(self) -> tuple[float, float]:
        """A log column's drawn range (log10 space): `decade_range` of its finite values, and its cap (∞) inside."""
        fin = [d for d, c in zip(self.draw, self.capped) if math.isfinite(d) and not c]
        if not fin:
            fin = [d for d in self.draw if math.isfinite(d)] or [0.0]
        lo, hi = decade_range(min(fin), max(fin))
        if self.cap is not None:
            hi = max(hi, math.log10(self.cap))
        return lo, hi

    @property
    def cap_label(self) -> str:
        """The cap's label: ∞ where a value drawn there is ∞ (ε without privacy), else "missing" (values not
        measured or undefined: a user's objective whose function raised; ε paper without its closed form)."""
        return "∞" if any(c and v == math.inf for v, c in zip(self.raw, self.capped)) else "missing"

    @property
    def note(self) -> str:
        """The notes on this column's capped and floored points where its plots are 2D only (compare.html's
        projections): capped points marked ×."""
        return self.cap_note(marked="×")

    def cap_note(self, *, marked: str) -> str:
        """`note`, saying how the page's plots of this column mark a capped point: `marked`, e.g. "× in 2D, ■ in
        3D" (front.html's 3D view's axes), "×" (2D only), "" (not marked: ε paper on the parallel axes only)."""
        parts = []
        n = sum(self.capped)
        if n:
            n_inf = sum(1 for v, c in zip(self.raw, self.capped) if c and v == math.inf)
            if not self.key.startswith("eps"):
                what = ("∞" if n_inf == n else "missing (not measured)" if n_inf == 0 else
                        f"∞ ({n_inf}) or missing ({n - n_inf})")
            else:  # ∞: no privacy; NaN: no such ε for that evaluation (the paper's formula: central trust, none)
                what = ("∞ (no privacy)" if n_inf == n else "undefined" if n_inf == 0 else
                        f"∞ (no privacy: {n_inf}) or undefined ({n - n_inf})")
            parts.append(f"{n} point{'s' if n != 1 else ''} with {self.label} {what} drawn at the cap "
                         f"{self.label} = {num(self.cap)}, labelled {self.cap_label} ("
                         f"{f'marked {marked}; ' if marked else ''}the hover text shows the true value).")
        m = sum(self.floored)
        if m:
            parts.append(f"{m} point{'s' if m != 1 else ''} with {self.label} ≤ {num(EPS_FLOOR)} (0 included) drawn "
                         f"at {num(EPS_FLOOR)} on the log axis.")
        return " ".join(parts)


def _clean(v: float) -> float:
    """10**k computed in floating point, rounded to 12 significant digits (1.9999999 -> 2)."""
    return float(f"{v:.12g}")


def make_column(rows: Sequence[dict], key: str, label: str, *, kind: str = "num", log: Optional[bool] = None,
                choices: Sequence[Any] = (), eps_log: bool = False) -> Column:
    """A column of `rows`. log=None: decided from the values (see the module doc); eps_log: the search saw ε
    on a log scale (ε columns are then log whenever their values are positive)."""
    raw = [r.get(key) for r in rows]
    col = Column(key=key, label=label, raw=raw, kind=kind, choices=tuple(choices))
    if kind == "choice":
        idx = {str(c): i for i, c in enumerate(choices)}
        col.draw = [float(idx.get(str(v), -1)) for v in raw]
        col.capped = col.floored = [False] * len(raw)
        return col
    fin = [float(v) for v in raw if finite(v)]
    is_eps = key.startswith("eps")
    if log is None:
        pos = [v for v in fin if v > 0] if not is_eps else [max(v, EPS_FLOOR) for v in fin if v >= 0]
        log = bool(fin) and len(pos) == len(fin) and (
            (is_eps and eps_log) or max(pos) / min(pos) >= LOG_SPAN)
    col.log = bool(log) and bool(fin)
    col.floored = [col.log and finite(v) and float(v) < EPS_FLOOR for v in raw]
    if col.log:
        fin = [max(v, EPS_FLOOR) for v in fin]
    cap = None
    if len(fin) < len(raw):
        if not fin:
            cap = 1.0
        elif col.log:  # × 3 beyond the largest value and the highest label (41 → 300, not 124 beside 100)
            top = max(log_ticks(*decade_range(math.log10(min(fin)), math.log10(max(fin)))), default=-math.inf)
            cap = max(max(fin), 10 ** top) * 3
        else:
            hi, lo = max(fin), min(fin)
            cap = hi + 0.15 * (hi - lo) if hi > lo else (abs(hi) * 1.5 or 1.0)
    col.cap = cap
    col.capped = [not finite(v) for v in raw]
    vals = [cap if not finite(v) else max(float(v), EPS_FLOOR) if col.log else float(v) for v in raw]
    col.draw = [math.log10(v) if col.log else v for v in vals]
    return col
