"""SET-sparse local training of an MLP chunk through the native CSR kernel (`fedevo.native`, `smlp_step`).

At the densities SET searches (α small: a few % of the weights active) a dense matmul mostly multiplies zeros, and
torch has no batched sparse-times-dense product that beats it on CPU. The kernel runs forward, backward and the
SGD update over the active weights only, in fp32, with the chunk's weights kept compact (c, nnz) for all its
steps and written back to the dense parameters at the end. It computes the same step as the engine's dense
fp32 path (tested allclose, with the same per-step noise stream); it is used when it is cheaper, i.e. when the
active fraction of the fully-connected weights is below `MAX_DENSITY` for the model's compute dtype (crossovers
on the reference MLP, `benchmarks/round_speed.py --density-sweep`: Zen 5, one core, ~0.3 against the bf16
matmuls (with two chunk threads the sparse kernel scales better and wins to ~0.4); Zen 3 (AVX2), two threads,
~0.13 against the native fp32 GEMMs, which made the dense fp32 path ~1.2-1.5x faster than torch's matmuls).
"""

from __future__ import annotations

from typing import Optional

import torch

from ..envvars import env_auto_flag
from ..privacy.mechanisms import batch_norms, draws_compact

# active FC fraction under which the sparse path is used. fp32: against the native fp32 GEMM path (dense32.c),
# crossover ~0.13 on a Zen 3 (AVX2, 2 threads, round_speed.py --density-sweep; against torch's fp32 matmuls it was
# ~0.9 on Zen 5); bf16: against the bf16 matmuls on Zen 5
MAX_DENSITY = {torch.bfloat16: 0.3, torch.float32: 0.13}
MAX_BATCH = 128  # native/sparse_mlp.c: NVMAX · 16
MAX_LAYERS = 15  # weight matrices


def sparse_mode() -> str:
    """FEDEVO_SPARSE: 'auto' (default: by density), '1' (or on/yes/true: whenever possible, for tests) or '0' (or
    off/no/false: never), returned as 'auto', '1' or '0'; another value is a SetupError (envvars.env_auto_flag)."""
    return {None: "auto", True: "1", False: "0"}[env_auto_flag("FEDEVO_SPARSE")]


def applies(model, masks: list[Optional[torch.Tensor]], batch_size: int, kernels) -> bool:
    """Whether `SparseStep` can and should train this chunk: an MLP whose every weight matrix is masked."""
    mode = sparse_mode()
    if kernels is None or mode == "0" or getattr(model, "kind", "") != "mlp":
        return False
    fc = model.fc_weight_ids
    if batch_size > MAX_BATCH or len(fc) > MAX_LAYERS or any(masks[i] is None for i in fc):
        return False
    if mode == "1":
        return True
    active = sum(float(masks[i].sum()) for i in fc)
    limit = MAX_DENSITY.get(getattr(model, "compute_dtype", torch.float32), MAX_DENSITY[torch.float32])
    return active < limit * sum(masks[i].numel() for i in fc)


def _ptrs(ts) -> torch.Tensor:
    return torch.tensor([0 if t is None else t.data_ptr() for t in ts], dtype=torch.int64)


class SparseStep:
    """One chunk's compact weights and CSR structure; `step` per local step, `finish` writes params back.

    params: the chunk's stacked [W0, b0, W1, b1, ...] (c, d_in, d_out) / (c, 1, d_out), inactive weights 0;
    the biases are updated in place, the weights through their compact copies.
    """

    def __init__(self, kernels, model, params: list[torch.Tensor], masks: list[Optional[torch.Tensor]],
                 batch_size: int):
        self.k = kernels
        self.c = params[0].shape[0]
        self.L = len(params) // 2
        self.dims = torch.tensor(model.dims, dtype=torch.int64)
        self.idx, rowptr, cols, self.vals = [], [], [], []
        for l in range(self.L):
            d_in, d_out = model.dims[l], model.dims[l + 1]
            idx = masks[2 * l].reshape(-1).nonzero().squeeze(1)  # flat order = the compact noise order
            rp = torch.zeros(d_in + 1, dtype=torch.int64)
            rp[1:] = torch.bincount(idx // d_out, minlength=d_in).cumsum(0)
            self.idx.append(idx)
            rowptr.append(rp.to(torch.int32))
            cols.append((idx % d_out).to(torch.int32))
            self.vals.append(params[2 * l].reshape(self.c, -1)[:, idx].contiguous())
        self.bias = [params[2 * l + 1] for l in range(self.L)]
        assert all(b.is_contiguous() for b in self.bias)
        self.nnz = torch.tensor([len(i) for i in self.idx], dtype=torch.int64)
        self.compact = [draws_compact(masks[2 * l]) for l in range(self.L)]
        self.masks = masks
        self._keep = (rowptr, cols)  # the kernel reads them through raw pointers
        self.p_rowptr, self.p_cols = _ptrs(rowptr), _ptrs(cols)
        self.p_vals, self.p_bias = _ptrs(self.vals), _ptrs(self.bias)
        bp = -(-batch_size // 16) * 16
        self.scratch = torch.empty(16 + (sum(model.dims) + 2 * max(model.dims[1:])) * bp)
        self.grads: Optional[list[torch.Tensor]] = None
        self.p_gvals = self.p_gbias = None
        self.neg_lr: dict[float, torch.Tensor] = {}
        self.no_update = torch.zeros(self.c)  # scale argument when the kernel only writes gradients

    def _grad_buffers(self) -> list[torch.Tensor]:
        if self.grads is None:
            gv = [torch.empty_like(v) for v in self.vals]
            gb = [torch.empty_like(b) for b in self.bias]
            self.grads = [t for pair in zip(gv, gb) for t in pair]
            self.p_gvals, self.p_gbias = _ptrs(gv), _ptrs(gb)
        return self.grads

    def _call(self, x, rows, y, w, scale: torch.Tensor, grads: bool) -> None:
        rc = self.k.smlp_step(self.L, self.dims.data_ptr(), self.p_rowptr.data_ptr(), self.p_cols.data_ptr(),
                              self.nnz.data_ptr(), self.p_vals.data_ptr(), self.p_bias.data_ptr(),
                              self.p_gvals.data_ptr() if grads else 0, self.p_gbias.data_ptr() if grads else 0,
                              x.data_ptr(), rows.data_ptr(), y.data_ptr(), w.data_ptr(), self.c, rows.shape[1],
                              scale.data_ptr(), self.scratch.data_ptr())
        if rc != 0:  # applies() keeps both limits: reaching this is a bug
            raise RuntimeError(f"sparse kernel rejected batch {rows.shape[1]} (max {MAX_BATCH}) or {self.L} layers "
                               f"(max {MAX_LAYERS})")

    def step(self, x: torch.Tensor, rows: torch.Tensor, y: torch.Tensor, w: torch.Tensor, hook, active: torch.Tensor,
             lr: float) -> None:
        """x (n, d) fp32 samples; rows, y (c, b) int64 and w (c, b) fp32, contiguous, b <= the batch size."""
        if hook is None:  # plain SGD: the kernel updates the weights as it goes
            scale = self.neg_lr.get(lr)
            if scale is None:
                scale = self.neg_lr[lr] = torch.full((self.c,), -lr)
            self._call(x, rows, y, w, scale, grads=False)
            return
        grads = self._grad_buffers()
        self._call(x, rows, y, w, self.no_update, grads=True)
        norms = batch_norms(grads) if hook.needs_norms else None
        coef = hook.coefficients(grads, active, lr, norms=norms)
        for l in range(self.L):  # parameter index order, as the eager path draws the noise
            self.vals[l].addcmul_(grads[2 * l], coef.view(self.c, 1), value=-1.0)
            self._noise_weight(hook, l, active)
            self.bias[l].addcmul_(grads[2 * l + 1], coef.view(self.c, 1, 1), value=-1.0)
            hook.add_noise(2 * l + 1, self.bias[l], None, active)

    def _noise_weight(self, hook, l: int, active: torch.Tensor) -> None:
        if self.compact[l]:  # one draw per active weight in flat order: exactly what the hook draws on the dense form
            hook.add_noise(2 * l, self.vals[l], None, active)
            return
        m = self.masks[2 * l]
        dense = torch.zeros(self.c, *m.shape)
        dense.view(self.c, -1)[:, self.idx[l]] = self.vals[l]
        hook.add_noise(2 * l, dense, m, active)
        self.vals[l].copy_(dense.view(self.c, -1)[:, self.idx[l]])

    def finish(self, params: list[torch.Tensor]) -> None:
        for l in range(self.L):
            params[2 * l].view(self.c, -1)[:, self.idx[l]] = self.vals[l]
