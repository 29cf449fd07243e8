"""The first layer's updates once a window of k steps (fl/stacked_window.py, FEDEVO_FIRST_LAYER_WINDOW): on the CPU
(the code a GPU runs) the windowed loop equals the plain loop within fp32 rounding — padded members of other widths,
a one-layer member, later layers SET-masked, clients that idle at different steps, the pointwise functions of
torch_compile uncompiled — while updating the first layer once a window; a masked first layer or a per-step hook
keeps the plain loop; the loop makes no host synchronisation (fake CUDA tensors); a bad value is one line."""

from __future__ import annotations

import math

import pytest
import torch

from fedevo.errors import SetupError
from fedevo.fl import stacked, stacked_fused, stacked_window
from fedevo.fl.stacked import _Bucket, train_members

from .test_stacked import CPU, DATA, _member

ATOL, RTOL = 1e-6, 1e-5  # |windowed − plain| after a round of 2 epochs: a reassociation of the same sums


def _later_masked(**kw):
    """A member whose second layer only is SET-masked (the first dense: the window applies)."""
    _, m = _member(alpha=2.0, **kw)
    m.params[0] = _member(**kw)[1].params[0]  # the same draw, unmasked (the masks are drawn after the weights)
    m.masks = {i: v for i, v in m.masks.items() if i != 0}
    return m


def _members():
    return [_member(units=24)[1], _member(units=17, lr=0.05, seed=1, shift=5)[1],
            _member(units=20, lr=0.2, seed=2, shift=9, epochs=3)[1], _later_masked(units=21, seed=4, shift=3),
            _member(layers=1, units=30, seed=3)[1]]


def assert_same_training(members, plain, got):
    """Each member's updates `got` equal the plain loop's `plain` within fp32 rounding, the clients moved, and the
    inactive weights of a SET mask stayed 0."""
    for m, a, b in zip(members, plain, got):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=RTOL)
        assert float(a.abs().max()) > 1e-3  # the clients moved
        for i, mask in m.masks.items():  # inactive weights stay 0
            off = sum(p.numel() for p in m.params[:i])
            assert torch.all(b[:, off:off + m.params[i].numel()].view(-1, *m.params[i].shape)[:, mask == 0] == 0)


@pytest.mark.parametrize("k", [2, 3, 7, 1000])
def test_a_windowed_round_equals_the_plain_loop(monkeypatch, k):
    members = _members()
    plain = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    updates = []
    monkeypatch.setattr(stacked_window.Window, "update",
                        lambda self, W, f=stacked_window.Window.update: (updates.append(len(self.sizes)), f(self, W)))
    monkeypatch.setenv(stacked_window.VARIABLE, str(k))
    got = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    assert_same_training(members, plain, got)
    # the first layer was updated once a window: the 2-layer bucket's steps and the 1-layer one's, in windows of k
    buckets = {}
    for m in members:
        buckets.setdefault(stacked.bucket_key(m), []).append(m)
    steps = [len(_Bucket(ms, DATA.y_train, CPU).used) for ms in buckets.values()]
    assert len(updates) == sum(math.ceil(s / k) for s in steps) and max(updates) == min(k, max(steps))


def float64_member(shape, *, layers: int, units: int, bounds, epochs: int, batch_size: int):
    """(x, y, member) in float64: random data of `shape` (bounds[-1] samples, 10 classes), an MLP of `layers`
    hidden layers of `units`, one chunk of clients of unequal sizes (their last sample indices `bounds`)."""
    import numpy as np

    from fedevo.config import MLPArch
    from fedevo.models import build_model

    g = torch.Generator().manual_seed(0)
    n = bounds[-1]
    x = torch.randn(n, math.prod(shape), generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (n,), generator=g)
    model = build_model(MLPArch(layers=layers, units=units), shape, 10)
    params = [p.double() for p in model.init(g)]
    clients = [np.arange(a, b) for a, b in zip((0, *bounds[:-1]), bounds)]
    return x, y, stacked.Member(dims=model.dims, params=params, masks={}, lr=0.05, chunks=[clients], seeds=[3],
                                epochs=epochs, batch_size=batch_size)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_the_window_is_exact_in_float64(monkeypatch, k):
    """The window is a reassociation of the same sums, not an approximation: in float64 the reference round's shape
    (784-200-200-10, B = 64, E = 5, unequal clients: short last batches) trains to the plain loop's numbers within
    1e-12, where fp32's rounding, amplified by ReLUs switching, leaves up to ~4e-4 (benchmarks' smoke test)."""
    x, y, member = float64_member((1, 28, 28), layers=2, units=200, bounds=(600, 1000, 1300), epochs=5,
                                  batch_size=64)
    torch.set_default_dtype(torch.float64)  # the stacked state is made in the default dtype
    try:
        (plain,) = train_members([member], x, y, device=CPU)
        monkeypatch.setenv(stacked_window.VARIABLE, str(k))
        (got,) = train_members([member], x, y, device=CPU)
    finally:
        torch.set_default_dtype(torch.float32)
    assert plain.dtype == torch.float64 and float(plain.abs().max()) > 1e-3
    assert float((got - plain).abs().max()) <= 1e-12 * float(plain.abs().max())


def test_the_pointwise_functions_in_a_window_equal_the_plain_loop(monkeypatch):
    """torch_compile's functions (uncompiled here: the same code) around the window's first layer."""
    members = _members()[:3]

    def trained(fns):
        bucket = _Bucket(members, DATA.y_train, CPU)
        state: dict = {}
        bucket.load(state)
        bucket.loop(state, DATA.x_train.reshape(len(DATA.x_train), -1), fns)
        return bucket, bucket.deltas(state)
    _, plain = trained(None)
    monkeypatch.setenv(stacked_window.VARIABLE, "4")
    bucket, got = trained(stacked_fused.PLAIN)
    assert bucket.window == 4
    for a, b in zip(plain, got):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=RTOL)


def test_a_masked_first_layer_or_a_hook_keeps_the_plain_loop(monkeypatch):
    from fedevo.privacy.mechanisms import StepLDP

    monkeypatch.setenv(stacked_window.VARIABLE, "4")
    assert _Bucket([_member(units=24)[1]], DATA.y_train, CPU).window == 4
    assert _Bucket([_member(units=24, alpha=2.0)[1]], DATA.y_train, CPU).window == 1
    assert _Bucket([_member(units=24)[1], _member(units=20, alpha=2.0)[1]], DATA.y_train, CPU).window == 1
    hooked = _member(units=24)[1]
    hooked.hook = StepLDP(sigma=0.1, clip=1.0).for_group(hooked.seeds, [len(c) for c in hooked.chunks], CPU)
    assert _Bucket([hooked], DATA.y_train, CPU).window == 1
    monkeypatch.setenv(stacked_window.VARIABLE, "1")
    assert _Bucket([_member(units=24)[1]], DATA.y_train, CPU).window == 1
    monkeypatch.delenv(stacked_window.VARIABLE)
    assert _Bucket([_member(units=24)[1]], DATA.y_train, CPU).window == 1  # off by default


def test_a_bad_window_is_one_line(monkeypatch):
    monkeypatch.setenv(stacked_window.VARIABLE, "four")
    with pytest.raises(SetupError, match=f"^{stacked_window.VARIABLE} must be an integer"):
        _Bucket([_member(units=24)[1]], DATA.y_train, CPU)


def test_the_windowed_loop_on_fake_cuda(monkeypatch):
    """The windowed loop on fake CUDA tensors (FakeTensorMode: shapes and devices, no data), as
    tests/fl/test_device.py runs fl/device.py's: a CPU tensor meeting a CUDA one raises, and so does a host
    synchronisation (`.item()`, `bool()`, boolean indexing) inside the loop (it is captured in a CUDA graph)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setenv(stacked_window.VARIABLE, "3")
    bucket = _Bucket(_members()[:4], DATA.y_train, CPU)
    assert bucket.window == 3
    state: dict = {}
    bucket.load(state)
    cuda = torch.device("cuda")
    with FakeTensorMode(allow_non_fake_inputs=True):
        state = {k: v.to(cuda) for k, v in state.items()}
        bucket.device = cuda
        x = DATA.x_train.reshape(len(DATA.x_train), -1).to(cuda)
        bucket.loop(state, x)
        bucket.loop(state, x, stacked_fused.PLAIN)
        assert all(v.device.type == "cuda" for v in state.values())


@pytest.mark.cuda
def test_a_windowed_round_in_a_cuda_graph_equals_the_plain_loop(monkeypatch):
    """The reference round (10 clients, dense) on CUDA: eager with the plain loop; then windowed three times (eager,
    captured, replayed): the same numbers each time, within the fp32 round tolerance of the plain loop."""
    from fedevo.fl import stacked_graphs

    from .test_cuda import ROUND_L2, _rel_l2
    from .test_cuda_population import CUDA
    from .test_stacked_fused import eager_reference

    data, m, plain = eager_reference(monkeypatch, None)
    monkeypatch.setenv(stacked_window.VARIABLE, "4")
    runs = [train_members([m], data.x_train, data.y_train, device=CUDA)[0].cpu() for _ in range(3)]
    assert len(stacked_graphs.cache(CUDA).graphs) == 1
    assert all(torch.equal(r, runs[0]) for r in runs[1:])
    assert _rel_l2(runs[0], plain.cpu()) <= ROUND_L2


def test_a_batched_generation_with_a_window_and_its_results_say_so(monkeypatch, tmp_path):
    """A generation as one batch (fl/population.py) on the CPU with FEDEVO_FIRST_LAYER_WINDOW: the objectives of the
    plain loop's batch (ε, comm, Ω equal; the error within docs/engine.md's tolerance, equal on the CPU that wrote
    this), and each result's `engine` names the window
    where it applied: not for the member whose first layer is SET-masked (α = 4), for those whose ER density
    reaches 1 there (α = 32 on digits' 64 inputs: no mask), not at all where the variable is unset."""
    from fedevo.evaluation import evaluate_population
    from fedevo.problem import load_problem
    from tests.searching.test_batched_search import TINY

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    problem = load_problem(str(path))
    generation = [dict(units=24, alpha=32), dict(layers=1, units=30, alpha=32, lr=0.1),
                  dict(units=20, alpha=4, sigma=3.0)]
    seeds = [1, 2, 3]
    plain = evaluate_population(problem, generation, seeds, device="cpu")
    assert all("first_layer_window" not in r.engine for r in plain)
    monkeypatch.setenv(stacked_window.VARIABLE, "3")
    windows = []
    monkeypatch.setattr(stacked_window.Window, "__init__",
                        lambda self, *a, f=stacked_window.Window.__init__: (windows.append(1), f(self, *a))[1])
    got = evaluate_population(problem, generation, seeds, device="cpu")
    assert windows  # the dense members' buckets trained in windows
    assert [r.engine.get("first_layer_window") for r in got] == [3, 3, None]
    for a, b in zip(plain, got):
        assert (a.status, a.comm, a.eps, a.omega) == (b.status, b.comm, b.eps, b.omega)
        assert b.error == pytest.approx(a.error, abs=0.02)  # docs/engine.md's tolerance (equal on Zen 5)
