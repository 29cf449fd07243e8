"""CNN built from genes; a chunk's clients get functional per-client gradients (torch.func.grad).

Measured here (2-core AVX-512 CPU, 5 clients × 64 images, conv 32→64): vmap over the clients (grouped
convolutions) took 0.26 s a step, a loop of per-client grads 0.19 s in fp32 and 0.14 s in bf16 — convolutions
are compute-bound, so batching clients buys nothing and bf16 does. Chunks still train in parallel threads.
The device path (fl/device.py: a GPU, where one kernel for many clients is what pays) takes `grads_vmap`
instead: the same gradients through torch.func.vmap (grouped convolutions).

Layout: `conv_layers` × [conv k×k ('same' padding), ReLU, 2×2 max-pool while the map is ≥ 4 px], with
`channels` in the first conv layer, doubling in each next one (seed 004: 32→64; seed 000's MNIST CNN: 10→20), flatten,
`layers` × [FC `units`, ReLU], FC to the classes. Parameters are a flat list
[conv_w0, conv_b0, ..., W0, b0, ...] with FC W (d_in, d_out) and b (1, d_out) as in StackedMLP. A pooled layer's
ReLU comes after its pool (the same values and gradients, a quarter of the work), both in one native pass on the
CPU in fp32 (models/cnn_ops.py; `fused_pool = False` gives torch's ops, as the vmap path always uses).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.func import grad, vmap

from ..arch import CNNArch
from .cnn_ops import pool_relu
from .layout import conv_layout, fc_dims


class StackedCNN:
    kind = "cnn"
    supports_bf16 = True

    def __init__(self, arch: CNNArch, input_shape: tuple, num_classes: int):
        convs, self.flat = conv_layout(arch, input_shape)
        self.input_shape = tuple(int(d) for d in input_shape)
        self.conv_shapes = [(cv.c_out, cv.c_in, arch.kernel, arch.kernel) for cv in convs]
        self.pool = [cv.pool for cv in convs]
        self.map_sizes = [cv.size for cv in convs]  # each conv's input map side
        self.dims = fc_dims(self.flat, arch, num_classes)
        self.shapes = []
        for s in self.conv_shapes:
            self.shapes += [s, (s[0],)]
        n_conv = len(self.shapes)
        for a, b in zip(self.dims[:-1], self.dims[1:]):
            self.shapes += [(a, b), (1, b)]
        self.n_conv = n_conv
        self.fc_weight_ids = tuple(range(n_conv, len(self.shapes), 2))
        self.padding = arch.kernel // 2
        self._grad = grad(self._loss)
        self._grad_fused = grad(lambda p, x, y, w: self._loss(p, x, y, w, fused=True))
        self._grad_vmap = vmap(self._grad)
        self.compute_dtype = torch.float32
        self.fused_pool = True

    def init(self, gen: torch.Generator) -> list[torch.Tensor]:
        """PyTorch's default Conv2d/Linear init (uniform ±1/√fan_in)."""
        out = []
        for s in self.shapes:
            if len(s) == 4:
                fan_in = s[1] * s[2] * s[3]
            elif len(s) == 1:
                fan_in = out[-1][0].numel()
            elif s[0] == 1:
                fan_in = out[-1].shape[0]
            else:
                fan_in = s[0]
            bound = 1.0 / math.sqrt(fan_in)
            out.append((torch.rand(*s, generator=gen) * 2 - 1) * bound)
        return out

    def _forward(self, params, x, fused: bool = False):
        h = x
        for i, pool in enumerate(self.pool):
            h = F.conv2d(h, params[2 * i], params[2 * i + 1], padding=self.padding)
            h = pool_relu(h, fused) if pool else F.relu(h)
        h = h.flatten(1)
        fc = params[self.n_conv:]
        n = len(fc) // 2
        for i in range(n):
            h = torch.addmm(fc[2 * i + 1], h, fc[2 * i])
            if i < n - 1:
                h = F.relu(h)
        return h

    def _loss(self, params, x, y, w, fused: bool = False):
        return (F.cross_entropy(self._forward(params, x, fused), y, reduction="none") * w).sum()

    def logits(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return self._forward(params, x, self.fused_pool)

    def grads(self, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
        """Per-client gradients of Σ_b w_b·CE; x (c,B,C,H,W). In bf16 mode the forward/backward runs on bf16
        copies of the fp32 master weights and the gradients come back in bf16."""
        dt = self.compute_dtype
        ps = [p.to(dt) for p in params] if dt != params[0].dtype else params
        x, w = x.to(dt), w.to(dt)
        g = self._grad_fused if self.fused_pool else self._grad
        per = [g([p[k] for p in ps], x[k], y[k], w[k]) for k in range(y.shape[0])]
        return [torch.stack(gs) for gs in zip(*per)]

    def grads_vmap(self, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                   w: torch.Tensor) -> list[torch.Tensor]:
        """`grads` with the clients batched by torch.func.vmap instead of a loop: one (grouped) convolution for all
        of them. The same gradients up to rounding."""
        dt = self.compute_dtype
        ps = [p.to(dt) for p in params] if dt != params[0].dtype else params
        return list(self._grad_vmap(ps, x.to(dt), y, w.to(dt)))
