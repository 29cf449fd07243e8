"""Fixed-point encoding of real vectors into Z_{2^k}, so masked sums are exact.

A value v with |v| ≤ B is encoded as round(v·2^f) mod 2^k (two's complement). For n clients the signed sum
stays below 2^(k−1) in magnitude when n·B·2^f + n/2 < 2^(k−1); we take f = k − 2 − ⌈log2(n·B)⌉, so
decoding the modular sum is exact and the only error is rounding: |Σ decoded − Σ v| ≤ n·2^(−f−1).
Values beyond ±B are clamped (counted, so a report can say how often).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

_SIGNED = {32: np.int32, 64: np.int64}
_UNSIGNED = {32: np.uint32, 64: np.uint64}


@dataclass(frozen=True)
class FixedPoint:
    bits: int
    frac_bits: int
    bound: float  # |v| ≤ bound before encoding (clamped otherwise)

    @property
    def step(self) -> float:
        """The quantisation step 2^−f."""
        return 2.0 ** -self.frac_bits


def fixed_point(*, bits: int, bound: float, clients: int) -> FixedPoint:
    """The finest encoding whose sum over `clients` values in [−bound, bound] cannot overflow Z_{2^bits}."""
    if bits not in _SIGNED:
        raise ValueError(f"bits must be 32 or 64, got {bits}")
    if not (math.isfinite(bound) and bound > 0) or clients < 1:
        raise ValueError(f"need bound > 0 and clients >= 1, got {bound}, {clients}")
    f = bits - 2 - math.ceil(math.log2(clients * bound))
    if bits == 64:
        f = min(f, 52 - math.ceil(math.log2(bound)))  # keep v·2^f exact in float64
    if f < 1:
        raise ValueError(f"{clients} clients × range {bound:g} do not fit {bits}-bit fixed point")
    return FixedPoint(bits=bits, frac_bits=f, bound=float(bound))


def quantize(v: np.ndarray, fp: FixedPoint) -> tuple[np.ndarray, int]:
    """(encoded uint vector, number of clamped entries)."""
    x = np.asarray(v, dtype=np.float64)
    clamped = int(np.count_nonzero(np.abs(x) > fp.bound))
    if clamped:
        x = np.clip(x, -fp.bound, fp.bound)
    q = np.rint(np.ldexp(x, fp.frac_bits)).astype(np.int64)
    return q.astype(_UNSIGNED[fp.bits]), clamped  # int64 → uint: two's complement mod 2^k


def dequantize(s: np.ndarray, fp: FixedPoint) -> np.ndarray:
    """Decode a (modular) sum of encodings: reinterpret as signed k-bit, scale by 2^−f."""
    if s.dtype != _UNSIGNED[fp.bits]:
        raise TypeError(f"expected uint{fp.bits}, got {s.dtype}")
    return np.ldexp(s.view(_SIGNED[fp.bits]).astype(np.float64), -fp.frac_bits)


__all__ = ["FixedPoint", "fixed_point", "quantize", "dequantize"]
