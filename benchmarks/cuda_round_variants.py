"""Where the last milliseconds of the stacked reference round could come from (issue #37): graph replays of its
step loop (schedule drawn on the GPU, TF32) as fedevo runs it, against cuBLASLt preferred over cuBLAS. Ad hoc: what
benchmarks/results-2026-11-25-cuda-h100-round-opt-ins.txt quotes under "variants". Its other experiment then, −lr
folded into the schedule's per-sample weights (0.8 ms less), is fedevo's loop since 2026-11-26 (`_Bucket.loop`);
benchmarks/cuda_step_fusion.py times the loops after it.

    python benchmarks/cuda_round_variants.py
"""
import argparse, statistics, sys, time
argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
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


def replay(fn):
    b = stacked._Bucket([m], data.y_train, dev)
    st = {}
    b.load(st)
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
try:
    torch.backends.cuda.preferred_blas_library("cublaslt")
    t, d = replay(stacked._Bucket.run)
    print(f"cuBLASLt preferred: {t * 1e3:.2f} ms; L2 rel diff {float((d - base).norm() / base.norm()):.1e}")
except Exception as e:  # noqa: BLE001
    print(f"cuBLASLt: {type(e).__name__}: {e}", file=sys.stderr)
