"""pfl-research's round on the reference workload, for issue #16's "≥ 2.5× pfl-research's 2-process round".

Runs in its own environment (pfl is not a fedevo dependency):

    python -m venv /tmp/pflvenv && /tmp/pflvenv/bin/pip install "pfl[pytorch]==0.6.0" "torch==2.14.1"
    /tmp/pflvenv/bin/torchrun --nproc_per_node 2 benchmarks/pfl_round.py --threads 1   # 2 worker processes
    /tmp/pflvenv/bin/python benchmarks/pfl_round.py --threads 2                        # 1 process, 2 threads
    /tmp/pflvenv/bin/torchrun --nproc_per_node 2 benchmarks/pfl_round.py --threads 1 --rounds 5 --paired

Reference workload (benchmarks/round_speed.py): MLP 784-200-200-10 (fp32), K = 100 clients × 600 samples, B = 64,
E = 5, lr 0.05, every client trains every round (cohort 100), FedAvg with central SGD lr 1; synthetic 28×28 data
(values do not affect speed). pfl's SimulatedBackend splits the cohort over the worker processes (torch.distributed
with gloo under torchrun) and all-reduces the summed updates. Prints the seconds of each central iteration; the
first (warm-up) is dropped, the median of the rest reported. Compare with `round_speed.py`'s fp32 round run on the
same machine in the same quarter of an hour.

--paired: also each round over the machine's fp32 matmul floor at the rate measured right before and after it
(rank 0 runs back-to-back 1536³ matmuls on 2 threads for half a second between rounds while the other ranks wait
at a barrier; the windows are not counted in the rounds), the same measure as `round_speed.py`'s paired ratio: on
a VM whose speed drifts between runs, pfl's and fedevo's rounds in floor units compare where their seconds do not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4, help="central iterations (the first is a warm-up)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--paired", action="store_true", help="each round over the matmul floor measured around it")
    a = ap.parse_args(argv)

    import numpy as np
    import torch
    import torch.nn.functional as F
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.callback.base import TrainingProcessCallback
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.data.sampling import get_user_sampler
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.internal.ops.selector import get_default_framework_module
    from pfl.metrics import Metrics, Weighted
    from pfl.model.pytorch import PyTorchModel

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2, self.l3 = torch.nn.Linear(784, 200), torch.nn.Linear(200, 200), torch.nn.Linear(200, 10)

        def forward(self, x):
            return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))

        def loss(self, x, y, eval=False):
            return F.cross_entropy(self(x), y.long())

        @torch.no_grad()
        def metrics(self, x, y, eval=False):
            n = len(y)
            return {"loss": Weighted(float(F.cross_entropy(self(x), y.long(), reduction="sum")), n)}

    rng = np.random.default_rng(0)
    users = {u: [rng.standard_normal((600, 784), dtype=np.float32), rng.integers(0, 10, 600)]
             for u in range(a.clients)}
    data = FederatedDataset.from_slices(users, get_user_sampler("minimize_reuse", list(range(a.clients))))
    net = MLP()
    model = PyTorchModel(model=net, local_optimizer_create=torch.optim.SGD,
                         central_optimizer=torch.optim.SGD(net.parameters(), lr=1.0))
    times: list[float] = []  # (start, end) of each round
    rates: list[float] = []  # matmul rate (FLOP/s, 2 threads) before the first round and after each

    def window(seconds=0.5, n=1536) -> None:
        """round_speed.window_rate's measure, written here because pfl's venv has no fedevo to import it from."""
        if a.paired:
            if torch.distributed.is_initialized() and torch.distributed.get_rank() != 0:
                torch.distributed.barrier()
                return
            m1, m2, prev = torch.randn(n, n), torch.randn(n, n), torch.get_num_threads()
            torch.set_num_threads(2)
            torch.mm(m1, m2)
            calls, t0 = 0, time.perf_counter()
            while calls == 0 or time.perf_counter() - t0 < seconds:
                torch.mm(m1, m2)
                calls += 1
            rates.append(2.0 * n ** 3 * calls / (time.perf_counter() - t0))
            torch.set_num_threads(prev)
            if torch.distributed.is_initialized():
                torch.distributed.barrier()

    class Timer(TrainingProcessCallback):
        def on_train_begin(self, *, model):
            window()
            times.append(time.perf_counter())
            return Metrics()

        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            times.append(time.perf_counter())
            window()
            times.append(time.perf_counter())
            return False, Metrics()

    backend = SimulatedBackend(training_data=data, val_data=data)
    FederatedAveraging().run(
        algorithm_params=NNAlgorithmParams(central_num_iterations=a.rounds, evaluation_frequency=10**9,
                                           train_cohort_size=a.clients, val_cohort_size=0),
        backend=backend, model=model,
        model_train_params=NNTrainHyperParams(local_num_epochs=5, local_learning_rate=0.05, local_batch_size=64),
        model_eval_params=NNEvalHyperParams(local_batch_size=600), callbacks=[Timer()])
    ops = get_default_framework_module()
    rank, world = ops.distributed.global_rank, ops.distributed.world_size
    per = [b - a_ for a_, b in zip(times[0::2], times[1::2])]
    if rank == 0:
        print(f"pfl {__import__('pfl').__version__}, torch {torch.__version__}; {world} process(es) x {a.threads} "
              f"thread(s); K = {a.clients}; CPU {os.cpu_count()} logical")
        print("seconds per central iteration:", " ".join(f"{t:.2f}" for t in per))
        print(f"median after warm-up: {statistics.median(per[1:]):.2f} s")
        if a.paired:
            # the round's FLOPs as round_speed.round_flops counts them: per sample and layer the forward product and
            # the weight gradient, past the first layer the input gradient (2 FLOPs a multiply-add)
            sizes = [m.in_features * m.out_features for m in (net.l1, net.l2, net.l3)]
            flops = 2.0 * a.clients * 600 * 5 * (2 * sum(sizes) + sum(sizes[1:]))
            ratios = [t * (r0 + r1) / 2 / flops for t, r0, r1 in zip(per, rates, rates[1:])][1:]
            print(f"paired (each round over the fp32 matmul floor at the rate around it, {flops / 1e9:.1f} GFLOP): "
                  f"median {statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x; matmul "
                  f"rates {', '.join(f'{r / 1e9:.0f}' for r in rates)} GFLOP/s")


if __name__ == "__main__":
    main()
