"""The stacked trainer's fused masked weight update (fl/stacked_update.py): its Triton kernel against the plain
update (cuBLAS's GEMM then the mask product; here torch's CPU ops) under Triton's interpreter on the CPU — uneven
shapes, short batches, masked or not, strided inputs — and the stacked trainer with it against the plain loop, in
a subprocess with TRITON_INTERPRET=1 (skipped where Triton is not installed); the mode's setting; the fallback
when the kernel cannot run. On a GPU, tests/fl/test_cuda.py runs the compiled kernel (`pytest -m cuda`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from fedevo.errors import SetupError
from fedevo.fl import stacked_update

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")


def _interpreted(code: str, **env) -> str:
    """Run `code` in a fresh interpreter with TRITON_INTERPRET=1 (Triton reads it when a kernel is defined)."""
    full = {**os.environ, "TRITON_INTERPRET": "1", **env}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@needs_triton
def test_kernel_equals_plain_update_under_the_interpreter():
    out = _interpreted("""
        import torch
        from fedevo.fl import stacked_update as su
        g = torch.Generator().manual_seed(0)
        worst = 0.0
        for C, K, N, B, masked in [(2, 70, 37, 24, True), (3, 64, 64, 64, False), (1, 129, 10, 1, True),
                                   (2, 20, 130, 17, True), (4, 5, 3, 7, False)]:
            W = torch.randn(C, K, N, generator=g)
            h = torch.randn(C, B, K, generator=g)
            d = torch.randn(C, B, N, generator=g)
            M = (torch.rand(C, K, N, generator=g) < 0.3).to(torch.uint8) if masked else None
            ref = su.plain_(W.clone(), h, d, None if M is None else M.float())
            got = su.update_(W.clone(), h, d, M)
            assert got.shape == ref.shape
            if masked:  # inactive weights are exactly 0
                assert bool((got[M == 0] == 0).all())
            worst = max(worst, float(((got - ref).abs() / (ref.abs() + 1)).max()))
            changed = float((got - W).abs().max())
            assert changed > 0.1, changed
        # a strided h (the transpose of a contiguous tensor) and a float mask: the same numbers
        W = torch.randn(2, 30, 12, generator=g); h = torch.randn(2, 30, 9, generator=g).transpose(1, 2)
        d = torch.randn(2, 9, 12, generator=g); M = (torch.rand(2, 30, 12, generator=g) < .5).float()
        worst = max(worst, float((su.update_(W.clone(), h, d, M) - su.plain_(W.clone(), h, d, M)).abs().max()))
        # more clients than one launch takes (CUDA's grid limit, here 2): launched in slices, every client updated
        su.MAX_GRID_Z = 2
        W = torch.randn(5, 20, 40, generator=g); h = torch.randn(5, 8, 20, generator=g)
        d = torch.randn(5, 8, 40, generator=g); M = (torch.rand(5, 20, 40, generator=g) < .5).to(torch.uint8)
        worst = max(worst, float((su.update_(W.clone(), h, d, M) - su.plain_(W.clone(), h, d, M.float())).abs().max()))
        print(worst)
    """)
    assert float(out.strip()) < 1e-5  # fp32 rounding of B products summed in another order


@needs_triton
def test_stacked_trainer_with_the_fused_update_equals_the_plain_loop():
    """Members with SET masks and without, padded in one bucket: the trainer with the kernel (masked layers, then
    every layer, then the masked layers with the biases inside the weights) gives the plain loop's updates within
    fp32 rounding, inactive and padded weights stay zero."""
    out = _interpreted("""
        import torch
        import tests.fl.test_stacked as ts
        from fedevo.fl import stacked, stacked_update as su
        # one epoch (test_stacked's members train two): the interpreter runs each kernel launch in Python, and one
        # epoch has every case already (uneven clients, a short last batch, chunks idle at different steps)
        members = [ts._member(units=24, alpha=2.0, epochs=1)[1],
                   ts._member(units=17, alpha=3.0, lr=0.05, seed=1, shift=5, epochs=1)[1],
                   ts._member(units=20, lr=0.2, seed=2, shift=9, epochs=1)[1]]
        assert su.usable("cpu"), su.status("cpu")
        got = {}
        for mode in ("off", "masked", "all"):
            import os
            os.environ["FEDEVO_CUDA_FUSED_UPDATE"] = mode
            got[mode] = stacked.train_members(members, ts.DATA.x_train, ts.DATA.y_train, device="cpu")
        os.environ["FEDEVO_BIAS_IN_WEIGHTS"] = "1"  # the kernel on the layout's strided views (fl/stacked_bias.py)
        for mode in ("masked", "all"):
            os.environ["FEDEVO_CUDA_FUSED_UPDATE"] = mode
            got["bias in weights", mode] = stacked.train_members(members, ts.DATA.x_train, ts.DATA.y_train,
                                                                 device="cpu")
        for mode in ("masked", "all", ("bias in weights", "masked"), ("bias in weights", "all")):
            for a, b in zip(got[mode], got["off"]):
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
        m, flat = members[1], got["masked"][1]
        W0 = flat[:, :m.params[0].numel()].view(-1, *m.params[0].shape)
        assert bool((W0[:, m.masks[0] == 0] == 0).all())  # local − global is 0 where the mask is 0
        assert float(flat.abs().max()) > 1e-3
        print("ok")
    """, PYTHONPATH=os.getcwd(), FEDEVO_CUDA_FUSED_UPDATE="masked")
    assert out.strip().endswith("ok")


def test_mode_setting(monkeypatch):
    monkeypatch.delenv("FEDEVO_CUDA_FUSED_UPDATE", raising=False)
    assert stacked_update.mode() == "masked"
    for v in ("ALL", "off", " masked "):
        monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", v)
        assert stacked_update.mode() == v.strip().lower()
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "1")
    with pytest.raises(SetupError, match="FEDEVO_CUDA_FUSED_UPDATE must be 'masked', 'all' or 'off'"):
        stacked_update.mode()


def test_by_default_only_a_bucket_to_be_captured_uses_the_kernel(monkeypatch):
    """Unset, the masked layers of a bucket to be captured as a CUDA graph only (an eager bucket keeps cuBLAS's
    GEMM and the mask product: on an H100 eager generations ran faster so); set, its mode in every bucket; never
    in a hooked bucket, nor 'masked' in a bucket without masks."""
    mode = stacked_update.bucket_mode
    monkeypatch.delenv("FEDEVO_CUDA_FUSED_UPDATE", raising=False)
    assert mode(masked=True, hooked=False, captured=True) == "masked"
    assert mode(masked=True, hooked=False, captured=False) == "off"
    assert mode(masked=False, hooked=False, captured=True) == "off"
    assert mode(masked=True, hooked=True, captured=True) == "off"
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "masked")
    assert mode(masked=True, hooked=False, captured=False) == "masked"
    assert mode(masked=False, hooked=False, captured=False) == "off"
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "all")
    assert mode(masked=False, hooked=False, captured=False) == "all"
    assert mode(masked=True, hooked=True, captured=True) == "off"
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "off")
    assert mode(masked=True, hooked=False, captured=True) == "off"


def test_a_bucket_asks_by_whether_it_is_to_be_captured(monkeypatch):
    """_Bucket passes captured = its graph is to recur (`recurs` not False): a 5-round generation's buckets, which
    are never captured, update with torch's ops; a bucket of members with enough rounds left, in the kernel."""
    import tests.fl.test_stacked as ts
    from fedevo.fl import stacked

    asked = []
    monkeypatch.setattr(stacked_update, "bucket_mode", lambda **kw: asked.append(kw) or "off")
    monkeypatch.setattr(stacked, "graphs_enabled", lambda: True)
    monkeypatch.setattr(stacked, "plan", lambda *a, **k: ([64], [None], None))  # no CUDA tensors made here
    m = ts._member(alpha=2.0)[1]
    for left, want in ((2, False), (10, True), (None, True)):
        monkeypatch.setattr(m, "rounds_left", left)
        stacked._Bucket([m], ts.DATA.y_train, torch.device("cuda"))
        assert asked[-1]["captured"] is want, left
    stacked._Bucket([m], ts.DATA.y_train, torch.device("cpu"))
    assert asked[-1]["captured"] is False


def test_not_used_on_the_cpu_without_the_interpreter_and_the_variable(monkeypatch):
    stacked_update.reset()
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "all")
    assert not stacked_update.usable("cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # a user debugging Triton: a CPU run keeps torch's ops
    monkeypatch.delenv("FEDEVO_CUDA_FUSED_UPDATE")
    assert not stacked_update.usable("cpu")
    assert stacked_update.status("cpu") is None  # nothing was checked


def test_a_kernel_that_cannot_run_warns_once_and_the_plain_loop_trains(monkeypatch):
    """Where the check fails (here: the kernel raises, as without Triton or a compiler), one warning, `usable` is
    False from then on, and a bucket trains with the plain update (the CPU's numbers)."""
    import tests.fl.test_stacked as ts
    from fedevo.fl import stacked

    stacked_update.reset()
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "masked")
    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise ImportError("No module named 'triton'")

    monkeypatch.setattr(stacked_update, "update_", broken)
    try:
        with pytest.warns(RuntimeWarning, match="fused masked update is not used on cpu .*ImportError"):
            assert not stacked_update.usable("cpu")
        assert not stacked_update.usable("cpu") and len(calls) == 1  # checked once
        assert "ImportError" in stacked_update.status("cpu")
        m = ts._member(alpha=2.0)[1]
        monkeypatch.delenv("TRITON_INTERPRET")
        (plain,) = stacked.train_members([m], ts.DATA.x_train, ts.DATA.y_train, device="cpu")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        (got,) = stacked.train_members([m], ts.DATA.x_train, ts.DATA.y_train, device="cpu")
        assert torch.equal(got, plain) and len(calls) == 1
    finally:
        stacked_update.reset()


def test_engine_label_names_the_kernel_only_where_the_process_used_it(monkeypatch):
    from fedevo.fl import stacked_settings

    monkeypatch.delenv("FEDEVO_CUDA_FUSED_UPDATE", raising=False)
    cuda = {"device": "cuda", "kernels": "not used (the CUDA device path runs torch ops)"}
    stacked_update.reset()
    try:
        assert stacked_settings.engine_label(cuda) == cuda  # not checked on a GPU: nothing to say
        monkeypatch.setitem(stacked_update._CHECKED, "cuda:0", True)
        assert "SET-masked layers in one Triton kernel" in stacked_settings.engine_label(cuda)["kernels"]
        assert stacked_settings.engine_label({"device": "cpu"}) == {"device": "cpu"}
        monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "all")
        assert "all layers" in stacked_settings.engine_label(cuda)["kernels"]
        monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", "off")
        assert stacked_settings.engine_label(cuda) == cuda
        monkeypatch.delenv("FEDEVO_CUDA_FUSED_UPDATE")
        monkeypatch.setitem(stacked_update._CHECKED, "cuda:0", "ImportError: No module named 'triton'")
        assert stacked_settings.engine_label(cuda)["kernels"] == (
            "torch ops (the fused update's Triton kernel not used: ImportError: No module named 'triton')")
    finally:
        stacked_update.reset()


@pytest.mark.cuda
def test_on_cuda_the_kernel_passes_its_check_and_the_trainer_equals_the_plain_loop(monkeypatch):
    """On a GPU: the compiled kernel passes `usable`'s check (fp32 and TF32); the trainer with it (eager, then a
    captured CUDA graph replayed: the same shapes three times) gives the plain loop's updates within fp32 rounding,
    and the same numbers bit for bit each time (no atomics)."""
    import tests.fl.test_stacked as ts
    from fedevo.fl import stacked

    stacked_update.reset()
    assert stacked_update.usable("cuda"), stacked_update.status("cuda")
    members = [ts._member(units=24, alpha=2.0)[1], ts._member(units=17, alpha=3.0, lr=0.05, seed=1, shift=5)[1]]
    x = ts.DATA.x_train.cuda()
    got = {}
    for mode in ("off", "masked", "all"):
        monkeypatch.setenv("FEDEVO_CUDA_FUSED_UPDATE", mode)
        runs = [[f.cpu() for f in stacked.train_members(members, x, ts.DATA.y_train, device="cuda")]
                for _ in range(3)]
        for again in runs[1:]:
            assert all(torch.equal(a, b) for a, b in zip(again, runs[0]))
        got[mode] = runs[0]
    for mode in ("masked", "all"):
        for a, b in zip(got[mode], got["off"]):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_a_launch_that_raises_later_falls_back_to_the_plain_update_once(monkeypatch):
    """A kernel that passed its check but raises at a later launch (a new shape's compile failing): that step gets
    the plain update (the same numbers: nothing was launched), one warning, and the plain update from then on."""
    stacked_update.reset()
    monkeypatch.setitem(stacked_update._CHECKED, "cpu", True)
    calls = []

    def broken(*a, **k):
        calls.append(1)
        raise RuntimeError("PassManager::run failed\nmore")

    monkeypatch.setattr(stacked_update, "update_", broken)
    g = torch.Generator().manual_seed(1)
    W, h, d = torch.randn(2, 6, 5, generator=g), torch.randn(2, 3, 6, generator=g), torch.randn(2, 3, 5, generator=g)
    M = (torch.rand(2, 6, 5, generator=g) < 0.5).to(torch.uint8)
    want = stacked_update.plain_(W.clone(), h, d, M.float())
    try:
        with pytest.warns(RuntimeWarning, match=r"not used on cpu \(RuntimeError: PassManager::run failed\)"):
            got = stacked_update.apply_(W.clone(), h, d, M)
        assert torch.equal(got, want)
        assert torch.equal(stacked_update.apply_(W.clone(), h, d, M), want) and len(calls) == 1
        assert stacked_update.status("cpu") == "RuntimeError: PassManager::run failed"
    finally:
        stacked_update.reset()
