"""The native kernels build and pass their checks for other targets than this CPU: an AVX2 machine without
AVX-512 (-march=x86-64-v3), the same with dense32.c's AVX-512 vector width, and a baseline x86-64 (SSE2 only),
or, on Arm, baseline Armv8-A. Each source has a portable path (GNU vector extensions, #if-guarded AVX-512 /
AVX512-BF16 with fallbacks); this compiles every source for the target into a library and runs the kernels'
checks against torch (kernel_checks.py) and one fp32 and one bf16 engine chunk against the eager torch step. On
x86 hosts with an aarch64 cross compiler it also builds the library for Arm (compile and link only)."""

import platform
import shutil
import subprocess

import pytest
import torch

from fedevo import native
from fedevo.config import MLPArch
from fedevo.fl.engine import train_clients

from ..fl.test_engine import _setup
from . import kernel_checks

CC = native.os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

ARCH = platform.machine().lower()
# (-march, extra flags): FEDEVO_VW=16 builds dense32.c's AVX-512 tiles (16-lane vectors, 32-column strips) for an
# AVX2 target, so their logic runs here although no AVX-512 CPU was ever lent to this project.
TARGETS = ([("x86-64-v3", ()), ("x86-64", ()), ("x86-64-v3", ("-DFEDEVO_VW=16",))] if ARCH in ("x86_64", "amd64")
           else [("armv8-a", ())] if ARCH in ("aarch64", "arm64") else [])


def _flags(march: str, *extra: str) -> tuple:
    """native.CFLAGS for another target: -march=native replaced by -march=`march`, then `extra`."""
    return tuple(f"-march={march}" if f == "-march=native" else f for f in native.CFLAGS) + extra


def _accepts(march: str) -> bool:
    r = subprocess.run([CC, f"-march={march}", "-x", "c", "-c", "-", "-o", "/dev/null"], input=b"int x;\n",
                       capture_output=True)
    return r.returncode == 0


@pytest.fixture(scope="module", params=TARGETS or [None], ids=lambda t: " ".join((t[0], *t[1])) if t else "none")
def kernels_for(request):
    if request.param is None:
        pytest.skip(f"no cross-target list for {ARCH}")
    march, extra = request.param
    if not _accepts(march):
        pytest.skip(f"{CC} does not know -march={march}")
    return march, native.load_library(native.build(CC, _flags(march, *extra)))


def test_kernels_match_torch(kernels_for):
    kernel_checks.run_all(kernels_for[1])


def test_without_avx512_bf16_the_bf16_gemm_declines(kernels_for):
    """gemm.c's AVX512-BF16 kernel is compiled out: -1, and the bf16 engine uses torch's matmul instead."""
    k = kernels_for[1]
    bf = torch.zeros(2, 4, 6, dtype=torch.bfloat16)
    assert k.linear_fwd_bf16(bf.data_ptr(), bf.data_ptr(), torch.zeros(2, 6).data_ptr(), bf.data_ptr(), 2, 4, 6, 6,
                             1) == -1


def test_same_noise_as_this_machines_build(kernels_for):
    """The Gaussian stream is the same function of (key, counter) on every target (to float rounding of the
    vectorised log/sin/cos)."""
    here = native.load()
    if here is None:
        pytest.skip("native kernels unavailable")
    a, b = torch.empty(10_000), torch.empty(10_000)
    here.fill(a.data_ptr(), a.numel(), 77, 5, 1.0)
    kernels_for[1].fill(b.data_ptr(), b.numel(), 77, 5, 1.0)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_engine_chunk_equals_eager_step(kernels_for, dtype, monkeypatch):
    monkeypatch.setenv("FEDEVO_SPARSE", "0")
    data, clients, model, params, masks = _setup(MLPArch(layers=2, units=24), sizes=(37, 50, 20), alpha=2.0)
    model.compute_dtype = dtype
    x = data.x_train if dtype == torch.float32 else data.x_train.bfloat16()
    out = {}
    for name, k in (("native", kernels_for[1]), ("eager", None)):
        monkeypatch.setattr(native, "load", lambda k=k: k)
        out[name] = train_clients(model, params, masks, x, data.y_train, clients, epochs=2, batch_size=16, lr=0.1,
                                  gen=torch.Generator().manual_seed(5))
    tol = dict(atol=1e-5, rtol=1e-4) if dtype == torch.float32 else dict(atol=3e-3, rtol=2e-2)
    for a, b, p0 in zip(out["native"], out["eager"], params):
        torch.testing.assert_close(a, b, **tol)
        assert not torch.allclose(a, p0.expand_as(a))


@pytest.mark.parametrize("march", ["x86-64-v4", "sapphirerapids"])
def test_avx512_sources_compile(march):
    """The AVX-512 (16-lane) and AVX512-BF16 paths compile; they run only where the CPU has them (the checks
    above then cover them through this machine's -march=native build)."""
    if ARCH not in ("x86_64", "amd64"):
        pytest.skip("x86 only")
    if not _accepts(march):
        pytest.skip(f"{CC} does not know -march={march}")
    assert native.build(CC, _flags(march)).exists()


ARM_CC = shutil.which("aarch64-linux-gnu-gcc")


@pytest.mark.skipif(ARCH not in ("x86_64", "amd64"), reason="x86 hosts only (on Arm the builds above are native)")
@pytest.mark.skipif(ARM_CC is None, reason="no aarch64 cross compiler (Debian's gcc-aarch64-linux-gnu; .ci/run "
                                           "installs it)")
@pytest.mark.parametrize("march", ["armv8-a", "armv9-a"])
def test_arm_library_builds(march):
    """Every source compiles and links for Arm (NEON through the GNU vector extensions' 4-lane path): baseline
    Armv8-A and Armv9-A (Graviton 4 / Neoverse V2 class, SVE2 and bf16). Compile only: the kernels' checks on Arm
    run by hand under qemu-aarch64 (tests/native/qemu_arm.sh; benchmarks/README.md, "Arm")."""
    lib = native.build(ARM_CC, _flags(march))
    assert lib.read_bytes()[:4] == b"\x7fELF" and lib.read_bytes()[18] == 183  # e_machine EM_AARCH64
