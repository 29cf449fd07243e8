from dataclasses import replace

import pytest

from fedevo.config import CNNArch, DataConfig, MLPArch, PrivacyConfig, SimConfig
from fedevo.fl.cost import macs_and_params, relative_cost


def cfg(**kw) -> SimConfig:
    base = dict(data=DataConfig(dataset="fashion", clients=100), arch=MLPArch(2, 200), rounds=5, epochs=5,
                batch_size=64, participation=0.1)
    base.update(kw)
    return SimConfig(**base)


def test_mlp_macs_and_params_match_the_reference_mlp():
    macs, params = macs_and_params(cfg())
    assert macs == 784 * 200 + 200 * 200 + 200 * 10
    assert params == macs + 200 + 200 + 10


def test_cost_scales_with_rounds_clients_and_epochs():
    c = relative_cost(cfg())
    assert relative_cost(cfg(rounds=10)) == pytest.approx(2 * c)
    assert relative_cost(cfg(participation=0.2)) == pytest.approx(2 * c)
    assert relative_cost(cfg(epochs=1)) == pytest.approx(c / 5)


def test_per_step_noise_costs_more_and_sparsity_only_cuts_the_noise_part():
    plain = relative_cost(cfg())
    step = cfg(privacy=PrivacyConfig(mechanism="step", sigma=0.01, clip=1.0))
    assert relative_cost(step) > 2 * plain  # measured ~3x on the reference round
    sparse_step = replace(step, alpha=60.0)  # 38% active: above the sparse kernel's limit, dense matmuls
    assert plain < relative_cost(sparse_step) < relative_cost(step)
    assert relative_cost(replace(cfg(), alpha=60.0)) == pytest.approx(plain)


def test_sparse_kernel_runs_cost_by_active_weights():
    import torch

    from fedevo.fl import cost, sparse

    assert cost.SPARSE_BELOW == {"bf16": sparse.MAX_DENSITY[torch.bfloat16],
                                 "fp32": sparse.MAX_DENSITY[torch.float32]}
    plain = relative_cost(cfg(precision="bf16"))
    ten = relative_cost(cfg(alpha=16.0, precision="bf16"))  # ~11% active: the sparse kernel
    assert cost.sparse_fc(cfg(alpha=16.0)) is not None and cost.sparse_fc(cfg(alpha=60.0)) is None
    assert 0.3 * plain < ten < 0.6 * plain  # measured 0.30 vs 0.70 s a round at 10% (round_speed --density-sweep)
    assert relative_cost(cfg(alpha=4.0)) < ten < relative_cost(cfg(alpha=40.0, precision="bf16"))
    # ~20% active: the sparse kernel with bf16 compute, dense fp32 matmuls (the fp32 crossover is 13%)
    assert cost.sparse_fc(cfg(alpha=30.0, precision="bf16")) is not None
    assert cost.sparse_fc(cfg(alpha=30.0, precision="fp32")) is None
    assert cost.sparse_fc(cfg(arch=CNNArch(conv_layers=1, channels=8, kernel=3, layers=1, units=64), alpha=2.0)) is None


def test_cnn_cost_counts_convolutions():
    small = cfg(arch=CNNArch(conv_layers=1, channels=8, kernel=3, layers=1, units=64))
    big = cfg(arch=CNNArch(conv_layers=2, channels=32, kernel=5, layers=1, units=64))
    macs_small, _ = macs_and_params(small)
    assert macs_small == 28 * 28 * 9 * 8 + 14 * 14 * 8 * 64 + 64 * 10
    assert relative_cost(big) > 10 * relative_cost(small)
