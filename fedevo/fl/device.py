"""The device path: local training in torch ops on one device (a CUDA GPU in the simulator, the CPU in the tests).

It computes the CPU engine's step (engine.py) for the same chunks of `chunk_clients` clients with the same seeds,
hence the same batch schedules, so a seed gives the CPU path's numbers within the tolerance docs/engine.md states
(fp32: TF32 off, `hardware.cuda_setup`). What differs:

- Several chunks train at once: a *group* stacks the clients of consecutive chunks (by default all of a round's;
  FEDEVO_GPU_CLIENTS=N caps a group at N clients, whole chunks, at least one), so a GPU runs one batched matmul
  for a round's clients instead of one per chunk. Each chunk keeps its own schedule; a group runs as many steps
  as its longest chunk, the others idle after their last (weight 0, no update, no noise), so a client's numbers
  do not depend on the clients that share its group, up to rounding.
- torch ops only, no native kernels: MLP gradients from `StackedMLP.grads`, CNN gradients from
  `StackedCNN.grads_vmap` (a group's clients in grouped convolutions).
- Per-step hooks come from `for_group(seeds, counts, device)` (StepLDP, the adaptive controller), one per group;
  StepLDP's noise comes from torch's generator on the device, seeded from the group's first chunk: the same
  distribution as the CPU's native stream, other draws (which, with FEDEVO_GPU_CLIENTS, depend on the grouping).
- Nothing in the step loop waits for the device (no `.item()`, no boolean indexing, no data-dependent branch):
  the schedule is made on the CPU and copied once per group; tests run the loop on fake CUDA tensors, where a
  host synchronisation or a CPU tensor meeting a CUDA one is an error.
- Each chunk's trained parameters come back to the CPU, so everything after local training (uploads, secure
  aggregation, server noise, evaluation) runs as on the CPU path.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import torch

from ..envvars import env_count
from .engine import batch_schedule, client_rows, eager_update, intra_op_threads


def group_cap() -> Optional[int]:
    """FEDEVO_GPU_CLIENTS: the most clients trained at once on the device (None: a round's in one group)."""
    return env_count("FEDEVO_GPU_CLIENTS")


def group_chunks(counts: Sequence[int], cap: Optional[int]) -> list[list[int]]:
    """Consecutive chunks (their indices) grouped so that a group holds at most `cap` clients (a larger chunk
    alone); cap None: one group."""
    groups: list[list[int]] = []
    total = 0
    for i, n in enumerate(counts):
        if groups and (cap is None or total + n <= cap):
            groups[-1].append(i)
            total += n
        else:
            groups.append([i])
            total = n
    return groups


@dataclass
class Plan:
    """A group's local steps, made on the CPU: per step s, the rows of x, labels and per-sample weights of every
    client (c, used[s]) laid end to end in `rows`, `y`, `w`; `active` (steps, c): the clients that step."""

    counts: list[int]
    used: list[int]
    rows: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor
    active: torch.Tensor

    @property
    def clients(self) -> int:
        return sum(self.counts)


def plan_group(y: torch.Tensor, chunks: Sequence[Sequence[np.ndarray]], gens: Sequence[torch.Generator], *,
               epochs: int, batch_size: int) -> Plan:
    """Each chunk's batch schedule (engine.batch_schedule with its own generator, as the CPU path draws it),
    stacked; a chunk shorter than the group's longest idles (weight 0) after its last step."""
    scheds = [batch_schedule([len(ix) for ix in ch], epochs=epochs, batch_size=batch_size, gen=g)
              for ch, g in zip(chunks, gens)]
    clients = [ix for ch in chunks for ix in ch]
    c, steps = len(clients), max(p.shape[1] for p, _ in scheds)
    pos = torch.zeros(c, steps, batch_size, dtype=torch.int64)
    wts = torch.zeros(c, steps, batch_size)
    k = 0
    for p, w in scheds:
        pos[k:k + len(p), :p.shape[1]] = p
        wts[k:k + len(p), :p.shape[1]] = w
        k += len(p)
    _, rows = client_rows(clients, pos)  # (c, steps, B) rows of x
    labels = y[rows]
    used = (wts > 0).sum(-1).amax(0).tolist()  # per step: the most real samples any client has
    flat = [torch.cat([t.transpose(0, 1)[s, :, :b].reshape(-1) for s, b in enumerate(used)])
            for t in (rows, labels, wts)]
    return Plan(counts=[len(ch) for ch in chunks], used=used, rows=flat[0], y=flat[1], w=flat[2],
                active=(wts.sum(-1) > 0).t().contiguous())


def run_group(model, global_params: list[torch.Tensor], masks: dict, x: torch.Tensor, plan: Plan, *, lr: float,
              hook=None, device: torch.device) -> list[torch.Tensor]:
    """Train a group's clients from the global model on `device`; returns their stacked parameters there.
    x: the whole training set, on `device` (else it is copied there). The step is the CPU engine's eager one."""
    c = plan.clients
    params = [p.to(device).unsqueeze(0).repeat(c, *([1] * p.dim())).contiguous() for p in global_params]
    mask_list = [None if masks.get(i) is None else masks[i].to(device) for i in range(len(params))]
    for p, m in zip(params, mask_list):
        if m is not None:
            p.mul_(m)
    neg_lr_masks = [None if m is None else m * -lr for m in mask_list]
    return run_steps(model, params, mask_list, neg_lr_masks, x, plan, lr=lr, hook=hook, device=device)


def run_steps(model, params: list[torch.Tensor], mask_list: list, neg_lr_masks: list, x: torch.Tensor, plan: Plan,
              *, lr: float, hook=None, device: torch.device) -> list[torch.Tensor]:
    """The group's local steps on its clients' stacked parameters `params` (c, ...) on `device`, in place
    (engine.eager_update: mask_list, neg_lr_masks per parameter, each None, shared or per client); returns them.
    x: the whole training set (N, *feature shape), on `device` (else it is copied there)."""
    c = plan.clients
    x = x.to(device)
    rows, ys, ws, active = (t.to(device) for t in (plan.rows, plan.y, plan.w, plan.active))
    grads_of = getattr(model, "grads_vmap", model.grads)
    feat = x.shape[1:]
    xbuf = torch.empty(c * max(plan.used, default=1), *feat, dtype=x.dtype, device=device)
    off = 0
    for s, b in enumerate(plan.used):
        n = c * b
        xb = torch.index_select(x, 0, rows[off:off + n], out=xbuf[:n])
        grads = grads_of(params, xb.view(c, b, *feat), ys[off:off + n].view(c, b), ws[off:off + n].view(c, b))
        off += n
        grads = [g if g.dtype == torch.float32 else g.float() for g in grads]  # bf16 compute: fp32 updates
        eager_update(params, grads, mask_list, neg_lr_masks, hook, active[s], lr)
    return params


def train_groups(model, global_params: list[torch.Tensor], masks: dict, x: torch.Tensor, y: torch.Tensor,
                 chunks: Sequence[Sequence[np.ndarray]], *, epochs: int, batch_size: int, lr: float,
                 seeds: Sequence[int], device: torch.device, group_hook_for: Optional[Callable] = None,
                 cap: Optional[int] = None) -> Iterator[list[torch.Tensor]]:
    """engine.train_chunks on `device`: yields each chunk's stacked parameters (c, ...), on the CPU, in order.
    Groups train one after the other (one stream); group_hook_for(seeds, counts, device): a group's step hook."""
    device = torch.device(device)
    x = x.to(device)  # no copy when the caller keeps the training set there (fl/rounds.py does)
    for group in group_chunks([len(ch) for ch in chunks], cap if cap is not None else group_cap()):
        chs = [chunks[i] for i in group]
        gseeds = [int(seeds[i]) for i in group]
        plan = plan_group(y, chs, [torch.Generator().manual_seed(s) for s in gseeds], epochs=epochs,
                          batch_size=batch_size)
        hook = group_hook_for(gseeds, plan.counts, device) if group_hook_for is not None else None
        # on the CPU (tests) one intra-op thread, as the CPU engine: small ops, no thread wake-ups
        with intra_op_threads(1) if device.type == "cpu" else contextlib.nullcontext():
            trained = [p.cpu() for p in run_group(model, global_params, masks, x, plan, lr=lr, hook=hook,
                                                  device=device)]
        k = 0
        for n in plan.counts:
            yield [p[k:k + n] for p in trained]
            k += n
