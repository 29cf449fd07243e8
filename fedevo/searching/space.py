"""Search space: a problem's genes <-> the flat float vectors pymoo evolves.

Encoding (one column per gene, in the problem file's order):

* ``real``: the value itself on [low, high]; ``log = true``: log10(value) on [log10 low, log10 high].
* ``int``: the integer k, searched on the widened interval [low - 1/2, high + 1/2] (a hair inside), so that
  after rounding every integer owns a cell of the same width: uniform sampling, SBX and polynomial mutation
  followed by rounding give the end points no less (and no more) mass than the inner values. Rounding the
  plain [low, high] interval instead would give each end point half a cell: the classic rounding bias.
  ``log = true``: log10(k) on [log10(low - 1/2), log10(high + 1/2)], rounded to the nearest integer k and
  stored back as log10(k) (a log-uniform prior over integers).
* ``choice``: the index i into ``choices``, handled like an int gene on [0, n - 1].

:class:`GeneRepair` (a pymoo ``Repair``) applies this rounding to the int/choice columns only, after sampling
and after every crossover + mutation, so every X pymoo holds is canonical: two individuals decoding to the
same genes have identical X, and pymoo's duplicate elimination sees them as equal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from pymoo.core.repair import Repair

from ..errors import FedevoError
from ..problem import Gene, Problem

# How far inside the widened [low - 1/2, high + 1/2] interval the bounds of a discrete column sit, so that
# rounding never has to break a tie at exactly k + 1/2.
_HAIR = 1e-9


def _log10(v: float) -> float:
    return float(np.log10(v))  # numpy's, everywhere: math.log10 can differ by an ulp


@dataclass(frozen=True)
class _Column:
    gene: Gene
    discrete: bool  # int or choice: rounded by the repair
    log: bool
    lo: int | float  # decoded bounds (for choice: index bounds)
    hi: int | float
    xl: float  # encoded bounds handed to pymoo
    xu: float


def _column(g: Gene) -> _Column:
    if g.type == "choice":
        n = len(g.choices)
        return _Column(g, True, False, 0, n - 1, -0.5 + _HAIR, n - 1 + 0.5 - _HAIR)
    if g.type == "int":
        lo, hi = math.ceil(g.low), math.floor(g.high)
        if lo > hi:
            raise FedevoError(f"gene {g.name!r}: no integer lies in [{g.low:g}, {g.high:g}]")
        if g.log:
            return _Column(g, True, True, lo, hi, _log10(lo - 0.5 + _HAIR) if lo > 0.5 else _log10(lo),
                           _log10(hi + 0.5 - _HAIR))
        return _Column(g, True, False, lo, hi, lo - 0.5 + _HAIR, hi + 0.5 - _HAIR)
    lo, hi = float(g.low), float(g.high)
    if g.log:
        return _Column(g, False, True, lo, hi, _log10(lo), _log10(hi))
    return _Column(g, False, False, lo, hi, lo, hi)


class SearchSpace:
    """The genes of a :class:`~fedevo.problem.Problem` as a box of floats, with encode/decode/repair."""

    def __init__(self, genes: Sequence[Gene]):
        if not genes:
            raise FedevoError("the problem declares no genes: there is nothing to search")
        self.genes = tuple(genes)
        self._cols = tuple(_column(g) for g in self.genes)
        self.xl = np.array([c.xl for c in self._cols], dtype=float)
        self.xu = np.array([c.xu for c in self._cols], dtype=float)
        self.discrete = np.array([c.discrete for c in self._cols], dtype=bool)

    @classmethod
    def from_problem(cls, problem: Problem) -> "SearchSpace":
        return cls(problem.genes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.genes)

    @property
    def n_var(self) -> int:
        return len(self.genes)

    # ------------------------------------------------------------------ repair (canonical X)
    def repair(self, X: np.ndarray) -> np.ndarray:
        """Round the discrete columns to their integer (or log10 of integer) values; clip into the box."""
        X = np.array(X, dtype=float, copy=True)
        single = X.ndim == 1
        X = np.atleast_2d(X)
        for j, c in enumerate(self._cols):
            col = np.clip(X[:, j], c.xl, c.xu)
            if c.discrete:
                k = np.clip(np.rint(10.0 ** col if c.log else col), c.lo, c.hi)
                col = np.log10(k) if c.log else k
            X[:, j] = col
        return X[0] if single else X

    # ------------------------------------------------------------------ decode / encode
    def decode(self, x: Sequence[float]) -> dict[str, Any]:
        """One encoded vector -> {gene name: value of the gene's Python type}, every value within bounds."""
        x = np.asarray(x, dtype=float)
        if x.shape != (self.n_var,):
            raise ValueError(f"expected a vector of {self.n_var} values, got shape {x.shape}")
        out: dict[str, Any] = {}
        for v, c in zip(x, self._cols):
            v = min(max(float(v), c.xl), c.xu)
            g = c.gene
            if c.discrete:
                k = int(min(max(round(10.0 ** v if c.log else v), c.lo), c.hi))
                out[g.name] = g.choices[k] if g.type == "choice" else k
            else:
                out[g.name] = float(min(max(10.0 ** v if c.log else v, c.lo), c.hi))
        return out

    def decode_batch(self, X: np.ndarray) -> list[dict[str, Any]]:
        return [self.decode(x) for x in np.atleast_2d(X)]

    def encode(self, params: Mapping[str, Any]) -> np.ndarray:
        """{gene name: value} -> encoded vector; every gene must be present and valid."""
        missing = [g.name for g in self.genes if g.name not in params]
        if missing:
            raise FedevoError(f"missing gene(s) {', '.join(missing)}")
        x = np.empty(self.n_var)
        for j, c in enumerate(self._cols):
            g = c.gene
            v = g.check(params[g.name])
            if g.type == "choice":
                x[j] = float(g.choices.index(v))
            else:
                x[j] = _log10(v) if c.log else float(v)
        return x

    def describe(self) -> list[dict[str, Any]]:
        """How each gene is encoded (recorded in run.json)."""
        rows = []
        for c in self._cols:
            g = c.gene
            kind = {"choice": "index into choices", "int": "integer", "real": "real"}[g.type]
            rows.append({"gene": g.name, "type": g.type, "encoding": ("log10 " if c.log else "") + kind,
                         "bounds": [float(c.xl), float(c.xu)],
                         **({"choices": list(g.choices)} if g.type == "choice" else {"low": g.low, "high": g.high})})
        return rows


class GeneRepair(Repair):
    """pymoo Repair: round the int/choice columns (only those) of every sampled or mated individual."""

    def __init__(self, space: SearchSpace, **kwargs):
        super().__init__(**kwargs)
        self.space = space

    def _do(self, problem, X, **kwargs):
        return self.space.repair(X)
