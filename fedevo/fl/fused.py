"""The bf16 engine's local step through the native kernels (`fedevo.native`): one pass per weight tensor.

Eager torch spends 3-4 passes over every weight per step on the elementwise work around the bf16 matmuls
(cast the bf16 gradient to fp32, masked or clipped update, per-step noise, cast the new weight to bf16 for the
next forward pass); `step_bf16` does all of it in one, and keeps the model's bf16 copies of the weights current,
so the model skips its own cast. Weights come with bf16 gradients, biases with fp32 ones; both go through the
kernel. Used for models whose `grads` accept those copies (`accepts_low`), with bf16 compute and the native
kernels available; the engine's eager path computes the same step otherwise. The fp32 engine's native path
(models/mlp.py `step_f32`) uses it without the bf16 copies (`keep_low=False`) when a privacy hook transforms the
step (plain SGD updates the weights inside the backward GEMMs instead).
"""

from __future__ import annotations

from typing import Optional

import torch


class FusedStep:
    """keep_low: keep bf16 copies of the weights current (the bf16 engine); False for the fp32 engine, whose
    gradients are all fp32 (the kernel then only updates and adds noise, one pass a tensor)."""

    def __init__(self, kernels, params: list[torch.Tensor], masks: list[Optional[torch.Tensor]], lr: float,
                 keep_low: bool = True):
        self.k = kernels
        self.keep_low = keep_low
        self.lr = lr
        self.c = params[0].shape[0]
        self.fused: Optional[list[int]] = None  # params the kernel steps (known after the first step)
        self.masks8 = [None if m is None else m.to(torch.uint8).contiguous() for m in masks]
        self.masks = masks
        self.low: dict[int, torch.Tensor] = {}  # bf16 copies of params, current when listed in self.valid
        self.valid: set[int] = set()
        self._neg_lr = torch.full((self.c,), -lr)

    def current_low(self) -> dict[int, torch.Tensor]:
        return {i: self.low[i] for i in self.valid}

    def _setup(self, params, grads) -> None:
        self.fused = [i for i, g in enumerate(grads) if g.dtype in (torch.bfloat16, torch.float32)
                      and g.is_contiguous() and params[i].is_contiguous()]
        for i in self.fused if self.keep_low else ():
            self.low[i] = torch.empty(params[i].shape, dtype=torch.bfloat16)

    def _kernel(self, params, grads, i, scale: torch.Tensor, noise=None) -> None:
        p, g, m = params[i], grads[i], self.masks8[i]
        key, counter, std = noise if noise is not None else (0, 0, 0.0)
        low = self.low[i].data_ptr() if self.keep_low else 0
        self.k.step_bf16(p.data_ptr(), g.data_ptr(), 0 if m is None else m.data_ptr(), scale.data_ptr(), self.c,
                         p[0].numel(), low, key, counter, std, int(g.dtype == torch.float32))

    def _norms(self, grads, fused: set) -> torch.Tensor:
        """‖g‖ per client over all parameters, of the masked gradients (what is applied)."""
        sq = torch.zeros(self.c, dtype=torch.float64)
        for i, g in enumerate(grads):
            if i in fused and g.dtype == torch.bfloat16:
                m = self.masks8[i]
                self.k.sumsq_bf16(g.data_ptr(), 0 if m is None else m.data_ptr(), self.c, g[0].numel(), sq.data_ptr())
            else:
                m = self.masks[i] if i in fused else None  # the kernel masks fused params: not applied yet
                sq += (g if m is None else g * m).reshape(self.c, -1).double().pow(2).sum(1)
        return sq.sqrt().float()

    def step(self, params, grads, hook, active: torch.Tensor) -> None:
        if self.fused is None:
            self._setup(params, grads)
        fused = set(self.fused)
        if hook is None:
            for i, (p, g) in enumerate(zip(params, grads)):
                if i in fused:
                    self._kernel(params, grads, i, self._neg_lr)
                else:
                    m = self.masks[i]
                    p.sub_(g if m is None else g * m, alpha=self.lr)
            self.valid = fused if self.keep_low else set()
            return
        for i, g in enumerate(grads):
            if (i not in fused or not self.keep_low) and self.masks[i] is not None:
                g.mul_(self.masks[i])  # the kernel masks the fused ones (again, for fp32: the norms are torch's)
        norms = self._norms(grads, fused) if hook.needs_norms and self.keep_low else None
        coef = hook.coefficients(grads, active, self.lr, norms=norms)
        scale = (-coef).contiguous()
        self.valid = set()
        for i, (p, g) in enumerate(zip(params, grads)):  # index order: the noise stream as in the eager path
            if i in fused:
                noise = hook.reserve_noise(i, p, self.masks[i], active)  # None: add_noise below
                self._kernel(params, grads, i, scale, noise)
                if noise is not None:
                    if self.keep_low:
                        self.valid.add(i)
                    continue
            else:
                p.addcmul_(g, coef.view(self.c, *([1] * (g.dim() - 1))), value=-1.0)
            hook.add_noise(i, p, self.masks[i], active)  # not fused: the model casts this weight itself
