"""Local training of many MLPs' clients as one batched program on one device (a GPU; the CPU in the tests).

A *member* is one evaluation's round of local training: its model's widths, its global parameters and SET masks,
its learning rate, its arrived clients in chunks with each chunk's seed. Members whose models have the same depth
(and batch size and epochs) and whose widths fall in the same power-of-two class train together in one *bucket*:
every client of every member is one slice of stacked weights (clients, d_in, d_out), each member's layers padded to
the bucket's widest with zero weights (a padded unit's pre-activation is 0, its ReLU output and gradient are 0, so
padding stays 0 and changes no real unit's numbers beyond rounding), its learning rate in its clients' per-sample
weights and its SET mask a per-client 0/1 tensor. One step is one batched matmul per layer and direction for the
whole bucket:

- forward z = b + h·W (`baddbmm`), ReLU; softmax-CE's gradient in fp32, weighted by the schedule's per-sample
  weights (1/|batch|, 0 for padding and for a client that has finished its schedule) with each client's −lr
  folded in where the plan is built: δ is the update's from the top, no per-layer scaling;
- backward per layer: the input gradient δ·Wᵀ (with ReLU') first, then the weight update fused into the
  weight-gradient GEMM: W += hᵀ·δ (`baddbmm_` in place: no gradient tensor, no update pass), the mask product
  after it where SET masks are, the bias b += Σδ. On CUDA a masked layer's update and mask product are one Triton
  kernel (fl/stacked_update.py: one pass over the weights instead of two; FEDEVO_CUDA_FUSED_UPDATE).

The schedule is by default the CPU engine's (`engine.batch_schedule`'s draws, each chunk with its own seed:
`engine_draws`, through the native randperm where it equals torch's), hence the same batches as the CPU engine and
the device path, and every member's numbers do not depend on the members beside it, up to rounding (padding changes
the GEMMs' blocking; members of equal widths are exact). A bucket's plan is its members' draws (each client's E
permutations of its rows) gathered through a layout that depends only on the clients' sizes (`_plan_layout`,
cached): on a GPU the host draws, copies them once and the gather runs there. On CUDA the steps of a bucket
whose shapes recur (the same clients count, widths and schedule lengths: a round repeated, a fixed cohort) replay
as one captured CUDA graph (`FEDEVO_CUDA_GRAPHS=0` turns it off): one launch for the whole local training instead
of ~25 per step. fp32 only (the user's `precision = "bf16"` takes the device path of fl/device.py).

Three opt-ins for speed on a GPU, all off by default (docs/engine.md): a problem's `[train]` keys (SimConfig's
`batch_schedule`, `tf32`, `torch_compile`), each overridden by an environment variable where it is set (benchmarks):
- `batch_schedule = "device"` (`FEDEVO_SCHEDULE=device`): the batch schedule drawn on the device (`device_plan`):
  per member one generator seeded from its chunks' seeds, per epoch one `argsort(rand(clients, n))`, the rows
  gathered there. Every client still makes E shuffled passes over its own samples in batches of B, with the same
  per-sample weights, but the batches differ from the CPU engine's, so results agree with it statistically
  (tests/fl/test_stacked_schedule.py), not within rounding; the same seed gives the same numbers on the same device.
- `tf32 = true` (`FEDEVO_CUDA_TF32=1`): the bucket's matmuls with TF32 on CUDA (~1e-3 relative error per product;
  fp32 storage, softmax and updates).
- `torch_compile = true` (`FEDEVO_CUDA_COMPILE=1`): on CUDA the step loop's pointwise work (bias + ReLU, softmax-CE's
  gradient, ReLU', the bias updates) in functions torch.compile fuses (fl/stacked_fused.py; the GEMMs stay cuBLAS's,
  the loop is still one captured graph): the same numbers up to rounding, compiled once per process and shape
  (seconds); where compiling fails, one warning and the plain loop.

A member may carry a per-step hook (`Member.hook`: the `step` mechanism's clipping and noise, the adaptive
mechanism's per-client learning rates; the device path's `for_group` hook made for all of its chunks): its bucket
(`bucket_key` keeps hooked members apart) steps with explicit gradients, each member's hook giving its clients'
coefficients and adding its noise (`hooked_loop`).

`train_members` returns each member's flat updates (local − global, (clients, D) in its own layout) on the device;
the round loop (fl/rounds.py) and the population path (fl/population.py) aggregate them there.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ..envvars import env_choice, env_flag
from . import stacked_cnn, stacked_fused, stacked_update, tf32
from .stacked_cnn import CNNMember
from .engine import chunk_draws, intra_op_threads
from .local_round import LocalRound, MemberHooks, client_spans, size_class, steps_of


@dataclass(eq=False)
class Member(LocalRound):
    """One evaluation's round of local training (fl/local_round.py) of an MLP. dims: its widths (input, hidden...,
    classes); params: [W0, b0, W1, b1, ...] with W (d_in, d_out), b (1, d_out); masks: {weight index: 0/1 mask}."""
    dims: tuple
    schedule: str = field(default_factory=lambda: schedule_setting())
    tf32: bool = field(default_factory=lambda: tf32_enabled())  # TF32 matmuls (on CUDA only)
    torch_compile: bool = field(default_factory=lambda: compile_enabled())  # compiled pointwise work (CUDA only)
    drawn: Optional[np.ndarray] = None  # `predraw`'s engine draws (clients, E, n), made ahead (in a run's thread)
    hook: Optional[object] = None  # the round's per-step hook for its clients (privatizer.for_group), or None
    rounds_left: Optional[int] = None  # this round and the run's rounds after it (None: unknown; `recurs`)

    def __post_init__(self):
        super().__post_init__()
        self.dims = tuple(int(d) for d in self.dims)


SCHEDULES = ("engine", "device")


def schedule_setting(setting: str = "engine") -> str:
    """The batch schedule: FEDEVO_SCHEDULE where set (an override), else `setting` (a config's batch_schedule):
    'engine' (the CPU engine's draws) or 'device' (drawn on the device)."""
    v = env_choice("FEDEVO_SCHEDULE", SCHEDULES, setting, expected="'engine' or 'device'")
    if v not in SCHEDULES:  # `setting` itself (a SimConfig checks its batch_schedule: only a direct call gets here)
        from ..errors import FedevoError
        raise FedevoError(f"batch_schedule must be 'engine' or 'device', got {v!r}")
    return v


def _opt_in(variable: str, setting: bool) -> bool:
    """A config's opt-in `setting`, overridden by environment variable `variable` where set (1/0: env_flag)."""
    return env_flag(variable, bool(setting))


def tf32_enabled(setting: bool = False) -> bool:
    """TF32 matmuls in the stacked trainer on CUDA: FEDEVO_CUDA_TF32 where set (an override: 1/0), else `setting`
    (a config's tf32; off by default)."""
    return _opt_in("FEDEVO_CUDA_TF32", setting)


def compile_enabled(setting: bool = False) -> bool:
    """The step loop's pointwise work torch.compile'd in the stacked trainer on CUDA: FEDEVO_CUDA_COMPILE where set
    (an override: 1/0), else `setting` (a config's torch_compile; off by default)."""
    return _opt_in("FEDEVO_CUDA_COMPILE", setting)


def settings_of(cfg) -> dict:
    """A Member's `schedule`, `tf32` and `torch_compile` for a SimConfig (its keys, the environment's overrides)."""
    return {"schedule": schedule_setting(cfg.batch_schedule), "tf32": tf32_enabled(cfg.tf32),
            "torch_compile": compile_enabled(cfg.torch_compile)}


def opt_ins(cfg, device, hooked: bool = False, cnn: bool = False) -> dict:
    """The opt-ins the stacked trainer trains `cfg` with on `device`, for a result's `engine` (none by default;
    TF32 and torch_compile on CUDA only; hooked: a per-step hook's loop, which has no compiled pointwise work;
    cnn: a CNN bucket's, which takes TF32 alone)."""
    got = settings_of(cfg)
    if cnn:
        return {"tf32": True} if got["tf32"] and torch.device(device).type == "cuda" else {}
    out = {"batch_schedule": "device"} if got["schedule"] == "device" else {}
    if torch.device(device).type == "cuda":
        out.update({k: True for k in ("tf32", "torch_compile") if got[k] and not (hooked and k == "torch_compile")})
    return out


def engine_label(engine: dict, mlp: bool = True) -> dict:
    """A result's `engine` as this process trained it: torch_compile's fallback (stacked_fused) and the fused
    update's kernel (stacked_update) named where it trained in the MLP buckets (`mlp`, `applies_mlp`); another
    result's unchanged (a CNN's, a user model's: none of those is theirs)."""
    return stacked_update.engine_label(stacked_fused.engine_label(engine)) if mlp else engine


def enabled() -> bool:
    """FEDEVO_STACKED=0: the device path of fl/device.py for MLPs too (what this replaced; benchmarks compare).
    On by default; a value env_flag does not take is a SetupError."""
    return env_flag("FEDEVO_STACKED", True)


def split(flat: torch.Tensor, chunks: Sequence) -> list[torch.Tensor]:
    """A member's flat updates (clients, D) as one view per chunk, in order."""
    out, k = [], 0
    for ch in chunks:
        out.append(flat[k:k + len(ch)])
        k += len(ch)
    return out


def hooked(pv) -> bool:
    """Whether a privatizer has a per-step hook (the CPU engine's `for_chunk` or the device path's `for_group`)."""
    return getattr(pv, "for_chunk", None) is not None or getattr(pv, "for_group", None) is not None


def _takes_hook(pv) -> bool:
    return not hooked(pv) or getattr(pv, "for_group", None) is not None


def applies(model, pv, dtype: torch.dtype) -> bool:
    """Whether the stacked trainer takes a round of `model` under privatizer `pv`: an MLP as `applies_mlp` says, or
    a built-in CNN under the same privatizers (fl/stacked_cnn.py, in its compute precision)."""
    return applies_mlp(model, pv, dtype) or stacked_cnn.applies(model, _takes_hook(pv))


def applies_mlp(model, pv, dtype: torch.dtype) -> bool:
    """Whether a round of `model` trains in the MLP buckets (this module's own trainer, its opt-ins, graphs and fused
    update): an MLP, fp32 compute, and no per-step hook or one with the device path's `for_group` (StepLDP's
    clipping and noise, the adaptive mechanism's per-client learning rates: `member_hook`)."""
    return getattr(model, "kind", "") == "mlp" and _takes_hook(pv) and dtype == torch.float32


def member_hook(pv, chunks: Sequence, seeds: Sequence[int], device):
    """The round's per-step hook for a member's clients (its chunks' seeds and sizes, as fl/device.py makes it for
    one group of all the round's chunks: the same noise draws), or None."""
    if getattr(pv, "for_group", None) is None:
        return None
    return pv.for_group([int(s) for s in seeds], [len(c) for c in chunks], torch.device(device))


def width_class(dims: Sequence[int]) -> int:
    """Power-of-two class of the widest hidden layer: members of one class pad to at most twice their width."""
    hidden = dims[1:-1]
    return size_class(max(hidden)) if hidden else 0


def bucket_key(m: Member, exact: bool = False) -> tuple:
    """Members with equal keys train together. exact: only members of equal widths (no padding)."""
    if isinstance(m, CNNMember):
        return stacked_cnn.bucket_key(m, exact)
    shape = m.dims if exact else (len(m.dims), m.dims[0], m.dims[-1], width_class(m.dims))
    return (shape, m.batch_size, m.epochs, m.schedule, m.tf32, m.torch_compile, m.hook is not None)


def engine_draws(m: Member) -> np.ndarray:
    """The member's clients' rows of the training set for each epoch as the CPU engine draws them: (clients, E, n)
    with n its largest client; [k, e, :n_k] client k's rows in its e-th permutation (each chunk's
    `engine.chunk_draws` from the chunk's seed), 0 beyond n_k: `device_draws`'s layout, so that the two schedules
    share the bucket's plan (`_plan_layout`)."""
    n = max((len(ix) for ch in m.chunks for ix in ch), default=0)
    out = np.zeros((m.clients, m.epochs, n), dtype=np.int64)
    k = 0
    for ch, seed in zip(m.chunks, m.seeds):
        chunk_draws(ch, epochs=m.epochs, seed=int(seed), out=out[k:k + len(ch)])
        k += len(ch)
    return out


def predraw(m: Member) -> Member:
    """m with its engine draws made now (`engine_draws`, kept in m.drawn): a bucket built later copies them
    instead of drawing them on the thread that queues the GPU's work (the population path draws each run's next
    schedule in the run's own thread). The same numbers; a device schedule is not drawn ahead."""
    if not isinstance(m, CNNMember) and m.schedule == "engine" and m.drawn is None and m.clients:
        m.drawn = engine_draws(m)
    return m


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
        w = np.zeros(pe * B, dtype=np.float32)
        full, rest = divmod(size, B)
        w[:full * B] = 1.0 / B
        if rest:
            w[full * B:size] = 1.0 / rest
        src[ks, :epochs * pe] = block.reshape(epochs * pe, B)
        ws[ks, :epochs * pe] = np.tile(w.reshape(pe, B), (epochs, 1))


def device_seed(seeds: Sequence[int]) -> int:
    """One generator seed for a member's device schedule, from its chunks' seeds (the round's draws)."""
    a, b = np.random.SeedSequence([int(s) for s in seeds]).generate_state(2)
    return (int(a) << 31) ^ int(b)


def device_draws(m: Member, device) -> torch.Tensor:
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


def _compact(rows: np.ndarray, ws: np.ndarray, quantum: int = 1) -> tuple[tuple, tuple]:
    """used: per step the most real samples any client has, rounded up to a multiple of `quantum` within B (the
    rest of B is padding, weight 0, not computed); rows and ws (clients, steps, B) flattened step by step to those
    columns."""
    B = ws.shape[-1]
    used = tuple(min(B, -(-int(u) // quantum) * quantum) for u in (ws > 0).sum(-1).max(0))
    keep = np.arange(ws.shape[-1]) < np.array(used).reshape(-1, 1, 1)  # (steps, 1, B): step s's first used[s]
    keep = np.broadcast_to(keep, (ws.shape[1], ws.shape[0], ws.shape[2]))
    return used, tuple(t.transpose(1, 0, 2)[keep] for t in (rows, ws))  # step by step, clients in order


def _per_slot(values: np.ndarray, used: Sequence[int]) -> np.ndarray:
    """A value per client (clients,) in the plan's flat layout: step by step, its clients × its used columns."""
    return np.concatenate([np.repeat(values, u) for u in used]) if len(used) else values[:0]


@functools.lru_cache(maxsize=8)
def _plan_layout(shapes: tuple, B: int, device: str, pad: int = 0, quantum: int = 1) -> tuple:
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
    used, (src, ws) = _compact(src, ws, quantum)
    return (used, to_device(torch.from_numpy(src), device), to_device(torch.from_numpy(ws), device),
            to_device(torch.from_numpy(active), device))


class _Bucket:
    """The stacked state of one bucket's members on the device and its step loop."""

    def __init__(self, members: list[Member], y: torch.Tensor, device: torch.device,
                 shaped: Optional[bool] = None):
        """shaped: whether the bucket's shapes are rounded up so that its graph recurs (its clients by
        `padded_clients`, each step's samples to a multiple of SAMPLE_QUANTUM); None: where it is to recur
        (`recurs`, on CUDA)."""
        self.members = members
        self.device = device
        L = len(members[0].dims) - 1
        self.dims = [max(m.dims[i] for m in members) for i in range(L + 1)]
        B = members[0].batch_size
        self.hooked = members[0].hook is not None  # one bucket: all or none (bucket_key)
        self.recurs = recurs(members) if device.type == "cuda" and not self.hooked and graphs_enabled() else False
        shaped = bool(self.recurs) if shaped is None else shaped
        self.spans = client_spans(members)  # each member's clients' slots in the stacked state, then the padding's
        real = self.spans[-1].stop
        pad = padded_clients(real) - real if shaped else 0
        self.C = real + pad
        # the plan's per-sample weights × each client's −lr: the step loop's δ is the update's from the top (with
        # a per-step hook, the gradient's: the hook's coefficients carry lr); 0 for the padding clients
        coefs = [np.float32(1.0 if self.hooked else -float(m.lr)) for m in members]
        # the plan's structure from the clients' sizes (cached: it recurs), the rows from the members' draws
        shapes = tuple((tuple(len(ix) for ch in m.chunks for ix in ch), m.epochs) for m in members)
        self.used, src, ws, self.active = _plan_layout(shapes, B, str(device), pad, SAMPLE_QUANTUM if shaped else 1)
        if members[0].schedule == "device":
            drawn = torch.cat([device_draws(m, device).reshape(-1) for m in members])
        else:  # the CPU engine's draws (made ahead in a run's thread where `predraw` did), one copy to the device
            host = [m.drawn if m.drawn is not None else engine_draws(m) for m in members]
            drawn = to_device(torch.from_numpy(np.concatenate([h.reshape(-1) for h in host])), device)
        rows = drawn[src]
        if len(set(coefs)) == 1:  # one coefficient for every member (a run alone): no per-slot array to upload
            ws = ws * float(coefs[0])  # a new tensor (ws is cached), the same fp32 products; padding stays 0
        else:
            neg_lr = np.concatenate([np.full(m.clients, c, dtype=np.float32) for m, c in zip(members, coefs)]
                                    + [np.zeros(pad, dtype=np.float32)])
            ws = ws * to_device(torch.from_numpy(_per_slot(neg_lr, self.used)), device)
        self.plan = [rows, _labels_on(y, device)[rows], ws]
        self.masked = any(m.masks for m in members)
        self.tf32 = device.type == "cuda" and members[0].tf32  # one bucket: one setting (bucket_key)
        self.compiled = device.type == "cuda" and members[0].torch_compile  # likewise
        # which layers' updates run in the fused kernel (fl/stacked_update.py): the masked ones by default
        fused = stacked_update.mode()
        if (fused == "masked" and not self.masked) or self.hooked:  # a hook's step applies explicit gradients
            fused = "off"
        self.fused = fused if fused != "off" and stacked_update.usable(device) else "off"  # checked once a device

    def key(self) -> tuple:
        return (self.C, tuple(self.dims), self.used, self.masked, self.tf32, self.compiled, self.fused, self.hooked)

    def load(self, state: dict) -> None:
        """Copy the members' global parameters (and masks) into the stacked state (allocated or reused)."""
        L = len(self.dims) - 1
        if not state:
            for l in range(L):
                state[f"W{l}"] = torch.zeros(self.C, self.dims[l], self.dims[l + 1], device=self.device)
                state[f"b{l}"] = torch.zeros(self.C, 1, self.dims[l + 1], device=self.device)
                if self.masked:  # 0/1: bytes where the fused kernel reads them, else W's dtype for mul_
                    state[f"M{l}"] = torch.zeros(self.C, self.dims[l], self.dims[l + 1], device=self.device,
                                                 dtype=torch.uint8 if self.fused != "off" else torch.float32)
            state["rows"], state["y"], state["w"] = (torch.empty_like(t) for t in self.plan)
        for name, t in zip(("rows", "y", "w"), self.plan):
            state[name].copy_(t)
        self.globals = []  # each member's global parameters on the device (deltas subtracts them)
        self.member_masks = []  # with hooks: each member's masks on the device, one per parameter (None: none)
        for m, sl in zip(self.members, self.spans):
            self.globals.append([to_device(p, self.device) for p in m.params])
            on_device = [None] * len(m.params)  # the member's masks on the device, by parameter index
            for l in range(L):
                W, b = self.globals[-1][2 * l], self.globals[-1][2 * l + 1]
                mask = m.masks.get(2 * l)
                if mask is not None:
                    mask = on_device[2 * l] = to_device(mask, self.device)
                    W = W * mask  # inactive weights are 0 (a precondition-free fact, as engine.py)
                for name, src in ((f"W{l}", W), (f"b{l}", b)):
                    dst = state[name][sl]
                    if src.shape != dst.shape[1:]:
                        dst.zero_()  # padding: zero weights
                    dst[:, :src.shape[0], :src.shape[1]] = src
                if self.masked:
                    dst = state[f"M{l}"][sl]
                    dst.zero_()
                    dst[:, :W.shape[0], :W.shape[1]] = 1.0 if mask is None else mask
            if self.hooked:
                self.member_masks.append(on_device)
        k = self.spans[-1].stop
        if k < self.C:  # the padding clients: zero weights (a recurring graph's state held other clients there)
            for name in [f"{t}{l}" for l in range(L) for t in ("W", "b", "M") if f"{t}{l}" in state]:
                state[name][k:].zero_()

    def run(self, state: dict, x: torch.Tensor) -> None:
        """The bucket's whole local training, in place on `state` (no host synchronisation: capturable): `loop`,
        with the pointwise functions torch.compile'd where the bucket opted in (`torch_compile`, CUDA). Where
        compiling or a compiled call fails, one warning, the state loaded again and the plain loop (for the rest of
        the process: stacked_fused.failed)."""
        if self.hooked:
            self.hooked_loop(state, x)
            return
        fns = stacked_fused.compiled() if self.compiled else None
        if fns is not None:
            try:
                self.loop(state, x, fns)
                return
            except Exception as e:  # noqa: BLE001 - no Triton, no compiler, a limit: the plain loop
                if self.device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                    raise  # compiled in the warm-up before capture: not expected here
                stacked_fused.failed(e)
                self.load(state)  # the failed call may have updated part of the state: start over
        self.loop(state, x)

    def _layers(self, state: dict) -> tuple[list, list, list]:
        """The stacked state's weights, biases and masks (None where unmasked), layer by layer."""
        L = len(self.dims) - 1
        return ([state[f"W{l}"] for l in range(L)], [state[f"b{l}"] for l in range(L)],
                [state.get(f"M{l}") for l in range(L)])

    def _forward(self, x: torch.Tensor, rows: torch.Tensor, b: int, W: list, bias: list, fwd=None) -> list:
        """One step's forward pass over the bucket's C·b rows of x: the layers' inputs and the logits (fwd:
        stacked_fused's bias + ReLU, else the bias inside the GEMM)."""
        L = len(W)
        hs = [x.index_select(0, rows).view(self.C, b, -1)]
        for l in range(L):
            if fwd is None:
                z = torch.baddbmm(bias[l], hs[-1], W[l])
                if l < L - 1:
                    z.relu_()
            else:
                z = fwd(torch.bmm(hs[-1], W[l]), bias[l], l < L - 1)
            hs.append(z)
        return hs

    def loop(self, state: dict, x: torch.Tensor, fns: Optional[tuple] = None) -> None:
        """The step loop. The per-sample weights are × −lr already, so δ is the update's from the top: per layer the
        input gradient δ·Wᵀ (ReLU') before W changes, the weight update inside the weight-gradient GEMM (the SET
        mask product after it), the bias += Σδ. fns: (fwd, top, mid) of stacked_fused (compiled or not) for the
        pointwise work around the GEMMs; None: the plain loop (the forward's bias inside its GEMM)."""
        L = len(self.dims) - 1
        C = self.C
        W, bias, M = self._layers(state)
        rows, ys, ws = state["rows"], state["y"], state["w"]
        fwd, top, mid = fns or (None, None, None)
        off = 0
        for b in self.used:
            n = C * b
            hs = self._forward(x, rows[off:off + n], b, W, bias, fwd)
            y, w = ys[off:off + n].view(C, b), ws[off:off + n].view(C, b, 1)
            off += n
            if top is None:
                delta = _logits_grad(hs[-1], y, w)  # × −lr: the update's from the top
                bias[L - 1].add_(delta.sum(1, keepdim=True))
            else:
                delta = top(hs[-1], y, w, bias[L - 1])
            for l in range(L - 1, -1, -1):
                nd = None
                if l > 0:  # the input gradient before W changes, ReLU' applied; the bias below it
                    g = torch.bmm(delta, W[l].transpose(1, 2))
                    if mid is None:
                        nd = torch.ops.aten.threshold_backward(g, hs[l], 0)
                        bias[l - 1].add_(nd.sum(1, keepdim=True))
                    else:
                        nd = mid(g, hs[l], bias[l - 1])
                if self.fused == "all" or (self.fused == "masked" and M[l] is not None):
                    stacked_update.apply_(W[l], hs[l], delta, M[l], tf32=self.tf32)  # one pass, mask inside
                else:
                    W[l].baddbmm_(hs[l].transpose(1, 2), delta)  # W −= lr·hᵀδ, inside the GEMM
                    if M[l] is not None:
                        W[l].mul_(M[l])
                delta = nd

    def hooked_loop(self, state: dict, x: torch.Tensor) -> None:
        """The step loop with each member's per-step hook (fl/device.py's step, stacked): the gradients explicit
        (the per-sample weights are not × −lr here), the masked ones; each member's hook gives its clients'
        coefficients (StepLDP: lr·min(1, S/‖g‖), from the gradients' norms over the member's own weights: its
        padding's gradients are 0) and adds its noise after the step (on views of the member's own widths, as the
        device path draws it: the same values)."""
        L = len(self.dims) - 1
        C = self.C
        W, bias, M = self._layers(state)
        rows, ys, ws = state["rows"], state["y"], state["w"]
        spans = self.spans
        hooks = MemberHooks(self.members)
        off = 0
        for s, b in enumerate(self.used):
            n = C * b
            hs = self._forward(x, rows[off:off + n], b, W, bias)
            y, w = ys[off:off + n].view(C, b), ws[off:off + n].view(C, b, 1)
            off += n
            delta = _logits_grad(hs[-1], y, w)  # the gradient's (the weights are not × −lr here)
            grads: list = [None] * (2 * L)  # [gW0, gb0, gW1, gb1, ...]: the members' parameter order
            for l in range(L - 1, -1, -1):
                grads[2 * l + 1] = delta.sum(1, keepdim=True)
                nd = None
                if l > 0:
                    nd = torch.ops.aten.threshold_backward(torch.bmm(delta, W[l].transpose(1, 2)), hs[l], 0)
                grads[2 * l] = torch.bmm(hs[l].transpose(1, 2), delta)
                if M[l] is not None:
                    grads[2 * l].mul_(M[l])  # the gradient that is applied (and clipped): the masked one
                delta = nd
            active = self.active[s]
            c = hooks.coefficients(grads, active).view(C, 1, 1)
            for i, g in enumerate(grads):
                (W if i % 2 == 0 else bias)[i // 2].addcmul_(g, c, value=-1.0)
            for m, sl, masks in zip(self.members, spans, self.member_masks):
                views = []
                for i, p in enumerate(m.params):
                    r, q = p.shape
                    views.append((W if i % 2 == 0 else bias)[i // 2][sl, :r, :q])
                m.hook.after_step(views, masks, active[sl])

    def deltas(self, state: dict) -> list[torch.Tensor]:
        """Each member's flat updates (clients, D), local − global in its own layout, on the device."""
        L = len(self.dims) - 1
        out = []
        for m, gs, sl in zip(self.members, self.globals, self.spans):
            c = m.clients
            D = sum(int(np.prod(p.shape)) for p in m.params)
            flat = torch.empty(c, D, device=self.device)
            off = 0
            for i, g in enumerate(gs):
                name = f"W{i // 2}" if i % 2 == 0 else f"b{i // 2}"
                r, q = g.shape
                local = state[name][sl, :r, :q]
                torch.sub(local, g.unsqueeze(0), out=flat[:, off:off + r * q].view(c, r, q))
                off += r * q
            out.append(flat)
        assert L * 2 == len(self.members[0].params)
        return out


def _logits_grad(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dL/dlogits of softmax cross-entropy (fp32) × each sample's weight w (C, b, 1), for labels y (C, b)."""
    C, b = y.shape
    delta = torch.softmax(logits, dim=-1)
    delta.scatter_add_(2, y.view(C, b, 1), torch.full((C, b, 1), -1.0, device=logits.device))
    return delta.mul_(w)


def graphs_enabled() -> bool:
    """FEDEVO_CUDA_GRAPHS=0: the stacked trainer's step loops eager on CUDA, no captured graphs. On by default; a
    value env_flag does not take is a SetupError."""
    return env_flag("FEDEVO_CUDA_GRAPHS", True)


#: a bucket whose every member has at least this many rounds left (this one included) trains in a captured CUDA
#: graph: seen once eagerly, captured the next time (a capture costs about two eager runs), replayed in the rounds
#: after; with fewer rounds left the capture would not pay back, and the bucket runs eagerly (`recurs`)
GRAPH_ROUNDS = 6
#: such a bucket's client count rounded up by at most 1/CLIENT_SLACK of itself (`padded_clients`: clients with no
#: sample): the clients who arrive vary from round to round, and an unrounded count would make a new graph nearly
#: every round
CLIENT_SLACK = 8
#: and each step's computed samples (the most any client has) rounded up to a multiple of this: clients whose
#: sizes differ by a sample (an IID split of N among K) would otherwise change a step's shape with the arrivals
SAMPLE_QUANTUM = 8


def padded_clients(real: int) -> int:
    """`real` rounded up to a multiple of the largest power of two ≤ real / CLIENT_SLACK (at least 1): at most
    1/CLIENT_SLACK more clients, and a few counts for a bucket's varying arrivals to fall on (70 ± 5 → 72 or 80)."""
    q = 1 << max(0, (max(int(real), 1) // CLIENT_SLACK).bit_length() - 1)
    return -(-int(real) // q) * q


def recurs(members: Sequence[Member]) -> Optional[bool]:
    """Whether the members' bucket is to recur: True where every member has GRAPH_ROUNDS rounds left or more (its
    shapes rounded up, `_Bucket`; its graph captured on the next sighting), False where one has fewer (eager,
    unrounded: a 5-round generation captures nothing), None where a member does not say (a caller's own repeated
    call, as a benchmark's: captured the second time its shape comes, unrounded)."""
    left = [m.rounds_left for m in members]
    if any(n is None for n in left):
        return None
    return min(left) >= GRAPH_ROUNDS


class _GraphCache:
    """Captured CUDA graphs of buckets' step loops, by shape signature: captured the second time a signature
    comes where the bucket is to recur (`recurs`: not False), replayed after; the most recent kept, at most `size`
    and at most a quarter of the device's memory in their states (each graph's private pool of intermediates comes on
    top: a step's activations, less than its state for the stacked MLPs)."""

    def __init__(self, size: int = 32):  # a 30-round generation's 9 buckets hold ~25 shapes between them
        self.size = size
        self.seen: set = set()
        self.graphs: OrderedDict = OrderedDict()

    def run(self, bucket: _Bucket, x: torch.Tensor, before_capture: Optional[Callable[[], None]] = None) -> dict:
        """before_capture: called before a capture, where the caller's other threads must have stopped using the
        GPU (a capture fails where another thread synchronises with the device meanwhile). An eager run or a
        capture is inside the bucket's TF32 window (`tf32.window`); a replay needs none: its TF32 or not is in
        the captured graph."""
        key = (bucket.key(), x.data_ptr(), x.shape)
        hit = self.graphs.get(key)
        if hit is not None:
            self.graphs.move_to_end(key)
            graph, state = hit
            bucket.load(state)
            graph.replay()
            return state
        state: dict = {}
        bucket.load(state)
        cuda = bucket.device.type == "cuda"
        capture = (cuda and key in self.seen and graphs_enabled() and bucket.recurs is not False
                   and not bucket.hooked)  # a hook's Python state changes every step (its norms, its noise's
        # counters): hooked buckets run eagerly
        if capture and before_capture is not None:
            before_capture()  # before the window: a thread waiting for it could not end while it is open
        with tf32.window(bucket.tf32) if cuda else contextlib.nullcontext():
            return self._run_new(bucket, x, key, state, capture)

    def _run_new(self, bucket: _Bucket, x: torch.Tensor, key: tuple, state: dict, capture: bool) -> dict:
        """A signature not captured yet: eager the first time (or without CUDA graphs), else captured."""
        if not capture:
            self.seen.add(key)
            bucket.run(state, x)
            return state
        side = torch.cuda.Stream(bucket.device)  # warm-up on a side stream, as capture requires
        side.wait_stream(torch.cuda.current_stream(bucket.device))
        snapshot = {k: v.clone() for k, v in state.items()}
        with torch.cuda.stream(side):
            bucket.run(state, x)
        torch.cuda.current_stream(bucket.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            bucket.run(state, x)
        for k, v in snapshot.items():  # capture ran nothing; the warm-up trained once: start over
            state[k].copy_(v)
        graph.replay()
        self.graphs[key] = (graph, state)
        self.evict(_memory_of(bucket.device) // 4)
        return state

    def evict(self, budget: int) -> None:
        """Drop the least recently used graphs beyond `size`, or while their states hold more than `budget` bytes
        (the newest is kept)."""
        while len(self.graphs) > self.size or (len(self.graphs) > 1 and sum(
                _state_bytes(st) for _, st in self.graphs.values()) > budget):
            self.graphs.popitem(last=False)


def _state_bytes(state: dict) -> int:
    return sum(t.numel() * t.element_size() for t in state.values())


def _memory_of(device: torch.device) -> int:
    """The device's memory in bytes (CUDA), else no limit."""
    if device.type != "cuda":
        return 1 << 62
    return int(torch.cuda.get_device_properties(device).total_memory)


_CACHE: dict = {}


def _cache(device: torch.device) -> _GraphCache:
    return _CACHE.setdefault(str(device), _GraphCache())


def work_of(m: Member) -> int:
    """A member's multiply-adds a local step and sample, × its clients and steps: to order buckets by."""
    if isinstance(m, CNNMember):
        return stacked_cnn.work_of(m)
    return m.clients * steps_of(m) * sum(a * b for a, b in zip(m.dims[:-1], m.dims[1:]))


def train_members(members: Sequence[Member], x: torch.Tensor, y: torch.Tensor, *, device,
                  exact: bool = False, timings: Optional[dict] = None,
                  on_bucket: Optional[Callable[[list, list], None]] = None,
                  before_capture: Optional[Callable[[], None]] = None) -> list[torch.Tensor]:
    """Train every member's clients for one round, members bucketed (`bucket_key`) and each bucket stacked on
    `device`; returns each member's flat updates (clients, D) there, in the members' order. x: the training set
    (on `device`, else copied), y: its labels (CPU). exact: only members of equal widths share a bucket.
    timings: a dict whose 'plan_s' gets the host seconds spent building the buckets (schedules, state; benchmarks).
    on_bucket(indices, updates): called as soon as each bucket's work is queued on the device (its updates not yet
    computed on a GPU), the members' indices and their updates, then once for the members with no client; the
    buckets go largest first (`work_of`), so the last, whose results nothing overlaps, is the smallest.
    before_capture: see `_GraphCache.run`."""
    device = torch.device(device)
    x = x.to(device)
    x = x.reshape(x.shape[0], -1)
    groups: dict = {}
    for i, m in enumerate(members):
        if m.clients:
            groups.setdefault(bucket_key(m, exact), []).append(i)
    out: list = [None] * len(members)
    for idx in sorted(groups.values(), key=lambda ix: -sum(work_of(members[i]) for i in ix)):
        # on the CPU (tests) one intra-op thread, as the CPU engine: small ops, no thread wake-ups; on CUDA the
        # bucket's TF32 setting around its eager run or capture (_GraphCache.run)
        one_thread = intra_op_threads(1) if device.type == "cpu" else contextlib.nullcontext()
        if isinstance(members[idx[0]], CNNMember):
            with one_thread:
                flats = stacked_cnn.train([members[i] for i in idx], x, y, device=device)
        else:
            t = time.perf_counter()
            bucket = _Bucket([members[i] for i in idx], y, device)
            if timings is not None:
                timings["plan_s"] = timings.get("plan_s", 0.0) + time.perf_counter() - t
            with one_thread:
                state = _cache(device).run(bucket, x, before_capture)
            flats = bucket.deltas(state)
        for i, d in zip(idx, flats):
            out[i] = d
        if on_bucket is not None:
            on_bucket(idx, flats)
    empty = [i for i, o in enumerate(out) if o is None]
    for i in empty:  # no client arrived
        out[i] = torch.empty(0, sum(int(np.prod(p.shape)) for p in members[i].params), device=device)
    if on_bucket is not None and empty:
        on_bucket(empty, [out[i] for i in empty])
    return out


__all__ = ["CLIENT_SLACK", "GRAPH_ROUNDS", "Member", "SAMPLE_QUANTUM", "SCHEDULES", "applies", "applies_mlp",
           "bucket_key",
           "compile_enabled", "device_draws", "enabled", "engine_draws", "engine_label",
           "graphs_enabled", "hooked", "layout_into", "member_hook", "opt_ins", "padded_clients", "predraw",
           "recurs", "schedule_setting", "settings_of", "split", "tf32_enabled", "train_members", "width_class",
           "work_of"]
