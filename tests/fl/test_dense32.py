"""The fp32 engine's native path (models/mlp.py step_f32, native/dense32.c) computes the eager fp32 step."""

import pytest
import torch

from fedevo import native
from fedevo.config import MLPArch
from fedevo.fl.engine import train_clients
from fedevo.privacy.mechanisms import StepLDP
from fedevo.privacy.noise import NoiseSource

from .test_engine import _setup

pytestmark = pytest.mark.skipif(native.load() is None, reason="native kernels unavailable (no C compiler)")


def _train(model, params, masks, data, clients, *, native_f32: bool, sigma=None, monkeypatch):
    hook = None
    if sigma is not None:  # the same native noise stream in both paths
        hook = StepLDP(sigma=sigma, clip=0.05).for_chunk(0, noise=NoiseSource(9, threads=1))
    monkeypatch.setattr(model, "native_f32", native_f32)
    return train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=2, batch_size=16, lr=0.1,
                         gen=torch.Generator().manual_seed(5), hook=hook)


@pytest.mark.parametrize("layers", [0, 1, 2])
@pytest.mark.parametrize("alpha", [None, 2.0])
@pytest.mark.parametrize("sigma", [None, 1e-30, 0.01])  # plain SGD (update in the GEMM), clipping, clipping + noise
def test_native_fp32_step_equals_eager(layers, alpha, sigma, monkeypatch):
    monkeypatch.setenv("FEDEVO_SPARSE", "0")  # the dense path, not the sparse kernel
    data, clients, model, params, masks = _setup(MLPArch(layers=layers, units=24), sizes=(37, 50, 64, 20),
                                                 alpha=alpha)
    assert model.step_f32_applies(native.load())
    got = _train(model, params, masks, data, clients, native_f32=True, sigma=sigma, monkeypatch=monkeypatch)
    ref = _train(model, params, masks, data, clients, native_f32=False, sigma=sigma, monkeypatch=monkeypatch)
    for a, b, p0 in zip(got, ref, params):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        assert not torch.allclose(a, p0.expand_as(a))
    for i, m in masks.items():  # inactive weights stay exactly 0
        assert torch.equal(got[i] * (1 - m), torch.zeros_like(got[i]))


def test_step_f32_gradients_equal_grads(monkeypatch):
    """Without a scale the native step returns the gradients, as the eager `grads` does."""
    data, clients, model, params, _ = _setup(MLPArch(layers=2, units=24), sizes=(20, 20))
    c, b = 2, 16
    stacked = [p.unsqueeze(0).repeat(c, *([1] * p.dim())).contiguous() for p in params]
    x = data.x_train.reshape(len(data.x_train), -1).contiguous()
    rows = torch.tensor([[3 * j % 40 for j in range(b)], [(5 * j + 1) % 40 for j in range(b)]])
    y, w = data.y_train[rows].contiguous(), torch.full((c, b), 1.0 / b)
    got = [g.clone() for g in model.step_f32(stacked, x, rows, y, w, native.load())]
    ref = model.grads(stacked, x[rows], y, w)
    for a, r in zip(got, ref):
        torch.testing.assert_close(a, r.reshape(a.shape), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("group", [2, 4])
def test_plain_fp32_result_independent_of_group(group, monkeypatch):
    """The chunk's plain fp32 training, client by client (engine.F32_GROUP = 1) or several in lockstep: the same
    numbers, bit for bit (unequal local datasets: padded steps)."""
    from fedevo.fl import engine
    monkeypatch.setenv("FEDEVO_SPARSE", "0")
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), sizes=(37, 50, 64, 20), alpha=2.0)
    one = _train(model, params, masks, data, clients, native_f32=True, monkeypatch=monkeypatch)
    monkeypatch.setattr(engine, "F32_GROUP", group)
    other = _train(model, params, masks, data, clients, native_f32=True, monkeypatch=monkeypatch)
    assert all(torch.equal(a, b) for a, b in zip(one, other))
