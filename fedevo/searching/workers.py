"""``--workers auto`` (the default): evaluate in this process where a local Ray would not pay for itself.

Ray's start-up (seconds), a torch-importing process per worker and the transfer of every task cost more than
they save where few evaluations can run at once: measured on a 2-core machine (issue #34), a 13-feature task took
58 s on Ray against 34 s in-process, a Python evaluator 21 s against 2 s. So ``auto`` evaluates in-process when

* the machine has 2 cores or fewer (at most 2-way parallelism, which Ray's overhead eats), or
* a batch holds one candidate (``--pop 1``: nothing to run side by side),

and otherwise starts a local Ray with one worker per core, at most one per candidate of a batch. One line on
stderr says which and why. ``--workers N`` (N >= 1) always uses Ray with N workers, ``--workers 0`` always
evaluates in-process, and ``--ray-address`` always uses that cluster.
"""

from __future__ import annotations

import sys
from typing import Optional, Union

from ..errors import FedevoError, arg

AUTO = "auto"
SMALL_MACHINE = 2  # cores at or below which auto evaluates in-process


def parse_workers(value: Union[int, str, None]) -> Union[int, str]:
    """workers: 'auto' (or None), else a whole number >= 0; FedevoError otherwise."""
    if value is None or value == AUTO:
        return AUTO
    if isinstance(value, bool):
        raise FedevoError(f"{arg('workers')} must be 'auto' or a whole number >= 0, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise FedevoError(f"{arg('workers')} must be 'auto' or a whole number >= 0, got {value!r}") from None
    if not isinstance(value, int):
        raise FedevoError(f"{arg('workers')} must be 'auto' or a whole number >= 0, got {value!r}")
    if value < 0:
        raise FedevoError(f"{arg('workers')} must be >= 0 (0: in-process; auto: fedevo decides), got {value}")
    return value


def decide(workers: Union[int, str, None], *, cores: int, pop: Optional[int], address: Optional[str] = None
           ) -> tuple[int, str]:
    """(workers, why): 0 for in-process, N for a local Ray of N workers; `why` is '' unless auto decided."""
    workers = parse_workers(workers)
    if workers != AUTO:
        return workers, ""
    if address:
        return 1, ""  # the cluster decides its own parallelism; 1 is never used for a cluster
    force = f"{arg('workers', 'N')} forces Ray"
    if cores <= SMALL_MACHINE:
        return 0, (f"in-process: this machine has {cores} core{'s' if cores != 1 else ''}, and Ray's start-up and "
                   f"a worker process per core cost more than they save ({force})")
    if pop is not None and pop <= 1:
        return 0, f"in-process: a batch holds one candidate, nothing runs side by side ({force})"
    n = cores if pop is None else min(cores, pop)
    return n, (f"a local Ray with {n} workers ({cores} cores, batches of {pop}; {arg('workers', 0)} evaluates "
               "in-process)")


def announce(why: str) -> None:
    if why:
        print(f"fedevo: {arg('workers', AUTO)}: {why}", file=sys.stderr)


__all__ = ["AUTO", "SMALL_MACHINE", "announce", "decide", "parse_workers"]
