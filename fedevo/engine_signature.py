"""The engine signature: the fields of a machine's compute engine that decide a simulation's exact numbers for
a problem (arch, device, precision, native kernels or torch, the kernels' ISA, vector width, compiler and tuning,
torch's CPU capability). Committed numbers that are compared exactly (tests/searching/reference_runs/,
experiments/results/trust_models/) record the signature they were made on, and are only compared on the same one.
See tests/searching/reference_runs/README.md for why each field decides the numbers.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Optional

# the compiler's target macros that change the kernels' code (fedevo/native/*.c's #if and vector widths)
ISA_MACROS = ("__AVX512F__", "__AVX512BW__", "__AVX512VL__", "__AVX512BF16__", "__AVX2__", "__AVX__", "__FMA__",
              "__ARM_NEON", "__ARM_FEATURE_SVE", "__ARM_FEATURE_BF16_VECTOR_ARITHMETIC", "__ARM_FEATURE_FMA")


def _macros(cc: str, cflags) -> dict:
    """The predefined macros of `cc` with `cflags` (`cc -dM -E`): what the kernels' #if see."""
    out = subprocess.run([cc, *cflags, "-dM", "-E", "-x", "c", os.devnull], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    macros = {}
    for line in out.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) >= 2 and parts[0] == "#define":
            macros[parts[1]] = parts[2] if len(parts) == 3 else ""
    return macros


def kernel_target() -> dict:
    """What the native kernels were built for: the ISA macros, dense32.c's vector width, the compiler (family
    and major version: code generation changes with major releases). The compiler is the one native.load()
    takes ($CC, else cc, gcc, clang) with native.CFLAGS."""
    from fedevo import native

    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    m = _macros(cc, native.CFLAGS)
    isa = [name.strip("_").lower() for name in ISA_MACROS if name in m]
    width = 16 if "__AVX512F__" in m else 8 if "__AVX__" in m else 4  # dense32.c's VW
    compiler = f"clang {m['__clang_major__']}" if "__clang_major__" in m else f"gcc {m.get('__GNUC__', '?')}"
    return {"kernel_isa": isa, "kernel_vector_width": width, "compiler": compiler, "kernel_tune": _tune(cc)}


def _tune(cc: str) -> Optional[str]:
    """What gcc makes of -march=native / -mtune=native on this CPU (e.g. "znver3/znver3"): the instruction
    selection and scheduling under -ffast-math follow it; None where the compiler does not say (clang)."""
    try:
        out = subprocess.run([cc, "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    opts = dict(ln.split(None, 1) for ln in out.splitlines() if ln.strip().startswith(("-march=", "-mtune="))
                and len(ln.split(None, 1)) == 2)
    return f"{opts.get('-march=', '?').strip()}/{opts.get('-mtune=', '?').strip()}" if opts else None


def engine_signature(problem) -> dict:
    """The fields of this machine's engine that decide a problem's numbers (its precision and device settings
    resolved as an evaluation resolves them: fedevo.hardware.resolve). `problem`: a problem file or bundled name."""
    import torch

    from fedevo import hardware, native
    from fedevo.problem import load_problem

    cfg = load_problem(str(problem)).sim_config()
    engine = hardware.resolve(cfg.precision, cfg.device)
    kernels = native.status()
    sig = {"arch": platform.machine(), "device": engine.device.type, "precision": engine.precision.name,
           "kernels": "native" if kernels == "native" else "torch",
           "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if engine.device.type == "cpu" and kernels == "native":
        sig.update(kernel_target())
    return sig


def signature_mismatch(reference_sig: dict, here: dict) -> Optional[str]:
    """Why numbers made on `reference_sig` are not comparable here (None: they are). The fields the reference
    records are compared (one made before a field was recorded is not held to it: kernel_tune)."""
    if all(here.get(k) == v for k, v in reference_sig.items()):
        return None
    fields = sorted(reference_sig)
    differ = ", ".join(f"{k}: {reference_sig.get(k)!r} there, {here.get(k)!r} here" for k in fields
                       if reference_sig.get(k) != here.get(k))
    return (f"the reference was made on another compute engine ({differ}); reference {reference_sig}, "
            f"this machine {here}: exact numbers are only comparable on the same engine")
