"""Shamir sharing, fixed-point encoding, the mask PRG and the per-client cost formula."""

import random

import numpy as np
import pytest

from fedevo.secagg import shamir
from fedevo.secagg.prg import MaskStream
from fedevo.secagg.protocol import client_words
from fedevo.secagg.quantize import dequantize, fixed_point, quantize


def test_prime_is_prime_and_above_secrets():
    p = shamir.PRIME
    d, s = p - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53):  # Miller–Rabin
        x = pow(a, d, p)
        assert x in (1, p - 1) or any(pow(x, 2**r, p) == p - 1 for r in range(1, s))
    assert p > 2**256
    assert shamir.PRIME.bit_length() <= 8 * shamir.FIELD_BYTES


@pytest.mark.parametrize("n, t", [(1, 1), (5, 3), (10, 5), (30, 30)])
def test_any_t_shares_recover_the_secret(n, t):
    rng = random.Random(n * 100 + t)
    secret = rng.randbytes(32)
    ys = shamir.split(shamir.to_int(secret), n=n, t=t, rng=rng)
    for _ in range(5):
        xs = sorted(rng.sample(range(1, n + 1), t))
        assert shamir.to_bytes(shamir.combine(xs, [ys[x - 1] for x in xs])) == secret


def test_fewer_than_t_shares_give_garbage():
    rng = random.Random(0)
    s = shamir.to_int(rng.randbytes(32))
    ys = shamir.split(s, n=6, t=4, rng=rng)
    assert shamir.combine([1, 2, 3], ys[:3]) != s


def test_fixed_point_roundtrip_and_exact_modular_sum():
    rng = np.random.default_rng(0)
    n, bound = 50, 4.0
    fp = fixed_point(bits=32, bound=bound, clients=n)
    v = rng.uniform(-bound, bound, size=(n, 1000))
    v[0, :3] = [-bound, bound, 0.0]
    enc = [quantize(row, fp)[0] for row in v]
    total = np.zeros(1000, dtype=np.uint32)
    for e in enc:
        total += e  # wraps mod 2^32
    assert np.abs(dequantize(total, fp) - v.sum(0)).max() <= n * fp.step / 2 + 1e-12
    assert np.abs(dequantize(enc[0], fp) - v[0]).max() <= fp.step / 2


def test_quantize_clamps_and_counts():
    fp = fixed_point(bits=32, bound=1.0, clients=2)
    enc, clamped = quantize(np.array([0.5, 3.0, -7.0]), fp)
    assert clamped == 2
    assert np.allclose(dequantize(enc, fp), [0.5, 1.0, -1.0], atol=fp.step)


def test_fixed_point_64_bit_and_too_large_range():
    fp = fixed_point(bits=64, bound=16.0, clients=100)
    assert fp.step < 1e-12
    with pytest.raises(ValueError, match="do not fit"):
        fixed_point(bits=32, bound=2.0**28, clients=100)


def test_mask_stream_is_deterministic_and_cancels():
    s = MaskStream(1000, 32)
    a = s.expand(b"k" * 32).copy()
    assert np.array_equal(a, s.expand(b"k" * 32)) and not np.array_equal(a, s.expand(b"j" * 32))
    acc = np.arange(1000, dtype=np.uint32)
    s.add_into(acc, b"k" * 32, +1)
    s.add_into(acc, b"k" * 32, -1)
    assert np.array_equal(acc, np.arange(1000, dtype=np.uint32))


def test_client_cost_formula():
    # keys 64 B + 9 shares × 102 B + 1001 words × 4 B + 9 unmask shares × 37 B, over 4 B per word
    assert client_words(n=10, length=1001, bits=32, responded=True) == (64 + 9 * 102 + 4004 + 9 * 37) / 4
    assert client_words(n=10, length=1001, bits=64, responded=False) == (64 + 9 * 102 + 8008) / 4
