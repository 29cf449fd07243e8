"""front.html's arrays written once: every long list of plain values (numbers, strings) that the page's data and its
figures hold more than once — the same objective's values of the dominated points in the 3D view and in two
projections, the colour of every point in four traces, a column of the parallel coordinates and the same column of
the colour choices — is written once into ``window.FEDEVO_ARRAYS`` and each place holds ``{"$a": its index}``, which
the page's script (`RESOLVE_JS`) replaces with a copy of the array before anything reads the data. At 10,000
evaluations of three objectives the page held 14 MB, most of it such copies. And the evaluations' rows are written
as columns (`columns`), each row's keys once instead of once per row."""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

MIN_LEN = 8  # shorter lists stay where they are: a reference would save little
KEEP = frozenset({"customdata"})  # lists left in place (tests and readers of the page take each trace's ids there)


def share(objs: Sequence[Any]) -> tuple[list[list], list[Any]]:
    """(the pool, `objs` with each list that occurs more than once in them all replaced by its reference)."""
    seen: dict[str, int] = {}
    keys: dict[int, str] = {}  # id of a list -> its JSON (the lists live as long as `objs`)
    _count(objs, seen, keys)
    pool: list[list] = []
    index: dict[str, int] = {}
    out = [_replace(o, seen, pool, index, keys) for o in objs]
    return pool, out


def _flat(v: Any) -> bool:
    return isinstance(v, list) and len(v) >= MIN_LEN and all(
        x is None or isinstance(x, (int, float, str)) for x in v)


def _count(v: Any, seen: dict[str, int], keys: dict[int, str]) -> None:
    if isinstance(v, Mapping):
        for k, x in v.items():
            if k not in KEEP:
                _count(x, seen, keys)
    elif isinstance(v, list):
        if _flat(v):
            key = keys[id(v)] = json.dumps(v)
            seen[key] = seen.get(key, 0) + 1
        else:
            for x in v:
                _count(x, seen, keys)


def _replace(v: Any, seen: dict[str, int], pool: list, index: dict[str, int], keys: dict[int, str]) -> Any:
    if isinstance(v, Mapping):
        return {k: (x if k in KEEP else _replace(x, seen, pool, index, keys)) for k, x in v.items()}
    if isinstance(v, list):
        key = keys.get(id(v))
        if key is not None:
            if seen.get(key, 0) < 2:
                return v
            if key not in index:
                index[key] = len(pool)
                pool.append(v)
            return {"$a": index[key]}
        return [_replace(x, seen, pool, index, keys) for x in v]
    return v


def columns(rows: Sequence[Mapping[str, Any]]) -> Any:
    """Rows of one set of keys as ``{"$rows": [keys, [column, ...]]}`` (rebuilt into the rows by `RESOLVE_JS`); rows
    whose keys differ as they are."""
    if not rows:
        return list(rows)
    keys = list(rows[0])
    if any(list(r) != keys for r in rows):
        return list(rows)
    return {"$rows": [keys, [[r[k] for r in rows] for k in keys]]}


# before the page's own script: the references replaced by copies of the arrays (a trace's array is its own, as
# before), the rows rebuilt from their columns
RESOLVE_JS = r"""
(function fedevoResolve() {
  const A = window.FEDEVO_ARRAYS || [];
  const r = v => {
    if (Array.isArray(v)) { for (let i = 0; i < v.length; i++) if (v[i] !== null && typeof v[i] === 'object') v[i] = r(v[i]); return v; }
    if (v === null || typeof v !== 'object') return v;
    const k = Object.keys(v);
    if (k.length === 1 && k[0] === '$a') return A[v.$a].slice();
    if (k.length === 1 && k[0] === '$rows') {
      const keys = r(v.$rows[0]), cs = v.$rows[1].map(r), n = cs.length ? cs[0].length : 0, out = new Array(n);
      for (let i = 0; i < n; i++) { const o = {}; keys.forEach((key, j) => { o[key] = cs[j][i]; }); out[i] = o; }
      return out;
    }
    for (const key of k) if (key !== 'customdata') v[key] = r(v[key]);
    return v;
  };
  window.FEDEVO = r(window.FEDEVO);
  window.FEDEVO_FIGS = r(window.FEDEVO_FIGS);
})();
"""

__all__ = ["MIN_LEN", "RESOLVE_JS", "columns", "share"]
