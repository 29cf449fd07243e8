"""Fresh Gaussian noise, fast: torch's CPU normal_ is single-threaded, so large buffers are split over
several generators filled in parallel threads (torch releases the GIL). Deterministic for a given seed and
thread count, whatever the thread timing."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import torch

_MIN_SPLIT = 1 << 15  # below this, one generator is faster than a thread hand-off


class NoiseSource:
    def __init__(self, seed: int, threads: int | None = None):
        self.threads = max(1, threads or min(4, os.cpu_count() or 1))
        self.gens = [torch.Generator().manual_seed((seed * 1_000_003 + i) % (1 << 63)) for i in range(self.threads)]
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def fill_(self, buf: torch.Tensor, std: float = 1.0) -> torch.Tensor:
        """Fill a contiguous tensor with N(0, std²) in place."""
        flat = buf.view(-1)
        n = flat.numel()
        if self._pool is None or n < _MIN_SPLIT:
            return flat.normal_(0.0, std, generator=self.gens[0]).view_as(buf)
        parts = flat.chunk(self.threads)
        list(self._pool.map(lambda a: a[0].normal_(0.0, std, generator=a[1]), zip(parts, self.gens)))
        return buf

    def close(self) -> None:
        """Stop the helper threads (the source still works after, single-threaded)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
