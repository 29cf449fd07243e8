"""Numbers for people: one formatter for every table, tooltip and tick (Python here, the same rules in JS).

``num(v)``:

* missing / NaN → "–", ±inf → "∞" / "−∞", 0 → "0";
* |v| ≥ 1000: three significant digits with a suffix k, M, B, T (1e5 → "100k", 1234 → "1.23k",
  2.5e9 → "2.5B"); from 1e15 on, an exponent ("3e15");
* 1 ≤ |v| < 1000: three significant digits (3.2, 12.3, 250);
* 0.001 ≤ |v| < 1: three decimals, or two significant digits where three decimals keep fewer
  (0.0831 → "0.083", 0.942 → "0.942", 0.00123 → "0.0012");
* |v| < 0.001: two significant digits as an exponent without "+" or leading zeros (2.3e-6 → "2.3e-6").

Trailing zeros are dropped (0.5, not 0.500). Integers below 1000 print as they are. Rounding is Python's: an
exact half goes to the even neighbour (528.5 → "528", 0.0625 → "0.062"). ``JS_NUM`` is the same function in
JavaScript (``fedevoNum``: the page's colour bars, notes, selection table and live tables), rounding exact halves to
even as well (JavaScript's own toPrecision rounds them up); tests check both against the same cases, halves
included. ``JS_NUM`` also holds ``fedevoParseNum``, which reads back what ``num`` writes ("1k", "1.3k", "1,000",
"1000 params", "inf" / "∞") for the page's typed caps and ranges.
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
// Python's format rounds an exact half to even (f"{528.5:.3g}" is "528", f"{0.0625:.3f}" "0.062"); JavaScript's
// toPrecision / toFixed / toExponential round it up ("529", "0.063"). Both round every other value correctly from
// its exact binary value, so the twins differ only where a double lies exactly halfway: fedevoHalfEven finds
// those from the double's exact decimal expansion (BigInt) and hands the JS functions the even neighbour.
function fedevoExact(x) {  // a finite x > 0 as [digits, f]: x = digits × 10^-f exactly
  const dv = new DataView(new ArrayBuffer(8));
  dv.setFloat64(0, x);
  const hi = dv.getUint32(0), lo = dv.getUint32(4), be = (hi >>> 20) & 0x7ff;
  let m = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo), k = -1074;
  if (be) { m |= 1n << 52n; k = be - 1075; }
  return k >= 0 ? [(m << BigInt(k)).toString(), 0] : [(m * 5n ** BigInt(-k)).toString(), -k];
}
function fedevoHalfEven(x, d) {  // x > 0 rounded at d decimals (d < 0: tens, hundreds...): the even neighbour
  // below when x lies exactly halfway and that neighbour is even (what Python keeps), else x itself
  const [digits, f] = fedevoExact(x), drop = f - d;
  if (drop <= 0) return x;
  const all = digits.padStart(drop + 1, '0'), rest = all.slice(all.length - drop), kept = all.slice(0, all.length - drop);
  if (!/^50*$/.test(rest) || Number(kept[kept.length - 1]) % 2) return x;
  return Number(kept + 'e' + (-d));
}
function fedevoLead(x) {  // the exponent of x's leading digit (x > 0), exactly
  const [digits, f] = fedevoExact(x);
  return digits.length - 1 - f;
}
function fedevoPrecision(x, p) { return fedevoHalfEven(x, p - 1 - fedevoLead(x)).toPrecision(p); }
function fedevoFixed(x, d) { return fedevoHalfEven(x, d).toFixed(d); }
function fedevoExponential(x, p) { return fedevoHalfEven(x, p - 1 - fedevoLead(x)).toExponential(p - 1); }

function fedevoNum(v) {
  if (v === null || v === undefined || (typeof v === 'number' && isNaN(v))) return '–';
  if (typeof v !== 'number') return String(v);
  if (v === Infinity) return '∞';
  if (v === -Infinity) return '−∞';
  if (v === 0) return '0';
  const a = Math.abs(v), sign = v < 0 ? '-' : '';
  const strip = s => s.indexOf('.') >= 0 && s.indexOf('e') < 0 ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
  const exp = (x, sig) => { const p = fedevoExponential(x, sig).split('e');
                            return strip(p[0]) + 'e' + parseInt(p[1], 10); };
  if (a >= 1e15) return sign + exp(a, 2);
  if (a >= 999.5) {
    const suf = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M'], [1e3, 'k']];
    for (const [div, s] of suf) {
      const m = parseFloat(fedevoPrecision(a / div, 3));
      if (m >= 1) {
        if (m >= 1000 && div < 1e12) continue;
        return sign + strip(m < 1000 ? fedevoPrecision(m, 3) : fedevoFixed(m, 0)) + s;
      }
    }
  }
  if (a >= 1) return sign + strip(fedevoFixed(parseFloat(fedevoPrecision(a, 3)), 6));
  if (a >= 1e-3) {
    const d = Math.max(3, -Math.floor(Math.log10(a)) + 1);
    return sign + strip(fedevoFixed(a, d));
  }
  return sign + exp(a, 2);
}

// What the page writes, read back (a cap, a typed range): 1000, 1k, 1.3k, 2.5M, 1G or 1B, 1T (k, M, G/B, T: 10^3,
// 10^6, 10^9, 10^12), 1,000 (thousands separators), 0.05, 1e-3, -3, a trailing unit word of the quantity's
// (`units`: "1000 params"), and inf / Infinity / ∞ (a sign allowed). Returns {value} (null: empty) or {error}.
const FEDEVO_SUFFIX = {k: 3, K: 3, M: 6, G: 9, B: 9, T: 12};
function fedevoParseNum(text, units) {
  const t = String(text === null || text === undefined ? '' : text).replace(/[\u00a0\u2009\u202f]/g, ' ')
    .replace(/\u2212/g, '-').trim();
  if (t === '') return {value: null};
  let m = /^([+-]?)(inf|infinity|∞)(?![a-z0-9])\s*(.*)$/i.exec(t), value, rest;
  if (m) {
    value = m[1] === '-' ? -Infinity : Infinity;
    rest = m[3];
  } else {
    m = /^([+-]?)((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?(?:\s*([kKMGBT])(?![A-Za-z0-9]))?\s*(.*)$/.exec(t);
    if (!m || (m[3] !== undefined && m[4] !== undefined)) return {error: 'not a number'};
    const exp = (m[3] !== undefined ? parseInt(m[3], 10) : 0) + (m[4] !== undefined ? FEDEVO_SUFFIX[m[4]] : 0);
    value = Number(m[1] + m[2].replace(/,/g, '') + 'e' + exp);  // decimal: 1.1k is 1100, not 1100.0000000000002
    rest = m[5];
  }
  if (Number.isNaN(value) || /^[0-9,.]/.test(rest)) return {error: 'not a number'};
  const r = rest.trim().toLowerCase().replace(/\s+/g, ' ');
  if (r === '') return {value: value};
  const ok = (units || []).some(u => {
    const w = String(u).toLowerCase().replace(/\s+/g, ' ');
    return w === r || w.startsWith(r + ' ') || w.startsWith(r + '/');
  });
  return ok ? {value: value} : {error: '"' + rest.trim() + '" is not ' + ((units || []).length ?
    'its unit (' + units.join(', ') + ')' : 'a number (this quantity has no unit)')};
}
"""
