"""The PLD accountant's discretisation chosen from a quick RDP bound (`accounting._pld_interval_of`: a subset of
the RDP orders, the full bound only where ε may exceed 10) against always computing the full RDP bound, inside
whole evaluations, side by side in one process.

Each configuration is evaluated (`fedevo.evaluate`) with the quick choice and with the full bound patched in,
alternating, --repeats times; ε and every objective must be equal (the same interval: tests/privacy/
test_accounting.py). Prints wall seconds (median) and the ratio; the accountant is most of a cheap evaluation.

    python benchmarks/accountant_hint.py [--repeats 5]
    python benchmarks/accountant_hint.py --grid     # the intervals alone over 1800 (z, q, steps, δ): 0 must differ
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fedevo  # noqa: E402
from fedevo.privacy import accounting  # noqa: E402
from machine import cpu  # noqa: E402
from side_by_side import alternate, outcome  # noqa: E402

CONFIGS = [  # the default problem (central trust, Poisson sampling: the PLD accountant) and fashion_mlp_dp's
    ("digits_mlp", {}),
    ("digits_mlp", {"sigma": 0.4, "participation": 0.9}),
    ("digits_mlp", {"sigma": 3.0}),
    ("fashion_mlp_dp", {"trust": "central", "layers": 1, "units": 60, "participation": 0.1}),
    ("fashion_mlp_dp", {"trust": "central"}),
]
QUICK = accounting._pld_interval_of


def full(event, delta):
    eps = accounting.eps_rdp(event=event, delta=delta)
    return accounting._pld_interval(eps), eps


def grid() -> None:
    """The quick and the full interval over a grid of z 0.05-100 (25, log), q 1e-4-0.99 (6), steps 1-500 (4),
    δ 1e-10-1e-5 (3)."""
    import itertools

    import dp_accounting as dpa
    import numpy as np

    cases = list(itertools.product(np.logspace(-1.3, 2, 25), [1e-4, 1e-3, 0.01, 0.1, 0.5, 0.99], [1, 5, 50, 500],
                                   [1e-10, 1e-7, 1e-5]))
    tq = tf = 0.0
    differ = []
    for z, q, n, d in cases:
        event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(float(z))), n)
        t = time.perf_counter()
        a = QUICK(event, d)[0]
        tq += time.perf_counter() - t
        t = time.perf_counter()
        b = full(event, d)[0]
        tf += time.perf_counter() - t
        if a != b:
            differ.append((float(z), q, n, d, a, b))
    print(f"{len(cases)} cases, {len(differ)} intervals differ {differ[:5]}; quick {tq:.1f} s, full {tf:.1f} s")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--grid", action="store_true", help="only the grid check of the intervals")
    a = ap.parse_args(argv)
    if a.grid:
        return grid()
    print(f"CPU: {cpu()}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'problem':<16}{'params':<70}{'full s':>8}{'quick s':>9}{'ratio':>7}  ε      equal")
    for problem, params in CONFIGS:
        fedevo.evaluate(problem, params, seed=0, rounds=1)  # warm-up: data read, kernels built
        med, res = alternate({"full": lambda: setattr(accounting, "_pld_interval_of", full),
                              "quick": lambda: setattr(accounting, "_pld_interval_of", QUICK)},
                             lambda: outcome(fedevo.evaluate(problem, params, seed=1)), a.repeats)
        accounting._pld_interval_of = QUICK
        f, q = med["full"], med["quick"]
        print(f"{problem:<16}{str(params):<70}{f:8.3f}{q:9.3f}{f / q:7.2f}  {res['quick'][2]:<7.3g}"
              f"{res['full'] == res['quick']}", flush=True)
    print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
