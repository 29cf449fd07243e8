import math

import numpy as np
import pytest
import torch

from fedevo.errors import FedevoError
from fedevo.privacy.recall import RecallStore, cosine, sign_agreement, similarity_fn


# ---------------------------------------------------------------- similarities
def test_sign_agreement_hand_case_zeros_match_zeros():
    a = torch.tensor([[1.0, -1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]])
    b = torch.tensor([1.0, 1.0, 0.0, -3.0])
    # row 0: signs (+,−,0,+) vs (+,+,0,−) → agree at j=0, 2; row 1: only j=2 (0 = 0)
    assert sign_agreement(a, b).tolist() == [0.5, 0.25]


def test_cosine_hand_case_and_zero_vector():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0], [-2.0, 0.0]])
    got = cosine(a, torch.tensor([1.0, 0.0]))
    assert torch.allclose(got, torch.tensor([1.0, 0.0, 1 / math.sqrt(2), 0.0, -1.0]))
    assert cosine(a, torch.zeros(2)).tolist() == [0.0] * 5


@pytest.mark.parametrize("fn", [sign_agreement, cosine])
def test_batched_shapes_match_a_loop(fn):
    g = torch.Generator().manual_seed(0)
    hist = torch.randn(3, 4, 50, generator=g)
    target = torch.randn(50, generator=g)
    out = fn(hist, target)
    assert out.shape == (3, 4)
    assert fn(hist[:, 0], target).shape == (3,)
    loop = torch.tensor([[float(fn(hist[i, h], target)) for h in range(4)] for i in range(3)])
    assert torch.allclose(out, loop, atol=1e-6)
    if fn is cosine:
        ref = torch.nn.functional.cosine_similarity(hist, target.expand_as(hist), dim=-1)
        assert torch.allclose(out, ref, atol=1e-6)
    assert ((out >= -1) & (out <= 1)).all()


def test_similarities_accept_float16():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 100, generator=g)
    b = torch.randn(100, generator=g)
    assert torch.allclose(cosine(a.half(), b), cosine(a, b), atol=2e-3)
    assert torch.equal(sign_agreement(a.half(), b), sign_agreement(a, b))


def test_similarity_shape_and_name_errors():
    with pytest.raises(FedevoError, match="similarity needs"):
        cosine(torch.zeros(3, 5), torch.zeros(4))
    with pytest.raises(FedevoError, match="similarity needs"):
        sign_agreement(torch.zeros(3, 5), torch.zeros(3, 5))
    with pytest.raises(FedevoError, match="'euclid'"):
        similarity_fn("euclid")


# ---------------------------------------------------------------- the store
def test_round_trip_float16_error_small():
    g = torch.Generator().manual_seed(2)
    store = RecallStore(num_params=1000)
    upd = torch.randn(3, 1000, generator=g) * 0.5
    store.add(np.array([4, 9, 2]), upd)
    assert len(store) == 3 and store.count(9) == 1 and store.count(5) == 0
    back = store.history(9)
    assert back.dtype == torch.float32 and back.shape == (1, 1000)
    err = (back[0] - upd[1]).abs()
    assert float(err.max()) <= float(upd[1].abs().max()) * 2 ** -11 + 1e-7  # half-precision rounding
    assert float(err.norm() / upd[1].norm()) < 5e-4


def test_window_eviction_keeps_the_last_h():
    store = RecallStore(num_params=3, window=4)
    for v in range(6):
        store.add([0], torch.full((1, 3), float(v)))
    assert store.count(0) == 4
    assert sorted(store.history(0)[:, 0].tolist()) == [2.0, 3.0, 4.0, 5.0]


def test_nbytes_and_worst_case():
    store = RecallStore(num_params=1000, window=4)
    assert store.nbytes == 0
    store.add(torch.tensor([0, 1]), torch.zeros(2, 1000))
    store.add([1, 2], torch.zeros(2, 1000))  # client 1 again: no new allocation
    assert store.nbytes == 3 * 4 * 1000 * 2
    # seed-000 MNIST setting: 1000 users, 200k-parameter MLP
    worst = RecallStore.worst_case_nbytes(num_clients=1000, num_params=200_000, window=4)
    assert worst == 1_600_000_000 <= 4 * 10 ** 9
    assert RecallStore.worst_case_nbytes(num_clients=1000, num_params=200_000, window=4,
                                         dtype=torch.float32) == 2 * worst


def test_best_match_picks_the_argmax_per_similarity():
    store = RecallStore(num_params=4, window=4)
    hist = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]])
    store.add([0, 0, 0], hist)
    m = store.best_match([0], torch.tensor([2.0, 1.0, -1.0, -1.0]), "sign")
    assert m.found.tolist() == [True] and m.slots.tolist() == [1] and torch.equal(m.updates[0], hist[1])
    assert store.best_match([0], torch.tensor([2.0, 1.0, -1.0, -1.0]), "cosine").slots.tolist() == [1]
    # sign and cosine disagree: A has the large aligned coordinate, B most aligned signs
    store.add([5, 5], torch.tensor([[10.0, -0.1, -0.1, -0.1], [0.1, 0.1, 0.1, -10.0]]))
    target = torch.ones(4)
    assert store.best_match([5], target, "sign").slots.tolist() == [1]
    assert store.best_match([5], target, cosine).slots.tolist() == [0]


def test_best_match_unknown_clients_and_integration_contract():
    g = torch.Generator().manual_seed(3)
    store = RecallStore(num_params=20, window=2)
    ups = torch.randn(6, 20, generator=g)
    store.add(np.array([0, 1, 0, 1, 0, 3]), ups)  # client 0 wraps: keeps rows 2 and 4
    target = torch.randn(20, generator=g)
    found, stored, slots = store.best_match(np.array([7, 0, 3, 1]), target, "cosine")
    assert found.tolist() == [False, True, True, True]
    assert slots[0] == -1 and torch.equal(stored[0], torch.zeros(20))
    kept0 = torch.stack([ups[4], ups[2]]).half().float()  # ring slots 0, 1 after the wrap
    best = int(torch.argmax(cosine(kept0, target)))
    assert int(slots[1]) == best and torch.equal(stored[1], kept0[best])
    assert torch.equal(stored[found][0], store.get(0, int(slots[1])))  # the (i, k) index resolves to the copy


def test_store_errors():
    store = RecallStore(num_params=4)
    with pytest.raises(FedevoError, match="shape"):
        store.add([0], torch.zeros(2, 4))
    with pytest.raises(FedevoError, match="overflow"):
        store.add([0], torch.tensor([[1e6, 0.0, 0.0, 0.0]]))
    with pytest.raises(FedevoError, match="no stored update"):
        store.get(0, 0)
    with pytest.raises(FedevoError, match="window"):
        RecallStore(num_params=4, window=0)
    with pytest.raises(FedevoError, match="num_params"):
        RecallStore(num_params=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("with_idx", [False, True])
def test_native_sign_agreement_equals_torch(dtype, with_idx, monkeypatch):
    """The one-pass kernel gives the torch expression's values: zeros of either sign match, NaN counts as a zero
    (torch's CPU sign(NaN) is 0)."""
    from fedevo import native

    if native.load() is None:
        pytest.skip("native kernels unavailable")
    g = torch.Generator().manual_seed(3)
    a = torch.randn(2, 3, 1000, generator=g)
    b = torch.randn(1000, generator=g)
    a[..., :200] = 0.0
    a[0, 0, :50] = -0.0
    b[100:300] = 0.0
    a[1, 2, 300:310], b[305:320] = float("nan"), float("nan")
    a[0, 1, 400:410], b[400:405] = float("inf"), -float("inf")
    a = a.to(dtype)
    idx = torch.randperm(1000, generator=g)[:321] if with_idx else None
    got = sign_agreement(a, b, idx)
    aa, bb = (a, b) if idx is None else (a[..., idx], b[idx])
    want = (torch.sign(aa.float()) == torch.sign(bb)).sum(-1, dtype=torch.float32) / bb.shape[0]
    assert got.shape == (2, 3) and torch.equal(got, want)
    with monkeypatch.context() as mp:  # the torch fallback agrees too
        mp.setattr(native, "load", lambda: None)
        assert torch.equal(sign_agreement(a.float(), b, idx), want)
