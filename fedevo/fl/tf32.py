"""TF32 for a bucket's training on CUDA where the user allows it, the process's fp32 for everything else.

torch's TF32 settings (cuBLAS matmuls, cuDNN convolutions) are process-wide, not per thread, and a batched
generation launches other threads' work beside a bucket's (fl/lockstep.py: each run's uploads, aggregation and
test accuracies). `window(on)` sets them for a bucket's launches (or its graph's capture) and puts the process's
back after; where it changes them it holds a lock, which `fp32` takes, so no other thread launches under a bucket's
setting. `hardware.cuda_setup` makes the process's setting fp32 (both off).
"""

from __future__ import annotations

import contextlib
import threading

import torch

_WINDOW = threading.Lock()  # held while a bucket's TF32 setting differs from the process's


def _flags(convs: bool) -> list:
    out = [torch.backends.cuda.matmul]
    return out + [torch.backends.cudnn] if convs else out


@contextlib.contextmanager
def window(on: bool, convs: bool = False):
    """TF32 matmuls (and, with `convs`, cuDNN convolutions) inside when `on`, the process's setting after; no lock
    where nothing changes."""
    flags = _flags(convs)
    before = [f.allow_tf32 for f in flags]
    if all(b == bool(on) for b in before):
        yield
        return
    with _WINDOW:
        for f in flags:
            f.allow_tf32 = bool(on)
        try:
            yield
        finally:
            for f, b in zip(flags, before):
                f.allow_tf32 = b


@contextlib.contextmanager
def fp32():
    """Launches inside at the process's own TF32 settings (fp32 by default): waits until no bucket's window is open,
    and keeps one from opening meanwhile. Hold it for launches only: a bucket waits for it."""
    with _WINDOW:
        yield


__all__ = ["fp32", "window"]
