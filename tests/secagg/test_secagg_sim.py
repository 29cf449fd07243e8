"""Secure aggregation inside the simulator: same model as plain FedAvg (to the quantisation step), composed
with LDP noise, with the protocol's communication counted."""

import math

import numpy as np
import pytest
import torch

from fedevo.config import DataConfig, PrivacyConfig, SimConfig
from fedevo.data.datasets import load_dataset
from fedevo.data.partition import partition
from fedevo.errors import FedevoError
from fedevo.fl.rounds import run_rounds
from fedevo.fl.simulate import simulate
from fedevo.privacy.mechanism import build_mechanism
from fedevo.models import build_model
from fedevo.privacy.noise import NoiseSource
from fedevo.secagg.protocol import client_words


def cfg(rounds=3, loss=0.3, clients=8, **priv):
    p = dict(mechanism="none", clip=1.0, delta=1e-4)
    p.update(priv)
    return SimConfig(data=DataConfig(dataset="synthetic", clients=clients), rounds=rounds, epochs=1,
                     batch_size=32, participation=1.0, upload_loss=loss, lr=0.2, alpha=4, xi=0.2,
                     privacy=PrivacyConfig(**p))


def final_params(c: SimConfig, seed=0):
    data = load_dataset("synthetic")
    part = partition(data.y_train.numpy(), data.y_test.numpy(), scheme="iid", clients=c.data.clients,
                     num_classes=data.num_classes, seed=seed)
    model = build_model(c.arch, data.input_shape, data.num_classes)
    noise = NoiseSource(seed + 1)
    pv = build_mechanism(c).privatizer(data, part, noise, seed)
    out = run_rounds(c, model, data, part, gen=torch.Generator().manual_seed(seed), privatizer=pv)
    noise.close()
    out.secagg = pv.secagg  # the mechanism's aggregator, for the assertions below
    return out


@pytest.mark.parametrize("priv", [{"mechanism": "none"}, {"mechanism": "update", "sigma": 0.5}])
def test_secagg_gives_the_plain_model(priv):
    plain = final_params(cfg(**priv))
    sec = final_params(cfg(aggregation="secagg", **priv))
    assert sec.secagg.stats["rounds"] == 3 and sec.secagg.stats["aborted"] == 0
    assert sec.secagg.stats["dropped_recovered"] > 0  # uploads were lost and their masks reconstructed
    # 3 rounds, each within a quantisation step of the exact mean; the plain path's own float32 sums differ from
    # the exact mean by ~1e-7 relative per round, and local training of the next rounds amplifies that ~10x
    tol = 3 * (max(sec.secagg.steps) + 2e-6)
    for a, b in zip(plain.params, sec.params):
        assert torch.allclose(a, b, atol=tol, rtol=1e-5)
    assert np.array_equal(plain.arrivals, sec.arrivals)


@pytest.mark.parametrize("lost_fraction", [0.0, 0.3, 0.5])
def test_aggregator_equals_weighted_mean_within_a_step(lost_fraction):
    from fedevo.secagg.aggregator import SecureAggregator

    n, P = 20, 3000
    rng = np.random.default_rng(5)
    sizes = rng.integers(20, 60, size=n)
    sampled = np.arange(n)
    arrived = np.sort(rng.choice(n, size=n - int(lost_fraction * n), replace=False))
    active = torch.as_tensor(rng.random(P) < 0.7, dtype=torch.float32)
    flat = torch.randn(len(arrived), P) * active
    agg = SecureAggregator(sizes=sizes, bits=32, value_range=8.0, threshold=0.5, seed=1)
    agg.begin_round(1, sampled, arrived, active)
    for s in range(0, len(arrived), 7):
        agg.add(flat[s:s + 7], arrived[s:s + 7])
    out = agg.finish()
    w = sizes[arrived].astype(np.float64)
    exact = (w @ flat.double().numpy()) / w.sum()
    err = np.abs(out.double().numpy() - exact).max()
    assert err <= agg.fp.step + 1e-7 * np.abs(exact).max()  # quantisation step (+ the final float32 cast)
    assert agg.stats["dropped_recovered"] == n - len(arrived)


def test_secagg_comm_is_the_protocol_cost():
    c = cfg(rounds=2, loss=0.0, clients=5, aggregation="secagg")
    out = final_params(c)
    n, L = 5, out.omega + 1
    assert out.comm == pytest.approx(client_words(n=n, length=L, bits=32, responded=True))
    plain = final_params(cfg(rounds=2, loss=0.0, clients=5))
    assert plain.comm == out.omega and out.comm > plain.comm


def test_secagg_reported_in_privacy_dict():
    r = simulate(cfg(aggregation="secagg", mechanism="update", sigma=1.0), seed=0)
    s = r.privacy["secagg"]
    assert r.status == "ok" and r.privacy["aggregation"] == "secagg"
    assert s["rounds"] == 3 and s["comm_words"] > 0 and s["overhead_s"] >= 0 and s["clamped_fraction"] == 0
    assert math.isfinite(r.eps)  # LDP ε unchanged by secure aggregation
    assert r.eps == simulate(cfg(mechanism="update", sigma=1.0), seed=0).eps


def test_abort_when_too_many_lost_keeps_the_model():
    out = final_params(cfg(rounds=2, loss=0.9, clients=4, aggregation="secagg", secagg_threshold=1.0))
    assert out.secagg.stats["aborted"] >= 1


def test_auto_range():
    def secagg_range(c):
        return build_mechanism(c).secagg_range()
    assert secagg_range(cfg(mechanism="update", sigma=0.5, clip=2.0)) == pytest.approx(2.0 * 5.0)
    assert secagg_range(cfg(mechanism="signds", signds_lr=0.05)) == 0.05
    assert secagg_range(cfg(secagg_range=3.0)) == 3.0


@pytest.mark.parametrize("priv, msg", [
    ({"aggregation": "mpc"}, "unknown aggregation"),
    ({"aggregation": "secagg", "secagg_bits": 16}, "secagg_bits must be 32 or 64"),
    ({"aggregation": "secagg", "secagg_threshold": 0.0}, "secagg_threshold"),
    ({"aggregation": "secagg", "secagg_range": -1.0}, "secagg_range"),
    ({"aggregation": "secagg", "mechanism": "update", "sigma": 1.0, "recall": True}, "recall"),
])
def test_bad_secagg_input(priv, msg):
    with pytest.raises(FedevoError, match=msg):
        cfg(**priv)
