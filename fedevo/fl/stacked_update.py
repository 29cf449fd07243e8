"""The stacked trainer's weight update and its SET mask in one pass on CUDA, a Triton kernel: W ← (W + hᵀ·δ)⊙M.

The plain step loop (fl/stacked.py `_Bucket.loop`) updates a masked layer in two passes over its stacked weights
(clients, d_in, d_out): the update inside cuBLAS's weight-gradient GEMM (`W.baddbmm_(hᵀ, δ)`: W read and written)
and the mask product after it (`W.mul_(M)`: W and M read, W written again). With a batch of B ≤ 64 samples each
weight takes 2·B multiply-adds a step, so both passes are bound by memory traffic, and the mask's pass is about
half of a masked layer's (the H100's masked reference round took 44 ms against 42 ms unmasked, 25 against 20 ms
with the device schedule: benchmarks/results-2026-11-26-cuda-h100-h200.txt). Here one kernel reads W, adds the
block's hᵀ·δ (the batch's B samples in one `tl.dot`), multiplies by the mask (kept as bytes, 0/1) and writes W
once. The numbers are the plain loop's up to fp32 rounding (the B products are summed in another order); the
kernel is deterministic (no atomics), so a seed still gives the same numbers on the same GPU. With the bucket's
TF32 opt-in the product uses TF32 as cuBLAS's would.

By default it runs for the masked layers of buckets to be captured as CUDA graphs (`bucket_mode`). On an H100
(benchmarks/results-2026-11-27-cuda-h100.txt) the eager buckets of 5-round `fashion_mlp_dp` generations took
0.85-1.02x as long without it as with it (faster without in 3 of 4 side-by-side pairs: an eager batch is bound
by its host, and a Triton launch costs the host more than cuBLAS's GEMM and the mask product); in captured
buckets it stays until measured side by side there (the masked reference round's extra time over the unmasked
one, +4.9 ms on 2026-11-26 before the kernel, was -0.2 and +3.9 ms in two calls with it).
`FEDEVO_CUDA_FUSED_UPDATE`, where set, chooses for every bucket, captured or eager: `masked` (the masked layers,
whose second pass it saves), `all` (the unmasked layers too, in place of cuBLAS's in-place GEMM: whether that pays
is the GPU's to say, benchmarks/cuda_fused_update.py), `off` (the plain loop everywhere). Before its first use on a
device the kernel is checked against the plain update on a few small problems (`usable`); where Triton is missing,
fails to compile, or disagrees, one warning and the plain loop for the rest of the process. Under Triton's interpreter
(`TRITON_INTERPRET=1`) with FEDEVO_CUDA_FUSED_UPDATE set it runs on CPU tensors too (the tests).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from typing import Optional

import torch

from ..envvars import env_choice

MODES = ("masked", "all", "off")
BLOCK_K, BLOCK_B = 64, 16  # a program's rows of W (d_in) and the samples it takes per tl.dot


def mode() -> str:
    """FEDEVO_CUDA_FUSED_UPDATE: 'masked' (default), 'all' or 'off'."""
    return env_choice("FEDEVO_CUDA_FUSED_UPDATE", MODES, "masked", expected="'masked', 'all' or 'off'")


def bucket_mode(*, masked: bool, hooked: bool, captured: bool) -> str:
    """Which layers of a bucket update in the kernel ('masked', 'all' or 'off'), before `usable`'s check: none in a
    hooked bucket (its step applies explicit gradients) or, for 'masked', one without masks; by default (the
    variable unset) only in a bucket that is to be captured as a CUDA graph (`captured`: its first, eager, run
    compiles the kernel before the capture), an eager bucket keeping cuBLAS's GEMM and the mask product, cheaper
    to launch; where FEDEVO_CUDA_FUSED_UPDATE is set, its mode in every bucket."""
    m = mode()
    if hooked or (m == "masked" and not masked):
        return "off"
    if not captured and not os.environ.get("FEDEVO_CUDA_FUSED_UPDATE", "").strip():
        return "off"
    return m


def _interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") == "1"


@functools.lru_cache(maxsize=None)
def _kernel():
    """The Triton kernel, defined at its first use (Triton is imported only where the kernel may run)."""
    import triton
    import triton.language as tl

    # shapes and row strides not specialised (Triton would compile a variant per divisibility by 16 of each: a
    # search's many widths and short last batches); the unit strides still are (value 1: contiguous loads)
    @triton.jit(do_not_specialize=["K", "N", "NB", "sWc", "sWk", "sHc", "sHb", "sDc", "sDb", "sMc", "sMk"])
    def masked_update(W, H, D, M, K, N, NB, sWc, sWk, sWn, sHc, sHb, sHk, sDc, sDb, sDn, sMc, sMk, sMn,
                      HAS_MASK: tl.constexpr, TF32: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr,
                      BB: tl.constexpr):
        # one program: rows [pk·BK, +BK) and columns [pn·BN, +BN) of client c's W (K, N)
        pk, pn, c = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
        ok = pk * BK + tl.arange(0, BK)
        on = pn * BN + tl.arange(0, BN)
        acc = tl.zeros((BK, BN), dtype=tl.float32)
        for j in range(0, NB, BB):  # hᵀ·δ over the batch's NB samples, BB at a time
            ob = j + tl.arange(0, BB)
            h = tl.load(H + c * sHc + ob[None, :] * sHb + ok[:, None] * sHk,
                        mask=(ob[None, :] < NB) & (ok[:, None] < K), other=0.0)  # (BK, BB): hᵀ's block
            d = tl.load(D + c * sDc + ob[:, None] * sDb + on[None, :] * sDn,
                        mask=(ob[:, None] < NB) & (on[None, :] < N), other=0.0)  # (BB, BN)
            if TF32:
                acc += tl.dot(h, d, input_precision="tf32")
            else:
                acc += tl.dot(h, d, input_precision="ieee")
        inside = (ok[:, None] < K) & (on[None, :] < N)
        wp = W + c * sWc + ok[:, None] * sWk + on[None, :] * sWn
        w = tl.load(wp, mask=inside, other=0.0) + acc
        if HAS_MASK:
            m = tl.load(M + c * sMc + ok[:, None] * sMk + on[None, :] * sMn, mask=inside, other=0)
            w = w * m.to(tl.float32)
        tl.store(wp, w, mask=inside)

    return triton, masked_update


MAX_GRID_Z = 65535  # CUDA's grid limit on the clients' axis: more clients are launched in slices


def _block_n(n: int) -> int:
    """A program's columns: the widest of 64, 32 and 16 that pads N by at most 1/8 (the padded columns' products
    are computed and dropped; narrower blocks read h's block more often), else the one that pads it least."""
    padded = {b: -(-n // b) * b for b in (64, 32, 16)}
    fits = [b for b in (64, 32, 16) if padded[b] <= n * 1.125]
    return fits[0] if fits else min(padded, key=lambda b: (padded[b], -b))


def update_(W: torch.Tensor, h: torch.Tensor, delta: torch.Tensor, M: Optional[torch.Tensor] = None, *,
            tf32: bool = False, blocks: Optional[tuple] = None) -> torch.Tensor:
    """W (C, K, N) += hᵀ·δ per client (h (C, B, K), δ (C, B, N)), then × M (C, K, N; 0/1, any dtype) where given;
    in place, one kernel. fp32 tensors on one device (CUDA, or the CPU under Triton's interpreter). blocks: (BK,
    BN, BB, warps) instead of the defaults (benchmarks compare tilings; each ≥ 16, powers of two)."""
    triton, kernel = _kernel()
    C, K, N = W.shape
    nb = h.shape[1]
    BK, BN, BB, warps = blocks or (BLOCK_K, _block_n(N), BLOCK_B, 4)
    Mt = M if M is not None else W  # not read without a mask
    for c in range(0, C, MAX_GRID_Z):
        n = min(MAX_GRID_Z, C - c)
        w, m = W[c:c + n], Mt[c:c + n]
        kernel[(triton.cdiv(K, BK), triton.cdiv(N, BN), n)](
            w, h[c:c + n], delta[c:c + n], m, K, N, nb, *w.stride(), *h.stride(), *delta.stride(), *m.stride(),
            HAS_MASK=M is not None, TF32=bool(tf32), BK=BK, BN=BN, BB=BB, num_warps=warps)
    return W


def plain_(W: torch.Tensor, h: torch.Tensor, delta: torch.Tensor, M: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The plain loop's update: cuBLAS's in-place GEMM, then the mask product."""
    W.baddbmm_(h.transpose(1, 2), delta)
    if M is not None:
        W.mul_(M)
    return W


_LOCK = threading.Lock()
_CHECKED: dict = {}  # device → True (the kernel agreed with plain_) or the reason it is not used


def _key(device) -> str:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return str(device)


def _refuse(key: str, e: BaseException) -> None:
    """The kernel is not used on `key` from now on; one warning saying why."""
    why = (str(e).strip().splitlines() or [""])[0][:200]
    _CHECKED[key] = f"{type(e).__name__}: {why}"
    warnings.warn(f"fedevo: the stacked trainer's fused masked update is not used on {key} ({_CHECKED[key]}); "
                  "the plain update (cuBLAS GEMM, then the mask)", RuntimeWarning, stacklevel=3)


def apply_(W: torch.Tensor, h: torch.Tensor, delta: torch.Tensor, M: Optional[torch.Tensor] = None, *,
           tf32: bool = False) -> torch.Tensor:
    """The step loop's call: `update_` where the device's check passed, else (or where a launch raises before it
    runs: a new shape's compile failing) `plain_`, the kernel given up for the process with one warning."""
    key = _key(W.device)
    if _CHECKED.get(key) is True:
        try:
            return update_(W, h, delta, M, tf32=tf32)
        except Exception as e:  # noqa: BLE001 - raised before the launch: W is untouched
            if W.is_cuda and torch.cuda.is_current_stream_capturing():
                raise  # compiled in the warm-up before a capture: not expected here
            with _LOCK:
                _refuse(key, e)
    return plain_(W, h, delta, M)


def usable(device) -> bool:
    """Whether the kernel runs on `device` (CUDA; the CPU only under Triton's interpreter with
    FEDEVO_CUDA_FUSED_UPDATE set: the tests, never a CPU run by default): checked once per process and device
    against `plain_` on small problems (uneven shapes, short batches, masked and not; fp32, and TF32 on CUDA); a
    failure warns once and answers False from then on."""
    device = torch.device(device)
    on_cpu = device.type == "cpu" and _interpreted() and bool(os.environ.get("FEDEVO_CUDA_FUSED_UPDATE", "").strip())
    if device.type != "cuda" and not on_cpu:
        return False
    key = _key(device)
    with _LOCK:
        if key not in _CHECKED:
            try:
                _CHECKED[key] = _check(device) or True
            except Exception as e:  # noqa: BLE001 - no Triton, no compiler, a launch failure: the plain loop
                _refuse(key, e)
        return _CHECKED[key] is True


def _check(device: torch.device) -> None:
    gen = torch.Generator().manual_seed(20261127)
    cases = [(3, 70, 37, 24, True), (2, 33, 10, 5, False)]  # uneven blocks, a short batch; a compile each
    for tf32 in ((False, True) if device.type == "cuda" else (False,)):
        for C, K, N, B, masked in cases:
            W = torch.randn(C, K, N, generator=gen)
            h, d = torch.randn(C, B, K, generator=gen), torch.randn(C, B, N, generator=gen) * 0.1
            M = (torch.rand(C, K, N, generator=gen) < 0.4).to(torch.uint8) if masked else None
            W, h, d = W.to(device), h.to(device), d.to(device)
            M = None if M is None else M.to(device)
            # the reference in fp64 (no TF32 whatever the process's matmul setting), the kernel in fp32
            ref = plain_(W.double(), h.double(), d.double(), None if M is None else M.double())
            got = update_(W.clone(), h, d, M, tf32=tf32).double()
            tol = 2e-2 if tf32 else 1e-5  # TF32: ~1e-3 relative a product
            err = float(((got - ref).abs() / (ref.abs() + 1.0)).max())
            if not err <= tol:  # NaN too
                raise RuntimeError(f"kernel disagrees with the plain update ({C}x{K}x{N}, B={B}, "
                                   f"masked={masked}, tf32={tf32}): max rel error {err:.2e} > {tol:g}")


def status(device) -> Optional[str]:
    """What the check said on `device`: 'used', the reason it is not, or None where it has not run."""
    got = _CHECKED.get(_key(device))
    return None if got is None else "used" if got is True else got


def engine_label(engine: dict) -> dict:
    """A CUDA result's `engine` naming the kernel where this process uses it (its check passed on a CUDA device and
    the mode is not 'off'), or why not where its check failed."""
    if engine.get("device") != "cuda":
        return engine
    got = [v for k, v in _CHECKED.items() if k.startswith("cuda")]
    if not got or mode() == "off":
        return engine
    if any(v is True for v in got):
        layers = "SET-masked" if mode() == "masked" else "all"
        where = ("" if os.environ.get("FEDEVO_CUDA_FUSED_UPDATE", "").strip()
                 else " in buckets to be captured as CUDA graphs")
        what = f"torch ops; weight updates of {layers} layers in one Triton kernel{where}"
    else:
        what = f"torch ops (the fused update's Triton kernel not used: {got[0]})"
    return {**engine, "kernels": what}


def reset() -> None:
    """Forget the checks (tests)."""
    with _LOCK:
        _CHECKED.clear()


__all__ = ["MODES", "apply_", "bucket_mode", "engine_label", "mode", "plain_", "reset", "status", "update_", "usable"]
