"""Which compute precision this CPU runs fast: bf16 only where it has native bf16 arithmetic.

`precision = "auto"` used to ask oneDNN (`torch.ops.mkldnn._is_mkldnn_bf16_supported()`), which says yes on any
AVX-512 CPU because oneDNN *emulates* bf16 there: on an Intel Xeon with AVX-512 but no AVX512-BF16/AMX the
emulated bf16 round was 3.4× slower than fp32 (issue #16). Here the CPU's own feature list decides:

- x86: ``avx512_bf16`` (Cooper Lake, Sapphire Rapids and later, Zen 4/5) or ``amx_bf16`` in /proc/cpuinfo's flags;
- Arm: ``bf16`` in /proc/cpuinfo's Features (Armv8.6 BF16: Neoverse V1/V2/N2, Graviton 3/4), or macOS's
  ``hw.optional.arm.FEAT_BF16``;
- anything else, or nothing readable: fp32.

`detect()` reads the machine once; `choose(setting, cpu)` is pure, so tests feed it the feature lists of
several CPU classes.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from dataclasses import dataclass

X86_BF16 = ("avx512_bf16", "amx_bf16")  # native bf16 dot products (AVX512-BF16) or tiles (AMX)
ARM_BF16 = ("bf16",)
# shown by benchmarks/round_speed.py beside the model name: the flags that decide the kernels' code paths
RELEVANT = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_bf16", "amx_tile", "asimd",
            "sve", "bf16")


@dataclass(frozen=True)
class CPUInfo:
    arch: str  # platform.machine(): x86_64, aarch64, arm64, ...
    model: str  # "model name" (x86) or "CPU part"/"Hardware" (Arm), "" when unknown
    flags: frozenset  # lower-case feature names; empty when unknown

    def relevant_flags(self) -> list[str]:
        return [f for f in RELEVANT if f in self.flags]


@dataclass(frozen=True)
class Precision:
    name: str  # 'fp32' or 'bf16'
    reason: str  # one line: why, for `fedevo evaluate --json` and the benchmark

    @property
    def dtype(self):
        import torch

        return torch.bfloat16 if self.name == "bf16" else torch.float32


def parse_cpuinfo(text: str, arch: str) -> CPUInfo:
    """CPUInfo from the text of /proc/cpuinfo (its first processor's entries are enough)."""
    flags: frozenset = frozenset()
    model = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("flags", "features") and not flags:
            flags = frozenset(value.lower().split())
        elif key in ("model name", "hardware", "cpu model") and not model:
            model = value.strip()
    return CPUInfo(arch=arch, model=model, flags=flags)


def _darwin() -> CPUInfo:
    def sysctl(name: str) -> str:
        try:
            return subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    flags = {"bf16"} if sysctl("hw.optional.arm.FEAT_BF16") == "1" else set()
    return CPUInfo(arch=platform.machine(), model=sysctl("machdep.cpu.brand_string"), flags=frozenset(flags))


@functools.lru_cache(maxsize=1)
def detect() -> CPUInfo:
    """This machine's CPU (read once per process)."""
    if platform.system() == "Darwin":
        return _darwin()
    try:
        with open("/proc/cpuinfo") as f:
            return parse_cpuinfo(f.read(), platform.machine())
    except OSError:
        return CPUInfo(arch=platform.machine(), model="", flags=frozenset())


def _is_x86(arch: str) -> bool:
    return arch.lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def _is_arm(arch: str) -> bool:
    return arch.lower() in ("aarch64", "arm64") or arch.lower().startswith("armv8")


def choose(setting: str, cpu: CPUInfo) -> Precision:
    """The compute precision for a config's `precision` setting ('auto', 'fp32' or 'bf16') on `cpu`."""
    if setting in ("fp32", "bf16"):
        return Precision(setting, f"precision = {setting!r} in the configuration")
    if setting != "auto":
        raise ValueError(f"precision must be 'auto', 'fp32' or 'bf16', got {setting!r}")
    if _is_x86(cpu.arch):
        have = [f for f in X86_BF16 if f in cpu.flags]
        if have:
            return Precision("bf16", f"auto: the CPU has native bf16 ({', '.join(have)})")
        if not cpu.flags:
            return Precision("fp32", "auto: CPU features unknown (no /proc/cpuinfo flags)")
        extra = " (AVX-512 alone: oneDNN would emulate bf16, slower than fp32)" if "avx512f" in cpu.flags else ""
        return Precision("fp32", f"auto: no native bf16 on this CPU (neither avx512_bf16 nor amx_bf16){extra}")
    if _is_arm(cpu.arch):
        if any(f in cpu.flags for f in ARM_BF16):
            return Precision("bf16", "auto: the CPU has native bf16 (Arm BF16 extension)")
        if not cpu.flags:
            return Precision("fp32", "auto: CPU features unknown (no Features list)")
        return Precision("fp32", "auto: no native bf16 on this CPU (no Arm BF16 extension)")
    return Precision("fp32", f"auto: unknown CPU architecture {cpu.arch or '?'}")


def precision(setting: str) -> Precision:
    """`choose` on this machine."""
    return choose(setting, detect())


def engine_info(setting: str) -> dict:
    """What `fedevo evaluate --json` shows under "engine": the precision chosen and why, the CPU, the kernels."""
    from . import native

    cpu = detect()
    p = precision(setting)
    return {"precision": p.name, "precision_reason": p.reason, "cpu": cpu.model or cpu.arch,
            "cpu_flags": cpu.relevant_flags(), "kernels": native.status()}
