"""Where the last milliseconds of the stacked reference round could come from (issue #37): graph replays of its
step loop (schedule drawn on the GPU, TF32) as fedevo runs it, against two experiments that are not fedevo code:
(1) −lr folded into the schedule's per-sample weights once (δ scaled from the top: the per-layer `mul_` and the
bias `addcmul_` go; the same products up to rounding), (2) cuBLASLt preferred over cuBLAS. Ad hoc: what
benchmarks/results-2026-11-25-cuda-h100-round-opt-ins.txt quotes under "variants".

    python benchmarks/cuda_round_variants.py
"""
import statistics, sys, time
import numpy as np
import torch
from fedevo import hardware
from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl import stacked
from fedevo.models import build_model

dev = hardware.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = True
data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
x = data.x_train.to(dev).reshape(60000, -1)
clients = [np.arange(k * 600, (k + 1) * 600) for k in range(100)]
chunks = [clients[s:s + 5] for s in range(0, 100, 5)]
model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
params = model.init(torch.Generator().manual_seed(0))
m = stacked.Member(dims=model.dims, params=params, masks={}, lr=0.05, chunks=chunks, seeds=list(range(20)),
                   epochs=5, batch_size=64, schedule="device")


def run_scaled(self, state, x):
    """_Bucket.run with state['w'] already multiplied by −lr per client (linear: δ scaled once at the top)."""
    L = len(self.dims) - 1
    C = self.C
    W = [state[f"W{l}"] for l in range(L)]
    bias = [state[f"b{l}"] for l in range(L)]
    rows, ys, ws = state["rows"], state["y"], state["w"]
    off = 0
    for b in self.used:
        n = C * b
        hs = [x.index_select(0, rows[off:off + n]).view(C, b, -1)]
        for l in range(L):
            z = torch.baddbmm(bias[l], hs[-1], W[l])
            if l < L - 1:
                z.relu_()
            hs.append(z)
        delta = torch.softmax(hs[-1], dim=-1)
        delta.scatter_add_(2, ys[off:off + n].view(C, b, 1), torch.full((C, b, 1), -1.0, device=x.device))
        delta.mul_(ws[off:off + n].view(C, b, 1))
        off += n
        for l in range(L - 1, -1, -1):
            nd = None
            if l > 0:
                nd = torch.ops.aten.threshold_backward(torch.bmm(delta, W[l].transpose(1, 2)), hs[l], 0)
            W[l].baddbmm_(hs[l].transpose(1, 2), delta)
            bias[l].add_(delta.sum(1, keepdim=True))
            delta = nd


def replay(fn, scale=False):
    b = stacked._Bucket([m], data.y_train, dev)
    st = {}
    b.load(st)
    if scale:  # ws · (−lr) per client, in the plan's flat layout
        per = torch.cat([st["neg_lr"].view(-1, 1).expand(-1, u).reshape(-1) for u in b.used])
        st["w"].mul_(per)
    snap = {k: v.clone() for k, v in st.items()}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(b, st, x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(b, st, x)
    ts = []
    for _ in range(10):
        for k, v in snap.items():
            st[k].copy_(v)
        torch.cuda.synchronize()
        t = time.perf_counter()
        g.replay()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t)
    for k, v in snap.items():
        st[k].copy_(v)
    g.replay()
    return statistics.median(ts), b.deltas(st)[0]


base_t, base = replay(stacked._Bucket.run)
print(f"graph replay, fedevo's loop (device schedule, TF32): {base_t * 1e3:.2f} ms")
t, d = replay(run_scaled, scale=True)
print(f"(1) -lr folded into the weights: {t * 1e3:.2f} ms; L2 rel diff to fedevo's {float((d - base).norm() / base.norm()):.1e}")
try:
    torch.backends.cuda.preferred_blas_library("cublaslt")
    t, d = replay(stacked._Bucket.run)
    print(f"(2) cuBLASLt preferred: {t * 1e3:.2f} ms; L2 rel diff {float((d - base).norm() / base.norm()):.1e}")
    t, d = replay(run_scaled, scale=True)
    print(f"(1)+(2): {t * 1e3:.2f} ms; L2 rel diff {float((d - base).norm() / base.norm()):.1e}")
except Exception as e:  # noqa: BLE001
    print(f"(2) cuBLASLt: {type(e).__name__}: {e}", file=sys.stderr)
