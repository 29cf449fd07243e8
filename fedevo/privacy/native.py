"""The native Gaussian sampler: `_gauss.c` compiled once per machine, loaded with ctypes.

Why: per-step LDP draws one Gaussian per parameter per local step (10⁹ a round for the reference workload);
torch's CPU `normal_` is bound by its scalar Mersenne Twister (~0.35·10⁹/s/core here), the vectorised
counter-based sampler in `_gauss.c` draws ~1.8·10⁹/s/core, and ctypes releases the GIL, so chunk threads
sample in parallel.

The library is built with the system C compiler (``$CC`` or ``cc``) on first use into
``$FEDEVO_CACHE`` (default ``~/.cache/fedevo``), named by a hash of the source, flags and CPU, so a shared
home directory with different CPUs is safe. No compiler, a failed build or ``FEDEVO_NOISE=torch``: `load()`
returns None and callers fall back to torch's generator (different numbers, same distribution).
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
from typing import Callable, Optional

SOURCE = Path(__file__).with_name("_gauss.c")
CFLAGS = ("-O3", "-march=native", "-ffast-math", "-fPIC")
BLOCK_VALUES = 1024  # 2 * BLOCK in _gauss.c: buffers split at multiples of this give identical numbers

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


def _build(cc: str) -> Path:
    src = SOURCE.read_bytes()
    tag = hashlib.sha256(src + " ".join((cc,) + CFLAGS).encode() + _cpu_id().encode()).hexdigest()[:16]
    out = cache_dir() / f"gauss-{tag}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        obj, lib = Path(tmp) / "gauss.o", Path(tmp) / "gauss.so"
        subprocess.run([cc, *CFLAGS, "-c", str(SOURCE), "-o", str(obj)], check=True, capture_output=True, timeout=120)
        subprocess.run([cc, "-shared", str(obj), "-o", str(lib), "-lm"], check=True, capture_output=True, timeout=120)
        os.replace(lib, out)  # atomic: concurrent workers building at once each install a complete file
    return out


class _Sampler:
    def __init__(self, fill, add):
        self.fill, self.add = fill, add

    def __call__(self, *args) -> None:
        self.fill(*args)


def load() -> Optional[Callable]:
    """fill(ptr, n, key, counter, std) from the native library, or None (reason in `status()`); its ``add``
    attribute adds the same values to the buffer instead of overwriting it."""
    with _lock:
        if "fill" in _state:
            return _state["fill"]
        fill, why = None, ""
        if os.environ.get("FEDEVO_NOISE", "").lower() == "torch":
            why = "FEDEVO_NOISE=torch"
        else:
            cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
            if cc is None:
                why = "no C compiler (cc) found"
            else:
                try:
                    lib = ctypes.CDLL(str(_build(cc)))
                    fns = []
                    for name in ("fedevo_fill_normal", "fedevo_add_normal"):
                        fn = getattr(lib, name)
                        fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_float]
                        fn.restype = None
                        fns.append(fn)
                    fill = _Sampler(*fns)
                except (OSError, subprocess.SubprocessError) as e:
                    err = getattr(e, "stderr", b"") or b""
                    why = f"build failed: {type(e).__name__}: {err.decode(errors='replace').strip()[:200] or e}"
        _state["fill"], _state["why"] = fill, why
        return fill


def status() -> str:
    """'native' or 'torch (why)': which sampler noise comes from in this process."""
    return "native" if load() is not None else f"torch ({_state.get('why', '')})"
