"""A straightforward per-client PyTorch loop (module copy, torch.optim.SGD, autograd).

The batched engine is tested against it (same schedule → allclose) and the speed benchmark times it as the
baseline. Kept deliberately plain: it is the definition of what the engine must compute.
"""

from __future__ import annotations

import copy
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def to_module(model, params: list[torch.Tensor]) -> nn.Module:
    """An nn.Module computing the same function as `model.logits(params, ·)`."""
    layers: list[nn.Module] = []
    if model.kind == "cnn":
        for i, pool in enumerate(model.pool):
            w, b = params[2 * i], params[2 * i + 1]
            conv = nn.Conv2d(w.shape[1], w.shape[0], w.shape[2], padding=model.padding)
            conv.weight.data.copy_(w)
            conv.bias.data.copy_(b)
            layers += [conv, nn.ReLU()] + ([nn.MaxPool2d(2)] if pool else [])
        fc = params[model.n_conv:]
    else:
        fc = params
    layers.append(nn.Flatten())
    n = len(fc) // 2
    for i in range(n):
        w, b = fc[2 * i], fc[2 * i + 1]
        lin = nn.Linear(w.shape[0], w.shape[1])
        lin.weight.data.copy_(w.t())
        lin.bias.data.copy_(b.view(-1))
        layers.append(lin)
        if i < n - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def from_module(model, module: nn.Module) -> list[torch.Tensor]:
    out = []
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            out += [m.weight.data.clone(), m.bias.data.clone()]
        elif isinstance(m, nn.Linear):
            out += [m.weight.data.t().contiguous(), m.bias.data.view(1, -1).clone()]
    return out


def _grad_masks(model, module: nn.Module, masks: dict) -> list[Optional[torch.Tensor]]:
    ps = list(module.parameters())
    out: list[Optional[torch.Tensor]] = [None] * len(ps)
    for i, m in masks.items():
        out[i] = m.t() if m.dim() == 2 else m
    return out


def train_clients_reference(model, global_params, masks, x, y, client_indices: Sequence[np.ndarray], *,
                            pos: torch.Tensor, wts: torch.Tensor, lr: float, clip: Optional[float] = None,
                            sigma: float = 0.0, noise_gen: Optional[torch.Generator] = None) -> list[torch.Tensor]:
    """Train each client in turn on the batch schedule (pos, wts) from `engine.batch_schedule`.

    clip/sigma: seed 004's per-step LDP with a fixed S (clip the batch gradient, step, add N(0, σ²)).
    """
    base = to_module(model, global_params)
    results = []
    for k, ix in enumerate(client_indices):
        net = copy.deepcopy(base)
        opt = torch.optim.SGD(net.parameters(), lr=lr)
        gmasks = _grad_masks(model, net, masks)
        ix_t = torch.as_tensor(ix, dtype=torch.int64)
        for s in range(pos.shape[1]):
            real = wts[k, s] > 0
            if not real.any():
                continue
            rows = ix_t[pos[k, s][real]]
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(net(x[rows]), y[rows])
            loss.backward()
            params = list(net.parameters())
            for p, m in zip(params, gmasks):
                if m is not None:
                    p.grad.mul_(m)
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            if sigma > 0:
                with torch.no_grad():
                    for p, m in zip(params, gmasks):
                        n = torch.randn(p.shape, generator=noise_gen) * sigma
                        p.add_(n * m if m is not None else n)
        results.append(from_module(model, net))
    return [torch.stack(t) for t in zip(*results)]
