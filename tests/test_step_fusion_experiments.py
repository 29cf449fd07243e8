"""benchmarks/cuda_step_fusion.py's experiments (issue #37's last milliseconds, timed only on a GPU) train exactly
fedevo's step: in float64 their weights after a few steps equal those of autograd on the weighted cross-entropy,
and the augmented layout keeps its constant input and padding untouched."""

from __future__ import annotations

import importlib
import sys

import torch
import torch.nn.functional as F

from tests.helpers import REPO


def _experiments():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        return importlib.import_module("cuda_step_fusion")
    finally:
        sys.path.remove(str(REPO / "benchmarks"))


def _reference_step(W, bias, x, rows, y, w, C, b):
    """autograd: W += ∂/∂W Σ_i w_i·CE_i (w carries −lr: a step of SGD), each client's own."""
    ps = [t.clone().requires_grad_() for t in W + bias]
    L = len(W)
    h = x[rows].view(C, b, -1)
    for l in range(L):
        h = torch.baddbmm(ps[L + l], h, ps[l])
        if l < L - 1:
            h = h.relu()
    loss = (F.cross_entropy(h.reshape(C * b, -1), y, reduction="none") * w).sum()
    grads = torch.autograd.grad(loss, ps)
    return [(p + g).detach() for p, g in zip(ps, grads)]


def test_the_experiments_train_fedevos_step_in_float64():
    ex = _experiments()
    gen = torch.Generator().manual_seed(0)
    dt = torch.float64
    C, dims, b = 3, [20, 8, 7, 5], 6
    x = torch.randn(200, dims[0], dtype=dt, generator=gen)
    W = [torch.randn(C, dims[l], dims[l + 1], dtype=dt, generator=gen) * 0.3 for l in range(3)]
    bias = [torch.randn(C, 1, dims[l + 1], dtype=dt, generator=gen) * 0.1 for l in range(3)]
    ref = [t.clone() for t in W + bias]
    Wg, bg = [t.clone() for t in W], [t.clone() for t in bias]
    Wa, ba = [t.clone() for t in W], [t.clone() for t in bias]
    A = ex.augment(Wa, ba)
    x_aug = torch.cat([x, torch.ones(200, 1, dtype=dt), torch.zeros(200, ex.PAD - 1, dtype=dt)], 1)
    minus, ones = -torch.ones(C, b, 1, dtype=dt), torch.ones(C, 1, b, dtype=dt)
    for _ in range(5):
        rows = torch.randint(0, 200, (C * b,), generator=gen)
        y = torch.randint(0, dims[-1], (C * b,), generator=gen)
        w = -0.05 * torch.rand(C * b, dtype=dt, generator=gen)
        ref = _reference_step(ref[:3], ref[3:], x, rows, y, w, C, b)
        ex._plain_step(Wg, bg, x, rows, y, w, minus, ones, C, b)
        ex._augmented_step(A, dims, x_aug, rows, y, w, minus, C, b)
    ex.unaugment(A, Wa, ba)
    for got in (Wg + bg, Wa + ba):
        for a, r in zip(got, ref):
            torch.testing.assert_close(a, r, atol=1e-12, rtol=1e-12)
    for l, a in enumerate(A[:-1]):  # the ones unit (bias 1, weights 0) and the zero padding as they were
        K, N = dims[l], dims[l + 1]
        assert torch.equal(a[:, K, N], torch.ones(C, dtype=dt))
        assert not a[:, :K, N:].any() and not a[:, K + 1:, :].any() and not a[:, K, N + 1:].any()
