"""A data-free estimate of one run's compute, for scheduling (longest evaluations first).

Only ratios between configurations of one problem matter, so per-client sample counts (the same for every
individual of a problem) are left out. Constants were measured on the reference round
(benchmarks/round_speed.py, 784-200-200-10, bf16): a bf16 multiply-add costs ~5.5 ps, a per-step Gaussian
draw + add ~2.1 ns, i.e. one noised parameter per step ≈ 380 multiply-adds. A SET-sparse MLP below the sparse
kernel's density limit (fl/sparse.py) costs per sample ~42 ps per active weight (forward + backward + update,
≈ 7.7 multiply-adds) plus ~0.37 µs of batch gathering per 784 input features (≈ 87 per input feature).
"""

from __future__ import annotations

import math

from .. import hardware
from ..config import CNNArch, SimConfig, UserArch
from ..models.layout import conv_layout, density, fc_dims

INPUT_SHAPES = {"digits": (1, 8, 8), "synthetic": (1, 8, 8), "fashion": (1, 28, 28), "mnist": (1, 28, 28),
                "cifar10": (3, 32, 32)}
NUM_CLASSES = 10  # every bundled dataset
NOISE_MACS = 380.0  # one Gaussian drawn and added to one parameter, in multiply-add equivalents
# fl/sparse.MAX_DENSITY by compute precision (torch-free here; a test keeps them equal). The precision is the one
# `precision = "auto"` picks on the machine estimating (the search's driver; a cluster's workers may differ).
SPARSE_BELOW = {"bf16": 0.3, "fp32": 0.13}
SPARSE_WEIGHT_MACS = 7.7  # one active weight, one sample, through the sparse kernel
SPARSE_INPUT_MACS = 87.0  # one input feature, one sample: the sparse kernel's transposed gather


def macs_and_params(config: SimConfig) -> tuple[float, float]:
    """(multiply-adds of one sample's dense forward pass (masks save none there), active parameters)."""
    macs, _, params = _counts(config)
    return macs, params


def active_forward_macs(config: SimConfig) -> float:
    """Multiply-adds of one example's forward pass over the active weights: conv layers dense, each
    fully-connected layer's SET-active weights (its Erdős–Rényi density × size; all of them without α); a user
    model's Linear layers (and Conv2d layers with `sparse_conv`) the same way."""
    return _counts(config)[1]


def train_macs(config: SimConfig, mean_examples: float) -> float:
    """Multiply-adds a participating client spends on local training in one round (the objective train_macs):
    3 × `active_forward_macs` (forward, and backward for the inputs' and the weights' gradients) × its training
    examples (`mean_examples`: the clients' mean) × local epochs. Privacy noise, clipping and SET's prune/regrow
    are not counted."""
    return 3.0 * active_forward_macs(config) * float(mean_examples) * config.epochs


def _counts(config: SimConfig) -> tuple[float, float, float]:
    """(dense forward multiply-adds, active forward multiply-adds, active parameters) of one example."""
    shape = _input_shape(config)
    macs = active = params = 0.0
    arch = config.arch
    if isinstance(arch, UserArch):  # builds the module (torch): user models only
        from ..models.user import macs_and_params as user_macs

        return user_macs(arch, tuple(shape), _num_classes(config), config.alpha)
    if isinstance(arch, CNNArch):
        convs, flat = conv_layout(arch, shape)
        k2 = arch.kernel * arch.kernel
        for cv in convs:
            macs += cv.size * cv.size * k2 * cv.c_in * cv.c_out
            params += k2 * cv.c_in * cv.c_out + cv.c_out
        active = macs
    else:
        flat = math.prod(shape)
    dims = fc_dims(flat, arch, _num_classes(config))
    for a, b in zip(dims[:-1], dims[1:]):
        d = 1.0 if config.alpha is None else density(config.alpha, a, b)
        macs += a * b
        active += d * a * b
        params += d * a * b + b
    return macs, active, params


def data_shape(config: SimConfig) -> tuple[tuple, int]:
    """(input shape, classes) of a configuration's data, without reading it (a user model's load-time probe)."""
    return _input_shape(config), _num_classes(config)


def _input_shape(config: SimConfig) -> tuple[int, ...]:
    """(C, H, W) or (D,): the user's data's own (known from reading it at problem load), else by dataset name."""
    src = config.data.source
    return src.input_shape if src is not None else INPUT_SHAPES.get(config.data.dataset, (1, 28, 28))


def _num_classes(config: SimConfig) -> int:
    src = config.data.source
    return src.num_classes if src is not None else NUM_CLASSES


def sparse_fc(config: SimConfig) -> tuple[float, int] | None:
    """(active FC weights, input features) when the run takes the SET-sparse kernel (an MLP), else None."""
    if isinstance(config.arch, (CNNArch, UserArch)) or config.alpha is None:  # a user MLP: estimated dense
        return None
    shape = _input_shape(config)
    d_in = math.prod(shape)
    dims = fc_dims(d_in, config.arch, _num_classes(config))
    pairs = list(zip(dims[:-1], dims[1:]))
    active = sum(density(config.alpha, a, b) * a * b for a, b in pairs)
    below = SPARSE_BELOW[hardware.precision(config.precision).name]
    return (active, d_in) if active < below * sum(a * b for a, b in pairs) else None


def relative_cost(config: SimConfig) -> float:
    """∝ rounds × sampled clients × epochs × (training multiply-adds per sample + per-step noise per sample, as the
    mechanism declares it: `fedevo.privacy.registry.Spec.step_noise`)."""
    macs, params = macs_and_params(config)
    sp = sparse_fc(config)
    if sp is None:
        per_sample = 3.0 * macs  # forward + backward
    else:
        active, d_in = sp
        per_sample = SPARSE_WEIGHT_MACS * active + SPARSE_INPUT_MACS * d_in  # an MLP: no other multiply-adds
    draws = config.privacy.spec.step_noise(config, params)  # the mechanism's per-step noise (registry.Spec)
    if draws:
        per_sample += NOISE_MACS * draws / config.batch_size
    return float(config.rounds * config.sampled_per_round * config.epochs * per_sample)
