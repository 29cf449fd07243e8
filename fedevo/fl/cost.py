"""A data-free estimate of one run's compute, for scheduling (longest evaluations first).

Only ratios between configurations of one problem matter, so per-client sample counts (the same for every
individual of a problem) are left out. Constants were measured on the reference round
(benchmarks/round_speed.py, 784-200-200-10, bf16): a bf16 multiply-add costs ~5.5 ps, a per-step Gaussian
draw + add ~2.1 ns, i.e. one noised parameter per step ≈ 380 multiply-adds.
"""

from __future__ import annotations

from ..config import CNNArch, SimConfig
from ..models.layout import conv_layout, density, fc_dims

INPUT_SHAPES = {"digits": (1, 8, 8), "synthetic": (1, 8, 8), "fashion": (1, 28, 28), "mnist": (1, 28, 28),
                "cifar10": (3, 32, 32)}
NUM_CLASSES = 10  # every bundled dataset
NOISE_MACS = 380.0  # one Gaussian drawn and added to one parameter, in multiply-add equivalents


def macs_and_params(config: SimConfig) -> tuple[float, float]:
    """(multiply-adds of one sample's forward pass -- dense matmuls, masks don't save any --, active parameters)."""
    shape = INPUT_SHAPES.get(config.data.dataset, (1, 28, 28))
    macs = params = 0.0
    arch = config.arch
    if isinstance(arch, CNNArch):
        convs, flat = conv_layout(arch, shape)
        k2 = arch.kernel * arch.kernel
        for cv in convs:
            macs += cv.size * cv.size * k2 * cv.c_in * cv.c_out
            params += k2 * cv.c_in * cv.c_out + cv.c_out
    else:
        flat = shape[0] * shape[1] * shape[2]
    dims = fc_dims(flat, arch, NUM_CLASSES)
    for a, b in zip(dims[:-1], dims[1:]):
        macs += a * b
        params += (1.0 if config.alpha is None else density(config.alpha, a, b)) * a * b + b
    return macs, params


def relative_cost(config: SimConfig) -> float:
    """∝ rounds × sampled clients × epochs × (training multiply-adds per sample + per-step noise per sample)."""
    macs, params = macs_and_params(config)
    per_sample = 3.0 * macs  # forward + backward
    if config.privacy.mechanism == "step":
        per_sample += NOISE_MACS * params / config.batch_size
    return float(config.rounds * config.sampled_per_round * config.epochs * per_sample)
