"""The SET-sparse native path (fl/sparse.py) computes the engine's dense fp32 step over the active weights."""

import pytest
import torch

from fedevo import native
from fedevo.config import CNNArch, MLPArch
from fedevo.fl import sparse
from fedevo.fl.engine import train_clients
from fedevo.models.sparse import erdos_renyi_masks
from fedevo.privacy.mechanisms import StepLDP, draws_compact
from fedevo.privacy.noise import NoiseSource

from .test_engine import _compare, _setup

needs_native = pytest.mark.skipif(native.load() is None, reason="native kernels unavailable (no C compiler)")


def _train(model, params, masks, data, clients, monkeypatch, *, mode: str, sigma=None, clip=0.05, batch_size=20):
    ml = [masks.get(i) for i in range(len(params))]
    with monkeypatch.context() as mp:
        mp.setenv("FEDEVO_SPARSE", mode)
        assert sparse.applies(model, ml, batch_size, native.load()) == (mode == "1")
    hook = None
    if sigma is not None:  # the same native noise stream on both paths
        hook = StepLDP(sigma=sigma, clip=clip).for_chunk(0, noise=NoiseSource(9, threads=1))
    with monkeypatch.context() as mp:
        mp.setenv("FEDEVO_SPARSE", mode)
        return train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=2,
                             batch_size=batch_size, lr=0.1, gen=torch.Generator().manual_seed(5), hook=hook)


@needs_native
@pytest.mark.parametrize("layers,alpha", [(0, 0.5), (1, 2.0), (2, 1.0), (3, 6.0)])  # α = 6: the last layer is dense-ish
@pytest.mark.parametrize("sigma,clip", [(None, None), (1e-30, 0.05), (0.01, 0.05), (0.01, None)])
def test_sparse_path_equals_dense_fp32_path(layers, alpha, sigma, clip, monkeypatch):
    data, clients, model, params, masks = _setup(MLPArch(layers=layers, units=24), alpha=alpha)
    if layers == 3:  # covers the branch where the hook draws noise for every weight, then masks it
        assert not all(draws_compact(m) for m in masks.values())
    got = _train(model, params, masks, data, clients, monkeypatch, mode="1", sigma=sigma, clip=clip)
    ref = _train(model, params, masks, data, clients, monkeypatch, mode="0", sigma=sigma, clip=clip)
    for a, b, p0 in zip(got, ref, params):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert any(not torch.allclose(a, p0.expand_as(a)) for a, p0 in zip(got, params))
    for i, m in masks.items():  # inactive weights stay exactly 0
        assert torch.equal(got[i] * (1 - m), torch.zeros_like(got[i]))


@needs_native
def test_sparse_path_matches_per_client_reference(monkeypatch):
    """Against the independent per-client loop (fl/reference.py), not only the engine's other path."""
    monkeypatch.setenv("FEDEVO_SPARSE", "1")
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), alpha=1.5)
    _compare(model, params, masks, data, clients)
    _compare(model, params, masks, data, clients, hook=StepLDP(sigma=0.0, clip=0.02).for_chunk(0), clip=0.02)


@needs_native
def test_sparse_path_batch_larger_than_a_vector_block(monkeypatch):
    """B = 40 pads to 48 (3 vectors of 16) with zero-weight columns."""
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), alpha=1.0, sizes=(90, 41, 80))
    got = _train(model, params, masks, data, clients, monkeypatch, mode="1", batch_size=40)
    ref = _train(model, params, masks, data, clients, monkeypatch, mode="0", batch_size=40)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_applies_only_where_it_can_and_pays(monkeypatch):
    monkeypatch.delenv("FEDEVO_SPARSE", raising=False)
    kern = object()  # applies() only checks that kernels exist
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), alpha=1.0)
    ml = [masks.get(i) for i in range(len(params))]
    dens = sum(float(masks[i].mean()) * masks[i].numel() for i in masks) / sum(masks[i].numel() for i in masks)
    assert dens < 0.25
    assert sparse.applies(model, ml, 16, kern)
    assert not sparse.applies(model, ml, 16, None)  # no compiler
    assert not sparse.applies(model, ml, 256, kern)  # batch beyond the kernel's registers
    assert not sparse.applies(model, [None] * len(ml), 16, kern)  # no SET masks: dense
    part = list(ml)
    part[model.fc_weight_ids[-1]] = None
    assert not sparse.applies(model, part, 16, kern)  # one layer unmasked
    dense_masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 100.0, torch.Generator().manual_seed(0))
    assert not sparse.applies(model, [dense_masks.get(i) for i in range(len(params))], 16, kern)  # too dense
    monkeypatch.setenv("FEDEVO_SPARSE", "0")
    assert not sparse.applies(model, ml, 16, kern)
    monkeypatch.setenv("FEDEVO_SPARSE", "auto")
    _, _, cnn, cparams, cmasks = _setup(CNNArch(conv_layers=1, channels=4, kernel=3, layers=1, units=16), alpha=1.0)
    assert not sparse.applies(cnn, [cmasks.get(i) for i in range(len(cparams))], 16, kern)  # MLPs only


@needs_native
def test_sparse_path_with_per_client_learning_rates(monkeypatch):
    """The adaptive mechanism's hook (per-client lr factors, no clipping, no noise) through the sparse path."""
    from fedevo.privacy.adaptive import _ChunkLR

    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), alpha=1.5)
    out = {}
    for mode in ("1", "0"):
        monkeypatch.setenv("FEDEVO_SPARSE", mode)
        out[mode] = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=2, batch_size=16,
                                  lr=0.1, gen=torch.Generator().manual_seed(5),
                                  hook=_ChunkLR(torch.tensor([1.0, 0.5, 2.0, 0.0])))
    for a, b, p0 in zip(out["1"], out["0"], params):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(a[3], p0)  # factor 0: the client does not move
