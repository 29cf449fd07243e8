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


def _train(model, params, masks, data, clients, monkeypatch, *, fused: bool, sigma=None, head=False):
    hook = None
    if sigma is not None:  # a native noise stream in both paths: the fused kernel must draw the same values
        hook = StepLDP(sigma=sigma, clip=0.05).for_chunk(0, noise=NoiseSource(9, threads=1))
    with monkeypatch.context() as mp:
        if not fused:
            mp.setattr(native, "load", lambda: None)
        mp.setattr(model, "native_layers", head)
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


@pytest.mark.parametrize("layers", [0, 1, 2])
@pytest.mark.parametrize("sigma", [None, 0.01])
def test_native_layers_train_like_eager_bf16(layers, sigma, monkeypatch):
    """With the native forward GEMM (fp32 bias) and the fp32 output-layer kernel the bf16 path differs from the
    eager one by bf16 rounding only."""
    monkeypatch.setenv("FEDEVO_SPARSE", "0")
    data, clients, model, params, masks = _setup(MLPArch(layers=layers, units=24), sizes=(37, 50, 64, 20), alpha=2.0)
    model.compute_dtype = torch.bfloat16
    got = _train(model, params, masks, data, clients, monkeypatch, fused=True, sigma=sigma, head=True)
    ref = _train(model, params, masks, data, clients, monkeypatch, fused=False, sigma=sigma)
    for a, b, p0 in zip(got, ref, params):
        torch.testing.assert_close(a, b, atol=3e-3, rtol=2e-2)
        assert not torch.allclose(a, p0.expand_as(a))
    for i, m in masks.items():
        assert torch.equal(got[i] * (1 - m), torch.zeros_like(got[i]))


@pytest.mark.parametrize("c,B,H,C", [(5, 64, 200, 10), (2, 13, 37, 3), (1, 8, 16, 16), (3, 21, 784, 10)])
def test_head_kernel_matches_fp32_torch(c, B, H, C):
    k = native.load()
    g = torch.Generator().manual_seed(c * B + H)
    h = torch.randn(c, B, H, generator=g).relu().bfloat16()
    W, b = torch.randn(c, H, C, generator=g) * 0.2, torch.randn(c, 1, C, generator=g)
    y, w = torch.randint(0, C, (c, B), generator=g), torch.full((c, B), 1.0 / B)
    w[-1, B // 2:] = 0  # padding rows of an idle client
    gw, gb = torch.full((c, H, C), float("nan")), torch.full((c, 1, C), float("nan"))
    d = torch.full((c, B, H), float("nan")).bfloat16()
    assert k.head_bf16(h.data_ptr(), W.data_ptr(), b.data_ptr(), y.data_ptr(), w.data_ptr(), c, B, H, C,
                       gw.data_ptr(), gb.data_ptr(), d.data_ptr()) == 0
    z = torch.baddbmm(b.double(), h.double(), W.double())
    delta = torch.softmax(z, -1).scatter_add(2, y.unsqueeze(-1), -torch.ones(c, B, 1, dtype=torch.float64))
    delta *= w.unsqueeze(-1)
    torch.testing.assert_close(gw, (h.double().transpose(1, 2) @ delta).float(), atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(gb, delta.sum(1, keepdim=True).float(), atol=1e-6, rtol=1e-4)
    torch.testing.assert_close(d, (delta @ W.double().transpose(1, 2)).bfloat16(), atol=1e-6, rtol=8e-3)
    assert k.head_bf16(h.data_ptr(), W.data_ptr(), b.data_ptr(), y.data_ptr(), w.data_ptr(), c, B, H, 17,
                       gw.data_ptr(), gb.data_ptr(), 0) == -1  # more classes than one vector: caller uses torch


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


def test_relu_kernel_matches_torch():
    k = native.load()
    v = torch.randn(1000, generator=torch.Generator().manual_seed(1)).bfloat16()
    v[:6] = torch.tensor([float("nan"), -float("nan"), float("inf"), -float("inf"), -0.0, 0.0])
    want = torch.relu(v)
    k.relu_bf16(v.data_ptr(), v.numel())
    assert torch.equal(v[2:], want[2:]) and v[0].isnan() and v[1].isnan()  # NaN stays NaN, whatever its sign


def test_gather_cast_kernel_matches_torch():
    """The chunk's samples gathered and cast to bf16 in one pass: bitwise what index_select + .bfloat16() give."""
    k = native.load()
    x = torch.randn(50, 3, 7, generator=torch.Generator().manual_seed(2)) * 100
    x[3, 0, :3] = torch.tensor([float("nan"), float("inf"), 1 + 2 ** -8])  # a tie: round to even
    idx = torch.tensor([3, 0, 49, 3, 17])
    out = torch.empty(5, 3, 7, dtype=torch.bfloat16)
    k.gather_rows_bf16(out.data_ptr(), x.data_ptr(), idx.data_ptr(), 5, 21)
    want = x[idx].bfloat16()
    nan = want.isnan()
    assert torch.equal(out.isnan(), nan) and nan.sum() == 2  # NaN stays NaN (torch's payload differs)
    assert torch.equal(out.view(torch.int16)[~nan], want.view(torch.int16)[~nan])


@pytest.mark.parametrize("c,M,K,N", [(5, 64, 784, 200), (2, 7, 34, 17), (3, 13, 64, 100), (1, 1, 2, 1), (2, 6, 8, 64)])
@pytest.mark.parametrize("relu", [0, 1])
def test_forward_gemm_kernel_matches_fp64_torch(c, M, K, N, relu):
    """Hidden-layer forward (bias, ReLU) against a float64 reference: off by the bf16 rounding of the output only."""
    k = native.load()
    g = torch.Generator().manual_seed(M * K + N)
    A, W = torch.randn(c, M, K, generator=g).bfloat16(), (torch.randn(c, K, N, generator=g) * 0.2).bfloat16()
    b = torch.randn(c, 1, N, generator=g)
    Z = torch.full((c, M, N), float("nan")).bfloat16()
    if k.linear_fwd_bf16(A.data_ptr(), W.data_ptr(), b.data_ptr(), Z.data_ptr(), c, M, K, N, relu) != 0:
        pytest.skip("no AVX512-BF16 on this CPU: the model uses torch")
    ref = torch.baddbmm(b.double(), A.double(), W.double())
    ref = ref.relu() if relu else ref
    torch.testing.assert_close(Z.double(), ref, atol=1e-5, rtol=2 ** -8)
    if relu:
        assert not (Z < 0).any()
    assert k.linear_fwd_bf16(A.data_ptr(), W.data_ptr(), b.data_ptr(), Z.data_ptr(), c, M, K - 1, N, relu) == -1


def test_forward_gemm_relu_keeps_nan():
    k = native.load()
    A, W = torch.ones(1, 2, 2).bfloat16(), torch.ones(1, 2, 3).bfloat16()
    W[0, 0, 1] = float("nan")
    b = torch.tensor([[[-5.0, 0.0, 1.0]]])
    Z = torch.empty(1, 2, 3).bfloat16()
    if k.linear_fwd_bf16(A.data_ptr(), W.data_ptr(), b.data_ptr(), Z.data_ptr(), 1, 2, 2, 3, 1) != 0:
        pytest.skip("no AVX512-BF16 on this CPU")
    assert Z[0, :, 0].eq(0).all() and Z[0, :, 1].isnan().all() and Z[0, :, 2].eq(3).all()
