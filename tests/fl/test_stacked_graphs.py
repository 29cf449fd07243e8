"""When the stacked trainer captures a bucket's CUDA graph (fl/stacked_graphs.py `recurs`, `GraphCache`), on the CPU: a
bucket padded with clients that have no sample trains its members exactly as unpadded; the capture rule by the
members' rounds left; the cache's bounds; the round loops hand each member its rounds left."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedevo.fl import engine, stacked
from fedevo.fl.stacked import Member, _Bucket
from fedevo.fl.stacked_graphs import GRAPH_ROUNDS, GraphCache, SAMPLE_QUANTUM, padded_clients, recurs

from .test_stacked import CPU, DATA, _member


def _trained(bucket: _Bucket, state: dict | None = None) -> list[torch.Tensor]:
    state = {} if state is None else state
    bucket.load(state)
    with engine.intra_op_threads(1):
        bucket.run(state, DATA.x_train.reshape(len(DATA.x_train), -1))
    return bucket.deltas(state)


@pytest.mark.parametrize("alpha", [None, 2.0], ids=["dense", "set"])
def test_a_shaped_bucket_trains_its_members_as_unshaped(alpha):
    """Members of other widths, their bucket's shapes rounded up as where its graph is to recur (clients of no
    sample after theirs; each step's samples with zero-weight columns): each member's updates within fp32 rounding
    of the bucket's as it is (the steps' sums run over more, zero, terms); the padding slots stay zero."""
    members = [_member(units=24, alpha=alpha)[1], _member(units=17, alpha=2.0, lr=0.05, seed=1, shift=5)[1]]
    # 11 + 10 clients whose last batches hold 5 and 3 samples: 22 slots; those steps' columns rounded up to 8
    members = [Member(dims=m.dims, params=m.params, masks=m.masks, lr=m.lr, seeds=[5 + k, 6 + k], epochs=2,
                      chunks=[[np.arange(0, 21) + 20 * j + k for j in range(5)],
                              [np.arange(0, 19) + 20 * j + k for j in range(6 - k)]], batch_size=16)
               for k, m in enumerate(members)]
    y = DATA.y_train
    plain_bucket = _Bucket(members, y, CPU)
    plain = _trained(plain_bucket)
    bucket = _Bucket(members, y, CPU, shaped=True)
    real = sum(m.clients for m in members)
    assert (real, plain_bucket.C, bucket.C) == (21, 21, 22)
    assert all(u % SAMPLE_QUANTUM == 0 or u == m.batch_size for u, m in zip(bucket.used, members * 99))
    assert bucket.used != plain_bucket.used and len(bucket.used) == len(plain_bucket.used)
    state: dict = {}
    padded = _trained(bucket, state)
    for a, b in zip(plain, padded):
        torch.testing.assert_close(b, a, atol=1e-7, rtol=1e-6)
    assert float(plain[0].abs().max()) > 1e-3  # the clients trained
    for name, t in state.items():
        if name[0] in "WbM":
            assert not t[real:].any(), name  # nothing moved the padding
    # a recurring graph's state held other clients in those slots: loading zeroes them, the numbers are the same
    for name, t in state.items():
        if name[0] in "Wb":
            t[real:].normal_()
    bucket.load(state)
    assert not any(t[real:].any() for name, t in state.items() if name[0] in "WbM")
    again = _trained(bucket, state)
    for a, b in zip(padded, again):
        assert torch.equal(a, b)


def test_recurs_by_the_members_rounds_left():
    m = _member()[1]

    def left(*ns):
        return [Member(dims=m.dims, params=m.params, masks=m.masks, lr=m.lr, chunks=m.chunks, seeds=m.seeds,
                       epochs=m.epochs, batch_size=m.batch_size, rounds_left=n) for n in ns]
    assert recurs(left(None)) is None and recurs(left(GRAPH_ROUNDS, None)) is None  # a caller's own repeats
    assert recurs(left(GRAPH_ROUNDS, GRAPH_ROUNDS + 40)) is True
    assert recurs(left(GRAPH_ROUNDS - 1, 100)) is False  # one member near its end: the bucket eager
    assert recurs(left(5, 4, 3, 2, 1)) is False  # a 5-round generation's members never capture
    # only on CUDA with graphs on: the CPU never pads
    assert _Bucket(left(100), DATA.y_train, CPU).C == m.clients


def _stub(key, recurs_, hooked=False):
    """A bucket as GraphCache.run sees it, on a 'cuda' device (no CUDA call is made: the capture is recorded)."""
    return SimpleNamespace(key=lambda: key, recurs=recurs_, hooked=hooked, tf32=False,
                           device=torch.device("cuda"), load=lambda state: None)


@pytest.mark.parametrize("recurs_,captures", [(None, [False, True]), (True, [False, True]),
                                              (False, [False, False])])
def test_capture_on_the_second_sighting_unless_the_bucket_ends_soon(monkeypatch, recurs_, captures):
    cache = GraphCache()
    seen = []
    monkeypatch.setattr(GraphCache, "_run_new",
                        lambda self, b, x, key, state, capture: (self.seen.add(key), seen.append(capture)))
    x = torch.zeros(3, 2)
    for _ in captures:
        cache.run(_stub(("k", 8), recurs_), x)
    assert seen == captures
    seen.clear()
    cache.run(_stub(("h", 8), recurs_, hooked=True), x)
    cache.run(_stub(("h", 8), recurs_, hooked=True), x)
    assert seen == [False, False]  # a hooked bucket never
    monkeypatch.setenv("FEDEVO_CUDA_GRAPHS", "0")
    seen.clear()
    cache.run(_stub(("k", 8), recurs_), x)
    assert seen == [False]


def test_the_cache_keeps_the_latest_graphs_within_its_bounds():
    cache = GraphCache(size=3)
    for i in range(5):
        cache.graphs[i] = (None, {"W0": torch.zeros(250)})  # 1000 bytes each
        cache.evict(budget=1 << 40)
    assert list(cache.graphs) == [2, 3, 4]
    cache.evict(budget=2500)  # two fit
    assert list(cache.graphs) == [3, 4]
    cache.evict(budget=10)  # the newest is kept even where it alone exceeds the budget
    assert list(cache.graphs) == [4]


def test_the_round_loop_hands_each_member_its_rounds_left(monkeypatch):
    """run_rounds (through local_round) and a batched generation (fl/population.py) build each round's Member
    with the rounds its loop has left, this one included; `until` ends the loop early and counts."""
    from fedevo.config import DataConfig, MLPArch, SimConfig
    from fedevo.fl import rounds
    from fedevo.fl.population import simulate_population
    from fedevo.fl.simulate import prepare

    seen: list = []
    real = stacked.train_members

    def recorded(members, *a, **kw):
        seen.append([m.rounds_left for m in members])
        return real(members, *a, **kw)
    monkeypatch.setattr(stacked, "train_members", recorded)
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=4), arch=MLPArch(1, 8), rounds=4, epochs=1,
                    batch_size=16, lr=0.1, participation=1.0, precision="fp32", alpha=4.0)
    su = prepare(cfg, seed=1)
    rounds.run_rounds(su.cfg, su.model, su.data, su.part, gen=su.gen, privatizer=su.privatizer, engine=su.engine,
                      device=CPU, until=3)  # the device path (a CPU device here), as simulate's on a GPU
    assert seen == [[3], [2], [1]]
    seen.clear()
    simulate_population([cfg, cfg.with_(rounds=2)], [1, 2], device="cpu")
    assert sorted(map(tuple, seen)) == sorted([(4, 2), (3, 1), (2,), (1,)])


def test_padded_clients_round_up_by_at_most_an_eighth():
    got = {c: padded_clients(c) for c in range(1, 2000)}
    assert all(c <= p <= c * (1 + 1 / 8) for c, p in got.items())
    assert [got[c] for c in (1, 7, 15, 16, 17, 63, 65, 70, 75, 200)] == [1, 7, 15, 16, 18, 64, 72, 72, 80, 208]
    assert len({got[c] for c in range(65, 76)}) == 2  # 70 ± 5 arriving: two shapes
    assert all(padded_clients(p) == p for p in got.values())  # a rounded count stays


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_graph_benchmark_says_there_is_no_gpu():
    from tests.helpers import run_benchmark

    r = run_benchmark("cuda_graph_rounds.py")
    assert r.returncode == 1 and r.stdout == "" and "torch sees no GPU" in r.stderr


@pytest.mark.parametrize("shaped", [False, True])
def test_one_learning_rate_weights_the_plan_as_per_slot(shaped):
    """Members with one learning rate (a run alone) scale the plan's weights by it on the device instead of an
    uploaded per-slot array: the same fp32 weights; the padding's stay 0."""
    from fedevo.fl.stacked_schedule import per_slot, plan_layout

    members = [_member(units=24, lr=0.07)[1], _member(units=17, alpha=2.0, lr=0.07, seed=1, shift=5)[1]]
    bucket = _Bucket(members, DATA.y_train, CPU, shaped=shaped)
    real = sum(m.clients for m in members)
    shapes = tuple((tuple(len(ix) for ch in m.chunks for ix in ch), m.epochs) for m in members)
    pad = bucket.C - real
    _, _, ws, _ = plan_layout(shapes, 16, "cpu", pad, SAMPLE_QUANTUM if shaped else 1)
    neg_lr = np.concatenate([np.full(real, -0.07, dtype=np.float32), np.zeros(pad, dtype=np.float32)])
    want = ws * torch.from_numpy(per_slot(neg_lr, bucket.used))
    assert torch.equal(bucket.plan[2].abs(), want.abs()) and torch.equal(bucket.plan[2], want)
    other = _Bucket([members[0], _member(units=17, lr=0.05, seed=1, shift=5)[1]], DATA.y_train, CPU)
    assert not torch.equal(other.plan[2][:len(want)], want[:len(other.plan[2])])  # two rates: per slot
