"""Model geometry from genes, without torch: the models build from it and the search's cost estimate
(`fl/cost.py`, run in the driver, which never imports torch) reads it, so the two cannot drift apart."""

from __future__ import annotations

from typing import NamedTuple

from ..arch import CNNArch, MLPArch


def density(alpha: float, n_in: int, n_out: int) -> float:
    """SET's Erdős–Rényi connection probability α(n_in + n_out)/(n_in·n_out), capped at 1."""
    return min(1.0, alpha * (n_in + n_out) / (n_in * n_out))


def fc_dims(d_in: int, arch: MLPArch | CNNArch, num_classes: int) -> list[int]:
    """Widths of the fully-connected stack: input, `layers` × `units`, classes."""
    return [d_in] + [arch.units] * arch.layers + [num_classes]


class ConvLayer(NamedTuple):
    c_out: int
    c_in: int
    size: int  # input map side (square maps, 'same' padding)
    pool: bool  # 2×2 max-pool after it


def conv_layout(arch: CNNArch, input_shape: tuple) -> tuple[list[ConvLayer], int]:
    """The conv blocks (channels doubling per block, pool while the map is ≥ 4 px) and the flattened size."""
    c_in, size = input_shape[0], input_shape[1]
    layers = []
    for i in range(arch.conv_layers):
        c_out = arch.channels * 2 ** i
        pool = size >= 4
        layers.append(ConvLayer(c_out, c_in, size, pool))
        size = size // 2 if pool else size
        c_in = c_out
    return layers, c_in * size * size
