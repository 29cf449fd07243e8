"""The stacked trainer's pointwise work as three functions torch.compile fuses (the `torch_compile` opt-in on CUDA;
fl/stacked.py's `_Bucket.loop`, docs/engine.md). The GEMMs stay cuBLAS's; what is fused around them:

- `fwd(z, b, relu)`: the bias and ReLU after a forward GEMM z = h·W;
- `top(logits, y, w, bias)`: softmax-CE's gradient weighted by the schedule's per-sample weights (already × −lr),
  its sum over the batch added to the last layer's bias;
- `mid(g, h, bias)`: ReLU' on an input gradient g = δ·Wᵀ, its sum over the batch added to that layer's bias.

Uncompiled they are the plain loop's arithmetic (up to rounding: the bias is added after the GEMM, not inside it).
`compiled()` compiles them once per process (fullgraph, static shapes: each new shape compiles once, seconds, at
its first call, which a bucket's eager run or its graph's warm-up makes before capture); where that fails (no
Triton, no compiler) `failed` warns once and the process keeps to the plain loop, and `engine_label` says so in
the results trained after it.
"""

from __future__ import annotations

import inspect
import threading
import warnings

import torch
import torch.nn.functional as F

RECOMPILE_LIMIT = 64  # shapes per function before torch.compile gives up (then: the plain loop, with a warning)


def fwd(z: torch.Tensor, b: torch.Tensor, relu: bool) -> torch.Tensor:
    z = z + b
    return z.relu() if relu else z


def top(logits: torch.Tensor, y: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    d = (torch.softmax(logits, dim=-1) - F.one_hot(y, logits.shape[-1]).to(logits.dtype)) * w
    bias.add_(d.sum(1, keepdim=True))
    return d


def mid(g: torch.Tensor, h: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    d = torch.where(h > 0, g, torch.zeros((), dtype=g.dtype, device=g.device))
    bias.add_(d.sum(1, keepdim=True))
    return d


PLAIN = (fwd, top, mid)
_LOCK = threading.Lock()
_COMPILED: object = None  # None: not yet; a tuple: (fwd, top, mid) compiled; False: failed, the plain loop


def compiled():
    """(fwd, top, mid) torch.compile'd, made once per process; None once compiling has failed."""
    global _COMPILED
    with _LOCK:
        if _COMPILED is None:
            try:
                _COMPILED = tuple(_compile(f) for f in PLAIN)
            except Exception as e:  # noqa: BLE001 - any failure: the plain loop
                _fail(e)
        return _COMPILED or None


def _compile(f):
    """torch.compile(f) (fullgraph, static shapes) allowed RECOMPILE_LIMIT shapes: torch.compile's own limit where
    it takes one, else the calls made under dynamo's (process-wide, default 8) raised to it."""
    kw = dict(fullgraph=True, dynamic=False)
    if "recompile_limit" in inspect.signature(torch.compile).parameters:
        return torch.compile(f, **kw, recompile_limit=RECOMPILE_LIMIT)
    fn = torch.compile(f, **kw)
    from torch._dynamo import config

    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"

    def limited(*args):
        with config.patch(**{name: max(getattr(config, name), RECOMPILE_LIMIT)}):
            return fn(*args)
    return limited


def _fail(e: BaseException) -> None:
    global _COMPILED
    first = _COMPILED is not False
    _COMPILED = False
    if first:
        why = (str(e).strip().splitlines() or [""])[0][:200]
        warnings.warn(f"fedevo: torch_compile: compiling the stacked trainer's step failed ({type(e).__name__}: "
                      f"{why}); the plain step loop for the rest of the process", RuntimeWarning, stacklevel=3)


def failed(e: BaseException) -> None:
    """A compiled call raised: warn once, the plain loop for the rest of the process."""
    with _LOCK:
        _fail(e)


FELL_BACK = "fell back to the plain loop"  # a result's engine["torch_compile"] after a failed compile


def engine_label(engine: dict) -> dict:
    """A result's `engine` as it trained: torch_compile was asked for but this process's compiling failed (its
    warning said so), so it names the fallback instead of claiming the compiled loop."""
    if engine.get("torch_compile") is True and _COMPILED is False:
        return {**engine, "torch_compile": FELL_BACK}
    return engine


def reset() -> None:
    """Forget the compiled functions and any failure (tests)."""
    global _COMPILED
    with _LOCK:
        _COMPILED = None
