"""The fused native step (bf16 engine) computes what the engine's eager bf16 path computes."""

import pytest
import torch

from fedevo import native
from fedevo.config import MLPArch
from fedevo.fl.engine import train_clients
from fedevo.privacy.mechanisms import StepLDP
from fedevo.privacy.noise import NoiseSource

from .test_engine import _setup

pytestmark = pytest.mark.skipif(native.load() is None, reason="native kernels unavailable (no C compiler)")


def _train(model, params, masks, data, clients, monkeypatch, *, fused: bool, sigma=None):
    hook = None
    if sigma is not None:  # a native noise stream in both paths: the fused kernel must draw the same values
        hook = StepLDP(sigma=sigma, clip=0.05).for_chunk(0, noise=NoiseSource(9, threads=1))
    with monkeypatch.context() as mp:
        if not fused:
            mp.setattr(native, "load", lambda: None)
        return train_clients(model, params, masks, data.x_train.bfloat16(), data.y_train, clients, epochs=2,
                             batch_size=16, lr=0.1, gen=torch.Generator().manual_seed(5), hook=hook)


@pytest.mark.parametrize("alpha", [None, 2.0])
@pytest.mark.parametrize("sigma", [None, 0.0, 0.01])  # plain SGD, clipping only, clipping + per-step noise
@pytest.mark.parametrize("sizes", [(37, 50, 64, 20), (16, 16)])  # unequal sizes: idle clients get no noise
def test_fused_step_equals_eager_bf16_step(alpha, sigma, sizes, monkeypatch):
    monkeypatch.setenv("FEDEVO_SPARSE", "0")  # the bf16 path, not the sparse kernel (tests/fl/test_sparse.py)
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), sizes=sizes, alpha=alpha)
    model.compute_dtype = torch.bfloat16
    if sigma == 0.0:
        sigma = 1e-30  # clipping path, noise negligible
    got = _train(model, params, masks, data, clients, monkeypatch, fused=True, sigma=sigma)
    ref = _train(model, params, masks, data, clients, monkeypatch, fused=False, sigma=sigma)
    moved = False
    for a, b, p0 in zip(got, ref, params):
        torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-3)
        moved |= not torch.allclose(a, p0.expand_as(a))
    assert moved
    for i, m in masks.items():  # inactive weights stay exactly 0
        assert torch.equal(got[i] * (1 - m), torch.zeros_like(got[i]))


def test_bf16_rounding_and_sumsq_match_torch():
    k = native.load()
    g = torch.Generator().manual_seed(0)
    c, n = 3, 5000
    p = torch.randn(c, n, generator=g) * 10
    p[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.4e38])
    grad = (torch.randn(c, n, generator=g)).bfloat16()
    mask = (torch.rand(n, generator=g) < 0.3).to(torch.uint8)
    scale = torch.tensor([-0.1, -0.2, 0.0])
    low = torch.empty(c, n, dtype=torch.bfloat16)
    want = p + scale.view(c, 1) * grad.float() * mask.float()
    k.step_bf16(p.data_ptr(), grad.data_ptr(), mask.data_ptr(), scale.data_ptr(), c, n, low.data_ptr(), 0, 0, 0.0, 0)
    torch.testing.assert_close(p, want, equal_nan=True)
    assert torch.equal(low[:, 4:], p[:, 4:].bfloat16())  # round to nearest even, like torch
    assert low[0, 0].isnan() and low[0, 1] == float("inf") and low[0, 2] == -float("inf")
    sq = torch.zeros(c, dtype=torch.float64)
    k.sumsq_bf16(grad.data_ptr(), mask.data_ptr(), c, n, sq.data_ptr())
    torch.testing.assert_close(sq, (grad.double() * mask.double()).pow(2).sum(1), rtol=1e-5, atol=0)
