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

And where training runs: `device(setting)` resolves a config's `device` ('auto', 'cpu', 'cuda') to a torch
device, `cuda_setup()` makes CUDA's fp32 arithmetic full fp32 (no TF32) and cuDNN deterministic.
"""

from __future__ import annotations

import contextlib
import functools
import os
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


def cores() -> int:
    """The CPUs this process may run on (its affinity: a cpuset, taskset or a batch job's share; os.cpu_count()
    counts the machine's)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


_SHARE = None  # inside `sharing`: what `side_threads` returns


def side_threads() -> int:
    """Threads a kernel of a run's CPU side that parallelises on its own (secure aggregation's encoding) may take
    now: torch's intra-op count, or inside `sharing(fn)`, fn() (a batched generation: its cores over the runs whose
    sides are running at that moment, so that a lone run's side at a batch's tail takes the idle cores)."""
    share = _SHARE
    if share is None:
        import torch

        return torch.get_num_threads()
    return max(1, int(share()))


@contextlib.contextmanager
def sharing(share):
    """Inside, `side_threads()` is share() (a callable, asked at each use)."""
    global _SHARE
    before, _SHARE = _SHARE, share
    try:
        yield
    finally:
        _SHARE = before


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


def precision(setting: str, device: str = "cpu") -> Precision:
    """`choose` on this machine; on CUDA (`device` 'cuda') 'auto' is fp32 with TF32 off (`cuda_setup`): the
    device path then computes what the CPU path computes within the tolerance docs/engine.md states."""
    if device == "cuda" and setting == "auto":
        return Precision("fp32", "auto on CUDA: fp32 with TF32 off (the documented tolerance to the CPU path; "
                                 "precision = 'bf16' opts into bf16 matmuls)")
    return choose(setting, detect())


def device(setting: str):
    """The torch.device local training runs on for a config's `device` setting: 'cpu', 'cuda' (a FedevoError
    when torch sees no GPU) or 'auto' (cuda when torch sees one; the FEDEVO_DEVICE environment variable, 'cpu'
    or 'cuda' in any case, overrides what 'auto' picks: the test suite sets it to 'cpu'; another value is a
    SetupError, envvars.env_choice). CUDA comes set up by `cuda_setup`.

    Under Ray, a task sees the GPUs Ray gave it (CUDA_VISIBLE_DEVICES); fedevo's runner hides every GPU from
    tasks that reserved none (search/runner.py), so 'auto' trains those on the CPU."""
    return device_choice(setting)[0]


def device_choice(setting: str):
    """(torch.device, one line saying why) for a `device` setting; see `device`."""
    import torch

    from .errors import FedevoError, NoDeviceError

    if setting not in ("auto", "cpu", "cuda"):
        raise FedevoError(f"device must be 'auto', 'cpu' or 'cuda', got {setting!r}")
    reason = f"device = {setting!r} in the configuration"
    if setting == "auto":
        env = _device_override()
        if env is not None:
            setting, reason = env, f"auto: FEDEVO_DEVICE={env}"
    if setting == "cpu":
        return torch.device("cpu"), reason
    if not torch.cuda.is_available():
        if setting == "cuda":
            raise NoDeviceError("device='cuda' but torch sees no GPU (torch.cuda.is_available() is False"
                              + _no_gpu_hint(torch) + "); use device = 'auto' or 'cpu'")
        return torch.device("cpu"), "auto: torch sees no GPU"
    cuda_setup()
    return torch.device("cuda", torch.cuda.current_device()), "auto: torch sees a GPU" if setting == "auto" else reason


def _device_override() -> str | None:
    """FEDEVO_DEVICE: what 'auto' becomes ('cpu' or 'cuda'), None where unset; another value is a SetupError."""
    from .envvars import env_choice

    return env_choice("FEDEVO_DEVICE", ("cpu", "cuda"), None, expected="'cpu' or 'cuda' (or unset)")


def may_use_gpu(setting: str) -> bool:
    """Whether a config's `device` setting may train on a GPU in this process (the device path): 'cuda', or 'auto'
    where FEDEVO_DEVICE does not say 'cpu' and torch sees a GPU. Resolves nothing (no cuda_setup) and raises
    nothing: for checks made before a run (a user model's load-time training step; a FEDEVO_DEVICE it cannot read
    is left to the run, which names it)."""
    from .errors import SetupError

    if setting == "cuda":
        return True
    if setting != "auto":
        return False
    try:
        env = _device_override()
    except SetupError:
        env = None
    if env is not None:
        return env == "cuda"
    import torch

    return bool(torch.cuda.is_available())


def training_device(setting: str, *, in_process: bool, gpus_per_task: float = 0.0) -> str:
    """'cpu' or 'cuda': where a training of a config's `device` setting runs, said before it runs (what a retrain's
    continuation must match). In-process: as `may_use_gpu` says. In a Ray task, 'auto' trains on the GPU the task
    reserved (gpus_per_task > 0), else on the CPU (the runner hides every GPU from a task that reserved none),
    unless FEDEVO_DEVICE names one; 'cpu' and 'cuda' say it themselves."""
    from .errors import SetupError

    if in_process or setting != "auto":
        return "cuda" if may_use_gpu(setting) else "cpu"
    try:
        env = _device_override()
    except SetupError:
        env = None
    return env or ("cuda" if gpus_per_task > 0 else "cpu")


def _no_gpu_hint(torch) -> str:
    import os

    if torch.version.cuda is None:
        return f": torch {torch.__version__} is a CPU-only build"
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        # said in a Ray task (or its --eval-timeout child), where errors.arg cannot know the caller's spelling: both
        return ": CUDA_VISIBLE_DEVICES is empty (a Ray task that reserved no GPU: --gpus-per-task / gpus_per_task)"
    return ""


def cuda_setup() -> None:
    """fp32 matmuls and convolutions in full fp32 (no TF32: cuDNN's convolutions default to it) and deterministic
    cuDNN algorithms, so that a seed gives the same numbers on the same GPU and the CPU path's within the
    documented tolerance. Process-wide torch flags; set on every resolution of a CUDA device."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


GPU_SHARE = "FEDEVO_GPU_SHARE"


def gpu_share(share: float):
    """Inside, this process (and a child it starts: an evaluation under --eval-timeout) plans for `share`
    (0 < share <= 1) of its GPU's memory: FEDEVO_GPU_SHARE set, the previous value put back after. fedevo's
    runner sets it around a Ray task that reserved --gpus-per-task < 1 (0.25: three other tasks share the GPU)."""
    from .envvars import env_set

    if not 0 < share <= 1:
        raise ValueError(f"a GPU share is in (0, 1], got {share!r}")
    return env_set(GPU_SHARE, repr(float(share)))


def gpu_total(dev) -> int:
    """Bytes of a CUDA device's memory this process's share holds (FEDEVO_GPU_SHARE, `gpu_share`; all of it
    where unset)."""
    import torch

    from .envvars import env_share

    return int(torch.cuda.get_device_properties(dev).total_memory * (env_share(GPU_SHARE) or 1.0))


def gpu_available(dev) -> int:
    """Bytes of a CUDA device's memory this process may still plan to use: its share (`gpu_total`) less what its
    tensors hold, and no more than the device has free now plus what torch's allocator keeps free in its cache
    (another process's use counted)."""
    import torch

    free, _ = torch.cuda.mem_get_info(dev)
    allocated = torch.cuda.memory_allocated(dev)
    cached = torch.cuda.memory_reserved(dev) - allocated
    return max(0, min(gpu_total(dev) - allocated, free + cached))


def gpu_name(dev) -> str:
    import torch

    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else ""


@dataclass(frozen=True)
class Engine:
    """Where an evaluation trains and in which compute precision, resolved once (`resolve`, called by
    fl/simulate.prepare) and handed down to the round loop and to the result's `engine` info."""

    device: object  # torch.device
    device_reason: str
    precision: Precision

    def info(self) -> dict:
        """What `fedevo evaluate --json` shows under "engine": the device and the precision chosen and why, the CPU,
        the native kernels (CPU path only), the GPU's name on CUDA."""
        from . import native

        cpu = detect()
        out = {"device": self.device.type, "device_reason": self.device_reason, "precision": self.precision.name,
               "precision_reason": self.precision.reason, "cpu": cpu.model or cpu.arch,
               "cpu_flags": cpu.relevant_flags()}
        if self.device.type == "cuda":
            import torch

            out.update(gpu=gpu_name(self.device), cuda=torch.version.cuda,
                       kernels="not used (the CUDA device path runs torch ops)")
        else:
            out.update(kernels=native.status())
        return out


def resolve(setting: str, device_setting: str = "cpu") -> Engine:
    """The device (`device_choice`: a FedevoError for 'cuda' without a GPU) and the precision on it, once."""
    dev, why = device_choice(device_setting)
    return Engine(device=dev, device_reason=why, precision=precision(setting, dev.type))


def engine_info(setting: str, device_setting: str = "cpu") -> dict:
    """`resolve(...).info()`: the engine info of a precision and a device setting."""
    return resolve(setting, device_setting).info()
