"""SignDS's accountant (`privacy/signds.py`, `eps_signds`): ε of m pure-ε uploads from dp-accounting's pessimistic
PLD of an ε-DP mechanism, composed m times by dp-accounting's FFT self-composition (the way before) against the
same two-point PLD composed in closed form (a binomial, what eps_signds does now), side by side in one process,
the two ε printed together. The FFT's memory grows with m·ε/Δ (Δ = min(1e-4, ε/1000)): m = 10⁵ at ε = 1 needed
more than 15 GB, so `--old-max` (default 10⁴) caps the m it is run at.

    python benchmarks/signds_accounting.py [--eps 1.0] [--delta 1e-5] [--ms 1000 10000 100000] [--old-max 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo.privacy.signds import eps_signds  # noqa: E402


def fft_composition(eps: float, m: int, delta: float) -> float:
    """eps_signds as it was: from_privacy_parameters(ε, 0) self-composed m times by dp-accounting."""
    from dp_accounting.pld import common, privacy_loss_distribution as pld

    one = pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                      value_discretization_interval=min(1e-4, eps / 1000))
    total = one.self_compose(m) if m > 1 else one
    return min(float(total.get_epsilon_for_delta(delta)), m * eps)


def timed(fn, *args) -> tuple[float, float]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eps", type=float, default=1.0, help="ε of one upload")
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--ms", type=int, nargs="+", default=[1000, 10_000, 100_000], help="participations m")
    ap.add_argument("--old-max", type=int, default=10_000, help="largest m the FFT composition is run at")
    a = ap.parse_args(argv)
    eps_signds(eps_round=a.eps, participations=2, delta=a.delta)  # warm-up: dp-accounting imported
    print(f"CPU: {cpu()}; ε per upload {a.eps:g}, δ = {a.delta:g}")
    print(f"{'m':>8}  {'FFT (before)':>14}  {'closed form':>12}  {'speed-up':>9}  ε before / ε now")
    for m in a.ms:
        new_s, new = timed(lambda: eps_signds(eps_round=a.eps, participations=m, delta=a.delta))
        if m <= a.old_max:
            old_s, old = timed(fft_composition, a.eps, m, a.delta)
            print(f"{m:>8}  {old_s:>12.3f} s  {new_s * 1e3:>9.2f} ms  {old_s / new_s:>8.0f}x  {old!r} / {new!r}")
        else:
            print(f"{m:>8}  {'(not run)':>14}  {new_s * 1e3:>9.2f} ms  {'':>9}  – / {new!r}")


if __name__ == "__main__":
    main()
