"""The CNN's fused 2×2 max-pool + ReLU (models/cnn_ops.py) against torch's ReLU then max_pool2d."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad

from fedevo import native
from fedevo.config import CNNArch
from fedevo.models import build_model
from fedevo.models import cnn_ops
from fedevo.models.cnn_ops import pool_relu

needs_native = pytest.mark.skipif(native.load() is None, reason="native kernels unavailable")


def _maps(shape, seed=0):
    h = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    h[0, 0, :2, :2] = 0.25  # a tie
    h[0, -1, -2:, -2:] = -2.0  # a window with nothing positive
    return h


@needs_native
@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (2, 3, 7, 9), (4, 32, 28, 28), (1, 1, 2, 2)])
def test_fused_equals_relu_then_pool_in_values_and_gradients(shape):
    h = _maps(shape)
    ref = F.max_pool2d(F.relu(h), 2)
    assert torch.equal(pool_relu(h), ref)
    g = torch.randn(ref.shape)
    got = grad(lambda h: (pool_relu(h) * g).sum())(h)
    want = grad(lambda h: (F.max_pool2d(F.relu(h), 2) * g).sum())(h)
    assert torch.equal(got, want)
    assert bool((got[0, -1, -2:, -2:] == 0).all())  # nothing positive there: no gradient


@needs_native
def test_fused_path_is_taken_only_where_it_applies(monkeypatch):
    calls = []
    real = cnn_ops._PoolReLU.apply
    monkeypatch.setattr(cnn_ops._PoolReLU, "apply", lambda *a: calls.append(1) or real(*a))
    h = _maps((2, 3, 8, 8))
    pool_relu(h)
    assert calls == [1]
    pool_relu(h, fused=False)
    pool_relu(h.bfloat16())
    assert calls == [1]


@needs_native
def test_cnn_gradients_are_the_same_with_the_fused_pool():
    """The per-client CNN gradients (the CPU engine's loop) through the fused op equal torch's ops to the bit, and
    the vmap path (the device path's) agrees."""
    cnn = build_model(CNNArch(conv_layers=3, channels=4, kernel=3, layers=1, units=16), (1, 14, 14), 10)
    gen = torch.Generator().manual_seed(3)
    ps = [p.unsqueeze(0).expand(2, *p.shape).contiguous() for p in cnn.init(gen)]
    x, y = torch.randn(2, 9, 1, 14, 14, generator=gen), torch.randint(0, 10, (2, 9), generator=gen)
    w = torch.rand(2, 9, generator=gen)
    cnn.fused_pool = True
    fused = cnn.grads(ps, x, y, w)
    cnn.fused_pool = False
    plain = cnn.grads(ps, x, y, w)
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)
    for a, b in zip(cnn.grads_vmap(ps, x, y, w), plain):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    cnn.fused_pool = True
    assert torch.equal(cnn.logits([p[0] for p in ps], x[0]), cnn._forward([p[0] for p in ps], x[0], False))
