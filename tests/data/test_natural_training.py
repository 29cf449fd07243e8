"""Unbalanced natural clients train correctly: clients with fewer samples than the batch (one sample included) next
to large ones, images and feature vectors, through the batched engine, equal the plain per-client loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedevo.config import MLPArch
from fedevo.data.sources import ArraySource, open_source
from fedevo.data.partition import natural
from fedevo.fl.engine import batch_schedule, train_clients
from fedevo.fl.reference import train_clients_reference
from fedevo.models import build_model
from fedevo.models.sparse import erdos_renyi_masks

SIZES = (1, 3, 70, 5, 16, 17)  # batch 16: below, equal, just above, many batches


@pytest.mark.parametrize("shape", [(1, 6, 6), (11,)], ids=["images", "vectors"])
@pytest.mark.parametrize("alpha", [None, 2.0], ids=["dense", "sparse"])
def test_engine_equals_reference_on_tiny_and_large_clients(shape, alpha):
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(len(SIZES)), SIZES)
    rng.shuffle(ids)  # a client's rows scattered through the file
    x = rng.normal(size=(len(ids), *shape)).astype(np.float32)
    y = rng.integers(0, 3, len(ids))
    a = ArraySource(x=x, y=y, client_id=ids, x_test=x[:5], y_test=y[:5], client_id_test=ids[:5])
    from fedevo.data.sources import load_user

    data = load_user(open_source(a, natural=True))
    part = natural(data.train_clients, data.test_clients, clients=len(SIZES))
    assert tuple(part.sizes) == SIZES
    model = build_model(MLPArch(layers=1, units=12), data.input_shape, data.num_classes)
    g = torch.Generator().manual_seed(0)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, alpha, g)
    for i, m in masks.items():
        params[i].mul_(m)
    clients = list(part.train)
    got = train_clients(model, params, masks, data.x_train, data.y_train, clients, epochs=2, batch_size=16, lr=0.1,
                        gen=torch.Generator().manual_seed(5))
    pos, wts = batch_schedule(list(SIZES), epochs=2, batch_size=16, gen=torch.Generator().manual_seed(5))
    ref = train_clients_reference(model, params, masks, data.x_train, data.y_train, clients, pos=pos, wts=wts, lr=0.1)
    for a_, b_ in zip(got, ref):
        torch.testing.assert_close(a_, b_, atol=1e-5, rtol=1e-4)
    # the one-sample client moved (it trained 2 steps), as did the largest
    moved = [max(float((p[k] - p0).abs().max()) for p, p0 in zip(got, params)) for k in range(len(SIZES))]
    assert min(moved) > 1e-4


def test_chunk_order_largest_first_for_natural_only():
    from fedevo.data.partition import chunk_order

    arrived = np.array([0, 2, 3, 5, 7])
    sizes = np.array([10, 99, 4, 10, 1, 500, 0, 10])
    assert chunk_order(arrived, sizes, scheme="natural").tolist() == [5, 0, 3, 7, 2]  # ties keep id order
    for scheme in ("iid", "shards", "dirichlet"):
        assert chunk_order(arrived, sizes, scheme=scheme) is arrived


def _natural_problem(tmp_path, privacy: str = ""):
    from fedevo.problem import load_problem
    from tests.data.user_data import problem, write_npz

    write_npz(tmp_path / "d.npz")
    p = problem(tmp_path / "p.toml", 'source = "npz"\npath = "d.npz"\npartition = "natural"',
                train="chunk_clients = 2\nupload_loss = 0.0")
    if privacy:
        p.write_text(p.read_text().replace("[genes]", f"[privacy]\n{privacy}\n[genes]"))
    return load_problem(str(p))


def test_rounds_chunk_natural_clients_by_size(tmp_path, monkeypatch):
    import fedevo.fl.rounds as rounds
    from fedevo.fl.simulate import simulate

    seen = []
    real = rounds.train_chunks

    def spy(model, params, masks, x, y, chunks, **kw):
        seen.append([[len(ix) for ix in c] for c in chunks])
        return real(model, params, masks, x, y, chunks, **kw)

    monkeypatch.setattr(rounds, "train_chunks", spy)
    prob = _natural_problem(tmp_path)
    r = simulate(prob.sim_config({"device": "cpu"}), seed=0)  # the CPU engine's chunks (a GPU groups them)
    assert r.status == "ok"
    assert seen and all(sum(seen_round, []) == sorted(sum(seen_round, []), reverse=True) for seen_round in seen)


@pytest.mark.parametrize("privacy", [
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0\nrecall = true\ntau = 0.5',
    'mechanism = "step"\nsigma = 0.5\nclip = 1.0',
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0\ntrust = "central"\nsampling = "fixed"\ndelta = 1e-3',
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0\ntrust = "secagg"\naggregation = "secagg"\ndelta = 1e-3',
    'mechanism = "adaptive"\nsigma = 0.5\nclip = 1.0',
], ids=["update-recall", "step", "central", "secagg", "adaptive"])
def test_mechanisms_run_on_unbalanced_natural_clients(tmp_path, privacy):
    from fedevo.fl.simulate import simulate

    prob = _natural_problem(tmp_path, privacy)
    r = simulate(prob.sim_config(), seed=0)
    assert r.status == "ok", r.message
    assert 0 <= r.error <= 1 and r.comm > 0 and 0 < r.eps < float("inf")
