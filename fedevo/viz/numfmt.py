"""Numbers for people: one formatter for every table, tooltip and tick (Python here, the same rules in JS).

``num(v)``:

* missing / NaN → "–", ±inf → "∞" / "−∞", 0 → "0";
* |v| ≥ 1000: three significant digits with a suffix k, M, B, T (1e5 → "100k", 1234 → "1.23k",
  2.5e9 → "2.5B"); from 1e15 on, an exponent ("3e15");
* 1 ≤ |v| < 1000: three significant digits (3.2, 12.3, 250);
* 0.001 ≤ |v| < 1: three decimals, or two significant digits where three decimals keep fewer
  (0.0831 → "0.083", 0.942 → "0.942", 0.00123 → "0.0012");
* |v| < 0.001: two significant digits as an exponent without "+" or leading zeros (2.3e-6 → "2.3e-6").

Trailing zeros are dropped (0.5, not 0.500). Integers below 1000 print as they are. ``JS_NUM`` is the same
function in JavaScript (used by the page's colour bars, selection table and live tables);
tests check both against the same cases.
"""

from __future__ import annotations

import math
from typing import Any

SUFFIXES = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def _strip(s: str) -> str:
    return s.rstrip("0").rstrip(".") if "." in s else s


def _exp(v: float, sig: int = 2) -> str:
    m, e = f"{v:.{sig - 1}e}".split("e")
    return f"{_strip(m)}e{int(e)}"


def num(v: Any) -> str:
    if v is None or isinstance(v, str):
        return "–" if v is None else v
    if isinstance(v, bool):
        return str(v)
    v = float(v)
    if math.isnan(v):
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    a = abs(v)
    sign = "-" if v < 0 else ""
    if a >= 1e15:
        return sign + _exp(a, 2)
    if a >= 999.5:
        for div, suffix in SUFFIXES:
            m = float(f"{a / div:.3g}")
            if m >= 1:
                if m >= 1000 and div < 1e12:  # 999.95k rounds to 1000k: say 1M
                    continue
                return sign + _strip(f"{m:.3g}" if m < 1000 else f"{m:.0f}") + suffix
    if a >= 1:
        return sign + _strip(f"{float(f'{a:.3g}'):.6f}")
    if a >= 1e-3:
        decimals = max(3, -math.floor(math.log10(a)) + 1)
        return sign + _strip(f"{a:.{decimals}f}")
    return sign + _exp(a, 2)


JS_NUM = r"""
function fedevoNum(v) {
  if (v === null || v === undefined || (typeof v === 'number' && isNaN(v))) return '–';
  if (typeof v !== 'number') return String(v);
  if (v === Infinity) return '∞';
  if (v === -Infinity) return '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v), sign = v < 0 ? '-' : '';
  const strip = s => s.indexOf('.') >= 0 && s.indexOf('e') < 0 ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  const exp = (x, sig) => { const p = x.toExponential(sig - 1).split('e');
                            return strip(p[0]) + 'e' + parseInt(p[1], 10); };
  if (a >= 1e15) return sign + exp(a, 2);
  if (a >= 999.5) {
    const suf = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
    for (const [div, s] of suf) {
      const m = parseFloat((a / div).toPrecision(3));
      if (m >= 1) {
        if (m >= 1000 && div < 1e12) continue;
        return sign + strip(m < 1000 ? m.toPrecision(3) : m.toFixed(0)) + s;
      }
    }
  }
  if (a >= 1) return sign + strip(parseFloat(a.toPrecision(3)).toFixed(6));
  if (a >= 1e-3) {
    const d = Math.max(3, -Math.floor(Math.log10(a)) + 1);
    return sign + strip(a.toFixed(d));
  }
  return sign + exp(a, 2);
}
"""
