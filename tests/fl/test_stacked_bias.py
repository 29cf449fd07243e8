"""The biases inside the weights (fl/stacked_bias.py, FEDEVO_BIAS_IN_WEIGHTS): on the CPU (the code a GPU runs) the
layout's loop equals the plain loop within fp32 rounding (padded members of other widths, one and two hidden
layers, SET masks with the bias row never masked, clients that idle at different steps, with the first layer's
window too) and exactly in float64; the ones units and zero units never change; a hook or torch_compile keeps the
plain loop; off by default; a bad value is one line."""

from __future__ import annotations

import pytest
import torch

from fedevo.errors import SetupError
from fedevo.fl import stacked, stacked_bias, stacked_graphs, stacked_window
from fedevo.fl.stacked import _Bucket, train_members

from .test_stacked import CPU, DATA, _member
from .test_stacked_window import _later_masked, assert_same_training, float64_member


def _members():
    return [_member(units=24)[1], _member(units=17, lr=0.05, seed=1, shift=5)[1],
            _member(units=20, lr=0.2, seed=2, shift=9, epochs=3)[1], _later_masked(units=21, seed=4, shift=3),
            _member(units=22, alpha=2.0, seed=5, shift=7)[1], _member(layers=3, units=19, seed=6, shift=2)[1],
            _member(layers=1, units=30, seed=3)[1]]


@pytest.mark.parametrize("window", [1, 3])
def test_the_layout_trains_as_the_plain_loop(monkeypatch, window):
    members = _members()
    monkeypatch.setenv(stacked_window.VARIABLE, str(window))
    plain = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    made = []
    real = stacked_bias.allocate
    monkeypatch.setattr(stacked_bias, "allocate", lambda *a: made.append(a[1]) or real(*a))
    monkeypatch.setenv(stacked_bias.VARIABLE, "1")
    got = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    assert len(made) == len({stacked.bucket_key(m) for m in members})  # every bucket in the layout
    assert_same_training(members, plain, got)


def test_the_layout_is_exact_in_float64(monkeypatch):
    """A reassociation of the same sums: in float64 a 3-layer round of unequal clients (short last batches) trains
    to the plain loop's numbers within 1e-12 of their scale; the ones units (bias 1, weights 0) and the zero units
    are as allocated after it."""
    x, y, member = float64_member((1, 6, 10), layers=3, units=30, bounds=(300, 500, 700), epochs=3, batch_size=32)
    torch.set_default_dtype(torch.float64)  # the stacked state is made in the default dtype
    try:
        (plain,) = train_members([member], x, y, device=CPU)
        monkeypatch.setenv(stacked_bias.VARIABLE, "on")
        bucket = _Bucket([member], y, CPU)
        state: dict = {}
        bucket.load(state)
        bucket.run(state, x)
        (got,) = bucket.deltas(state)
    finally:
        torch.set_default_dtype(torch.float32)
    assert bucket.aug and plain.dtype == torch.float64 and float(plain.abs().max()) > 1e-3
    assert float((got - plain).abs().max()) <= 1e-12 * float(plain.abs().max())
    dims, P = bucket.dims, stacked_bias.PAD
    for l in range(len(dims) - 2):  # the hidden layers' ones units and zero units
        K, N = dims[l], dims[l + 1]
        A = state[f"A{l}"]
        bias = state["B0"][:, 0] if l == 0 else A[:, K]
        assert torch.equal(bias[:, N], torch.ones(bucket.C, dtype=torch.float64))
        assert not bias[:, N + 1:].any() and not A[:, :K, N:].any()
        if l > 0:
            assert not A[:, K + 1:].any()
    assert not state[f"A{len(dims) - 2}"][:, dims[-2] + 1:].any()  # the last layer's zero rows


def test_a_hook_or_torch_compile_keeps_the_plain_layout(monkeypatch):
    from fedevo.privacy.mechanisms import StepLDP

    monkeypatch.setenv(stacked_bias.VARIABLE, "1")
    assert _Bucket([_member(units=24)[1]], DATA.y_train, CPU).aug
    hooked = _member(units=24)[1]
    hooked.hook = StepLDP(sigma=0.1, clip=1.0).for_group(hooked.seeds, [len(c) for c in hooked.chunks], CPU)
    assert not _Bucket([hooked], DATA.y_train, CPU).aug
    assert not stacked_bias.applies(hooked=False, compiled=True)
    monkeypatch.delenv(stacked_bias.VARIABLE)
    assert not _Bucket([_member(units=24)[1]], DATA.y_train, CPU).aug  # off by default
    monkeypatch.setenv(stacked_bias.VARIABLE, "maybe")
    with pytest.raises(SetupError, match="FEDEVO_BIAS_IN_WEIGHTS"):
        stacked_bias.enabled()


def test_a_state_counts_each_storage_once():
    """The graph cache's memory bound: W{l} and b{l} are views of A{l} and count once."""
    state = stacked_bias.allocate(3, [8, 6, 4], CPU)
    whole = sum(state[k].numel() for k in ("A0", "B0", "A1")) * 4
    assert stacked_graphs.state_bytes(state) == whole


def test_the_layout_on_fake_cuda(monkeypatch):
    """The layout's loop (and with the window) on fake CUDA tensors (FakeTensorMode: shapes and devices, no data): a
    CPU tensor meeting a CUDA one raises, and so does a host synchronisation inside the loop (a CUDA graph's)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setenv(stacked_bias.VARIABLE, "1")
    for window in ("1", "3"):
        monkeypatch.setenv(stacked_window.VARIABLE, window)
        bucket = _Bucket(_members()[:4], DATA.y_train, CPU)
        assert bucket.aug
        state: dict = {}
        bucket.load(state)
        cuda = torch.device("cuda")
        with FakeTensorMode(allow_non_fake_inputs=True):
            owned = {k: v.to(cuda) for k, v in state.items() if not k.startswith(("W", "b"))}
            state = {**owned, **stacked_bias.views(owned, bucket.dims)}
            bucket.device = cuda
            x = DATA.x_train.reshape(len(DATA.x_train), -1).to(cuda)
            bucket.loop(state, x)
            assert all(v.device.type == "cuda" for v in state.values())


def test_a_batched_generation_in_the_layout_and_its_results_say_so(monkeypatch, tmp_path):
    """A generation evaluated as one batch on the CPU with the variable set: the same ε, comm and Ω as without, the
    error within docs/engine.md's tolerance, and each result's `engine` says `bias_in_weights`; not where unset."""
    from fedevo.evaluation import evaluate_population
    from fedevo.problem import load_problem
    from tests.searching.test_batched_search import TINY

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    problem = load_problem(str(path))
    generation = [dict(units=24, alpha=32), dict(layers=1, units=30, alpha=4, lr=0.1), dict(units=20, sigma=3.0)]
    seeds = [1, 2, 3]
    plain = evaluate_population(problem, generation, seeds, device="cpu")
    assert all("bias_in_weights" not in r.engine for r in plain)
    monkeypatch.setenv(stacked_bias.VARIABLE, "1")
    made = []
    real = stacked_bias.allocate
    monkeypatch.setattr(stacked_bias, "allocate", lambda *a: made.append(a[1]) or real(*a))
    got = evaluate_population(problem, generation, seeds, device="cpu")
    assert made and [r.engine.get("bias_in_weights") for r in got] == [True] * 3
    for a, b in zip(plain, got):
        assert (a.status, a.comm, a.eps, a.omega) == (b.status, b.comm, b.eps, b.omega)
        assert b.error == pytest.approx(a.error, abs=0.02)  # docs/engine.md's tolerance


@pytest.mark.cuda
@pytest.mark.parametrize("alpha", [None, 5.0], ids=["dense", "set"])
@pytest.mark.parametrize("window", ["1", "4"])
def test_the_layout_in_a_cuda_graph_equals_the_plain_loop(monkeypatch, alpha, window):
    """The reference round (10 clients; dense, and SET-masked with the fused masked update, which a captured bucket
    uses) on CUDA: eager with the plain loop; then in the layout three times (eager, captured, replayed; with the
    window where the first layer is dense): the same numbers each time, within the fp32 round tolerance."""
    from .test_cuda import ROUND_L2, _rel_l2
    from .test_cuda_population import CUDA
    from .test_stacked_fused import eager_reference

    data, m, plain = eager_reference(monkeypatch, alpha)
    monkeypatch.setenv(stacked_window.VARIABLE, window)
    monkeypatch.setenv(stacked_bias.VARIABLE, "1")
    runs = [train_members([m], data.x_train, data.y_train, device=CUDA)[0].cpu() for _ in range(3)]
    assert len(stacked_graphs.cache(CUDA).graphs) == 1
    assert all(torch.equal(r, runs[0]) for r in runs[1:])
    assert _rel_l2(runs[0], plain.cpu()) <= ROUND_L2
