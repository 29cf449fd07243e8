"""fedevo's native kernels: the C files here compiled once per machine into one library, loaded with ctypes.

noise.c (the Gaussian stream), step.c (the dense bf16 MLP step's elementwise work and output layer), gemm.c (the
bf16 hidden-layer forward GEMM), dense32.c (the dense fp32 MLP step's GEMMs with fused epilogues, and a chunk's
whole plain fp32 training in one call), sparse_mlp.c (the SET-sparse MLP step), similarity.c (recall's sign
agreement), ddg.c (the distributed discrete Gaussian's client encoding), pool.c (the CNN's 2×2 max-pool and ReLU
in one pass), perm.c (torch.randperm's CPU draws, for the stacked trainer's plan), common.h (bf16 conversions,
the noise block).

Every kernel builds for any target: AVX-512 / AVX512-BF16 code is behind #if on the compiler's target macros with
a portable fallback (gemm.c returns -1 without AVX512-BF16 and the caller uses torch), the rest is plain C and GNU
vector extensions that GCC/Clang lower to AVX-512, AVX2, SSE2 or NEON (tests/native/test_build.py builds and
checks the kernels for -march=x86-64-v3, -march=x86-64 and x86-64-v3 with dense32.c's AVX-512 vector width
(-DFEDEVO_VW=16), and builds them for Arm where an aarch64 cross compiler exists).

Two things eager torch does slowly on CPU, and no library does for us:
- Gaussian noise: per-step LDP draws one Gaussian per parameter per local step (10⁹ a round for the reference
  workload); torch's CPU `normal_` is bound by its scalar Mersenne Twister (~0.35·10⁹/s/core here), the
  vectorised counter-based sampler here draws ~1.8·10⁹/s/core.
- The bf16 engine's local step: cast the bf16 gradient, masked or clipped update, noise, cast the new weights
  to bf16 -- 3 to 4 passes over every weight in torch, one pass here (`step_bf16`), plus a fused masked
  sum of squares for clipping norms (`sumsq_bf16`).
- SET-sparse MLPs: forward, backward and update over the active weights only (`smlp_step`, fl/sparse.py);
  torch has no batched sparse-times-dense product that beats a dense bf16 matmul at these sizes.
ctypes releases the GIL during a call, so chunk threads run these in parallel.

The library is built with the system C compiler (``$CC`` or ``cc``) on first use into
``$FEDEVO_CACHE`` (default ``~/.cache/fedevo``), named by a hash of the source, flags and CPU, so a shared
home directory with different CPUs is safe. No compiler, a failed build or ``FEDEVO_NATIVE=0``: `load()`
returns None and callers fall back to torch (noise: different numbers, same distribution). A value of
``FEDEVO_NATIVE`` that is not an on/off (a typo: ``ture``) is a one-line SetupError from `load()` rather than a
silent choice: the first call reads the variable (later calls return what it loaded), and every first call is
where an error is caught (a search's start, `searching.run.versions`, before its run directory is made; inside an
evaluation, which the runners turn into a stopped, resumable search; never at import).
Compiled with ``-ffast-math`` but linked without it, so loading it does not set flush-to-zero for the process.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Optional, Sequence

from ..envvars import env_flag

HERE = Path(__file__).parent
SOURCES = tuple(HERE / f for f in ("noise.c", "step.c", "sparse_mlp.c", "gemm.c", "similarity.c", "dense32.c",
                                   "ddg.c", "pool.c", "perm.c"))
HEADERS = (HERE / "common.h",)
CFLAGS = ("-O3", "-march=native", "-ffast-math", "-fPIC")
BLOCK_VALUES = 1024  # 2 * BLOCK in common.h: buffers split at multiples of this give identical numbers

_lock = threading.Lock()
_state: dict = {}


def cache_dir() -> Path:
    return Path(os.environ.get("FEDEVO_CACHE") or Path.home() / ".cache" / "fedevo")


def _cpu_id() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        flags = ""
    return platform.machine() + flags


def build(cc: str, cflags: Sequence[str] = CFLAGS) -> Path:
    """The library compiled from SOURCES with `cflags` (cached; the sources are compiled in parallel). The cache
    name hashes sources, compiler, flags and CPU. Tests build it for other targets (x86-64-v3, x86-64, Arm)."""
    src = b"".join(f.read_bytes() for f in SOURCES + HEADERS)
    tag = hashlib.sha256(src + " ".join((cc, *cflags)).encode() + _cpu_id().encode()).hexdigest()[:16]
    out = cache_dir() / f"kernels-{tag}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        objs = [str(Path(tmp) / (f.stem + ".o")) for f in SOURCES]
        procs = [subprocess.Popen([cc, *cflags, "-c", str(f), "-o", o], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE) for f, o in zip(SOURCES, objs)]
        failed = None
        for p in procs:
            _, err = p.communicate(timeout=300)
            if p.returncode != 0 and failed is None:
                failed = subprocess.CalledProcessError(p.returncode, p.args, stderr=err)
        if failed is not None:
            raise failed
        lib = Path(tmp) / "kernels.so"
        subprocess.run([cc, "-shared", *objs, "-o", str(lib), "-lm"], check=True, capture_output=True, timeout=120)
        os.replace(lib, out)  # atomic: concurrent workers building at once each install a complete file
    return out


def load_library(path) -> "Kernels":
    """The kernels of a library `build` made."""
    return Kernels(ctypes.CDLL(str(path)))


_P, _I, _U, _F = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_float
SIGNATURES = {  # name in the C files -> argument types (void unless in RETURNS_INT)
    "fedevo_fill_normal": [_P, _I, _U, _U, _F],  # (out, n, key, counter, std)
    "fedevo_add_normal": [_P, _I, _U, _U, _F],
    # (p, g, mask, scale, c, n, low, key, counter, std, g_is_fp32)
    "fedevo_step_bf16": [_P, _P, _P, _P, _I, _I, _P, _U, _U, _F, _I],
    "fedevo_sumsq_bf16": [_P, _P, _I, _I, _P],  # (g, mask, c, n, out)
    "fedevo_gather_rows": [_P, _P, _P, _I, _I],  # (dst, src, idx, n, row_bytes)
    "fedevo_gather_rows_bf16": [_P, _P, _P, _I, _I],  # (dst bf16, src fp32, idx, n, values per row)
    "fedevo_softmax_ce_bf16": [_P, _P, _P, _I, _I, _I, _P, _P],  # (z, y, w, c, B, C, out, bias_grad)
    "fedevo_relu_bwd_bf16": [_P, _P, _I, _I, _I, _P],  # (nd, h, c, B, d, bias_grad)
    "fedevo_relu_bf16": [_P, _I],  # (v, n)
    # (A, W, bias, Z, c, M, K, N, relu) -> 0, or -1 without AVX512-BF16
    "fedevo_linear_fwd_bf16": [_P, _P, _P, _P, _I, _I, _I, _I, _I],
    # (a, a_is_fp16, rows, P, b, idx | NULL, n, out counts) -> 0, or -1 out of memory
    "fedevo_sign_agree": [_P, _I, _I, _I, _P, _P, _I, _P],
    # (h, W, b, y, w, c, B, H, C, weight_grad, bias_grad, input_grad | NULL) -> 0, or -1 if C > 16 or H > 4096
    "fedevo_head_bf16": [_P, _P, _P, _P, _P, _I, _I, _I, _I, _P, _P, _P],
    # fp32 engine (dense32.c), each -> 0, or -1 out of memory:
    "fedevo_fwd_f32": [_P, _P, _P, _P, _P, _I, _I, _I, _I, _I],  # (A, idx | NULL, W, bias, Z, c, M, K, N, relu)
    "fedevo_dgrad_f32": [_P, _P, _P, _P, _P, _I, _I, _I, _I],  # (D, W, H, out, bias_grad | NULL, c, M, K, N)
    # (A, idx | NULL, D, G (the weight when scale), scale | NULL, mask | NULL, c, M, K, N)
    "fedevo_wgrad_f32": [_P, _P, _P, _P, _P, _P, _I, _I, _I, _I],
    # (L, dims, W[], bias[], mask[], x, steps, rows[], y[], w[], used, scale, c, group): a chunk's plain local training
    "fedevo_train_f32": [_I, _P, _P, _P, _P, _P, _I, _P, _P, _P, _P, _P, _I, _I],
    "fedevo_softmax_ce_f32": [_P, _P, _P, _I, _I, _I, _P, _P],  # as softmax_ce_bf16, fp32 logits and out
    "fedevo_add_normal_rows": [_P, _I, _I, _I, _U, _U, _P, _P],  # (out, n, start, len, key, counter, std, mask)
    # (L, dims, rowptr[], cols[], nnz, vals[], bias[], gvals[] | NULL, gbias[] | NULL, x, rows, y, w, c, B, scale,
    #  scratch) -> 0, or -1 if B or L is too large
    "fedevo_smlp_step": [_I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I, _I, _P, _P],
    # (x fp64, n, 1/γ, σ, key, out int64) -> 0, or -1 for σ <= 0 (ddg.c)
    "fedevo_ddg_encode": [_P, _I, ctypes.c_double, ctypes.c_double, _U, _P],
    "fedevo_pool_relu_f32": [_P, _I, _I, _I, _P, _P],  # the CNN's 2×2 max-pool + ReLU: (x, planes, h, w, out, idx)
    # (seed, items | NULL, sizes, count, repeats, stride, out int64) -> 0, or -1 for a size out of range:
    # items shuffled by torch.randperm's draws (perm.c)
    "fedevo_randperms": [_U, _P, _P, _I, _I, _I, _P],
}
RETURNS_INT = {"fedevo_smlp_step", "fedevo_ddg_encode", "fedevo_randperms", "fedevo_head_bf16",
               "fedevo_linear_fwd_bf16", "fedevo_sign_agree", "fedevo_fwd_f32", "fedevo_dgrad_f32", "fedevo_wgrad_f32",
               "fedevo_train_f32"}


class Kernels:
    """The loaded functions (see the C files): fill / add (noise), step_bf16, sumsq_bf16, smlp_step, gather_rows,
    gather_rows_bf16, softmax_ce_bf16, relu_bwd_bf16, head_bf16, relu_bf16, linear_fwd_bf16, sign_agree,
    add_rows, fwd_f32, dgrad_f32, wgrad_f32, softmax_ce_f32, train_f32, ddg_encode, pool_relu_f32, randperms;
    pointers as ints."""

    def __init__(self, lib):
        fns = {}
        for name, argtypes in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = argtypes, ctypes.c_int if name in RETURNS_INT else None
            fns[name] = fn
        self.fill, self.add = fns["fedevo_fill_normal"], fns["fedevo_add_normal"]
        self.step_bf16, self.sumsq_bf16 = fns["fedevo_step_bf16"], fns["fedevo_sumsq_bf16"]
        self.smlp_step = fns["fedevo_smlp_step"]
        self.gather_rows, self.softmax_ce_bf16 = fns["fedevo_gather_rows"], fns["fedevo_softmax_ce_bf16"]
        self.gather_rows_bf16 = fns["fedevo_gather_rows_bf16"]
        self.relu_bwd_bf16, self.add_rows = fns["fedevo_relu_bwd_bf16"], fns["fedevo_add_normal_rows"]
        self.head_bf16, self.relu_bf16 = fns["fedevo_head_bf16"], fns["fedevo_relu_bf16"]
        self.linear_fwd_bf16, self.sign_agree = fns["fedevo_linear_fwd_bf16"], fns["fedevo_sign_agree"]
        self.fwd_f32, self.dgrad_f32, self.wgrad_f32 = fns["fedevo_fwd_f32"], fns["fedevo_dgrad_f32"], fns["fedevo_wgrad_f32"]
        self.softmax_ce_f32, self.train_f32 = fns["fedevo_softmax_ce_f32"], fns["fedevo_train_f32"]
        self.ddg_encode = fns["fedevo_ddg_encode"]
        self.pool_relu_f32 = fns["fedevo_pool_relu_f32"]
        self.randperms = fns["fedevo_randperms"]


def load() -> Optional[Kernels]:
    """The native kernels, or None (reason in `status()`); a SetupError where FEDEVO_NATIVE is not an on/off
    (envvars.env_flag; nothing is cached then, so every call says so)."""
    with _lock:
        if "kernels" in _state:
            return _state["kernels"]
        kern, why = None, ""
        if not env_flag("FEDEVO_NATIVE", True):
            why = "FEDEVO_NATIVE=0"
        else:
            cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
            if cc is None:
                why = "no C compiler (cc) found"
            else:
                try:
                    kern = load_library(build(cc))
                except (OSError, AttributeError, subprocess.SubprocessError) as e:
                    err = getattr(e, "stderr", b"") or b""
                    why = f"build failed: {type(e).__name__}: {err.decode(errors='replace').strip()[:200] or e}"
        _state["kernels"], _state["why"] = kern, why
        return kern


def status() -> str:
    """'native' or 'torch (why)': whether this process uses the native kernels or torch only."""
    return "native" if load() is not None else f"torch ({_state.get('why', '')})"
