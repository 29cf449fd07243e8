"""Phases of the stacked reference round on a GPU (fedevo/fl/stacked.py), synchronised: the schedule built on the
CPU (the CPU engine's draws), loading the global model, the step loop eager, the updates; then the step loop as a
replayed CUDA graph; the plan and load again with the state reused (as a search's rounds run them, the graph
cache's state) and the whole round as cuda_population.py times it; a CUDA kernel table of one eager loop
(torch.profiler), and two fp32 GEMM ceilings (a batched
product of the round's first-layer shape, one 4096³ product). Ad hoc: what benchmarks/results-2026-11-25-cuda-h100-
population.txt quotes under "phases".

    [FEDEVO_SCHEDULE=device] [FEDEVO_CUDA_TF32=1] [FEDEVO_FIRST_LAYER_WINDOW=4] [FEDEVO_CUDA_COMPILE=1] \
        [FEDEVO_BIAS_IN_WEIGHTS=1] \
        python benchmarks/cuda_round_phases.py
"""
import argparse, sys, time, statistics, torch, numpy as np
argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
sys.path.insert(0, "benchmarks")
from fedevo import hardware
from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl import stacked, stacked_bias, stacked_settings, stacked_window
from fedevo.models import build_model
dev = hardware.device("cuda")
# FEDEVO_SCHEDULE=device: the schedule drawn on the GPU (Member's default); FEDEVO_CUDA_TF32=1: TF32 matmuls
torch.backends.cuda.matmul.allow_tf32 = stacked_settings.tf32_enabled()
print(f"schedule {stacked_settings.schedule_setting()}, TF32 matmuls {torch.backends.cuda.matmul.allow_tf32}, "
      f"first-layer window {stacked_window.steps()}, torch_compile {stacked_settings.compile_enabled()}, "
      f"biases inside the weights {stacked_bias.enabled()}")
K = 100
data = synthetic(n_train=60000, n_test=10, shape=(1, 28, 28), seed=0)
x = data.x_train.to(dev).reshape(60000, -1)
clients = [np.arange(k * 600, (k + 1) * 600) % 60000 for k in range(K)]
chunks = [clients[s:s + 5] for s in range(0, K, 5)]
model = build_model(MLPArch(layers=2, units=200), (1, 28, 28), 10)
params = model.init(torch.Generator().manual_seed(0))
m = stacked.Member(dims=model.dims, params=params, masks={}, lr=0.05, chunks=chunks, seeds=list(range(20)), epochs=5, batch_size=64)
S = lambda: torch.cuda.synchronize()
def ph():
    S(); t0 = time.perf_counter()
    b = stacked._Bucket([m], data.y_train, dev); S(); t1 = time.perf_counter()
    st = {}; b.load(st); S(); t2 = time.perf_counter()
    b.run(st, x); S(); t3 = time.perf_counter()
    d = b.deltas(st); S(); t4 = time.perf_counter()
    return b, st, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)
for _ in range(2): ph()
rs = [ph()[2] for _ in range(5)]
print("phases, a fresh state each time (median s): bucket/plan %.4f load %.4f run-eager %.4f deltas %.4f" % tuple(statistics.median(r[i] for r in rs) for i in range(4)))
# as a round of a search runs it: the state reused (the graph cache's), the step loop a replayed graph
kept = {}
def ph_kept():  # each phase's host time (its launches returned) and its time until the GPU is done
    S(); t0 = time.perf_counter()
    b = stacked._Bucket([m], data.y_train, dev); h1 = time.perf_counter(); S(); t1 = time.perf_counter()
    b.load(kept); h2 = time.perf_counter(); S(); t2 = time.perf_counter()
    return b, t1 - t0, t2 - t1, h1 - t0, h2 - t1
for _ in range(2): ph_kept()
rk = [ph_kept()[1:] for _ in range(7)]
print("phases, the state reused (median s): bucket/plan %.4f load %.4f; of which the host's (until its launches "
      "returned): bucket/plan %.4f load %.4f" % tuple(statistics.median(r[i] for r in rk) for i in range(4)))
def whole():
    S(); t = time.perf_counter()
    (flat,) = stacked.train_members([m], x, data.y_train, device=dev); flat.mean(0); S()
    return time.perf_counter() - t
for _ in range(3): whole()
tw = [whole() for _ in range(7)]
print("the whole round as cuda_population.py times it (train_members, graph replayed; median s): %.4f" % statistics.median(tw))
b, st, _ = ph()
g = torch.cuda.CUDAGraph()
side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side): b.run(st, x)
torch.cuda.current_stream().wait_stream(side)
with torch.cuda.graph(g): b.run(st, x)
ts = []
for _ in range(10):
    S(); t = time.perf_counter(); g.replay(); S(); ts.append(time.perf_counter() - t)
print("graph replay of the run alone: median %.4f min %.4f" % (statistics.median(ts), min(ts)))
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    b.run(st, x); S()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=60))
# fp32 GEMM ceiling: one big bmm
A = torch.randn(100, 64, 784, device=dev); W = torch.randn(100, 784, 200, device=dev)
for _ in range(3): torch.bmm(A, W)
S(); t = time.perf_counter()
for _ in range(50): torch.bmm(A, W)
S(); dt = (time.perf_counter() - t) / 50
print("bmm (100,64,784)x(100,784,200): %.3f ms, %.1f TFLOP/s" % (dt * 1e3, 2 * 100 * 64 * 784 * 200 / dt / 1e12))
A = torch.randn(4096, 4096, device=dev)
for _ in range(3): A @ A
S(); t = time.perf_counter()
for _ in range(20): A @ A
S(); dt = (time.perf_counter() - t) / 20
print("sgemm 4096^3: %.1f TFLOP/s (TF32 %s)" % (2 * 4096**3 / dt / 1e12, torch.backends.cuda.matmul.allow_tf32))
