"""The batched engine must compute what the plain per-client loop computes."""

import numpy as np
import torch

from fedevo.config import CNNArch, MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl.engine import batch_schedule, train_clients
from fedevo.fl.reference import train_clients_reference
from fedevo.models import build_model
from fedevo.models.sparse import erdos_renyi_masks
from fedevo.privacy.mechanisms import StepLDP


class _ZeroNoise:
    def fill_(self, buf, std=1.0):
        return buf.zero_()

    def add_(self, buf, std=1.0):
        return buf


def _setup(arch, sizes=(37, 50, 64, 20), alpha=None, shape=(1, 8, 8)):
    data = synthetic(n_train=sum(sizes), n_test=10, shape=shape, seed=0)
    offsets = np.cumsum((0,) + sizes)
    clients = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(sizes))]
    model = build_model(arch, shape, 10)
    g = torch.Generator().manual_seed(0)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, alpha, g)
    for i, m in masks.items():
        params[i].mul_(m)
    return data, clients, model, params, masks


def _compare(model, params, masks, data, clients, hook=None, clip=None, atol=1e-5):
    got = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=2, batch_size=16, lr=0.1,
                        gen=torch.Generator().manual_seed(5), hook=hook)
    pos, wts = batch_schedule([len(c) for c in clients], epochs=2, batch_size=16, gen=torch.Generator().manual_seed(5))
    ref = train_clients_reference(model, params, masks, data.x_train, data.y_train, clients, pos=pos, wts=wts, lr=0.1,
                                  clip=clip)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=atol, rtol=1e-4)
    # and the clients really moved
    assert any((a - p.unsqueeze(0)).abs().max() > 1e-3 for a, p in zip(got, params))


def test_mlp_matches_reference_unequal_sizes():
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24))
    _compare(model, params, masks, data, clients)


def test_mlp_masked_matches_reference_and_stays_sparse():
    data, clients, model, params, masks = _setup(MLPArch(layers=1, units=32), alpha=2.0)
    assert masks
    _compare(model, params, masks, data, clients)
    got = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=1, batch_size=16, lr=0.1,
                        gen=torch.Generator().manual_seed(1))
    for i, m in masks.items():
        assert torch.all(got[i][:, m == 0] == 0)


def test_clipping_matches_reference():
    data, clients, model, params, masks = _setup(MLPArch(layers=1, units=16))
    hook = StepLDP(sigma=1.0, clip=0.05).for_chunk(0, noise=_ZeroNoise())
    _compare(model, params, masks, data, clients, hook=hook, clip=0.05)


def test_cnn_matches_reference():
    data, clients, model, params, masks = _setup(CNNArch(conv_layers=2, channels=4, kernel=3, layers=1, units=16),
                                                 sizes=(20, 33), alpha=2.0)
    _compare(model, params, masks, data, clients, atol=1e-4)


def test_schedule_visits_every_sample_once_per_epoch():
    pos, wts = batch_schedule([10, 23], epochs=3, batch_size=4, gen=torch.Generator().manual_seed(0))
    assert pos.shape == (2, 3 * 6, 4)
    for k, n in enumerate((10, 23)):
        real = wts[k] > 0
        seen = pos[k][real]
        assert len(seen) == 3 * n
        assert torch.equal(torch.bincount(seen, minlength=n), torch.full((n,), 3))
        # each real batch's weights sum to 1 (a mean over the batch)
        sums = wts[k].sum(-1)
        assert torch.allclose(sums[sums > 0], torch.ones(int((sums > 0).sum())))


def test_step_noise_has_sigma_std():
    from fedevo.privacy.noise import NoiseSource

    data, clients, model, params, masks = _setup(MLPArch(layers=1, units=16), sizes=(16, 16))
    src = NoiseSource(0, threads=2)
    hook = StepLDP(sigma=0.5, clip=1e-9).for_chunk(0, noise=src)  # clip ~0: the step is pure noise
    got = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=4, batch_size=16, lr=0.1,
                        gen=torch.Generator().manual_seed(1), hook=hook)
    diff = torch.cat([(a - p.unsqueeze(0)).reshape(2, -1) for a, p in zip(got, params)], 1)
    # 4 steps of N(0, 0.25): std 1.0; a factor-2 error in σ would give 0.5 or 2
    assert abs(float(diff.std()) - 1.0) < 0.05
    src.close()


def test_step_noise_on_active_weights_only_when_sparse():
    from fedevo.privacy.noise import NoiseSource

    data, clients, model, params, masks = _setup(MLPArch(layers=1, units=64), sizes=(16, 16, 16), alpha=1.0)
    m = masks[0]
    assert float(m.mean()) < 0.5  # the sparse (index_add) path
    hook = StepLDP(sigma=0.5, clip=1e-9).for_chunk(0, noise=NoiseSource(1, threads=1))
    got = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=4, batch_size=16, lr=0.1,
                        gen=torch.Generator().manual_seed(1), hook=hook)
    diff = got[0] - params[0].unsqueeze(0)
    assert torch.all(diff[:, m == 0] == 0)
    assert abs(float(diff[:, m == 1].std()) - 1.0) < 0.1  # 4 steps of N(0, 0.25)
