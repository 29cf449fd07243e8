"""Shamir t-out-of-n secret sharing over GF(p), p = 2^256 + 297 (the smallest prime above 2^256), so any
32-byte secret (an X25519 private key, a self-mask seed) is one field element. A share is (x, y) with
x = 1..n; any t shares give the secret by Lagrange interpolation at 0, fewer reveal nothing.

Share generation evaluates the degree-(t−1) polynomial by Horner's rule without intermediate reductions
(x ≤ n is small, so the integers stay ~(256 + t·log2 n) bits) and reduces once: ~10× faster than reducing at
every step (0.1 s for 100 clients × 2 secrets × 100 shares at t = 50).
"""

from __future__ import annotations

import random
import secrets as _secrets
from collections.abc import Sequence

PRIME = 2**256 + 297
FIELD_BYTES = 33  # bytes of one share value on the wire


def split(secret: int, *, n: int, t: int, rng: random.Random | None = None) -> list[int]:
    """Shares y_1..y_n of `secret` (0 ≤ secret < PRIME) for x = 1..n, threshold t (1 ≤ t ≤ n)."""
    if not 1 <= t <= n:
        raise ValueError(f"need 1 <= t <= n, got t={t}, n={n}")
    return split_at(secret, xs=range(1, n + 1), t=t, rng=rng)


def split_at(secret: int, *, xs: Sequence[int], t: int, rng: random.Random | None = None) -> list[int]:
    """Shares y_j = f(x_j) of `secret` at the given distinct nonzero x-coordinates (SecAgg+: only a client's
    neighbours get one), threshold t ≤ len(xs). Same random draws as `split`, so split_at(xs=1..n) == split."""
    xs = list(xs)
    if not 0 <= secret < PRIME:
        raise ValueError("secret out of the field")
    if not 1 <= t <= len(xs):
        raise ValueError(f"need 1 <= t <= number of shares, got t={t}, {len(xs)} shares")
    if len(set(xs)) != len(xs) or any(not 0 < x < PRIME for x in xs):
        raise ValueError("share x-coordinates must be distinct and in [1, PRIME)")
    rng = rng or _secrets.SystemRandom()
    coeffs = [rng.randrange(PRIME) for _ in range(t - 1)][::-1] + [secret]  # highest degree first
    out = []
    for x in xs:
        acc = 0
        for c in coeffs:
            acc = acc * x + c
        out.append(acc % PRIME)
    return out


def lagrange_at_zero(xs: Sequence[int]) -> list[int]:
    """λ_j with f(0) = Σ_j λ_j·f(x_j) for any polynomial of degree < len(xs); xs distinct and nonzero."""
    if len(set(xs)) != len(xs) or any(x % PRIME == 0 for x in xs):
        raise ValueError("share x-coordinates must be distinct and nonzero")
    out = []
    for j, xj in enumerate(xs):
        num, den = 1, 1
        for m, xm in enumerate(xs):
            if m != j:
                num = num * xm % PRIME
                den = den * (xm - xj) % PRIME
        out.append(num * pow(den, -1, PRIME) % PRIME)
    return out


def combine(xs: Sequence[int], ys: Sequence[int], coefficients: Sequence[int] | None = None) -> int:
    """The secret from shares (x_j, y_j); pass `coefficients` = lagrange_at_zero(xs) to reuse them."""
    lam = coefficients if coefficients is not None else lagrange_at_zero(xs)
    return sum(l * y for l, y in zip(lam, ys)) % PRIME


def to_int(b: bytes) -> int:
    if len(b) != 32:
        raise ValueError("secrets are 32 bytes")
    return int.from_bytes(b, "big")


def to_bytes(v: int) -> bytes:
    return int(v).to_bytes(32, "big")


__all__ = ["PRIME", "FIELD_BYTES", "split", "split_at", "lagrange_at_zero", "combine", "to_int", "to_bytes"]
