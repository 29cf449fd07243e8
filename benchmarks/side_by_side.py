"""Variants of one piece of code timed side by side in one process (benchmarks/README.md: ratios against a
baseline in the same process): each repeat runs the same work once under every variant, the order reversed every
other repeat, so drift in the machine's load falls on all of them alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any, Optional


def outcome(r) -> tuple:
    """What must not change between variants: an EvaluationResult's error, comm, ε, Ω and status."""
    return (r.error, r.comm, r.eps, r.omega, r.status)


def alternate(variants: Mapping[str, Callable[[], None]], run: Callable[[], Any],
              repeats: int, times: Optional[dict] = None) -> tuple[dict[str, float], dict[str, Any]]:
    """`run()` under each variant (its setup called first), `repeats` times in alternating order:
    ({name: median seconds}, {name: what its last run returned}). Each run computes its accountant calls afresh
    (privacy/offload.py remembers them: a repeat would find them done, where a new individual computes them).
    times: a dict filled with every run's seconds per variant (for min and max)."""
    from fedevo.privacy import offload

    names = list(variants)
    times = {} if times is None else times
    times.update({n: [] for n in names})
    last: dict[str, Any] = {}
    for i in range(repeats):
        for name in (names if i % 2 == 0 else names[::-1]):
            variants[name]()
            offload.forget()
            t = time.perf_counter()
            last[name] = run()
            times[name].append(time.perf_counter() - t)
    return {n: statistics.median(v) for n, v in times.items()}, last
