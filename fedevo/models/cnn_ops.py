"""The CNN's 2×2 max-pool and ReLU as one op, with a native forward on the CPU in fp32 (torch's is slow there).

`pool_relu(h)` is relu(max_pool2d(h, 2)), which equals F.max_pool2d(F.relu(h), 2) in values and gradients (max
commutes with the monotone ReLU; where a window's max is ≤ 0 both give 0 and pass no gradient; ties go to the
window's first value, as torch's kernel). On the CPU in fp32 with the native kernels the forward is one pass
(fedevo/native/pool.c) writing torch-style indices, and the backward is torch's max_pool2d_with_indices_backward
of the gradient masked where the output is 0; otherwise, and under vmap (the device path), torch's ops.
torch.func.grad differentiates through it (an autograd.Function with setup_context).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .. import native


class _PoolReLU(torch.autograd.Function):
    @staticmethod
    def forward(h: torch.Tensor, k) -> tuple[torch.Tensor, torch.Tensor]:
        h = h.contiguous()
        *lead, H, W = h.shape
        out = h.new_empty(*lead, H // 2, W // 2)
        idx = torch.empty(out.shape, dtype=torch.int64)
        k.pool_relu_f32(h.data_ptr(), h.numel() // (H * W), H, W, out.data_ptr(), idx.data_ptr())
        return out, idx

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0], *output)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, g: torch.Tensor, _g_idx):
        h, out, idx = ctx.saved_tensors
        gx = torch.ops.aten.max_pool2d_with_indices_backward(g * (out > 0), h, [2, 2], [2, 2], [0, 0], [1, 1],
                                                             False, idx)
        return gx, None


def pool_relu(h: torch.Tensor, fused: bool = True) -> torch.Tensor:
    """relu(max_pool2d(h, 2)) of h (N, C, H, W); `fused`: the native forward where it applies (CPU, fp32, the
    native kernels loaded, maps of at least 2×2)."""
    k = native.load() if fused and h.device.type == "cpu" and h.dtype == torch.float32 else None
    if k is None or h.dim() != 4 or min(h.shape[-2:]) < 2:
        return F.relu(F.max_pool2d(h, 2))
    return _PoolReLU.apply(h, k)[0]
