"""The divergence check (`fedevo/fl/finite.py`'s `all_finite`: one aminmax reduction) against what it replaced
(`torch.isfinite(t).all()`), inside whole evaluations, side by side in one process.

Each configuration is evaluated (`fedevo.evaluate`, the CPU engine) with the check as it is and with the old check
patched into the simulator's modules, in alternating order, --repeats times; the results must be equal (the two
checks answer alike, tests/fl/test_finite.py). Prints wall seconds (median of the repeats) and the ratio.

    python benchmarks/finite_check.py [--repeats 3] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import fedevo  # noqa: E402
from fedevo.fl import finite, population, rounds, simulate  # noqa: E402
from machine import cpu  # noqa: E402
from side_by_side import alternate, outcome  # noqa: E402

CONFIGS = [  # (problem, params): the default problem, and fashion_mlp_dp's default (its MLP 784-200-200-10)
    ("digits_mlp", {}),
    ("fashion_mlp_dp", {"trust": "central", "participation": 0.3}),
    ("fashion_mlp_dp", {"trust": "secagg", "participation": 0.3}),
]


def old_check(t: torch.Tensor) -> bool:
    return bool(torch.isfinite(t).all())


def use(check) -> None:
    for mod in (rounds, simulate, population):
        mod.all_finite = check


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"CPU: {cpu()}; torch {torch.__version__}, {torch.get_num_threads()} threads; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'problem':<16}{'params':<46}{'isfinite().all() s':>19}{'all_finite s':>14}{'ratio':>7}  equal")
    for problem, params in CONFIGS:
        fedevo.evaluate(problem, params, seed=0, rounds=1)  # warm-up: data read, kernels built
        med, res = alternate({"old": lambda: use(old_check), "new": lambda: use(finite.all_finite)},
                             lambda: outcome(fedevo.evaluate(problem, params, seed=1, rounds=a.rounds)), a.repeats)
        use(finite.all_finite)
        old, new = med["old"], med["new"]
        print(f"{problem:<16}{str(params):<46}{old:19.3f}{new:14.3f}{old / new:7.2f}  {res['old'] == res['new']}",
              flush=True)
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
