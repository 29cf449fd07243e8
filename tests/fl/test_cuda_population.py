"""On a real GPU (marked `cuda`, skipped where torch sees none): the stacked trainer and a batched generation on
CUDA against the CPU engine and against each individual alone on the GPU; captured CUDA graphs against eager."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from fedevo.config import DataConfig, MLPArch, SimConfig
from fedevo.data.datasets import synthetic
from fedevo.evaluation import evaluate, evaluate_population
from fedevo.fl import stacked, stacked_graphs
from fedevo.fl.engine import flat_deltas, train_chunks
from fedevo.models import build_model

from .test_cuda import ROUND_L2, _rel_l2
from .test_population import GENERATION, SEEDS, _objectives, batched_and_alone, problem  # noqa: F401  (the fixture)

pytestmark = pytest.mark.cuda
CUDA = torch.device("cuda")


def _reference(alpha=None, clients=20):
    data = synthetic(n_train=clients * 600, n_test=10, shape=(1, 28, 28), seed=0, noise=3.0)
    model = build_model(MLPArch(2, 200), (1, 28, 28), 10)
    g = torch.Generator().manual_seed(0)
    params = model.init(g)
    masks = {}
    if alpha:
        from fedevo.models.sparse import erdos_renyi_masks
        masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, alpha, g)
        for i, m in masks.items():
            params[i].mul_(m)
    clients_ix = [np.arange(k * 600, (k + 1) * 600) for k in range(clients)]
    chunks = [clients_ix[s:s + 5] for s in range(0, clients, 5)]
    member = stacked.Member(dims=model.dims, params=params, masks=masks, lr=0.05, chunks=chunks,
                            seeds=list(range(len(chunks))), epochs=5, batch_size=64)
    return data, model, member


@pytest.mark.parametrize("alpha", [None, 5.0], ids=["dense", "set"])
def test_stacked_reference_round_on_cuda_equals_cpu_engine(alpha):
    data, model, m = _reference(alpha)
    model.compute_dtype = torch.float32
    cpu = torch.cat([flat_deltas(c, m.params) for c in train_chunks(
        model, m.params, m.masks, data.x_train, data.y_train, m.chunks, epochs=5, batch_size=64, lr=0.05,
        seeds=m.seeds)])
    (got,) = stacked.train_members([m], data.x_train, data.y_train, device=CUDA)
    got = got.cpu()
    assert _rel_l2(got, cpu) <= ROUND_L2
    m.lr *= 0.9  # a 10% error in the step: outside the tolerance
    (other,) = stacked.train_members([m], data.x_train, data.y_train, device=CUDA)
    assert _rel_l2(other.cpu(), cpu) > ROUND_L2


def test_cuda_graph_replay_equals_eager(monkeypatch):
    """The same round three times: eager, captured (its second sight), replayed: the same numbers, bit for bit
    (and the same as with graphs off)."""
    data, _, m = _reference(5.0, clients=10)
    stacked_graphs.CACHES.clear()
    runs = [stacked.train_members([m], data.x_train, data.y_train, device=CUDA)[0].cpu() for _ in range(3)]
    assert len(stacked_graphs.cache(CUDA).graphs) == 1
    monkeypatch.setenv("FEDEVO_CUDA_GRAPHS", "0")
    runs.append(stacked.train_members([m], data.x_train, data.y_train, device=CUDA)[0].cpu())
    assert all(torch.equal(r, runs[0]) for r in runs[1:])


def test_a_long_run_replays_its_padded_graphs(monkeypatch):
    """A run with more rounds than GRAPH_ROUNDS whose arrivals vary (upload loss): its shapes rounded up
    (`padded_clients`, SAMPLE_QUANTUM), each seen once, captured the next time, replayed after; the same numbers
    twice, and within the documented tolerance of the run with graphs off (unrounded, eager); its last rounds
    (fewer than GRAPH_ROUNDS left) eager."""
    from fedevo.fl.simulate import simulate

    # 20 clients of 71 or 72 samples, ~18 arriving (16 to 20: rounded to even counts), the last batch's 7 or 8
    # samples computed as 8; 15 rounds with graphs: some shape comes three times or more
    cfg = SimConfig(data=DataConfig(dataset="digits", clients=20), arch=MLPArch(1, 64),
                    rounds=stacked_graphs.GRAPH_ROUNDS + 14, epochs=1, batch_size=32, lr=0.05, participation=1.0,
                    upload_loss=0.1, precision="fp32", alpha=4.0, device="cuda")
    hits, runs, keys = [], [], []
    real = stacked_graphs.GraphCache.run

    def counted(self, bucket, x, before_capture=None):
        key = (bucket.key(), x.data_ptr(), x.shape)
        hits.append(key in self.graphs)
        runs.append((bucket.recurs, bucket.C))
        keys.append(key)
        return real(self, bucket, x, before_capture)
    monkeypatch.setattr(stacked_graphs.GraphCache, "run", counted)
    stacked_graphs.CACHES.clear()
    a = simulate(cfg, seed=5)
    recurring = [key for (r, _), key in zip(runs, keys) if r]
    assert len(recurring) == cfg.rounds - (stacked_graphs.GRAPH_ROUNDS - 1)
    assert [r for r, _ in runs[-(stacked_graphs.GRAPH_ROUNDS - 1):]] == [False] * (stacked_graphs.GRAPH_ROUNDS - 1)
    assert all(k[0][0] == stacked_graphs.padded_clients(k[0][0]) for k in recurring)
    # each shape seen once, captured the next time, replayed every time after (no eviction: a few shapes)
    counts = {k: recurring.count(k) for k in set(recurring)}
    replayed = sum(h for h, (r, _) in zip(hits, runs) if r)
    assert replayed == sum(n - min(n, 2) for n in counts.values()) > 0, (hits, counts)
    b = simulate(cfg, seed=5)
    assert _objectives(a) == _objectives(b)
    monkeypatch.setenv("FEDEVO_CUDA_GRAPHS", "0")
    eager = simulate(cfg, seed=5)
    assert (a.status, a.comm, a.eps, a.omega) == (eager.status, eager.comm, eager.eps, eager.omega)
    assert abs(a.error - eager.error) <= 0.02


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_generation_on_cuda_equals_each_alone(problem, exact):  # noqa: F811
    for p, s, got, alone in batched_and_alone(problem, GENERATION, SEEDS, device="cuda", exact=exact):
        assert got.engine["device"] == "cuda"
        if exact:
            assert _objectives(got) == _objectives(alone), p
        else:
            assert (got.status, got.comm, got.eps, got.omega) == (alone.status, alone.comm, alone.eps, alone.omega)
            assert abs(got.error - alone.error) <= 0.02
        cpu = evaluate(problem, dict(p, device="cpu"), seed=s)  # the CPU engine: the documented tolerance
        assert (got.comm, got.eps, got.omega) == (cpu.comm, cpu.eps, cpu.omega)
        assert abs(got.error - cpu.error) <= 0.02


def test_same_seeds_same_numbers_on_cuda(problem):  # noqa: F811
    a = evaluate_population(problem, GENERATION, SEEDS, device="cuda")
    b = evaluate_population(problem, GENERATION, SEEDS, device="cuda")
    assert [_objectives(r) for r in a] == [_objectives(r) for r in b]


def test_simulate_on_cuda_takes_the_stacked_path():
    """simulate on CUDA trains an MLP through the stacked trainer: its numbers equal a population of one."""
    from fedevo.fl.population import simulate_population
    from fedevo.fl.simulate import simulate

    cfg = SimConfig(data=DataConfig(dataset="digits", clients=10), arch=MLPArch(2, 64), rounds=3, epochs=2,
                    batch_size=32, lr=0.05, participation=0.5, precision="fp32", alpha=4.0, device="cuda")
    a = simulate(cfg, seed=3)
    (b,) = simulate_population([cfg], [3], device="cuda")
    assert _objectives(a) == _objectives(b)
    os.environ["FEDEVO_STACKED"] = "0"
    try:
        old = simulate(cfg, seed=3)  # today's device path: the documented tolerance
    finally:
        os.environ.pop("FEDEVO_STACKED")
    assert abs(old.error - a.error) <= 0.02 and (old.eps, old.comm) == (a.eps, a.comm)


def test_overlapped_run_sides_on_cuda_equal_after_training(problem, monkeypatch):  # noqa: F811
    """Each run's side of a round on its thread's own stream, started as its bucket is queued (the default),
    against the same after the round's training (overlap=False) and one thread: bit for bit, twice (a race
    between the streams would show as a difference), central and secure-aggregation members."""
    from fedevo.fl.population import evaluate_population as batched

    gen, seeds = GENERATION * 2, SEEDS + [s + 10 for s in SEEDS]
    assert {p.get("trust", "central") for p in gen} == {"central", "secagg"}
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "1")
    want = [_objectives(r) for r in batched(problem, gen, seeds, device="cuda", overlap=False)]
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "8")
    for overlap in (False, True, True):
        got = batched(problem, gen, seeds, device="cuda", overlap=overlap)
        assert [_objectives(r) for r in got] == want, overlap


def test_overlapped_run_sides_with_tf32_members_equal_after_training(problem, monkeypatch):  # noqa: F811
    """TF32 members (FEDEVO_CUDA_TF32=1): the bucket's process-wide TF32 flag must not reach the other runs'
    sides in their threads (aggregation's and the test accuracies' matmuls stay fp32, as alone): overlapped
    equals after the round's training, bit for bit, twice."""
    from fedevo.fl.population import evaluate_population as batched

    gen, seeds = GENERATION * 2, SEEDS + [s + 10 for s in SEEDS]
    monkeypatch.setenv("FEDEVO_CUDA_TF32", "1")
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "8")
    want = [_objectives(r) for r in batched(problem, gen, seeds, device="cuda", overlap=False)]
    for _ in range(2):
        got = batched(problem, gen, seeds, device="cuda", overlap=True)
        assert [_objectives(r) for r in got] == want
