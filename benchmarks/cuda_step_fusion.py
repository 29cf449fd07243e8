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

    python benchmarks/cuda_step_fusion.py [--device cpu --clients 10] [--no-tf32]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--no-tf32", action="store_true")
    ap.add_argument("--variants", default="fedevo,fused,step")
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

    kw = dict(fullgraph=True, dynamic=False)
    variants = {
        "fedevo": stacked._Bucket.run,
        "fused": lambda s, st, x: s.loop(st, x, (cfwd, ctop, cmid)),
        "step": lambda s, st, x: step_loop(s, st, x, fn=cstep),
    }
    ctop = cmid = cfwd = cstep = None

    def replay(fn):
        b = stacked._Bucket([m], data.y_train, dev)  # its plan's weights × −lr per client (as fedevo trains)
        st = {}
        b.load(st)
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
        return statistics.median(ts), first, b.deltas(st)[0], (lambda: fn(b, st, x))

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
