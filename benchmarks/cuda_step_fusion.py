"""The stacked reference round's step loop (issue #37), as fedevo runs it and three experiments, each replayed as a
CUDA graph (eager on the CPU): (1) −lr folded into the schedule's per-sample weights (δ scaled once at the top: the
per-layer `mul_` and the bias `addcmul_` go), (2) (1) with its pointwise work fused by torch.compile (bias + ReLU
after each forward GEMM; softmax-CE's gradient, its bias sum and update; ReLU' with the next bias sum and update),
the GEMMs left to cuBLAS, (3) (1) with the whole step compiled. fedevo has since adopted (1) (the plan's
per-sample weights × −lr, `_Bucket.__init__`), so 'fold' is no longer a line of its own, and (2)'s pointwise
functions are fedevo's (fl/stacked_fused.py, the `torch_compile` opt-in): 'fused' is `_Bucket.loop` with them
compiled, whatever FEDEVO_CUDA_COMPILE says. Each line: median replay of
the loop, the members' updates' L2 relative difference to fedevo's (rounding: the same products in another
order), then the CUDA kernels of the fastest variant.

Two more experiments (2026-11-27, for the round's last 1.1 ms to issue #37's 13 ms; fedevo's plain loop runs ~27
kernels a step, a third of them on the biases): 'biasgemm', fedevo's plain loop with each bias gradient summed by a
batched GEMM with a row of ones (`bias.baddbmm_(1ᵀ, δ)`: one kernel for the sum and the add); 'augmented', the
biases inside the weights — each layer's (K+4) × (N+4) matrix holds W, the bias as the row that a constant input of
1 meets, and a hidden "ones" unit (weights 0, bias 1: ReLU(1) = 1) that gives the next layer its constant input
(3 zero rows and columns keep the leading dimensions multiples of 4), so each forward is one plain GEMM and each
weight-gradient GEMM updates the bias too: no bias kernels at all.

    python benchmarks/cuda_step_fusion.py [--device cpu --clients 10] [--no-tf32] [--variants fedevo,biasgemm,...]
"""
import argparse
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from fedevo import hardware
from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl import stacked, stacked_fused
from fedevo.models import build_model


def _step(W, bias, x, rows, y, w, C: int, b: int):
    L = len(W)
    hs = [x.index_select(0, rows).view(C, b, -1)]
    for l in range(L):
        z = torch.baddbmm(bias[l], hs[-1], W[l])
        hs.append(z.relu() if l < L - 1 else z)
    delta = (torch.softmax(hs[-1], dim=-1) - F.one_hot(y.view(C, b), hs[-1].shape[-1]).to(x.dtype)) * w.view(C, b, 1)
    for l in range(L - 1, -1, -1):
        nd = None
        if l > 0:
            nd = torch.where(hs[l] > 0, torch.bmm(delta, W[l].transpose(1, 2)), 0.0)
        W[l].baddbmm_(hs[l].transpose(1, 2), delta)
        bias[l].add_(delta.sum(1, keepdim=True))
        delta = nd


def _plain_step(W, bias, x, rows, y, w, minus, ones, C: int, b: int):
    """fedevo's plain loop's step (`_Bucket.loop` without window, compile or masks; δ × −lr from the plan's weights),
    each bias gradient a batched GEMM with ones (`ones`: (C, 1, the widest step's samples))."""
    L = len(W)
    hs = [x.index_select(0, rows).view(C, b, -1)]
    for l in range(L):
        z = torch.baddbmm(bias[l], hs[-1], W[l])
        if l < L - 1:
            z.relu_()
        hs.append(z)
    delta = stacked._logits_grad(hs[-1], y.view(C, b), w.view(C, b, 1), minus)
    bias[L - 1].baddbmm_(ones[:, :, :b], delta)
    for l in range(L - 1, -1, -1):
        nd = None
        if l > 0:
            nd = torch.ops.aten.threshold_backward(torch.bmm(delta, W[l].transpose(1, 2)), hs[l], 0)
            bias[l - 1].baddbmm_(ones[:, :, :b], nd)
        W[l].baddbmm_(hs[l].transpose(1, 2), delta)
        delta = nd


PAD = 4  # the augmented layout's extra rows and columns: the constant input (the bias row) and 3 zeros


def augment(W, bias):
    """Each layer's (C, K+PAD, N') weights with its bias as row K; hidden layers (N' = N+PAD) with the ones unit at
    column N (weights 0, bias 1); the last layer's columns as they are."""
    L = len(W)
    A = []
    for l in range(L):
        C, K, N = W[l].shape
        n = N + PAD if l < L - 1 else N
        a = torch.zeros(C, K + PAD, n, device=W[l].device, dtype=W[l].dtype)
        a[:, :K, :N] = W[l]
        a[:, K, :N] = bias[l][:, 0]
        if l < L - 1:
            a[:, K, N] = 1.0
        A.append(a)
    return A


def unaugment(A, W, bias):
    for a, Wl, bl in zip(A, W, bias):
        K, N = Wl.shape[1:]
        Wl.copy_(a[:, :K, :N])
        bl[:, 0].copy_(a[:, K, :N])


def _augmented_step(A, dims, x_aug, rows, y, w, minus, C: int, b: int):
    """One step on the augmented layout: each forward one bmm (the bias row meets the constant input; a hidden
    layer's ones unit makes the next one's), the input gradients from the real rows and columns only, each
    weight-gradient GEMM into the real columns (the bias row with them)."""
    L = len(A)
    hs = [x_aug.index_select(0, rows).view(C, b, -1)]
    for l in range(L):
        z = torch.bmm(hs[-1], A[l])
        if l < L - 1:
            z.relu_()
        hs.append(z)
    delta = stacked._logits_grad(hs[-1], y.view(C, b), w.view(C, b, 1), minus)
    for l in range(L - 1, -1, -1):
        K, N = dims[l], dims[l + 1]
        nd = None
        if l > 0:
            g = torch.bmm(delta, A[l][:, :K, :N].transpose(1, 2))
            nd = torch.ops.aten.threshold_backward(g, hs[l][:, :, :K], 0)
        A[l][:, :, :N].baddbmm_(hs[l].transpose(1, 2), delta)
        delta = nd


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--no-tf32", action="store_true")
    ap.add_argument("--variants", default="fedevo,fused,step,biasgemm,augmented")
    a = ap.parse_args()
    dev = hardware.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = not a.no_tf32
        print(torch.cuda.get_device_name(dev), "torch", torch.__version__, "TF32", not a.no_tf32)
    K = a.clients
    data = synthetic(n_train=600 * K, n_test=10, shape=(1, 28, 28), seed=0)
    x = data.x_train.to(dev).reshape(600 * K, -1)
    clients = [np.arange(k * 600, (k + 1) * 600) for k in range(K)]
    chunks = [clients[s:s + 5] for s in range(0, K, 5)]
    model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
    params = model.init(torch.Generator().manual_seed(0))
    m = stacked.Member(dims=model.dims, params=params, masks={}, lr=0.05, chunks=chunks,
                       seeds=list(range(len(chunks))), epochs=5, batch_size=64, schedule="device")

    def step_loop(self, state, x, fn=None):
        L = len(self.dims) - 1
        W = [state[f"W{l}"] for l in range(L)]
        bias = [state[f"b{l}"] for l in range(L)]
        off = 0
        for b in self.used:
            n = self.C * b
            fn(W, bias, x, state["rows"][off:off + n], state["y"][off:off + n], state["w"][off:off + n], self.C, b)
            off += n

    def plain_loop(self, state, x):
        L = len(self.dims) - 1
        W = [state[f"W{l}"] for l in range(L)]
        bias = [state[f"b{l}"] for l in range(L)]
        minus = stacked._minus_ones(self.C, self.used, self.device)
        ones = torch.ones(self.C, 1, max(self.used), device=self.device)
        off = 0
        for b in self.used:
            n = self.C * b
            _plain_step(W, bias, x, state["rows"][off:off + n], state["y"][off:off + n], state["w"][off:off + n],
                        minus, ones, self.C, b)
            off += n

    x_aug = torch.cat([x, torch.ones(x.shape[0], 1, device=dev), torch.zeros(x.shape[0], PAD - 1, device=dev)], 1)

    def augmented_loop(self, A, x):
        minus = stacked._minus_ones(self.C, self.used, self.device)
        off = 0
        for b in self.used:
            n = self.C * b
            _augmented_step(A, self.dims, x_aug, self.state["rows"][off:off + n], self.state["y"][off:off + n],
                            self.state["w"][off:off + n], minus, self.C, b)
            off += n

    kw = dict(fullgraph=True, dynamic=False)
    variants = {
        "fedevo": stacked._Bucket.run,
        "fused": lambda s, st, x: s.loop(st, x, (cfwd, ctop, cmid)),
        "step": lambda s, st, x: step_loop(s, st, x, fn=cstep),
        "biasgemm": plain_loop,
        "augmented": "augmented",
    }
    ctop = cmid = cfwd = cstep = None

    def replay(fn):
        b = stacked._Bucket([m], data.y_train, dev)  # its plan's weights × −lr per client (as fedevo trains)
        st = {}
        b.load(st)
        if fn == "augmented":  # the loop on its own state (made once, outside the timed loop), written back after
            L = len(b.dims) - 1
            W, bias = [st[f"W{l}"] for l in range(L)], [st[f"b{l}"] for l in range(L)]
            A = augment(W, bias)
            b.state = st
            aug = {f"A{l}": a for l, a in enumerate(A)}
            t, first, _, keep = _replay_on(lambda bb, state, xx: augmented_loop(bb, A, xx), b, aug)
            unaugment(A, W, bias)
            return t, first, b.deltas(st)[0], keep
        t, first, _, keep = _replay_on(fn, b, st)
        return t, first, b.deltas(st)[0], keep

    def _replay_on(fn, b, st):
        snap = {k: v.clone() for k, v in st.items()}
        t0 = time.perf_counter()
        if cuda:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn(b, st, x)
                fn(b, st, x)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn(b, st, x)
            go = g.replay
        else:
            go = lambda: fn(b, st, x)  # noqa: E731
            go()
        first = time.perf_counter() - t0
        ts = []
        for _ in range(10):
            for k, v in snap.items():
                st[k].copy_(v)
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            go()
            if cuda:
                torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        for k, v in snap.items():
            st[k].copy_(v)
        go()
        return statistics.median(ts), first, None, (lambda: fn(b, st, x))

    base, best = None, None
    for name in a.variants.split(","):
        if name == "fused" and ctop is None:
            ctop, cmid, cfwd = (torch.compile(f, **kw) for f in (stacked_fused.top, stacked_fused.mid,
                                                                 stacked_fused.fwd))
        if name == "step" and cstep is None:
            cstep = torch.compile(_step, **kw)
        try:
            t, first, d, keep = replay(variants[name])
        except Exception as e:  # noqa: BLE001 - an experiment: say why and go on
            print(f"{name:<8} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        if base is None:
            base = d
        rel = float((d - base).norm() / base.norm())
        print(f"{name:<8} replay median {t * 1e3:8.2f} ms  (first call incl. compile/capture {first:6.1f} s)  "
              f"L2 rel diff to the first {rel:.1e}", flush=True)
        if best is None or t < best[0]:
            best = (t, name, keep)
    if cuda and best is not None:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            best[2]()
            torch.cuda.synchronize()
        print(f"kernels of '{best[1]}' (one loop, eager):")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=16, max_name_column_width=70))


if __name__ == "__main__":
    main()
