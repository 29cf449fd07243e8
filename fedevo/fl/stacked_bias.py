"""The stacked trainer's biases inside its weights (opt-in: `FEDEVO_BIAS_IN_WEIGHTS=1`, off by default; fl/stacked.py's
`_Bucket.loop`, docs/engine.md).

The plain step loop spends about a third of its ~27 kernels a step on the biases (for each layer a broadcast copy of
the bias before the forward GEMM, and a sum over the batch and an add for its gradient), each a small kernel
whose launch and tail cost more than its arithmetic: on a GPU with TF32 the reference round's loop is bound by such
kernels and by memory traffic, not by its GEMMs. Here a layer l ≥ 1 keeps its weights and bias in one matrix
A_l of (d_in + PAD) × (d_out + PAD) per client: rows [0, d_in) the weights, row d_in the bias; the layer before it
(hidden) has a *ones unit*, an output column of weight 0 and bias 1 whose ReLU is 1 in every sample, so each
hidden activation comes out of its GEMM with a constant column of ones, and

- the forward of layer l ≥ 1 is one plain GEMM (the ones column meets the bias row);
- its weight-gradient GEMM `A_l[:, :, :d_out] += hᵀ·δ` updates the bias too (the ones column's product is Σδ).

PAD = 4 keeps the leading dimensions multiples of 4 floats (the ones unit and 3 zero units; a zero unit's weights
and bias are 0, its ReLU 0, its gradient 0). The first layer's input is the data (no ones column), so its bias is
still added and summed apart; the last layer has no ones unit (its outputs are the logits). The numbers are the
plain loop's up to rounding (the bias summed inside the GEMMs: a reassociation; equal in float64,
tests/fl/test_stacked_bias.py). With the bucket's TF32 opt-in the bias and its gradient's sum go through TF32 with
the rest of the GEMM (in the plain loop the bias is added, and its gradient summed, in fp32): within TF32's own
accuracy, untested against the plain loop on a GPU yet. Only for a bucket without per-step hooks (their
gradients are explicit) and without `torch_compile` (its fused functions add the bias apart): `applies`.

Not yet timed on a GPU (built in a session whose GPU time was spent): `benchmarks/cuda_step_fusion.py`'s
'augmented' line times a like step outside fedevo (its first layer's bias inside too), and
`benchmarks/cuda_population.py --bias-in-weights` the reference round with it.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ..envvars import env_flag

VARIABLE = "FEDEVO_BIAS_IN_WEIGHTS"
PAD = 4  # a hidden layer's extra output units (the ones unit, then zeros), hence the next layer's extra input rows


def enabled() -> bool:
    """FEDEVO_BIAS_IN_WEIGHTS (default off)."""
    return bool(env_flag(VARIABLE, False))


def applies(hooked: bool, compiled: bool) -> bool:
    """Whether a bucket may keep its biases inside its weights: no per-step hook, not torch.compile'd."""
    return not hooked and not compiled


def out_width(dims: Sequence[int], l: int) -> int:
    """Layer l's columns in the layout: its outputs, and for a hidden layer the ones unit and the zero units."""
    return dims[l + 1] + (PAD if l < len(dims) - 2 else 0)


def allocate(C: int, dims: Sequence[int], device) -> dict:
    """The state's tensors of the layout for C clients of (padded) widths `dims`: per layer l the whole matrix
    `A{l}` (layer 0: (C, d_in, out_width), its bias apart in `B0` (C, 1, out_width); l ≥ 1: (C, dims[l] + PAD,
    out_width) with the bias as row dims[l]), the ones units' bias set to 1; and `views`."""
    L = len(dims) - 1
    state = {"B0": torch.zeros(C, 1, out_width(dims, 0), device=device)}
    for l in range(L):
        state[f"A{l}"] = torch.zeros(C, dims[l] + (PAD if l > 0 else 0), out_width(dims, l), device=device)
        if l < L - 1:
            _bias_row(state, dims, l)[:, 0, dims[l + 1]] = 1.0  # the ones unit: weight 0, bias 1
    return {**state, **views(state, dims)}


def _bias_row(state: dict, dims: Sequence[int], l: int) -> torch.Tensor:
    """Layer l's whole bias row (C, 1, out_width): layer 0's apart, a later layer's inside its matrix."""
    return state["B0"] if l == 0 else state[f"A{l}"][:, dims[l]:dims[l] + 1]


def views(state: dict, dims: Sequence[int]) -> dict:
    """The views of the layout the rest of the trainer reads and writes as before: `W{l}` (C, d_in, d_out) and
    `b{l}` (C, 1, d_out) of each layer."""
    out = {}
    for l in range(len(dims) - 1):
        K, N = dims[l], dims[l + 1]
        out[f"W{l}"], out[f"b{l}"] = state[f"A{l}"][:, :K, :N], _bias_row(state, dims, l)[:, :, :N]
    return out


def mask_shape(C: int, dims: Sequence[int], l: int) -> tuple:
    """Layer l's SET mask in the layout: l ≥ 1 covers the bias row (1) and the zero rows, as its update does."""
    return (C, dims[l] + (PAD if l > 0 else 0), dims[l + 1])


def update_view(state: dict, dims: Sequence[int], l: int) -> torch.Tensor:
    """What layer l's weight-gradient GEMM updates: layer 0 its weights (`W0`), a later layer its weights and bias
    row together (its real columns: the ones unit and the zero units never change)."""
    return state["W0"] if l == 0 else state[f"A{l}"][:, :, :dims[l + 1]]


__all__ = ["PAD", "VARIABLE", "allocate", "applies", "enabled", "mask_shape", "out_width", "update_view", "views"]
