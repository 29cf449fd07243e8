"""A data-free estimate of one run's compute, for scheduling (longest evaluations first).

Only ratios between configurations of one problem matter, so per-client sample counts (the same for every
individual of a problem) are left out. Constants were measured on the reference round
(benchmarks/round_speed.py, 784-200-200-10, bf16): a bf16 multiply-add costs ~5.5 ps, a per-step Gaussian
draw + add ~2.1 ns, i.e. one noised parameter per step ≈ 380 multiply-adds.
"""

from __future__ import annotations

from ..config import CNNArch, SimConfig

INPUT_SHAPES = {"digits": (1, 8, 8), "synthetic": (1, 8, 8), "fashion": (1, 28, 28), "mnist": (1, 28, 28),
                "cifar10": (3, 32, 32)}
NOISE_MACS = 380.0  # one Gaussian drawn and added to one parameter, in multiply-add equivalents


def _fc_dims(d_in: int, layers: int, units: int, classes: int = 10) -> list[int]:
    return [d_in] + [units] * layers + [classes]


def macs_and_params(config: SimConfig) -> tuple[float, float]:
    """(multiply-adds of one sample's forward pass -- dense matmuls, masks don't save any --, active parameters)."""
    ch, h, w = INPUT_SHAPES.get(config.data.dataset, (1, 28, 28))
    macs = params = 0.0
    arch = config.arch
    if isinstance(arch, CNNArch):
        c_in, size = ch, h
        for i in range(arch.conv_layers):
            c_out = arch.channels * 2 ** i
            k2 = arch.kernel * arch.kernel
            macs += size * size * k2 * c_in * c_out
            params += k2 * c_in * c_out + c_out
            size = size // 2 if size >= 4 else size
            c_in = c_out
        dims = _fc_dims(c_in * size * size, arch.layers, arch.units)
    else:
        dims = _fc_dims(ch * h * w, arch.layers, arch.units)
    for a, b in zip(dims[:-1], dims[1:]):
        macs += a * b
        dens = 1.0 if config.alpha is None else min(1.0, config.alpha * (a + b) / (a * b))  # SET, models/sparse.py
        params += dens * a * b + b
    return macs, params


def relative_cost(config: SimConfig) -> float:
    """∝ rounds × sampled clients × epochs × (training multiply-adds per sample + per-step noise per sample)."""
    macs, params = macs_and_params(config)
    per_sample = 3.0 * macs  # forward + backward
    if config.privacy.mechanism == "step":
        per_sample += NOISE_MACS * params / config.batch_size
    return float(config.rounds * config.sampled_per_round * config.epochs * per_sample)
