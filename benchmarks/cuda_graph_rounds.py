"""A long run on a GPU with the stacked trainer's CUDA graphs (fl/stacked.py: buckets with GRAPH_ROUNDS rounds left
or more captured, their shapes rounded up so that they recur) against the same run eager (FEDEVO_CUDA_GRAPHS=0),
side by side in one process: wall seconds of `simulate` (median of --repeats, alternating), the objectives (within
the documented tolerance: the rounded shapes change fp32 rounding), and how many bucket runs were replays.

The run: --problem's defaults with --params (JSON) for --rounds rounds (a retrain's length), fp32, on CUDA.
Exits before any work where torch sees no GPU.

    python benchmarks/cuda_graph_rounds.py [--problem fashion_mlp_dp] [--params '{"participation": 1.0}']
        [--rounds 40] [--repeats 3] [--data-dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402
from side_by_side import alternate, outcome  # noqa: E402

from fedevo.fl import stacked_graphs  # noqa: E402
from fedevo.fl.simulate import simulate  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--params", default='{"trust": "central", "participation": 1.0}')
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("cuda_graph_rounds.py: torch sees no GPU; nothing measured", file=sys.stderr)
        return 1
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    print(f"GPU: {props.name}; torch {torch.__version__}, CUDA {torch.version.cuda}; CPU: {cpu()}")
    problem = load_problem(a.problem)
    params = dict(json.loads(a.params), precision="fp32", device="cuda")
    cfg = problem.sim_config(params, rounds=a.rounds, data_dir=a.data_dir)
    print(f"{a.problem} {params}, {a.rounds} rounds; GRAPH_ROUNDS {stacked_graphs.GRAPH_ROUNDS}; "
          f"median of {a.repeats}")
    replays = []
    real = stacked_graphs.GraphCache.run

    def counted(self, bucket, x, before_capture=None):
        replays.append((bucket.key(), x.data_ptr(), x.shape) in self.graphs)
        return real(self, bucket, x, before_capture)
    stacked_graphs.GraphCache.run = counted
    simulate(cfg.with_(rounds=2), seed=0)  # warm-up: data read, kernels built
    ways = {"eager (FEDEVO_CUDA_GRAPHS=0)": "0", "graphs (default)": "1"}
    current: list = [None]
    counts: dict = {}

    def use(name):
        def setup():
            os.environ["FEDEVO_CUDA_GRAPHS"] = ways[name]
            stacked_graphs.CACHES.clear()
            replays.clear()
            current[0] = name
            torch.cuda.synchronize(dev)
        return setup

    def once():
        out = outcome(simulate(cfg, seed=1))
        torch.cuda.synchronize(dev)
        counts[current[0]] = (sum(replays), len(replays))
        return out
    times: dict = {}
    try:
        med, last = alternate({name: use(name) for name in ways}, once, a.repeats, times=times)
    finally:
        os.environ.pop("FEDEVO_CUDA_GRAPHS", None)
    base = med["eager (FEDEVO_CUDA_GRAPHS=0)"]
    print(f"{'way':<32}{'wall s':>8}{'min':>8}{'max':>8}{'vs eager':>10}  replays/bucket runs  error")
    for name in ways:
        print(f"{name:<32}{med[name]:8.3f}{min(times[name]):8.3f}{max(times[name]):8.3f}{base / med[name]:9.2f}x"
              f"  {counts[name][0]:>7}/{counts[name][1]:<12}{last[name][0]:.4f}")
    e, g = last["eager (FEDEVO_CUDA_GRAPHS=0)"], last["graphs (default)"]
    print(f"comm, ε, Ω, status equal: {e[1:] == g[1:]}; |Δ error| {abs(e[0] - g[0]):.2e} (tolerance 0.02)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
