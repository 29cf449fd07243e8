"""The SET prune's sort (`fedevo/models/sparse.py`: which active weights have the smallest |update|, ties broken at
random) three ways, side by side in one process, single-threaded, on |update| with ties (a fraction of zeros and
a fraction of equal non-zero sizes, as sign-based updates give) and without:

* noise: argsort(|update| + 1e-12·max·rand), before 2026-11-28 (equal non-zero sizes pruned as one block);
* perm: argsort(rand) (here stable), then a stable argsort of |update| over that order (0348967);
* keys: one stable argsort of int64 keys, |update|'s bits then rand's (`prune_keys`, now).

Prints the median milliseconds of --repeats and each one's ratio to `noise`, and whether `perm` and `keys` give the
same order (they must: both sort by |update|, then by the same random draw, then by index).

    python benchmarks/prune_sort.py [--repeats 7] [--sizes 100000 2000000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from fedevo.models.sparse import prune_keys  # noqa: E402
from machine import cpu  # noqa: E402


def noise(mag, r):
    return torch.argsort(mag + 1e-12 * r * (mag.max() + 1e-30))


def perm(mag, r):
    p = torch.argsort(r, stable=True)
    return p[torch.argsort(mag[p], stable=True)]


def keys(mag, r):
    return torch.argsort(prune_keys(mag, r), stable=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 2_000_000])
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"CPU: {cpu()}; torch {torch.__version__}, 1 thread; load average {os.getloadavg()[0]:.1f}")
    print(f"{'n':>9} {'ties':>5} {'noise ms':>9} {'perm ms':>8} {'keys ms':>8} {'perm/noise':>10} {'keys/noise':>10}"
          "  perm == keys")
    variants = {"noise": noise, "perm": perm, "keys": keys}
    for n in a.sizes:
        for ties in (False, True):
            g = torch.Generator().manual_seed(n)
            mag = torch.randn(n, generator=g).abs()
            if ties:  # a fifth zero, a fifth at one size
                mag[: n // 5] = 0.0
                mag[n // 5: 2 * n // 5] = 0.05
                mag = mag[torch.randperm(n, generator=g)]
            r = torch.rand(n, generator=g)
            times = {k: [] for k in variants}
            for i in range(a.repeats):
                for k in (list(variants) if i % 2 == 0 else list(variants)[::-1]):
                    t = time.perf_counter()
                    variants[k](mag, r)
                    times[k].append(time.perf_counter() - t)
            ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
            same = bool(torch.equal(perm(mag, r), keys(mag, r)))
            print(f"{n:>9} {str(ties):>5} {ms['noise']:9.1f} {ms['perm']:8.1f} {ms['keys']:8.1f} "
                  f"{ms['perm'] / ms['noise']:10.2f} {ms['keys'] / ms['noise']:10.2f}  {same}", flush=True)
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
