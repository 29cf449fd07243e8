import torch

from fedevo.config import CNNArch, MLPArch
from fedevo.models import build_model
from fedevo.models.sparse import density, erdos_renyi_masks, omega, prune_regrow


def test_density_formula_and_cap():
    assert density(10, 784, 200) == 10 * (784 + 200) / (784 * 200)
    assert density(1000, 10, 10) == 1.0


def test_masks_counts_and_omega():
    model = build_model(MLPArch(layers=2, units=50), (1, 8, 8), 10)
    g = torch.Generator().manual_seed(0)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 3.0, g)
    expected = 0
    for i, s in enumerate(model.shapes):
        if i in masks:
            k = round(density(3.0, *s) * s[0] * s[1])
            assert int(masks[i].sum()) == k
            expected += k
        else:
            expected += s[0] * s[1]
    assert omega(model.shapes, masks) == expected


def test_prune_regrow_keeps_counts_and_drops_smallest():
    model = build_model(MLPArch(layers=1, units=40), (1, 8, 8), 10)
    g = torch.Generator().manual_seed(1)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 2.0, g)
    for i, m in masks.items():
        params[i].mul_(m)
    before = {i: int(m.sum()) for i, m in masks.items()}
    om = omega(model.shapes, masks)
    update = [torch.randn(p.shape, generator=g) for p in params]
    i0 = next(iter(masks))
    old = masks[i0].clone()
    act = old.view(-1).nonzero().squeeze(1)
    mags = update[i0].view(-1)[act].abs()
    n_drop = int(0.3 * act.numel())
    smallest = set(act[mags.argsort()[:n_drop]].tolist())
    for _ in range(3):
        prune_regrow(params, masks, update, 0.3, g)
        assert {i: int(m.sum()) for i, m in masks.items()} == before
        assert omega(model.shapes, masks) == om
        for i, m in masks.items():
            assert torch.all(params[i][m == 0] == 0)
        if _ == 0:
            removed = set((old.view(-1) - masks[i0].view(-1) > 0).nonzero().squeeze(1).tolist())
            assert removed == smallest


def test_conv_layers_stay_dense():
    model = build_model(CNNArch(conv_layers=1, channels=4, kernel=3, layers=1, units=16), (1, 8, 8), 10)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 1.0, torch.Generator().manual_seed(0))
    assert set(masks) <= set(model.fc_weight_ids) and len(masks) >= 1
    assert all(len(model.shapes[i]) == 2 for i in masks)


def test_equal_nonzero_update_sizes_are_pruned_at_random_positions():
    # sign-based updates give every active weight the same |update|: which ones are pruned must be random (fp32
    # absorbed a random term added to |update|, so the first n_drop active positions were pruned, every round)
    model = build_model(MLPArch(layers=1, units=40), (1, 8, 8), 10)
    g = torch.Generator().manual_seed(3)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, 2.0, g)
    i0 = next(iter(masks))
    act = masks[i0].view(-1).nonzero().squeeze(1)
    n_drop = int(0.3 * act.numel())
    update = [torch.full(p.shape, 0.05) for p in params]
    old = masks[i0].view(-1).clone()
    prune_regrow(params, masks, update, 0.3, g)
    removed = (old - masks[i0].view(-1) > 0).nonzero().squeeze(1)
    assert removed.numel() == n_drop
    # a random choice of n_drop among the active, not one contiguous run of them: neighbours among the chosen
    # positions, about n_drop**2 / active (18 here) at random, were 56 of 61 as one block
    pos = torch.searchsorted(act, removed)
    neighbours = int((pos.diff() == 1).sum())
    assert neighbours < 0.5 * n_drop, pos.tolist()


def test_prune_keys_order_by_size_then_by_the_random_draw():
    """The one int64 sort key per weight orders as (|update|, draw) does, lexicographically (numpy's lexsort), with
    zeros, equal non-zero sizes and sizes over many magnitudes."""
    import numpy as np

    from fedevo.models.sparse import prune_keys

    g = torch.Generator().manual_seed(5)
    mag = (torch.randn(5000, generator=g) * 10 ** torch.randint(-8, 4, (5000,), generator=g)).abs()
    mag[:1000] = 0.0
    mag[1000:2000] = 0.05
    r = torch.rand(5000, generator=g)
    got = torch.argsort(prune_keys(mag, r), stable=True).numpy()
    want = np.lexsort((np.arange(5000), r.numpy(), mag.numpy()))
    assert np.array_equal(got, want)
