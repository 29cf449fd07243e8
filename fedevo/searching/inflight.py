"""What this process is evaluating in-process, kept in RUN/.evaluating until the evaluation returns.

An evaluation in this process (`--workers 0`, or auto on a small machine) that crashes in native code (a segfault in
a user's extension) or is killed (the kernel's OOM killer, kill -9) ends the search itself, with no line of fedevo's
after it: Python runs nothing more. The file is how the next `fedevo resume` of the run knows, and says so
(`left_behind`) with the way to contain the evaluation (`--eval-timeout`: a child process, whose crash ends only
that evaluation). Written before the evaluation starts and removed when it returns, fails or is stopped (Ctrl-C,
SIGTERM), so it outlives only a process that died; it is read only by the process that holds the run's lock
(so never while the run's own search is running).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Optional

NAME = ".evaluating"


@contextlib.contextmanager
def in_flight(run_dir: Optional[os.PathLike], label: str):
    """Inside: RUN/.evaluating names `label` (nothing without a run directory)."""
    if run_dir is None:
        yield
        return
    path = Path(run_dir) / NAME
    try:
        path.write_text(json.dumps({"label": label, "pid": os.getpid()}) + "\n", encoding="utf-8")
    except OSError:  # a full disk: the log's own write reports it; this note is not worth failing for
        pass
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def left_behind(run_dir: os.PathLike) -> Optional[str]:
    """The label of the evaluation an earlier process of this run died in, else None (and the file is taken)."""
    path = Path(run_dir) / NAME
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    with contextlib.suppress(OSError):
        path.unlink()
    try:
        label = json.loads(text).get("label")
    except (ValueError, AttributeError):
        label = None
    return label if isinstance(label, str) and label else "an evaluation"


__all__ = ["NAME", "in_flight", "left_behind"]
