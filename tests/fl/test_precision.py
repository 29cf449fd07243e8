"""precision = "auto" follows the CPU's real bf16 features (fedevo.hardware), not oneDNN's emulation."""

import json

import pytest
import torch

from fedevo import hardware
from fedevo.fl.rounds import compute_dtype
from fedevo.hardware import CPUInfo, choose, parse_cpuinfo

COMMON_X86 = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 popcnt avx f16c"
CPUS = {  # (arch, /proc/cpuinfo flags or Features) -> expected precision
    "zen5": ("x86_64", COMMON_X86 + " avx2 bmi2 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512_bf16 "
                                    "avx512_vp2intersect", "bf16"),
    "sapphire_rapids": ("x86_64", COMMON_X86 + " avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16 avx512_fp16 "
                                               "amx_bf16 amx_tile amx_int8", "bf16"),
    "amx_only_listed": ("x86_64", COMMON_X86 + " avx2 avx512f amx_bf16 amx_tile", "bf16"),
    "icelake": ("x86_64", COMMON_X86 + " avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi "
                                       "avx512_vnni avx512_bitalg avx512_vpopcntdq", "fp32"),
    "skylake_x": ("x86_64", COMMON_X86 + " avx2 avx512f avx512dq avx512cd avx512bw avx512vl", "fp32"),
    "zen3": ("x86_64", COMMON_X86 + " avx2 bmi1 bmi2 sha_ni vaes vpclmulqdq", "fp32"),
    "graviton3": ("aarch64", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
                             "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs "
                             "paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng", "bf16"),
    "graviton2": ("aarch64", "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
                             "dcpop asimddp ssbs", "fp32"),
    "arm_svebf16_name_only": ("aarch64", "fp asimd sve svebf16", "fp32"),  # only the exact 'bf16' feature counts
    "x86_no_flags": ("x86_64", "", "fp32"),
    "arm_no_features": ("aarch64", "", "fp32"),
    "riscv": ("riscv64", "rv64imafdc", "fp32"),
    "unknown": ("", "", "fp32"),
}


@pytest.mark.parametrize("name", sorted(CPUS))
def test_auto_precision_by_cpu_class(name):
    arch, flags, want = CPUS[name]
    key = "Features" if arch == "aarch64" else "flags"
    cpu = parse_cpuinfo(f"processor\t: 0\nmodel name\t: {name}\n{key}\t\t: {flags}\n\nprocessor\t: 1\n", arch)
    p = choose("auto", cpu)
    assert p.name == want, p.reason
    assert p.reason.startswith("auto: ") and len(p.reason.splitlines()) == 1
    if want == "fp32" and "avx512f" in flags:
        assert "emulate" in p.reason  # says why AVX-512 alone is not enough


@pytest.mark.parametrize("setting", ["fp32", "bf16"])
def test_explicit_setting_wins(setting):
    for arch, flags, _ in CPUS.values():
        assert choose(setting, CPUInfo(arch, "", frozenset(flags.split()))).name == setting


def test_bad_setting():
    with pytest.raises(ValueError, match="precision"):
        choose("fp16", CPUInfo("x86_64", "", frozenset()))


def test_compute_dtype_ignores_onednn_emulation(monkeypatch):
    """An AVX-512 CPU without native bf16: oneDNN says bf16 is 'supported' (emulated), auto still picks fp32."""
    arch, flags, _ = CPUS["icelake"]
    monkeypatch.setattr(hardware, "detect", lambda: CPUInfo(arch, "Xeon", frozenset(flags.split())))
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)
    assert compute_dtype("auto") == torch.float32
    arch, flags, _ = CPUS["sapphire_rapids"]
    monkeypatch.setattr(hardware, "detect", lambda: CPUInfo(arch, "Xeon", frozenset(flags.split())))
    assert compute_dtype("auto") == torch.bfloat16
    assert compute_dtype("fp32") == torch.float32


def test_this_machine_is_read():
    cpu = hardware.detect()
    native_bf16 = bool({"avx512_bf16", "amx_bf16", "bf16"} & cpu.flags)
    assert (hardware.precision("auto").name == "bf16") == native_bf16
    assert set(cpu.relevant_flags()) <= cpu.flags


def test_evaluate_json_shows_engine(tiny_problem, capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(["evaluate", "--problem", tiny_problem.path, "--json"], capsys)
    assert code == 0, err
    eng = json.loads(out)["engine"]  # the problem leaves precision at its default, "auto"
    assert (eng["precision"], eng["precision_reason"]) == (hardware.precision("auto").name,
                                                           hardware.precision("auto").reason)
    assert eng["cpu"] and eng["kernels"]
