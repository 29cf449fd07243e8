"""The Gaussian sampler behind every mechanism: right distribution, reproducible, thread-count independent."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy import stats

from fedevo import native
from fedevo.privacy.noise import NoiseSource

needs_cc = pytest.mark.skipif((shutil.which("cc") is None and shutil.which("gcc") is None)
                              or os.environ.get("FEDEVO_NATIVE") == "0", reason="no C compiler, or FEDEVO_NATIVE=0")


@pytest.fixture(scope="module")
def native_cache(tmp_path_factory):
    """This module's own build cache, empty at its start: the library is compiled once here, by the first test that
    loads it (a build a test took 5-10 s of each native test on a loaded 2-core machine)."""
    return tmp_path_factory.mktemp("native-cache")


@pytest.fixture
def fresh_native(monkeypatch, native_cache):
    """Forget the loaded library (the next load() decides again, from FEDEVO_NATIVE and CC) and build into this
    module's cache (a build with another compiler, as CC=false, is another file there)."""
    monkeypatch.setenv("FEDEVO_CACHE", str(native_cache))
    monkeypatch.setattr(native, "_state", {})
    yield
    native._state.clear()


@needs_cc
def test_native_sampler_is_used_where_a_compiler_exists():
    assert native.status() == "native"
    assert NoiseSource(0).backend == "native"


@pytest.mark.parametrize("backend", ["native", "torch"])
def test_samples_are_standard_normal_times_std(backend, monkeypatch, fresh_native):
    if backend == "torch":
        monkeypatch.setenv("FEDEVO_NATIVE", "0")
    elif native.load() is None:
        pytest.skip("native sampler unavailable")
    src = NoiseSource(11, threads=2)
    assert src.backend == backend
    x = src.fill_(torch.empty(2_000_001), 0.5).double().numpy() / 0.5
    assert abs(x.mean()) < 5 / np.sqrt(x.size)
    assert abs(x.var() - 1) < 5 * np.sqrt(2 / x.size)
    assert abs(stats.kurtosis(x)) < 5 * np.sqrt(24 / x.size)
    assert stats.kstest(x[:500_000], "norm").pvalue > 1e-3
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 5 / np.sqrt(x.size)
    assert np.abs(x).max() < 6.0  # 24-bit uniforms, like torch: tails end at ~5.77 std


@needs_cc
def test_native_stream_depends_on_seed_and_call_order_not_on_threads():
    a, b, c = NoiseSource(3, threads=1), NoiseSource(3, threads=4), NoiseSource(4, threads=1)
    xa, xb, xc = (torch.empty(100_003) for _ in range(3))
    for _ in range(2):
        a.fill_(xa), b.fill_(xb), c.fill_(xc)
        assert torch.equal(xa, xb)
        assert not torch.equal(xa, xc)
    first = NoiseSource(3, threads=1).fill_(torch.empty(100_003))
    assert not torch.equal(first, xa)  # the second call continued the stream


@needs_cc
def test_loading_the_native_library_keeps_denormals():
    """Built with -ffast-math but linked without it: no flush-to-zero imposed on torch."""
    code = ("import torch; from fedevo import native; assert native.load() is not None; "
            "print(float((torch.tensor([1e-39]) / 10)[0]) > 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "True"


def test_a_failed_build_falls_back_to_torch(monkeypatch, fresh_native):
    monkeypatch.delenv("FEDEVO_NATIVE", raising=False)
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails
    assert native.load() is None
    assert native.status().startswith("torch (build failed")
    src = NoiseSource(1)
    assert src.backend == "torch"
    assert torch.isfinite(src.fill_(torch.empty(1000))).all()


def test_native_sampler_rejects_non_float32(fresh_native):
    src = NoiseSource(1)
    if src.backend != "native":
        pytest.skip("native sampler unavailable")
    with pytest.raises(TypeError, match="float32"):
        src.fill_(torch.empty(10, dtype=torch.float64))


@pytest.mark.parametrize("backend", ["native", "torch"])
@pytest.mark.parametrize("threads", [1, 3])
def test_add_rows_is_fill_scale_mask_add_in_one_pass(backend, threads, monkeypatch, fresh_native):
    """ULDP-FED's upload noise: the same numbers as the four-op form, whatever the thread split."""
    if backend == "torch":
        monkeypatch.setenv("FEDEVO_NATIVE", "0")
    elif native.load() is None:
        pytest.skip("native sampler unavailable")
    g = torch.Generator().manual_seed(0)
    c, n = 4, 70_001  # rows not aligned to the sampler's blocks
    base = torch.randn(c, n, generator=g)
    std = torch.tensor([0.5, 2.0, 0.0, 1e-3])
    mask = (torch.rand(n, generator=g) < 0.7).float()
    for m in (mask, None):
        ref_src, src = NoiseSource(5, threads=threads), NoiseSource(5, threads=threads)
        noise = ref_src.fill_(torch.empty(c, n), 1.0).mul_(std.unsqueeze(1))
        want = base + (noise if m is None else noise.mul_(m))
        got = src.add_rows_(base.clone(), std, m)
        assert torch.equal(got, want)
        assert src.counter == ref_src.counter  # the stream advanced as far
    assert not torch.equal(got, base)
