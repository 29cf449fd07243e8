"""Local training of many clients at once.

Clients are trained in chunks of `chunk_clients` (default 5) through all their epochs, with stacked weights and
batched matmuls in lockstep, in-place updates into preallocated buffers; the fp32 native path without a privacy
hook trains a chunk client by client instead (`F32_GROUP`: the same numbers, a client's weights stay in cache).
Unequal local datasets are handled by a padded batch schedule whose per-sample weights are 1/|batch| (0 for
padding), so a client with fewer batches simply idles. The per-step privacy transform (seed 004) plugs in through
`StepHook`. A chunk of a SET-sparse MLP at low density trains through the sparse kernel instead (`sparse.py`), bf16
dense MLPs through the fused step (`fused.py`), fp32 dense MLPs through the native fp32 GEMMs with fused epilogues
(`_train_f32`), everything else through the eager torch path below; all compute the same step.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Optional, Protocol, Sequence

import numpy as np
import torch

from .. import native
from ..envvars import env_count
from . import sparse as sparse_path
from .fused import FusedStep

# Clients the fp32 native path trains at a time through their whole schedule, without a privacy hook (the
# result does not depend on it). Client by client beat 5 in lockstep by 1.25x a round (reference workload, 2
# threads, paired floor ratio 1.23 vs 1.54, Zen 3): one client's weights and batches stay in cache between steps,
# where 5 clients' stream ~4 MB a step through a last-level cache shared with the other core.
F32_GROUP = 1


class StepHook(Protocol):
    """Called once per local step, batched over the chunk's clients. One hook object per chunk: chunks may
    train in parallel threads (see `train_chunks`)."""

    needs_norms: bool  # coefficients() reads the per-client gradient norms

    def coefficients(self, grads: list[torch.Tensor], active: torch.Tensor, lr: float,
                     norms: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Per-client step size (c,) applied to `grads` (e.g. lr·min(1, S/‖g‖) for clipping); `norms`: ‖g‖ per
        client when the caller has them already."""

    def after_step(self, params: list[torch.Tensor], masks: list[Optional[torch.Tensor]], active: torch.Tensor) -> None:
        """Post-step transform of the parameters in place (e.g. add Gaussian noise): add_noise for each index."""

    def add_noise(self, i: int, p: torch.Tensor, m: Optional[torch.Tensor], active: torch.Tensor) -> None:
        """The post-step transform of parameter i alone (the fused step calls it in index order)."""

    def reserve_noise(self, i: int, p: torch.Tensor, m: Optional[torch.Tensor], active: torch.Tensor):
        """(key, counter, std) of native-stream noise a fused kernel may add to parameter i instead of
        add_noise, std 0 for none; None: call add_noise."""


def chunk_draws(clients: Sequence, *, epochs: int, seed: int, out: Optional[np.ndarray] = None) -> np.ndarray:
    """A chunk's clients' rows shuffled as `batch_schedule` draws them from `torch.Generator().manual_seed(seed)`
    (torch.randperm client by client, epoch by epoch): out[k, e, :n_k] = clients[k][the e-th permutation of client
    k]. out: (c, epochs, ≥ max n_k) int64, C-contiguous (made, zeros, when None); beyond n_k untouched. Native
    (perm.c: torch's Mersenne Twister and Fisher–Yates on the rows themselves, ~10x faster for these small
    permutations) where its draws equal this torch's (checked once per process: `_native_randperms`), else torch."""
    sizes = np.array([len(ix) for ix in clients], dtype=np.int64)
    c = len(sizes)
    if out is None:
        out = np.zeros((c, epochs, int(sizes.max(initial=0))), dtype=np.int64)
    if c == 0:
        return out
    items = np.concatenate([np.asarray(ix, dtype=np.int64) for ix in clients])
    kern = _native_randperms()
    if kern is not None and out.flags.c_contiguous and kern.randperms(
            int(seed) & (2**64 - 1), items.ctypes.data, sizes.ctypes.data, c, int(epochs), out.shape[2],
            out.ctypes.data) == 0:
        return out
    gen = torch.Generator().manual_seed(int(seed))
    start = 0
    for k, n in enumerate(sizes.tolist()):
        ix = items[start:start + n]
        start += n
        for e in range(epochs):
            out[k, e, :n] = ix[torch.randperm(n, generator=gen).numpy()]
    return out


_RANDPERMS: dict = {}


def _native_randperms():
    """The native kernels where their randperm draws equal this torch's (a probe of seeds and sizes, once per
    process), else None (no native library, or a torch whose CPU randperm draws otherwise)."""
    if "kernels" not in _RANDPERMS:
        kern = native.load()
        for seed, sizes, epochs in ((0, [0, 1, 2, 37], 2), (2**40 + 12345, [600, 3], 3), (2**63 + 7, [700], 1)):
            if kern is None:
                break
            gen = torch.Generator().manual_seed(seed)
            want = [torch.randperm(n, generator=gen).numpy() for n in sizes for _ in range(epochs)]
            got = np.full((len(sizes), epochs, max(sizes)), -1, dtype=np.int64)
            n = np.asarray(sizes, dtype=np.int64)
            if kern.randperms(seed, None, n.ctypes.data, len(n), epochs, got.shape[2], got.ctypes.data) != 0 \
                    or not all(np.array_equal(got[k, e, :sizes[k]], want[k * epochs + e])
                               for k in range(len(sizes)) for e in range(epochs)):
                kern = None
        _RANDPERMS["kernels"] = kern
    return _RANDPERMS["kernels"]


def step_weights(n: int, batch_size: int) -> np.ndarray:
    """One epoch's per-sample weights of a client of n rows, (⌈n/B⌉, B): each step averages its samples (1/B in a
    full batch, 1/len in the short last one), 0 in the empty slots after them."""
    B = batch_size
    full, rest = divmod(n, B)
    w = np.zeros(-(-n // B) * B, dtype=np.float32)
    w[:full * B] = 1.0 / B
    if rest:
        w[full * B:n] = 1.0 / rest
    return w.reshape(-1, B)


def client_rows(client_indices: Sequence[np.ndarray], pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The clients' rows of the training set as a table (c, width: the largest client, at least 1; 0-padded), and
    the rows a schedule's positions `pos` (c, steps, B) name: (c, steps, B)."""
    c = len(client_indices)
    table = torch.zeros(c, max(1, max((len(ix) for ix in client_indices), default=0)), dtype=torch.int64)
    for k, ix in enumerate(client_indices):
        table[k, :len(ix)] = torch.as_tensor(ix, dtype=torch.int64)
    return table, torch.gather(table, 1, pos.reshape(c, -1)).view_as(pos)


def batch_schedule(sizes: Sequence[int], *, epochs: int, batch_size: int,
                   gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Local positions (c, steps, B) and per-sample weights (c, steps, B) for `epochs` shuffled passes.

    Client k runs E·⌈n_k/B⌉ steps; its last batch of each epoch may be short (weights 1/len), then it idles
    (weights 0) until the longest client is done. The permutations are drawn client by client, epoch by epoch
    (`torch.randperm` from `gen`; `chunk_draws` draws the same from a seed) and laid out in numpy, a chunk of equal
    clients in one assignment.
    """
    c, B = len(sizes), batch_size
    per_epoch = [-(-n // B) for n in sizes]
    steps = epochs * max(per_epoch)
    perms = [torch.randperm(n, generator=gen) for n in sizes for _ in range(epochs)]
    drawn = torch.cat(perms).numpy() if perms else np.zeros(0, dtype=np.int64)
    pos = np.zeros((c, steps, B), dtype=np.int64)
    wts = np.zeros((c, steps, B), dtype=np.float32)
    groups = [range(c)] if len(set(sizes)) == 1 else [[k] for k in range(c)]  # equal clients: one assignment
    for ks in groups:
        k0, n = ks[0], sizes[ks[0]]
        pe = per_epoch[k0]
        if pe == 0:
            continue
        off = epochs * sum(sizes[:k0])
        block = pos[k0:k0 + len(ks), :epochs * pe].reshape(len(ks), epochs, pe * B)
        block[:, :, :n] = drawn[off:off + len(ks) * epochs * n].reshape(len(ks), epochs, n)
        wts[k0:k0 + len(ks), :epochs * pe] = np.tile(step_weights(n, B), (epochs, 1))
    return torch.from_numpy(pos), torch.from_numpy(wts)


def train_clients(model, global_params: list[torch.Tensor], masks: dict[int, torch.Tensor], x: torch.Tensor,
                  y: torch.Tensor, client_indices: Sequence[np.ndarray], *, epochs: int, batch_size: int, lr: float,
                  gen: torch.Generator, hook: Optional[StepHook] = None) -> list[torch.Tensor]:
    """Train one chunk of clients from the global model; returns their stacked parameters (c, ...).

    x, y: the whole training set; client_indices: each client's rows of it.
    """
    c = len(client_indices)
    sizes = [len(ix) for ix in client_indices]
    pos, wts = batch_schedule(sizes, epochs=epochs, batch_size=batch_size, gen=gen)
    table, rows = client_rows(client_indices, pos)  # rows: (c, steps, B) rows of x
    width = table.shape[1]
    local = (torch.arange(c).view(c, 1, 1) * width + pos)  # (c, steps, B) rows of x_local
    y = y[rows]  # (c, steps, B) labels
    active_steps = wts.sum(-1) > 0  # (c, steps)
    # per step: rows, labels and weights (c, b) contiguous (as the native kernels read them), b = the most real
    # samples any client of the chunk has in that step; padding beyond it has weight 0 and is not computed (with
    # B = 64 and 600 samples a client, the last batch of an epoch holds 24)
    used = (wts > 0).sum(-1).amax(0).tolist()  # (steps,)
    step_rows, step_y, step_w = ([t[s] if b == batch_size else t[s, :, :b].contiguous() for s, b in enumerate(used)]
                                 for t in (tt.transpose(0, 1).contiguous() for tt in (local, y, wts)))
    params = [p.unsqueeze(0).repeat(c, *([1] * p.dim())).contiguous() for p in global_params]
    mask_list = [masks.get(i) for i in range(len(params))]
    for p, m in zip(params, mask_list):
        if m is not None:
            p.mul_(m)  # inactive weights are 0 (the simulator keeps them so; this makes it a precondition-free fact)
    kernels = native.load()
    # the chunk's own samples, gathered once: each step then reads a few MB that stay in cache instead of random
    # rows of the whole training set (DRAM traffic that two workers on two cores otherwise contend for)
    dt = getattr(model, "compute_dtype", x.dtype)
    if sparse_path.applies(model, mask_list, batch_size, kernels):  # low SET density: active weights only, fp32
        x_local = _gather_local(x, table.view(-1), torch.float32, kernels)
        sp = sparse_path.SparseStep(kernels, model, params, mask_list, batch_size)
        for s in range(pos.shape[1]):
            sp.step(x_local, step_rows[s], step_y[s], step_w[s], hook, active_steps[:, s], lr)
        sp.finish(params)
        return params
    x_local = _gather_local(x, table.view(-1), dt, kernels)
    if getattr(model, "step_f32_applies", lambda k: False)(kernels):  # fp32 compute: native GEMMs, fused epilogues
        _train_f32(model, params, mask_list, x_local.view(len(x_local), -1), step_rows, step_y, step_w, used,
                   active_steps, kernels, hook, lr)
        return params
    if not (getattr(model, "accepts_low", False) and model.compute_dtype == torch.bfloat16):
        kernels = None  # the fused step serves bf16 models that take current bf16 weight copies
    fused = FusedStep(kernels, params, mask_list, lr) if kernels is not None else None
    # eager path only: the masked SGD step as one fused op, fp32 copies of low-precision gradients
    neg_lr_masks = [None if m is None or fused else m * -lr for m in mask_list]
    g32: dict[int, torch.Tensor] = {}
    feat = x.shape[1:]
    xbuf = torch.empty(c * batch_size, *feat, dtype=x_local.dtype)
    row_bytes = x_local[0].numel() * x_local.element_size()
    for s, b in enumerate(used):
        xb = xbuf[: c * b]
        if fused is not None:
            kernels.gather_rows(xb.data_ptr(), x_local.data_ptr(), step_rows[s].data_ptr(), c * b, row_bytes)
            grads = model.grads(params, xb.view(c, b, *feat), step_y[s], step_w[s], low=fused.current_low(),
                                kernels=kernels)
            fused.step(params, grads, hook, active_steps[:, s])
            continue
        torch.index_select(x_local, 0, step_rows[s].view(-1), out=xb)
        grads = model.grads(params, xb.view(c, b, *feat), step_y[s], step_w[s])
        if hook is not None or masks:
            # mixed-precision elementwise ops (bf16 gradient into fp32 weights, bf16 norms) are slow kernels here:
            # cast once, then every following op is fp32
            grads = [g if g.dtype == torch.float32 else g32.setdefault(i, torch.empty(g.shape)).copy_(g)
                     for i, g in enumerate(grads)]
        eager_update(params, grads, mask_list, neg_lr_masks, hook, active_steps[:, s], lr)
    return params


def eager_update(params: list[torch.Tensor], grads: list[torch.Tensor], mask_list: list[Optional[torch.Tensor]],
                 neg_lr_masks: list[Optional[torch.Tensor]], hook: Optional[StepHook], active: torch.Tensor,
                 lr: float) -> None:
    """One local step's update in torch ops (the eager path here, the device path in device.py): plain masked SGD
    (neg_lr_masks: −lr·mask per parameter, None where unmasked) or, with a hook, the masked gradients scaled by
    its per-client coefficients, then its post-step transform."""
    if hook is None:
        for p, g, nm in zip(params, grads, neg_lr_masks):
            if nm is None:
                p.sub_(g, alpha=lr)
            else:
                p.addcmul_(g, nm)  # p − lr·(g ⊙ m): inactive weights stay 0
        return
    for g, m in zip(grads, mask_list):
        if m is not None:
            g.mul_(m)  # clip the gradient that is applied: the masked one
    coef = hook.coefficients(grads, active, lr)
    c = len(params[0])
    for p, g in zip(params, grads):
        p.addcmul_(g, coef.view(c, *([1] * (g.dim() - 1))), value=-1.0)
    hook.after_step(params, mask_list, active)


def _train_f32(model, params, mask_list, x_flat, step_rows, step_y, step_w, used, active_steps, kernels, hook,
               lr: float) -> None:
    """The fp32 native path (models/mlp.py): plain SGD as one native call for the chunk's whole schedule, client by
    client (`train_f32`, F32_GROUP); with a hook, step by step in lockstep, the gradients (`step_f32`) through the
    fused update + noise kernel (fused.py, without bf16 copies)."""
    if hook is None:
        model.train_f32(params, x_flat, step_rows, step_y, step_w, kernels, lr=lr, masks=mask_list, group=F32_GROUP)
        return
    fused = FusedStep(kernels, params, mask_list, lr, keep_low=False)
    for s in range(len(used)):
        grads = model.step_f32(params, x_flat, step_rows[s], step_y[s], step_w[s], kernels)
        fused.step(params, grads, hook, active_steps[:, s])


def _gather_local(x: torch.Tensor, idx: torch.Tensor, dt: torch.dtype, kernels) -> torch.Tensor:
    """x[idx] in the compute dtype: the chunk's samples are cast, not the whole training set (fp32 -> bf16 in the
    same native pass as the gather when the kernels are there)."""
    if kernels is not None and x.dtype == torch.float32 and dt == torch.bfloat16 and x.is_contiguous():
        out = torch.empty((len(idx), *x.shape[1:]), dtype=dt)
        kernels.gather_rows_bf16(out.data_ptr(), x.data_ptr(), idx.data_ptr(), len(idx), x[0].numel())
        return out
    out = x.index_select(0, idx)
    return out if out.dtype == dt else out.to(dt)


@contextlib.contextmanager
def intra_op_threads(n: int):
    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def chunk_threads() -> int:
    """Chunks trained at once: one per core torch may use (FEDEVO_CHUNK_THREADS overrides)."""
    n = env_count("FEDEVO_CHUNK_THREADS")
    return n if n is not None else torch.get_num_threads()


def flat_deltas(local: Sequence[torch.Tensor], global_params: Sequence[torch.Tensor],
                out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(c, D) fp32: each client's update local − global, its parameters flattened in order (one pass, written in
    place into the result: `out` where given, else a new CPU tensor). Each local parameter is (c, *its global
    shape), any strides (a padded bucket's corner: no copy of it is made)."""
    c = len(local[0])
    if out is None:
        out = torch.empty(c, sum(p.numel() for p in global_params), dtype=torch.float32)
    off = 0
    for lp, gp in zip(local, global_params):
        n = gp.numel()
        torch.sub(lp, gp.unsqueeze(0), out=out[:, off:off + n].view(c, *gp.shape))
        off += n
    return out


def train_chunks(model, global_params, masks, x, y, chunks: Sequence[Sequence[np.ndarray]], *, epochs: int,
                 batch_size: int, lr: float, seeds: Sequence[int], hook_for=None,
                 threads: Optional[int] = None, deltas: bool = False) -> Iterator:
    """Train several chunks of clients, yielding each chunk's stacked parameters in order (deltas: its
    `flat_deltas` instead, computed in the chunk's own thread, so the round's main thread does not serialise
    that pass over every update).

    Chunks run in parallel threads, each single-threaded inside: for these small batched matmuls one core per
    chunk beats two cores per op (no synchronisation per op, and the casts and elementwise ops overlap). Each
    chunk has its own generator (`seeds`) and hook (`hook_for(seed)`), so the result does not depend on thread
    timing or count.
    """
    n = len(chunks)
    threads = min(threads or chunk_threads(), n) if n else 1
    # Always one intra-op thread: reductions then run in a fixed order, so the numbers depend on the seed only,
    # not on how many threads or cores there are.

    def work(i):
        if threads > 1:
            # OpenMP's thread count is per calling thread: a new thread starts at the default (all cores), and
            # oneDNN's bf16 matmuls would fork a team per chunk thread (4 busy threads on 2 cores, measured)
            torch.set_num_threads(1)
        gen = torch.Generator().manual_seed(int(seeds[i]))
        hook = hook_for(int(seeds[i])) if hook_for is not None else None
        local = train_clients(model, global_params, masks, x, y, chunks[i], epochs=epochs, batch_size=batch_size,
                              lr=lr, gen=gen, hook=hook)
        return flat_deltas(local, global_params) if deltas else local

    with intra_op_threads(1):
        if threads <= 1:
            for i in range(n):
                yield work(i)
            return
        with ThreadPoolExecutor(threads) as pool:
            yield from pool.map(work, range(n))
