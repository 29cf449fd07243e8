"""Local training of many CNNs' clients as one batched program on one device (a GPU; the CPU in the tests).

The CNN counterpart of fl/stacked.py's MLP buckets. A *member* is one evaluation's round of local training; members
whose CNNs have the same layout (input, conv blocks, kernel, pools, FC depth, classes), batch size, epochs and
compute precision, and whose channels and FC widths fall in the same power-of-two classes, train together: every
client of every member is one slice of stacked parameters (clients, ...), each member's layers padded to the
bucket's widest with zero weights in the far corner (the extra conv channels, and the FC rows they feed, which come
last in the channel-major flatten). A padded channel's map is 0 (zero weights and bias), its ReLU and pool pass 0
and no gradient, so it changes no real unit's numbers beyond rounding; its weights are masked (0) besides, with the
member's SET masks, in each client's −lr·mask. One step is the device path's (fl/device.py `run_steps`): the
gradients of every client at once through torch.func.vmap (grouped convolutions), then one masked update per
parameter for the whole group.

The batches are the device path's for the same chunks and seeds (`device.plan_group`: each chunk's own schedule,
the CPU engine's draws), so a member's numbers do not depend on the members beside it, up to rounding (padding and
the group's size change the convolutions' blocking), and one member alone is a run of fl/device.py's path.
A bucket trains in groups of whole chunks (a round's clients of several runs each): of at most FEDEVO_GPU_CLIENTS
clients where it is set, as on the device path, else on CUDA as many as half the device's memory holds by
`client_bytes`' estimate (a generation of 20 fashion_cnn runs trains ~800 clients a round, whose activations would
not fit at once), on the CPU all. No CUDA graph, no schedule or compile opt-in: fp32 by default, bf16 where the
run's precision says (fp32 updates); with the config's `tf32 = true` (FEDEVO_CUDA_TF32) a bucket's convolutions
and matmuls run in TF32 on CUDA (fl/tf32.py's window: the other threads' launches keep fp32).

A member may carry the device path's per-step hook (`CNNMember.hook`: the `step` mechanism's clipping and noise,
the adaptive mechanism's per-client learning rates; its `for_group` hook for all of its chunks, as fl/stacked.py's
MLP members): hooked members train apart from the others (`bucket_key`), a group holds whole members, and each
member's hook gives its clients' coefficients (StepLDP: from the norms of their masked gradients, whose padding is
0) and adds its noise on views of the member's own shapes: the values it draws alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .. import hardware
from ..envvars import env_flag
from . import tf32
from .device import group_cap, group_chunks, plan_group, run_steps
from .engine import flat_deltas
from .local_round import LocalRound, MemberHooks, size_class, steps_of


@dataclass(eq=False)
class CNNMember(LocalRound):
    """One evaluation's round of local training (fl/local_round.py) of a CNN: its model (models/cnn.py's StackedCNN:
    layout and compute dtype); params [conv_w0, conv_b0, ..., W0, b0, ...]."""
    model: object
    hook: Optional[object] = None  # the round's per-step hook for its clients (privatizer.for_group), or None
    tf32: bool = False  # TF32 convolutions and matmuls (on CUDA only; the config's `tf32`)


def enabled() -> bool:
    """FEDEVO_STACKED_CNN=0: CNN generations evaluated one evaluation after another (fl/device.py alone), as
    before (benchmarks compare). On by default."""
    return env_flag("FEDEVO_STACKED_CNN", True)


def applies(model, takes_hook: bool) -> bool:
    """Whether a round of `model` trains here: a built-in CNN (models/cnn.py) under a privatizer with no per-step
    hook or one with the device path's `for_group` (takes_hook)."""
    return getattr(model, "kind", "") == "cnn" and takes_hook and enabled()


def bucket_key(m: CNNMember, exact: bool = False) -> tuple:
    """Members with equal keys train together. exact: only members of equal shapes (no padding)."""
    net = m.model
    shapes = tuple(tuple(p.shape) for p in m.params)
    if exact:
        layout = shapes
    else:
        hidden = [s[1] for s in shapes[net.n_conv:-2:2]]
        kernels = tuple(shapes[2 * i][2:] for i in range(len(net.pool)))
        layout = (tuple(len(s) for s in shapes), shapes[0][1], kernels, shapes[-1], size_class(shapes[0][0]),
                  size_class(max(hidden, default=0)))
    return ("cnn", tuple(net.input_shape), tuple(net.pool), net.padding, layout, m.batch_size, m.epochs,
            net.compute_dtype, m.hook is not None, m.tf32)


def work_of(m: CNNMember) -> int:
    """Multiply-adds of a sample's forward pass × the member's clients and local steps (to order buckets by)."""
    net, shapes = m.model, [tuple(p.shape) for p in m.params]
    conv = sum(int(np.prod(shapes[2 * i])) * net.map_sizes[i] ** 2 for i in range(len(net.map_sizes)))
    fc = sum(int(np.prod(s)) for s in shapes[net.n_conv::2])
    return m.clients * steps_of(m) * (conv + fc)


def _corner(shape: Sequence[int]) -> tuple:
    return tuple(slice(0, int(n)) for n in shape)


def _padded(t: torch.Tensor, shape: tuple) -> torch.Tensor:
    """t in the corner of zeros of `shape`."""
    if tuple(t.shape) == shape:
        return t
    out = t.new_zeros(shape)
    out[_corner(t.shape)] = t
    return out


def train(members: Sequence[CNNMember], x: torch.Tensor, y: torch.Tensor, *, device) -> list[torch.Tensor]:
    """One bucket's round (members of one `bucket_key`): each member's flat updates (clients, D: local − global, its
    parameters flattened in order, in its own shapes) on `device`, in the members' order. x: the training set on
    `device` (any shape with the images' elements per row), y: its labels (CPU). A group that runs out of CUDA
    memory is trained again in groups of half its clients (`_smaller`), and the bucket's later rounds start there."""
    device = torch.device(device)
    net = members[0].model
    x = x.reshape(x.shape[0], *tuple(net.input_shape))
    shapes = [tuple(max(int(m.params[i].shape[d]) for m in members) for d in range(m0.dim()))
              for i, m0 in enumerate(members[0].params)]
    chunks = [(j, ch, s) for j, m in enumerate(members) for ch, s in zip(m.chunks, m.seeds)]
    trained: list[list] = [[] for _ in members]
    hooked = members[0].hook is not None
    learned = (str(device), tuple(shapes), members[0].batch_size)
    cap = group_clients(net, shapes, members[0].batch_size, device)
    if _LEARNED.get(learned) is not None:
        cap = min(cap or _LEARNED[learned], _LEARNED[learned])
    todo = _groups(members, chunks, hooked, cap)
    while todo:
        group = todo.pop(0)
        part = [chunks[i] for i in group]
        smaller = None
        try:
            params = _train_group(members, part, shapes, hooked, x, y, device)
        except torch.cuda.OutOfMemoryError:
            smaller = _smaller(part, hooked)
            if smaller is None:
                raise
        if smaller is not None:  # out of the handler: the failed group's tensors are free now
            _LEARNED[learned] = smaller
            _out_of_memory(device, sum(len(ch) for _, ch, _ in part), smaller)
            rest = group + [i for g in todo for i in g]  # the chunks left, in order, in smaller groups
            todo = [[rest[k] for k in g] for g in group_chunks([len(chunks[i][1]) for i in rest], smaller)]
            continue
        k = 0
        for j, ch, _ in part:
            trained[j].append([p[k:k + len(ch)] for p in params])
            k += len(ch)
    return [_deltas(m, t, device) for m, t in zip(members, trained)]


_LEARNED: dict = {}  # (device, bucket shapes, batch size) -> the group size a CUDA out-of-memory error left


def _train_group(members, part: list, shapes: list, hooked: bool, x, y, device) -> list[torch.Tensor]:
    """One group's chunks trained: the stacked local parameters of its clients, in order."""
    net = members[0].model
    plan = plan_group(y, [ch for _, ch, _ in part], [torch.Generator().manual_seed(int(s)) for _, _, s in part],
                      epochs=members[0].epochs, batch_size=members[0].batch_size)
    owner = [j for j, ch, _ in part for _ in range(len(ch))]  # each client's member
    used = sorted(set(owner))
    params, mask_list, neg_lr = _stack_state(members, used, owner, shapes, device)
    hook = _Hooks([members[j] for j in used], device) if hooked else None
    with tf32.window(device.type == "cuda" and members[0].tf32, convs=True):
        return run_steps(net, params, mask_list, neg_lr, x, plan, lr=0.0, hook=hook, device=device)


def _smaller(part: list, hooked: bool) -> Optional[int]:
    """The group size to try after `part` ran out of memory: half its clients; None where it cannot shrink (one
    chunk; hooked members, whose hooks' state the failed group advanced)."""
    if hooked or len(part) < 2:
        return None
    return sum(len(ch) for _, ch, _ in part) // 2  # (a chunk larger than that: a group alone)


def _out_of_memory(device, clients: int, smaller: int) -> None:
    """Give back what the failed group left in torch's cache (other processes may share the GPU) and say so, once
    per process and group size."""
    import warnings

    if device.type == "cuda":
        torch.cuda.empty_cache()
    warnings.warn(f"a CNN group of {clients} clients ran out of GPU memory; training it and the bucket's later "
                  f"rounds in groups of at most {smaller} (FEDEVO_GPU_CLIENTS sets the size)", RuntimeWarning,
                  stacklevel=3)


def client_bytes(net, shapes: Sequence[tuple], batch_size: int) -> int:
    """A generous estimate of the device memory one client of a bucket takes during a step: its parameters four times
    over (weights, gradients, mask, −lr·mask) and twice the activations its batch keeps for the backward pass (each
    conv's input and output maps, the pool's indices, the FC layers' inputs), in 4-byte words (bf16: fewer)."""
    words = 4 * sum(int(np.prod(s)) for s in shapes)
    per_sample = 0
    for i, size in enumerate(net.map_sizes):
        c_out, c_in = shapes[2 * i][0], shapes[2 * i][1]
        per_sample += (c_in + 2 * c_out) * size * size + (3 * c_out * (size // 2) ** 2 if net.pool[i] else 0)
    per_sample += sum(s[0] + s[1] for s in shapes[len(net.map_sizes) * 2::2])
    return 4 * (words + 2 * batch_size * per_sample)


def group_clients(net, shapes: Sequence[tuple], batch_size: int, device) -> Optional[int]:
    """The most clients a group of the bucket holds: FEDEVO_GPU_CLIENTS where set; else on CUDA as many as half the
    memory this process may still use holds (`hardware.gpu_available`: its share of the GPU, another process's use
    counted; `client_bytes`); else (the CPU) no cap."""
    cap = group_cap()
    if cap is not None or torch.device(device).type != "cuda":
        return cap
    return max(1, int(hardware.gpu_available(torch.device(device)) // 2 // client_bytes(net, shapes, batch_size)))


def _groups(members: Sequence[CNNMember], chunks: list, hooked: bool, cap: Optional[int]) -> list[list[int]]:
    """The bucket's chunks (indices into `chunks`, in order) in groups of at most `cap` clients: whole chunks, or
    whole members where they carry hooks (a hook is made for all of a member's chunks)."""
    if not hooked:
        return group_chunks([len(ch) for _, ch, _ in chunks], cap)
    first = np.cumsum([0] + [len(m.chunks) for m in members])
    return [list(range(first[g[0]], first[g[-1] + 1])) for g in group_chunks([m.clients for m in members], cap)]


class _Hooks(MemberHooks):
    """A group's members' per-step hooks as one (engine.eager_update's): each member's coefficients on its clients'
    rows (MemberHooks), its noise on views of its own shapes, with its own masks (the device path's for it alone:
    the same draws)."""

    def __init__(self, members: Sequence[CNNMember], device):
        super().__init__(members)
        self.masks = [[m.masks[i].to(device) if i in m.masks else None for i in range(len(m.params))]
                      for m in members]

    def after_step(self, params, masks, active) -> None:
        for m, sl, own in zip(self.members, self.spans, self.masks):
            views = [p[(sl,) + _corner(q.shape)] for p, q in zip(params, m.params)]
            m.hook.after_step(views, own, active[sl])


def _stack_state(members, used: list[int], owner: list[int], shapes: list, device) -> tuple[list, list, list]:
    """The group's clients' stacked parameters (from their members' global ones, padded), and per parameter their
    0/1 masks (padding and SET; None where no member of the group has one) and −lr·mask (−lr where unmasked)."""
    pick = torch.as_tensor([used.index(j) for j in owner], dtype=torch.int64).to(device)
    params, mask_list, neg_lr = [], [], []
    lrs = torch.tensor([-float(members[j].lr) for j in used], dtype=torch.float32).to(device)
    for i, shape in enumerate(shapes):
        ps = torch.stack([_padded(members[j].params[i].float(), shape) for j in used]).to(device)
        lr_i = lrs.view(-1, *([1] * len(shape)))
        if any(i in members[j].masks or tuple(members[j].params[i].shape) != shape for j in used):
            ms = torch.stack([_padded(members[j].masks[i].float() if i in members[j].masks
                                      else torch.ones(members[j].params[i].shape), shape) for j in used])
            ms = ms.to(device)
            ps.mul_(ms)
            mask_list.append(ms.index_select(0, pick))
            neg_lr.append((ms * lr_i).index_select(0, pick))
        else:
            mask_list.append(None)
            neg_lr.append(lr_i.index_select(0, pick))
        params.append(ps.index_select(0, pick).contiguous())
    return params, mask_list, neg_lr


def _deltas(m: CNNMember, parts: list[list], device) -> torch.Tensor:
    """The member's clients' updates (clients, D) in its own layout, from its chunks' padded local parameters."""
    out = torch.empty(m.clients, sum(p.numel() for p in m.params), dtype=torch.float32, device=device)
    gs = [gp.to(device=device, dtype=torch.float32) for gp in m.params]  # once for all its chunks
    k = 0
    for local in parts:
        c = len(local[0])
        flat_deltas([lp[(slice(None),) + _corner(g.shape)] for lp, g in zip(local, gs)], gs, out=out[k:k + c])
        k += c
    return out


__all__ = ["CNNMember", "applies", "bucket_key", "client_bytes", "enabled", "group_clients", "train", "work_of"]
