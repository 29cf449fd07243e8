"""Local training of many MLPs' clients as one batched program on one device (a GPU; the CPU in the tests).

A *member* is one evaluation's round of local training: its model's widths, its global parameters and SET masks,
its learning rate, its arrived clients in chunks with each chunk's seed. Members whose models have the same depth
(and batch size and epochs) and whose widths fall in the same power-of-two class (`FEDEVO_WIDTH_CLASSES=depth`:
any widths) train together in one *bucket*:
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
  after it where SET masks are, the bias b += Σδ. On CUDA, in a bucket to be captured as a CUDA graph, a masked
  layer's update and mask product are one Triton kernel (fl/stacked_update.py: one pass over the weights instead
  of two; FEDEVO_CUDA_FUSED_UPDATE).

Its pieces, one module each: the batch schedule (fl/stacked_schedule.py: by default the CPU engine's draws, hence
the same batches as the CPU engine and the device path, and every member's numbers do not depend on the members
beside it, up to rounding: padding changes the GEMMs' blocking, members of equal widths are exact), the captured
CUDA graphs of buckets whose shapes recur (fl/stacked_graphs.py), the settings and speed opt-ins (schedule
drawn on the device, TF32, torch.compile'd pointwise work: fl/stacked_settings.py; all off by default), and the
first layer's weight updates once a window of steps (fl/stacked_window.py) and the biases inside the weights
(fl/stacked_bias.py; both opt-ins, off by default). fp32 only
(the user's `precision = "bf16"` takes the device path of fl/device.py); a generation's CNNs train in buckets of
their own (fl/stacked_cnn.py), through the same `train_members`.

A member may carry a per-step hook (`Member.hook`: the `step` mechanism's clipping and noise, the adaptive
mechanism's per-client learning rates; the device path's `for_group` hook made for all of its chunks): its bucket
(`bucket_key` keeps hooked members apart) steps with explicit gradients, each member's hook giving its clients'
coefficients and adding its noise (`hooked_loop`).

`train_members` returns each member's flat updates (local − global, (clients, D) in its own layout) on the device;
the round loop (fl/rounds.py) and the population path (fl/population.py) aggregate them there.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from .. import hardware
from . import stacked_bias, stacked_cnn, stacked_fused, stacked_update, stacked_window
from .device import group_chunks
from .engine import flat_deltas, intra_op_threads
from .local_round import LocalRound, MemberHooks, client_spans, size_class, steps_of
from .stacked_cnn import CNNMember
from .stacked_graphs import SAMPLE_QUANTUM, cache, padded_clients, recurs
from .stacked_schedule import engine_draws, plan, to_device
from .stacked_settings import compile_enabled, graphs_enabled, schedule_setting, tf32_enabled, width_classes


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


def width_class(dims: Sequence[int], classes: str = "pow2") -> int:
    """Power-of-two class of the widest hidden layer: members of one class pad to at most twice their width
    (classes 'depth', `stacked_settings.width_classes`: one class for all)."""
    hidden = dims[1:-1]
    return size_class(max(hidden)) if hidden and classes == "pow2" else 0


def bucket_key(m: Member, exact: bool = False) -> tuple:
    """Members with equal keys train together. exact: only members of equal widths (no padding). With the first
    layer's window (fl/stacked_window.py) asked for, the members it applies to apart from the others, so that they
    take it whatever trains beside them."""
    if isinstance(m, CNNMember):
        return stacked_cnn.bucket_key(m, exact)
    shape = m.dims if exact else (len(m.dims), m.dims[0], m.dims[-1], width_class(m.dims, width_classes()))
    return (shape, m.batch_size, m.epochs, m.schedule, m.tf32, m.torch_compile, m.hook is not None,
            window_steps([m]) > 1)


def window_steps(members: Sequence[Member]) -> int:
    """The first layer's window (fl/stacked_window.py) for a bucket of `members`: its steps where it is asked for
    and applies to every member (no per-step hook, no SET mask on the first weight), else 1 (every step)."""
    k = stacked_window.steps()
    return k if k > 1 and all(stacked_window.applies(m.hook is not None, 0 in m.masks) for m in members) else 1


def padded_dims(members: Sequence[Member]) -> list[int]:
    """A bucket's widths: each layer's widest among its members (the narrower padded to it with zero weights)."""
    return [max(m.dims[i] for m in members) for i in range(len(members[0].dims))]


def predraw(m: Member) -> Member:
    """m with its engine draws made now (`engine_draws`, kept in m.drawn): a bucket built later copies them
    instead of drawing them on the thread that queues the GPU's work (the population path draws each run's next
    schedule in the run's own thread). The same numbers; a device schedule is not drawn ahead."""
    if not isinstance(m, CNNMember) and m.schedule == "engine" and m.drawn is None and m.clients:
        m.drawn = engine_draws(m)
    return m


class _Bucket:
    """The stacked state of one bucket's members on the device and its step loop."""

    def __init__(self, members: list[Member], y: torch.Tensor, device: torch.device,
                 shaped: Optional[bool] = None):
        """shaped: whether the bucket's shapes are rounded up so that its graph recurs (its clients by
        `padded_clients`, each step's samples to a multiple of SAMPLE_QUANTUM); None: where it is to recur
        (`recurs`, on CUDA)."""
        self.members = members
        self.device = device
        self.dims = padded_dims(members)
        self.hooked = members[0].hook is not None  # one bucket: all or none (bucket_key)
        self.recurs = recurs(members) if device.type == "cuda" and not self.hooked and graphs_enabled() else False
        shaped = bool(self.recurs) if shaped is None else shaped
        self.spans = client_spans(members)  # each member's clients' slots in the stacked state, then the padding's
        real = self.spans[-1].stop
        pad = padded_clients(real) - real if shaped else 0
        self.C = real + pad
        # the plan (fl/stacked_schedule.py) with each client's −lr in its per-sample weights: the step loop's δ is
        # the update's from the top (with a per-step hook, the gradient's: the hook's coefficients carry lr)
        coefs = [1.0 if self.hooked else -float(m.lr) for m in members]
        self.used, self.active, self.plan = plan(members, y, device, coefs=coefs, pad=pad,
                                                 quantum=SAMPLE_QUANTUM if shaped else 1)
        self.masked = any(m.masks for m in members)
        self.tf32 = device.type == "cuda" and members[0].tf32  # one bucket: one setting (bucket_key)
        self.compiled = device.type == "cuda" and members[0].torch_compile  # likewise
        # the biases inside the weights (fl/stacked_bias.py; opt-in): for two layers or more
        self.aug = (stacked_bias.enabled() and stacked_bias.applies(self.hooked, self.compiled)
                    and len(self.dims) > 2)
        # which layers' updates run in the fused kernel (fl/stacked_update.py): by default the masked ones of a
        # bucket to be captured as a CUDA graph
        fused = stacked_update.bucket_mode(masked=self.masked, hooked=self.hooked, captured=self.recurs is not False)
        self.fused = fused if fused != "off" and stacked_update.usable(device) else "off"  # checked once a device
        self.window = window_steps(members)  # the first layer's updates once a window of steps (1: every step)

    def key(self) -> tuple:
        return (self.C, tuple(self.dims), self.used, self.masked, self.tf32, self.compiled, self.fused, self.hooked,
                self.window, self.aug)

    def load(self, state: dict) -> None:
        """Copy the members' global parameters (and masks) into the stacked state (allocated or reused)."""
        L = len(self.dims) - 1
        if not state:
            if self.aug:  # W{l} and b{l} are views of the layout's matrices (fl/stacked_bias.py)
                state.update(stacked_bias.allocate(self.C, self.dims, self.device))
            for l in range(L):
                if not self.aug:
                    state[f"W{l}"] = torch.zeros(self.C, self.dims[l], self.dims[l + 1], device=self.device)
                    state[f"b{l}"] = torch.zeros(self.C, 1, self.dims[l + 1], device=self.device)
                if self.masked:  # 0/1: bytes where the fused kernel reads them, else W's dtype for mul_
                    shape = (stacked_bias.mask_shape(self.C, self.dims, l) if self.aug
                             else (self.C, self.dims[l], self.dims[l + 1]))
                    state[f"M{l}"] = torch.zeros(shape, device=self.device,
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
                    if self.aug and l > 0:
                        dst[:, self.dims[l]] = 1  # the bias row inside the layer's matrix: never masked
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

    def _forward(self, x: torch.Tensor, rows: torch.Tensor, b: int, W: list, bias: list, fwd=None,
                 window: Optional[stacked_window.Window] = None, j: int = 0) -> list:
        """One step's forward pass over the bucket's C·b rows of x: the layers' inputs and the logits (fwd:
        stacked_fused's bias + ReLU, else the bias inside the GEMM; a bias None: inside the weights,
        fl/stacked_bias.py). window: the first layer's deferred updates (fl/stacked_window.py), step j of it: its
        input and pre-activation from there."""
        L = len(W)
        hs = [x.index_select(0, rows).view(self.C, b, -1) if window is None else window.input(j)]
        for l in range(L):
            if window is not None and l == 0:
                z = window.z(j)
                z = z.add_(bias[0]) if fwd is None else fwd(z, bias[0], L > 1)
                if fwd is None and L > 1:
                    z.relu_()
            elif fwd is None:
                z = torch.baddbmm(bias[l], hs[-1], W[l]) if bias[l] is not None else torch.bmm(hs[-1], W[l])
                if l < L - 1:
                    z.relu_()
            else:
                z = fwd(torch.bmm(hs[-1], W[l]), bias[l], l < L - 1)
            hs.append(z)
        return hs

    def loop(self, state: dict, x: torch.Tensor, fns: Optional[tuple] = None) -> None:
        """The step loop. The per-sample weights are × −lr already, so δ is the update's from the top: per layer the
        input gradient δ·Wᵀ (ReLU') before W changes, the weight update inside the weight-gradient GEMM (the SET
        mask product after it), the bias += Σδ; the first layer's weight updates once a window of `self.window`
        steps where it is more than 1 (fl/stacked_window.py). fns: (fwd, top, mid) of stacked_fused (compiled or
        not) for the pointwise work around the GEMMs; None: the plain loop (the forward's bias inside its GEMM)."""
        L = len(self.dims) - 1
        C = self.C
        W, bias, M = self._layers(state)
        # the forward's weights and biases: with the biases inside the weights (fl/stacked_bias.py) the layout's
        # matrices, layer 0's bias apart (B0), the others' None (in their rows); each update's target (U)
        aug = self.aug
        Wf, bf = ([state[f"A{l}"] for l in range(L)], [state["B0"]] + [None] * (L - 1)) if aug else (W, bias)
        U = [stacked_bias.update_view(state, self.dims, l) for l in range(L)] if aug else W
        rows, ys, ws = state["rows"], state["y"], state["w"]
        fwd, top, mid = fns or (None, None, None)
        minus = _minus_ones(C, self.used, self.device) if top is None else None
        k = self.window
        off = 0
        for s0 in range(0, len(self.used), k):
            sizes = self.used[s0:s0 + k]
            win = stacked_window.Window(x, rows, off, sizes, C, Wf[0], self.dims[1]) if k > 1 else None
            for j, b in enumerate(sizes):
                n = C * b
                hs = self._forward(x, rows[off:off + n], b, Wf, bf, fwd, win, j)
                y, w = ys[off:off + n].view(C, b), ws[off:off + n].view(C, b, 1)
                off += n
                if top is None:
                    delta = _logits_grad(hs[-1], y, w, minus)  # × −lr: the update's from the top
                    if not aug:  # else the bias row's update is inside the weight-gradient GEMM
                        bias[L - 1].add_(delta.sum(1, keepdim=True))
                else:
                    delta = top(hs[-1], y, w, bias[L - 1])
                for l in range(L - 1, -1, -1):
                    nd = None
                    if l > 0:  # the input gradient before W changes, ReLU' applied; the bias below it
                        g = torch.bmm(delta, W[l].transpose(1, 2))
                        if mid is None:
                            h = hs[l][:, :, :self.dims[l]] if aug else hs[l]  # without the ones and zero units
                            nd = torch.ops.aten.threshold_backward(g, h, 0)
                            if not aug or l == 1:  # in the layout only layer 0's bias is apart
                                bias[l - 1].add_(nd.sum(1, keepdim=True))
                        else:
                            nd = mid(g, hs[l], bias[l - 1])
                    if win is not None and l == 0:
                        win.slot(j).copy_(delta)  # the first layer's update at the window's end
                    elif self.fused == "all" or (self.fused == "masked" and M[l] is not None):
                        stacked_update.apply_(U[l], hs[l], delta, M[l], tf32=self.tf32)  # one pass, mask inside
                    else:
                        U[l].baddbmm_(hs[l].transpose(1, 2), delta)  # W −= lr·hᵀδ, inside the GEMM
                        if M[l] is not None:
                            U[l].mul_(M[l])
                    delta = nd
            if win is not None:
                win.update(Wf[0])

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
        minus = _minus_ones(C, self.used, self.device)
        off = 0
        for s, b in enumerate(self.used):
            n = C * b
            hs = self._forward(x, rows[off:off + n], b, W, bias)
            y, w = ys[off:off + n].view(C, b), ws[off:off + n].view(C, b, 1)
            off += n
            delta = _logits_grad(hs[-1], y, w, minus)  # the gradient's (the weights are not × −lr here)
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
        out = []
        for m, gs, sl in zip(self.members, self.globals, self.spans):
            local = [state[f"W{i // 2}" if i % 2 == 0 else f"b{i // 2}"][sl, :g.shape[0], :g.shape[1]]
                     for i, g in enumerate(gs)]  # each parameter's corner of the member's clients
            flat = torch.empty(m.clients, sum(g.numel() for g in gs), device=self.device)
            out.append(flat_deltas(local, gs, out=flat))
        assert 2 * (len(self.dims) - 1) == len(self.members[0].params)
        return out


def _logits_grad(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor, minus: torch.Tensor) -> torch.Tensor:
    """dL/dlogits of softmax cross-entropy (fp32) × each sample's weight w (C, b, 1), for labels y (C, b); minus:
    −1s of at least (C, b, 1) (`_minus_ones`: made once a loop, not a kernel a step)."""
    C, b = y.shape
    delta = torch.softmax(logits, dim=-1)
    delta.scatter_add_(2, y.view(C, b, 1), minus[:, :b])
    return delta.mul_(w)


def _minus_ones(C: int, used: Sequence[int], device) -> torch.Tensor:
    """The −1s `_logits_grad` adds at each sample's label, (C, the widest step's columns, 1)."""
    return torch.full((C, max(used, default=0), 1), -1.0, device=device)


def work_of(m: Member) -> int:
    """A member's multiply-adds a local step and sample, × its clients and steps: to order buckets by."""
    if isinstance(m, CNNMember):
        return stacked_cnn.work_of(m)
    return m.clients * steps_of(m) * sum(a * b for a, b in zip(m.dims[:-1], m.dims[1:]))


def client_bytes(dims: Sequence[int], steps: int, batch_size: int, window: int = 1) -> int:
    """A generous estimate of the device memory one client of an MLP bucket of (padded) widths `dims` takes: its
    weights and biases three times over (the state, its SET mask, a graph capture's snapshot), its plan (a row
    index, a label and a weight a slot), a step's activations and gradients (three times its batch × widths) and,
    with a first-layer window of `window` steps (fl/stacked_window.py), the window's inputs, products and δs, in
    bytes."""
    params = sum(a * b + b for a, b in zip(dims[:-1], dims[1:]))
    rows = window * batch_size if window > 1 else 0
    return 4 * (3 * params + 5 * steps * batch_size + 3 * batch_size * sum(dims) + rows * (dims[0] + 2 * dims[1]))


def _bucket_budget(device: torch.device) -> Optional[int]:
    """The bytes a bucket's stacked state may take: half the memory the process may still use on CUDA
    (`hardware.gpu_available`: its share of the GPU, another process's use counted); None (no bound) elsewhere."""
    return hardware.gpu_available(device) // 2 if device.type == "cuda" else None


def fitting(members: Sequence[Member], budget: Optional[int]) -> list[list[int]]:
    """An MLP bucket's members (indices, in order) in consecutive parts whose stacked state fits in `budget` bytes
    by `client_bytes` at the bucket's padded widths (a member larger than that alone); one part where it fits or
    without a budget. Each member's numbers do not depend on the members beside it, up to rounding."""
    if budget is None or len(members) < 2:
        return [list(range(len(members)))]
    per = client_bytes(padded_dims(members), max(steps_of(m) for m in members), members[0].batch_size,
                       window_steps(members))
    return group_chunks([m.clients for m in members], max(1, budget // per))


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
    before_capture: see fl/stacked_graphs.py's `GraphCache.run`."""
    device = torch.device(device)
    x = x.to(device)
    x = x.reshape(x.shape[0], -1)
    groups: dict = {}
    for i, m in enumerate(members):
        if m.clients:
            groups.setdefault(bucket_key(m, exact), []).append(i)
    out: list = [None] * len(members)

    def one_thread():  # on the CPU (tests) one intra-op thread, as the CPU engine: small ops, no thread wake-ups;
        # on CUDA the bucket's TF32 setting around its eager run or capture (stacked_graphs.GraphCache.run)
        return intra_op_threads(1) if device.type == "cpu" else contextlib.nullcontext()
    for idx in sorted(groups.values(), key=lambda ix: -sum(work_of(members[i]) for i in ix)):
        if isinstance(members[idx[0]], CNNMember):
            with one_thread():
                flats = stacked_cnn.train([members[i] for i in idx], x, y, device=device)
            _done(idx, flats, out, on_bucket)
            continue
        budget = _bucket_budget(device) if len(idx) > 1 else None  # larger than the memory left: in parts
        for part in fitting([members[i] for i in idx], budget):
            sub = [idx[k] for k in part]
            t = time.perf_counter()
            bucket = _Bucket([members[i] for i in sub], y, device)
            if timings is not None:
                timings["plan_s"] = timings.get("plan_s", 0.0) + time.perf_counter() - t
            with one_thread():
                state = cache(device).run(bucket, x, before_capture)
            _done(sub, bucket.deltas(state), out, on_bucket)
    empty = [i for i, o in enumerate(out) if o is None]
    for i in empty:  # no client arrived
        out[i] = torch.empty(0, sum(int(np.prod(p.shape)) for p in members[i].params), device=device)
    if on_bucket is not None and empty:
        on_bucket(empty, [out[i] for i in empty])
    return out


def _done(idx: list, flats: list, out: list, on_bucket) -> None:
    for i, d in zip(idx, flats):
        out[i] = d
    if on_bucket is not None:
        on_bucket(idx, flats)


__all__ = ["Member", "applies", "applies_mlp", "bucket_key", "client_bytes", "fitting", "hooked", "member_hook",
           "padded_dims", "predraw", "split", "train_members", "width_class", "window_steps", "work_of"]
