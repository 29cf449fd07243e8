"""Peak memory of ULDP-FED recall at the seed-000 MNIST scale (issue #3: must fit in ≤ 4 GB).

1000 users, q = 0.1 (100 per round), MLP 784-200-200-10 (199k parameters), `update` mechanism with recall
(window of 4 float16 updates per user), rounds until every user has had several participations. Synthetic
28×28 data stands in for MNIST (memory does not depend on the values).

    python benchmarks/recall_memory.py [--rounds 60] [--window 4]
"""

from __future__ import annotations

import argparse
import resource
import time

import fedevo  # noqa: F401
from fedevo.config import DataConfig, MLPArch, PrivacyConfig, SimConfig
from fedevo.fl import simulate as sim_mod
from fedevo.privacy.recall import RecallStore


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--sigma", type=float, default=0.01, help="noise multiplier (large σ makes this model diverge)")
    a = ap.parse_args(argv)
    stores = []
    orig = RecallStore.__init__

    def spy(self, *args, **kw):
        orig(self, *args, **kw)
        stores.append(self)

    RecallStore.__init__ = spy
    from fedevo.data import datasets

    datasets.load_dataset.cache_clear()
    real = datasets.load_dataset
    datasets.load_dataset = lambda name, d=None, dl=False: datasets.synthetic(n_train=60000, n_test=1000,
                                                                              shape=(1, 28, 28))
    cfg = SimConfig(data=DataConfig(dataset="synthetic", partition="shards", clients=a.clients, shards_per_client=2,
                                    shard_size=300),
                    arch=MLPArch(layers=2, units=200), rounds=a.rounds, epochs=1, batch_size=64, lr=0.05,
                    participation=0.1, upload_loss=0.0,
                    privacy=PrivacyConfig(mechanism="update", sigma=a.sigma, clip=2.0, beta=0.02, recall=True, tau=0.5))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    t = time.perf_counter()
    res = sim_mod.simulate(cfg, seed=0)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    store = stores[-1]
    worst = RecallStore.worst_case_nbytes(num_clients=a.clients, num_params=store.num_params)
    print(f"{a.clients} users, q=0.1, {a.rounds} rounds, {store.num_params} parameters, status {res.status}, "
          f"{wall:.0f} s")
    print(f"recall store: {len(store)} users hold history, {store.nbytes / 1e9:.2f} GB now, worst case "
          f"{worst / 1e9:.2f} GB (every user with a full window); recalls {res.privacy.get('recalls')}")
    print(f"peak RSS: {rss:.2f} GB (before the run {rss0:.2f} GB)")
    datasets.load_dataset = real


if __name__ == "__main__":
    main()
