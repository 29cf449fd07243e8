"""Fresh Gaussian noise, fast.

Default: the native counter-based sampler (`native.py`, ~5× torch's CPU `normal_` per core); each source is a
stream (key from the seed, a running counter), so the numbers depend on the seed and the order of `fill_` calls
only -- not on how many threads fill a buffer. Fallback (no C compiler, or FEDEVO_NATIVE=0): torch's
generator, with large buffers split over several generators filled in parallel threads (torch releases the GIL);
deterministic for a given seed and thread count.

`TorchNoise`: the device path's source (fl/device.py), torch's generator on the tensors' device (CUDA's Philox
generator on a GPU): the same distribution as the native stream, other values.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

from typing import Optional

import torch

from .. import native

_MIN_SPLIT = 1 << 15  # below this, one thread is faster than a thread hand-off
_M64 = (1 << 64) - 1


def _splitmix64(z: int) -> int:
    z = (z + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class NoiseSource:
    def __init__(self, seed: int, threads: int | None = None):
        self.threads = max(1, threads or min(4, os.cpu_count() or 1))
        self._k = native.load()
        self.key = _splitmix64(int(seed) & _M64)
        self.counter = 0  # pairs of values drawn so far (native stream position)
        self.gens = None if self._k else [torch.Generator().manual_seed((seed * 1_000_003 + i) % (1 << 63))
                                             for i in range(self.threads)]
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def reserve(self, n: int) -> tuple[int, int]:
        """(key, counter) of the next n values of the native stream, which advances past them: `fill_`/`add_` draw
        them here, a fused native kernel draws them itself (the values `add_` would have added)."""
        base, self.counter = self.counter, self.counter + (n + 1) // 2
        return self.key, base

    @property
    def backend(self) -> str:
        return "native" if self._k else "torch"

    def fill_(self, buf: torch.Tensor, std: float = 1.0) -> torch.Tensor:
        """Fill a contiguous float32 tensor with N(0, std²) in place."""
        if self._k is None:
            flat = buf.view(-1)
            return self._fill_torch(flat, flat.numel(), std).view_as(buf)
        return self._native(self._k.fill, buf, std)

    def add_(self, buf: torch.Tensor, std: float = 1.0) -> torch.Tensor:
        """buf += N(0, std²) in place: the values `fill_` would have drawn, without a temporary buffer."""
        if self._k is None:
            return buf.add_(self.fill_(torch.empty_like(buf), std))
        return self._native(self._k.add, buf, std)

    def add_rows_(self, buf: torch.Tensor, row_std: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """buf (c, n) += (z · row_std[k]) · mask[j] with z the values `fill_` would draw for buf at std 1: one pass
        instead of a temporary and three (the same numbers as fill_, mul_ by row, mul_ by mask, add_)."""
        if buf.dim() != 2 or not buf.is_contiguous() or buf.dtype != torch.float32:
            raise TypeError("add_rows_ needs a contiguous 2-D float32 tensor")
        row_std = row_std.to(torch.float32).contiguous()
        if self._k is None:
            noise = self.fill_(torch.empty_like(buf), 1.0).mul_(row_std.unsqueeze(1))
            return buf.add_(noise if mask is None else noise.mul_(mask))
        mask = None if mask is None else mask.to(torch.float32).contiguous()
        c, n = buf.shape
        key, base = self.reserve(c * n)
        args = (buf.data_ptr(), n)
        tail = (key, base, row_std.data_ptr(), 0 if mask is None else mask.data_ptr())
        total = c * n
        if self._pool is None or total < _MIN_SPLIT:
            self._k.add_rows(*args, 0, total, *tail)
            return buf
        step = -(-total // (self.threads * native.BLOCK_VALUES)) * native.BLOCK_VALUES
        list(self._pool.map(lambda s: self._k.add_rows(*args, s, min(step, total - s), *tail), range(0, total, step)))
        return buf

    def _native(self, fn, buf: torch.Tensor, std: float) -> torch.Tensor:
        flat = buf.view(-1)
        n = flat.numel()
        if flat.dtype != torch.float32:
            raise TypeError(f"NoiseSource needs a float32 tensor, got {flat.dtype}")
        key, base = self.reserve(n)
        ptr = flat.data_ptr()
        if self._pool is None or n < _MIN_SPLIT:
            fn(ptr, n, key, base, float(std))
            return buf
        step = -(-n // (self.threads * native.BLOCK_VALUES)) * native.BLOCK_VALUES  # split on block boundaries
        parts = [(s, min(step, n - s)) for s in range(0, n, step)]
        list(self._pool.map(lambda p: fn(ptr + 4 * p[0], p[1], key, base + p[0] // 2, float(std)), parts))
        return buf

    def _fill_torch(self, flat: torch.Tensor, n: int, std: float) -> torch.Tensor:
        if self._pool is None or n < _MIN_SPLIT:
            return flat.normal_(0.0, std, generator=self.gens[0])
        parts = flat.chunk(self.threads)
        list(self._pool.map(lambda a: a[0].normal_(0.0, std, generator=a[1]), zip(parts, self.gens)))
        return flat

    def get_state(self) -> dict:
        """Where the stream stands (its position, or the torch generators' states): `set_state` on a source made
        with the same seed continues it exactly (training continued from a saved state, fl/continuation.py)."""
        return {"key": self.key, "counter": self.counter,
                "gens": None if self.gens is None else [g.get_state() for g in self.gens]}

    def set_state(self, state: dict) -> None:
        if state["key"] != self.key or (state["gens"] is None) != (self.gens is None):
            raise ValueError("a noise state of another seed or backend")
        self.counter = state["counter"]
        for g, st in zip(self.gens or (), state["gens"] or ()):
            g.set_state(st)

    def close(self) -> None:
        """Stop the helper threads (the source still works after, single-threaded)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class TorchNoise:
    """N(0, std²) from one torch generator on `device` (the device path: `StepLDP.for_group`). The values depend on
    the seed and the order of the calls only; they are not the native stream's (same distribution, other draws),
    and a CUDA generator's are not a CPU generator's."""

    backend = "torch"

    def __init__(self, seed: int, device, generator: Optional[torch.Generator] = None):
        self.device = torch.device(device)
        self.gen = generator if generator is not None else torch.Generator(device=self.device).manual_seed(int(seed))

    def fill_(self, buf: torch.Tensor, std: float = 1.0) -> torch.Tensor:
        return buf.normal_(0.0, std, generator=self.gen)

    def add_(self, buf: torch.Tensor, std: float = 1.0) -> torch.Tensor:
        return buf.add_(self.fill_(torch.empty_like(buf), std))

    def close(self) -> None:
        pass
