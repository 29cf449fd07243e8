import math

import pytest

from fedevo.config import CNNArch, DataConfig, PrivacyConfig, SimConfig
from fedevo.evaluation import evaluate
from fedevo.fl.simulate import simulate


def test_determinism(tiny_problem):
    a = evaluate(tiny_problem, {}, seed=3)
    b = evaluate(tiny_problem, {}, seed=3)
    c = evaluate(tiny_problem, {}, seed=4)
    assert a.status == "ok"
    assert (a.error, a.comm, a.accuracy_global) == (b.error, b.comm, b.accuracy_global)
    assert (a.error, a.accuracy_global) != (c.error, c.accuracy_global)


def test_learns_and_comm_is_omega_times_c(tiny_problem):
    r = evaluate(tiny_problem, {"participation": 0.5}, seed=0, rounds=5)
    assert r.error < 0.5  # 10 classes: chance is 0.9
    assert r.comm == pytest.approx(r.omega * 3 / 6)  # p = ceil(0.5·6) = 3 of K = 6, no loss


def test_upload_loss_frequency():
    from fedevo.fl import rounds as R

    seen = []
    orig = R.train_chunks

    def spy(model, params, masks, x, y, chunks, **kw):
        seen.extend(len(c) for c in chunks)
        return orig(model, params, masks, x, y, chunks, **kw)

    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=10), rounds=60, epochs=1, batch_size=64,
                    participation=1.0, upload_loss=0.3, chunk_clients=100)
    R.train_chunks, saved = spy, R.train_chunks
    try:
        res = simulate(cfg, seed=0)
    finally:
        R.train_chunks = saved
    arrived = sum(seen) / (60 * 10)
    assert abs(arrived - 0.7) < 0.05  # 600 Bernoulli(0.7): sd 0.019
    assert res.comm == pytest.approx(res.omega)  # lost uploads still cost their bytes


def test_cnn_path():
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=4), arch=CNNArch(conv_layers=1, channels=4, kernel=3,
                    layers=1, units=16), rounds=2, epochs=1, batch_size=32, participation=1.0, upload_loss=0.0,
                    alpha=2.0, xi=0.2, lr=0.1)
    r = simulate(cfg, seed=0)
    assert r.status == "ok" and 0 <= r.error <= 1 and r.omega > 0


@pytest.mark.parametrize("alpha,sparse", [(None, "auto"), (2.0, "1"), (2.0, "0")])  # dense, SET sparse kernel, SET dense
def test_diverged_is_reported_not_raised(alpha, sparse, monkeypatch):
    monkeypatch.setenv("FEDEVO_SPARSE", sparse)  # the native kernels (-ffast-math) must not hide a NaN either
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=4), rounds=3, epochs=2, batch_size=8, lr=1e30,
                    participation=1.0, upload_loss=0.0, alpha=alpha)
    r = simulate(cfg, seed=0)
    assert r.status == "diverged" and r.error == 1.0 and math.isinf(r.comm)


@pytest.mark.parametrize("privacy", [PrivacyConfig(), PrivacyConfig(mechanism="step", sigma=0.01, clip=1.0),
                                     PrivacyConfig(mechanism="update", sigma=0.5, clip=1.0, recall=True, tau=0.5)])
def test_same_numbers_whatever_the_chunk_threads(monkeypatch, privacy):
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=9), rounds=3, epochs=1, batch_size=16,
                    participation=1.0, upload_loss=0.2, chunk_clients=2, alpha=2.0, xi=0.1, privacy=privacy)
    out = []
    for n in ("1", "2", "3"):
        monkeypatch.setenv("FEDEVO_CHUNK_THREADS", n)
        out.append(simulate(cfg, seed=7))
    assert out[0].to_dict() | {"wall_s": 0} == out[1].to_dict() | {"wall_s": 0} == out[2].to_dict() | {"wall_s": 0}


def test_bf16_close_to_fp32():
    base = dict(data=DataConfig(dataset="synthetic", clients=4), rounds=4, epochs=2, batch_size=16,
                participation=1.0, upload_loss=0.0, lr=0.1)
    a = simulate(SimConfig(**base), seed=0)
    b = simulate(SimConfig(**base, precision="bf16"), seed=0)
    assert b.status == "ok" and abs(a.error - b.error) < 0.05
