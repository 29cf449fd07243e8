"""The stacked trainer's batch schedule (fl/stacked.py): which of its clients' rows each step of a bucket trains
on, and with which weight.

By default the CPU engine's (`engine.batch_schedule`'s draws, each chunk with its own seed: `engine_draws`, through
the native randperm where it equals torch's), hence the same batches as the CPU engine and the device path, and
every member's numbers do not depend on the members beside it, up to rounding. A bucket's plan (`plan`) is its
members' draws (each client's E permutations of its rows) gathered through a layout that depends only on the
clients' sizes (`plan_layout`, cached: it recurs while the cohorts do): on a GPU the host draws, copies them once
and the gather runs there. With `batch_schedule = "device"` (fl/stacked_settings.py) the draws are made on the
device instead (`device_draws`: per member one generator seeded from its chunks' seeds, per epoch one
`argsort(rand(clients, n))`), through the same layout.
"""

from __future__ import annotations

import functools
from typing import Sequence

import numpy as np
import torch

from .engine import chunk_draws, step_weights
from .local_round import LocalRound


def engine_draws(m: LocalRound) -> np.ndarray:
    """The member's clients' rows of the training set for each epoch as the CPU engine draws them: (clients, E, n)
    with n its largest client; [k, e, :n_k] client k's rows in its e-th permutation (each chunk's
    `engine.chunk_draws` from the chunk's seed), 0 beyond n_k: `device_draws`'s layout, so that the two schedules
    share the bucket's plan (`plan_layout`)."""
    n = max((len(ix) for ch in m.chunks for ix in ch), default=0)
    out = np.zeros((m.clients, m.epochs, n), dtype=np.int64)
    k = 0
    for ch, seed in zip(m.chunks, m.seeds):
        chunk_draws(ch, epochs=m.epochs, seed=int(seed), out=out[k:k + len(ch)])
        k += len(ch)
    return out


def layout_into(sizes: Sequence[int], epochs: int, B: int, src: np.ndarray, ws: np.ndarray) -> None:
    """The schedule's structure, which depends on the clients' sizes alone: into src, ws (clients, ≥ steps, B)
    each slot's index into the client's draws (epochs, max(sizes)) flattened (e·n + j: the j-th of epoch e's
    permutation) and its weight, laid out as `engine.batch_schedule` (E·⌈n_k/B⌉ steps, a short last batch per
    epoch, then idle slots: weight 0, index 0)."""
    n = max(sizes, default=0)
    by_size: dict = {}
    for k, s in enumerate(sizes):
        by_size.setdefault(s, []).append(k)
    for size, ks in by_size.items():
        pe = -(-size // B)
        if pe == 0:
            continue
        j = np.arange(pe * B)
        block = np.arange(epochs).reshape(-1, 1) * n + j  # (E, pe·B)
        block[:, j >= size] = 0
        src[ks, :epochs * pe] = block.reshape(epochs * pe, B)
        ws[ks, :epochs * pe] = np.tile(step_weights(size, B), (epochs, 1))


def device_seed(seeds: Sequence[int]) -> int:
    """One generator seed for a member's device schedule, from its chunks' seeds (the round's draws)."""
    a, b = np.random.SeedSequence([int(s) for s in seeds]).generate_state(2)
    return (int(a) << 31) ^ int(b)


def device_draws(m: LocalRound, device) -> torch.Tensor:
    """The member's clients' rows of the training set for each epoch, drawn on `device`: (clients, E, n) with n its
    largest client; [k, e, :n_k] a random permutation of client k's rows (one `argsort(rand)` for all clients and
    epochs from a generator seeded by `device_seed`), row 0 beyond n_k."""
    device = torch.device(device)
    sizes = [len(ix) for ch in m.chunks for ix in ch]
    n = max(sizes)
    table = np.zeros((len(sizes), n), dtype=np.int64)
    for k, ix in enumerate(ix for ch in m.chunks for ix in ch):
        table[k, :len(ix)] = ix
    gen = torch.Generator(device).manual_seed(device_seed(m.seeds))
    keys = torch.rand(len(sizes), m.epochs, n, generator=gen, device=device)
    if min(sizes) < n:  # a client's padding sorts last
        pad = torch.arange(n).view(1, n) >= torch.tensor(sizes).view(-1, 1)
        keys += to_device(pad, device).view(len(sizes), 1, n) * 2.0
    perm = torch.argsort(keys, dim=-1, stable=True)
    table = to_device(torch.from_numpy(table), device).view(len(sizes), 1, n).expand(-1, m.epochs, -1)
    return table.gather(2, perm)


_LABELS: dict = {}


def _labels_on(y: torch.Tensor, device) -> torch.Tensor:
    """The training set's labels on `device`, uploaded once per set (the last few sets kept)."""
    key = (id(y), str(device))
    hit = _LABELS.get(key)
    if hit is not None and hit[0] is y:
        return hit[1]
    if len(_LABELS) >= 4:
        _LABELS.pop(next(iter(_LABELS)))
    _LABELS[key] = (y, to_device(y, device))
    return _LABELS[key][1]


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """t on `device`; from the CPU to CUDA through pinned memory, without waiting for the GPU's queued work (a
    copy from pageable memory waits for it: the host would build the next bucket only once the GPU is idle). The
    pinned buffer is the caching host allocator's, reused only once the copy has run."""
    device = torch.device(device)
    if device.type != "cuda" or t.device.type != "cpu":
        return t.to(device)
    staged = t.clone().pin_memory() if t.is_pinned() else t.pin_memory()  # pinned already: its own copy too
    return staged.to(device, non_blocking=True)


def compact(rows: np.ndarray, ws: np.ndarray, quantum: int = 1) -> tuple[tuple, tuple]:
    """used: per step the most real samples any client has, rounded up to a multiple of `quantum` within B (the
    rest of B is padding, weight 0, not computed); rows and ws (clients, steps, B) flattened step by step to those
    columns."""
    B = ws.shape[-1]
    used = tuple(min(B, -(-int(u) // quantum) * quantum) for u in (ws > 0).sum(-1).max(0))
    keep = np.arange(ws.shape[-1]) < np.array(used).reshape(-1, 1, 1)  # (steps, 1, B): step s's first used[s]
    keep = np.broadcast_to(keep, (ws.shape[1], ws.shape[0], ws.shape[2]))
    return used, tuple(t.transpose(1, 0, 2)[keep] for t in (rows, ws))  # step by step, clients in order


def per_slot(values: np.ndarray, used: Sequence[int]) -> np.ndarray:
    """A value per client (clients,) in the plan's flat layout: step by step, its clients × its used columns."""
    return np.concatenate([np.repeat(values, u) for u in used]) if len(used) else values[:0]


@functools.lru_cache(maxsize=8)
def plan_layout(shapes: tuple, B: int, device: str, pad: int = 0, quantum: int = 1) -> tuple:
    """A bucket's plan structure from its members' (client sizes, epochs), which recurs while the cohorts do:
    (used, indices into the members' concatenated draws (`engine_draws` or `device_draws`), weights, the clients
    with a batch at each step (steps, C)), the last three on `device`. pad: clients with no sample after the
    members' (row 0, weight 0 at every slot), quantum: each step's used columns rounded up to a multiple of it
    (where a bucket's graph is to recur: `recurs`)."""
    C = sum(len(sizes) for sizes, _ in shapes) + pad
    steps = max((e * -(-n // B) for sizes, e in shapes for n in sizes), default=0)
    src = np.zeros((C, steps, B), dtype=np.int64)
    ws = np.zeros((C, steps, B), dtype=np.float32)
    k = base = 0
    for sizes, epochs in shapes:
        n, c = max(sizes), len(sizes)
        layout_into(sizes, epochs, B, src[k:k + c], ws[k:k + c])
        src[k:k + c] += base + np.arange(c).reshape(-1, 1, 1) * (epochs * n)
        base += c * epochs * n
        k += c
    active = np.ascontiguousarray((ws > 0).any(-1).T)  # (steps, C): the clients with a batch at each step
    used, (src, ws) = compact(src, ws, quantum)
    return (used, to_device(torch.from_numpy(src), device), to_device(torch.from_numpy(ws), device),
            to_device(torch.from_numpy(active), device))


def plan(members: Sequence[LocalRound], y: torch.Tensor, device: torch.device, *, coefs: Sequence[float],
         pad: int = 0, quantum: int = 1) -> tuple:
    """A bucket's plan on `device`: (used, active, [rows, labels, weights]) for `plan_layout`'s steps, the rows
    from the members' draws (`device_draws` for a device schedule, else the CPU engine's: made ahead where
    `predraw` did, one copy to the device), each slot's weight × its member's coefficient `coefs` (−lr: the step
    loop's δ is the update's from the top; 1 where a per-step hook's coefficients carry lr), 0 for the `pad`
    clients after the members'."""
    B = members[0].batch_size
    shapes = tuple((tuple(len(ix) for ch in m.chunks for ix in ch), m.epochs) for m in members)
    used, src, ws, active = plan_layout(shapes, B, str(device), pad, quantum)
    if members[0].schedule == "device":
        drawn = torch.cat([device_draws(m, device).reshape(-1) for m in members])
    else:
        host = [m.drawn if m.drawn is not None else engine_draws(m) for m in members]
        drawn = to_device(torch.from_numpy(np.concatenate([h.reshape(-1) for h in host])), device)
    rows = drawn[src]
    coefs = [np.float32(c) for c in coefs]
    if len(set(coefs)) == 1:  # one coefficient for every member (a run alone): no per-slot array to upload
        ws = ws * float(coefs[0])  # a new tensor (ws is cached), the same fp32 products; padding stays 0
    else:
        per_client = np.concatenate([np.full(m.clients, c, dtype=np.float32) for m, c in zip(members, coefs)]
                                    + [np.zeros(pad, dtype=np.float32)])
        ws = ws * to_device(torch.from_numpy(per_slot(per_client, used)), device)
    return used, active, [rows, _labels_on(y, device)[rows], ws]


__all__ = ["compact", "device_draws", "device_seed", "engine_draws", "layout_into", "per_slot", "plan",
           "plan_layout", "to_device"]
