"""MLP as stacked weights with a hand-written backward pass.

Many clients train at once: every tensor carries a leading client dimension c, forward and backward are
batched matmuls into preallocated buffers. Autograd is skipped because for these small matrices its bookkeeping
and fresh allocations cost more than the arithmetic.
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Optional

import torch

from ..arch import MLPArch
from .layout import fc_dims


class StackedMLP:
    """Parameters are [W0, b0, W1, b1, ...] with W (d_in, d_out), b (1, d_out); stacked copies add a dim c."""

    kind = "mlp"
    supports_bf16 = True

    def __init__(self, arch: MLPArch, input_shape: tuple, num_classes: int):
        d_in = math.prod(input_shape)
        self.dims = fc_dims(d_in, arch, num_classes)
        self.shapes = []
        for a, b in zip(self.dims[:-1], self.dims[1:]):
            self.shapes += [(a, b), (1, b)]
        self.fc_weight_ids = tuple(range(0, len(self.shapes), 2))  # SET masks these
        self._local = threading.local()
        self.compute_dtype = torch.float32

    def init(self, gen: torch.Generator) -> list[torch.Tensor]:
        """PyTorch nn.Linear's default init (Kaiming-uniform weights, uniform biases)."""
        out = []
        for a, b in zip(self.dims[:-1], self.dims[1:]):
            bound = 1.0 / math.sqrt(a)
            out.append((torch.rand(a, b, generator=gen) * 2 - 1) * bound)
            out.append((torch.rand(1, b, generator=gen) * 2 - 1) * bound)
        return out

    def logits(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """Global (unstacked) model on x (N, ...)."""
        h = x.reshape(x.shape[0], -1)
        n = len(params) // 2
        for i in range(n):
            h = torch.addmm(params[2 * i + 1], h, params[2 * i])
            if i < n - 1:
                h.relu_()
        return h

    def _buffer(self, key, shape, dtype=torch.float32, device=None) -> torch.Tensor:
        """Per-thread scratch buffers (chunks of clients train in parallel threads), one per shape: a chunk's
        steps alternate between the full and the shorter last batch of an epoch. On another device than the CPU
        (the device path, fl/device.py) a fresh tensor each time: the group's client count changes from round to
        round, and torch's caching allocator already reuses the memory."""
        if device is not None and torch.device(device).type != "cpu":
            return torch.empty(shape, dtype=dtype, device=device)
        bufs = self._local.__dict__.setdefault("bufs", {})
        key = (key, tuple(shape), dtype)
        t = bufs.get(key)
        if t is None:
            t = bufs[key] = torch.empty(shape, dtype=dtype)
        return t

    accepts_low = True  # grads() takes current bf16 copies of the weights (fl/fused.py keeps them)
    # with the native kernels: hidden layers' forward through `linear_fwd_bf16` (bias and ReLU in its epilogue) and
    # the output layer in fp32 through `head_bf16` (tests switch both off to compare the step with the eager one)
    native_layers = True

    native_f32 = True  # fp32 compute with the native kernels: `step_f32` (tests switch it off to compare)

    def step_f32_applies(self, kernels) -> bool:
        """Whether `step_f32` takes this model: native kernels, fp32 compute, at most 1024 classes."""
        return (kernels is not None and self.native_f32 and self.compute_dtype == torch.float32
                and self.dims[-1] <= 1024)

    def step_f32(self, params: list[torch.Tensor], x: torch.Tensor, rows: torch.Tensor, y: torch.Tensor,
                 w: torch.Tensor, kernels) -> list[torch.Tensor]:
        """One local step's gradients in fp32 through the native kernels (native/dense32.c), for CPUs without
        native bf16, where a privacy hook transforms them before the update (plain SGD: `train_f32`).

        x (n, d) fp32: the chunk's samples; rows (c, b) int64: each client's batch, rows of x (read in place by
        the first layer's GEMMs, never gathered); y (c, b) int64; w (c, b) fp32. Forward: per layer a GEMM with
        bias (and ReLU) in its epilogue, then the softmax-CE gradient and the last bias's gradient; backward per
        layer: the input gradient's GEMM with ReLU' and the bias gradient in its epilogue, the weight gradient's.
        Returns the gradients like `grads` (reused buffers).
        """
        c, b = rows.shape
        n = len(params) // 2
        dims = self.dims
        hs = []  # hidden activations (c, b, d)
        for i in range(n):
            last = i == n - 1
            z = self._buffer(("z" if last else "h", i), (c, b, dims[i + 1]))
            src, idx = (x, rows.data_ptr()) if i == 0 else (hs[-1], 0)
            self._check(kernels.fwd_f32(src.data_ptr(), idx, params[2 * i].data_ptr(), params[2 * i + 1].data_ptr(),
                                        z.data_ptr(), c, b, dims[i], dims[i + 1], int(not last)), "fwd_f32")
            hs.append(z)
        out: list = [None] * len(params)
        gb = out[-1] = self._buffer(("gb", n - 1), (c, 1, dims[-1]))
        kernels.softmax_ce_f32(z.data_ptr(), y.data_ptr(), w.data_ptr(), c, b, dims[-1], z.data_ptr(), gb.data_ptr())
        delta = z  # now dL/dlogits
        for i in range(n - 1, -1, -1):  # delta: dL/d(layer i's output), (c, b, dims[i + 1])
            nd = None
            if i > 0:  # the input gradient, with ReLU' and the previous layer's bias gradient
                nd = self._buffer(("d", i), (c, b, dims[i]))
                gbp = out[2 * i - 1] = self._buffer(("gb", i - 1), (c, 1, dims[i]))
                self._check(kernels.dgrad_f32(delta.data_ptr(), params[2 * i].data_ptr(), hs[i - 1].data_ptr(),
                                              nd.data_ptr(), gbp.data_ptr(), c, b, dims[i], dims[i + 1]), "dgrad_f32")
            src, idx = (x, rows.data_ptr()) if i == 0 else (hs[i - 1], 0)
            gw = out[2 * i] = self._buffer(("gw", i), params[2 * i].shape)
            self._check(kernels.wgrad_f32(src.data_ptr(), idx, delta.data_ptr(), gw.data_ptr(), 0, 0, c, b, dims[i],
                                          dims[i + 1]), "wgrad_f32")
            delta = nd
        return out

    def train_f32(self, params: list[torch.Tensor], x: torch.Tensor, step_rows: list[torch.Tensor],
                  step_y: list[torch.Tensor], step_w: list[torch.Tensor], kernels, *, lr: float,
                  masks: list[Optional[torch.Tensor]], group: int = 1) -> None:
        """A chunk's whole plain-SGD local training in fp32, in one native call (dense32.c `fedevo_train_f32`).

        params: stacked (c, ...), updated in place; x, and per step s step_rows[s], step_y[s], step_w[s], as
        `step_f32`'s x, rows, y, w; masks: a 0/1 mask or None per parameter (weights only). Each step: the
        forward and backward of `step_f32`, each weight updated right after its last use inside the
        weight-gradient GEMM's epilogue (p −= lr·mask⊙grad, the gradient never written), the bias after it.
        `group` clients at a time, a group's whole schedule before the next group's: bit for bit the result of
        all c in lockstep (the clients are independent), with a group's weights kept in cache across its steps
        and no Python between steps."""
        c = len(params[0])
        keep = [None if m is None else m.to(torch.uint8).contiguous() for m in masks[0::2]]  # alive for the call
        ptrs = (lambda ts: (ctypes.c_void_p * len(ts))(*[0 if t is None else t.data_ptr() for t in ts]))
        used = torch.tensor([r.shape[1] for r in step_rows], dtype=torch.int64)
        dims = torch.tensor(self.dims, dtype=torch.int64)
        scale = torch.full((c,), -lr)
        self._check(kernels.train_f32(len(params) // 2, dims.data_ptr(), ptrs(params[0::2]), ptrs(params[1::2]),
                                      ptrs(keep), x.data_ptr(), len(step_rows), ptrs(step_rows), ptrs(step_y),
                                      ptrs(step_w), used.data_ptr(), scale.data_ptr(), c, group), "train_f32")

    @staticmethod
    def _check(rc: int, name: str) -> None:
        if rc != 0:
            raise MemoryError(f"fedevo_{name}: out of memory")

    def grads(self, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
              low: Optional[dict] = None, kernels=None) -> list[torch.Tensor]:
        """Gradients of Σ_b w_b·CE(f(x_b), y_b) for every client; x (c,B,d), y (c,B) int64, w (c,B).

        With `compute_dtype` bfloat16 the matmuls run in bf16 (about 4× the fp32 throughput on AVX-512 BF16
        CPUs) on bf16 copies of the fp32 master weights; softmax and the returned gradients' use stay fp32-safe.
        The returned tensors are reused buffers: consume them before the next call. `low` {param index: tensor}:
        compute-dtype copies of params that are already current (the cast is skipped for them). `kernels`
        (bf16 only): the native kernels replace torch ops: the hidden layers' forward GEMM with bias and ReLU
        (`linear_fwd_bf16`, ~15% faster than torch's batched matmul alone here), ReLU backward, and the whole
        output layer (`head_bf16`: logits, softmax-CE and both of its gradients in fp32, one pass; a
        10-class head is three batched matmuls that run at ~30 GMAC/s in torch).
        """
        dt = self.compute_dtype
        c, bsz = y.shape
        n = len(params) // 2
        dev = params[0].device
        buffer = lambda key, shape, dtype=torch.float32: self._buffer(key, shape, dtype, dev)  # noqa: E731
        if dt != params[0].dtype:
            ws = []
            for j, p in enumerate(params):
                wb = (low or {}).get(j)
                if wb is None:
                    wb = buffer(("wc", j), p.shape, dt)
                    wb.copy_(p)
                ws.append(wb)
        else:
            ws = params
        kernels = kernels if dt == torch.bfloat16 else None
        hs = [x.reshape(c, bsz, -1).to(dt)]
        # the output layer through the native head kernel (fp32, one pass) when it takes this shape
        native_layers = kernels is not None and self.native_layers
        head = native_layers and self.dims[-1] <= 16 and self.dims[-2] <= 4096
        for i in range(n - 1 if head else n):
            z = buffer(("h", i), (c, bsz, self.dims[i + 1]), dt)
            if i < n - 1 and native_layers and kernels.linear_fwd_bf16(
                    hs[-1].data_ptr(), ws[2 * i].data_ptr(), params[2 * i + 1].data_ptr(), z.data_ptr(), c, bsz,
                    self.dims[i], self.dims[i + 1], 1) == 0:  # fp32 bias, ReLU in the epilogue
                hs.append(z)
                continue
            torch.baddbmm(ws[2 * i + 1], hs[-1], ws[2 * i], out=z)
            if i < n - 1:
                if kernels is not None:
                    kernels.relu_bf16(z.data_ptr(), z.numel())
                else:
                    z.relu_()
            hs.append(z)
        out: list = [None] * len(params)
        if head:
            H, C = self.dims[-2], self.dims[-1]
            gw = out[-2] = buffer(("gw", n - 1), params[-2].shape)
            gb = out[-1] = buffer(("gb", n - 1), (c, 1, C))
            d = buffer(("d", n - 1), (c, bsz, H), dt) if n > 1 else None
            kernels.head_bf16(hs[-1].data_ptr(), params[-2].data_ptr(), params[-1].data_ptr(), y.data_ptr(),
                              w.data_ptr(), c, bsz, H, C, gw.data_ptr(), gb.data_ptr(),
                              0 if d is None else d.data_ptr())
            if n > 1:
                gb = out[-3] = buffer(("gb", n - 2), (c, 1, H))
                kernels.relu_bwd_bf16(d.data_ptr(), hs[-1].data_ptr(), c, bsz, H, gb.data_ptr())
            delta_c = d
        elif kernels is not None:
            delta_c = buffer("dlogits", hs[-1].shape, dt)
            gb = out[-1] = buffer(("gb", n - 1), (c, 1, self.dims[-1]))
            kernels.softmax_ce_bf16(hs[-1].data_ptr(), y.data_ptr(), w.data_ptr(), c, bsz, self.dims[-1],
                                    delta_c.data_ptr(), gb.data_ptr())
        else:
            delta = torch.softmax(hs[-1], dim=-1, dtype=torch.float32)  # dL/dlogits, in fp32
            delta.scatter_add_(2, y.unsqueeze(-1), torch.full((c, bsz, 1), -1.0, device=dev))
            delta.mul_(w.unsqueeze(-1))
            out[-1] = delta.sum(1, keepdim=True)
            delta_c = delta.to(dt)
        for i in range(n - 2 if head else n - 1, -1, -1):
            gw = buffer(("gw", i), params[2 * i].shape, dt)
            torch.bmm(hs[i].transpose(1, 2), delta_c, out=gw)
            out[2 * i] = gw
            if i > 0:
                nd = buffer(("d", i), hs[i].shape, dt)
                torch.bmm(delta_c, ws[2 * i].transpose(1, 2), out=nd)
                if kernels is not None:  # ReLU' and the bias gradient in one pass
                    gb = out[2 * i - 1] = buffer(("gb", i - 1), (c, 1, self.dims[i]))
                    kernels.relu_bwd_bf16(nd.data_ptr(), hs[i].data_ptr(), c, bsz, self.dims[i], gb.data_ptr())
                    delta_c = nd
                    continue
                delta_c = torch.ops.aten.threshold_backward(nd, hs[i], 0)  # ReLU': one fused kernel
                delta = delta_c if dt == torch.float32 else delta_c.float()
                out[2 * i - 1] = delta.sum(1, keepdim=True)
        return out
