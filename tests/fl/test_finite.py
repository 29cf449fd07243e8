"""all_finite answers as torch.isfinite(t).all() does, for every kind of tensor the simulator checks."""

import pytest
import torch

from fedevo.fl.finite import all_finite


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bad", [None, float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("shape", [(1,), (7,), (3, 1000), (2, 3, 4)])
def test_all_finite_is_isfinite_all(dtype, bad, shape):
    g = torch.Generator().manual_seed(hash((str(dtype), shape)) % 2**31)
    for where in range(3):
        x = (torch.randn(shape, generator=g) * 1e3).to(dtype)
        if bad is not None:
            flat = x.view(-1)
            flat[[0, flat.numel() // 2, flat.numel() - 1][where]] = bad
        assert all_finite(x) == bool(torch.isfinite(x).all()) == (bad is None)


def test_mixed_nan_and_inf_and_edge_cases():
    assert not all_finite(torch.tensor([float("inf"), float("nan"), -float("inf")]))
    assert not all_finite(torch.tensor([1.0, -float("inf")]))
    assert all_finite(torch.tensor([torch.finfo(torch.float32).max, torch.finfo(torch.float32).min]))
    assert all_finite(torch.empty(0)) and all_finite(torch.empty(0, 5))
    assert all_finite(torch.arange(5)) and all_finite(torch.tensor([True, False]))
    assert not all_finite(torch.tensor([1 + 1j, complex(0, float("nan"))]))
    assert all_finite(torch.tensor([1 + 1j, 2 - 3j]))
    assert all_finite(torch.randn(4, 5).t())  # non-contiguous
    assert all_finite(torch.tensor([1 + 1j]).conj())  # a conjugate view
    assert not all_finite(torch.tensor([1 + 1j, complex(float("nan"), 0)]).conj())
    if hasattr(torch, "float8_e5m2"):  # no aminmax for it: the plain check answers
        assert all_finite(torch.tensor([1.0, 2.0]).to(torch.float8_e5m2))
        assert not all_finite(torch.tensor([1.0, float("inf")]).to(torch.float8_e5m2))


@pytest.mark.cuda
def test_all_finite_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")
    x = torch.randn(100, 1000, device="cuda")
    assert all_finite(x)
    x[50, 500] = float("nan")
    assert not all_finite(x)
