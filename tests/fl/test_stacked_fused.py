"""The `torch_compile` opt-in (fl/stacked_fused.py): the step loop's pointwise work as three functions that
torch.compile fuses on CUDA. On the CPU (always; nothing compiles here, seconds each): the functions uncompiled in
the loop equal the plain loop within rounding, dense and SET-masked, members of several widths in one bucket; where
compiling fails the bucket trains with the plain loop, one warning; the setting is ignored on the CPU. On CUDA
(`pytest -m cuda`): the compiled loop, captured and replayed as a CUDA graph, equals the plain eager loop within the
fp32 tolerance (TF32 off) and gives the same numbers again."""

from __future__ import annotations

import warnings

import pytest
import torch

from fedevo.fl import stacked, stacked_fused, stacked_graphs
from fedevo.fl.stacked import _Bucket, train_members

from .test_stacked import CPU, DATA, _member

ATOL = 1e-6  # |uncompiled functions − plain loop| per parameter after a round (rounding: the bias after the GEMM)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    """Each test from no compiled functions, the process's left as they were."""
    monkeypatch.setattr(stacked_fused, "_COMPILED", None)


def _bucket(alpha):
    """Members of 17, 20 and 24 units (padded to 24) in one bucket, SET-masked ones where alpha is given."""
    members = [_member(units=24, alpha=alpha)[1], _member(units=17, alpha=alpha, lr=0.05, seed=1, shift=5)[1],
               _member(units=20, lr=0.2, seed=2, shift=9)[1]]
    assert len({stacked.bucket_key(m) for m in members}) == 1
    return _Bucket(members, DATA.y_train, CPU)


def _train(bucket, fns=None, run=False):
    """The bucket's updates after its loop (`run`: through _Bucket.run, which picks the functions)."""
    state: dict = {}
    bucket.load(state)
    x = DATA.x_train.reshape(len(DATA.x_train), -1)
    bucket.run(state, x) if run else bucket.loop(state, x, fns)
    return bucket.deltas(state)


@pytest.mark.parametrize("alpha", [None, 2.0], ids=["dense", "set"])
def test_the_pointwise_functions_equal_the_plain_loop(alpha):
    bucket = _bucket(alpha)
    plain, fused = _train(bucket), _train(bucket, stacked_fused.PLAIN)
    for m, a, b in zip(bucket.members, plain, fused):
        torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
        assert float(a.abs().max()) > 1e-3  # the clients moved
        for i, mask in m.masks.items():  # inactive weights stay 0
            off = sum(p.numel() for p in m.params[:i])
            W = b[:, off:off + m.params[i].numel()].view(-1, *m.params[i].shape)
            assert torch.all(W[:, mask == 0] == 0)
    assert alpha is None or bucket.masked


def _warnings(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [w for w in seen if "torch_compile" in str(w.message)]


def _raise(*args, **kw):
    raise RuntimeError("no compiler here\nsecond line")


@pytest.mark.parametrize("where", ["compile", "first call"])
def test_a_failed_compile_falls_back_to_the_plain_loop_with_one_warning(monkeypatch, where):
    """torch.compile raising, or a compiled function raising at its first call after another has updated part of
    the state: the bucket trains as with the plain loop (the state loaded again), one warning for the process."""
    bucket = _bucket(2.0)
    want = _train(bucket)
    if where == "compile":
        monkeypatch.setattr(torch, "compile", _raise)
    else:  # `top` updates the last bias, then `mid` fails
        monkeypatch.setattr(torch, "compile", lambda f, **kw: _raise if f is stacked_fused.mid else f)
    bucket.compiled = True  # as on CUDA
    got, warned = _warnings(lambda: _train(bucket, run=True))
    assert len(warned) == 1 and "no compiler here" in str(warned[0].message)
    assert "\n" not in str(warned[0].message) and warned[0].category is RuntimeWarning
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    again, warned = _warnings(lambda: _train(bucket, run=True))  # the plain loop for the rest of the process
    assert not warned and all(torch.equal(a, b) for a, b in zip(again, want))
    assert stacked_fused.compiled() is None


def test_the_setting_is_ignored_on_the_cpu(monkeypatch):
    monkeypatch.setattr(torch, "compile", _raise)
    _, m = _member(alpha=2.0)
    (plain,) = train_members([m], DATA.x_train, DATA.y_train, device=CPU)
    m.torch_compile = True
    (got,), warned = _warnings(lambda: train_members([m], DATA.x_train, DATA.y_train, device=CPU))
    assert torch.equal(got, plain) and not warned and stacked_fused._COMPILED is None  # nothing compiled


def eager_reference(monkeypatch, alpha):
    """The reference round of 10 clients (SET-masked where alpha is given, fp32) on CUDA with the plain eager loop:
    (data, member, its updates); the CUDA graph cache emptied."""
    from .test_cuda_population import CUDA, _reference

    data, _, m = _reference(alpha, clients=10)
    m.tf32 = False
    stacked_graphs.CACHES.clear()
    monkeypatch.setenv("FEDEVO_CUDA_GRAPHS", "0")
    (plain,) = train_members([m], data.x_train, data.y_train, device=CUDA)
    monkeypatch.delenv("FEDEVO_CUDA_GRAPHS")
    return data, m, plain


@pytest.mark.cuda
@pytest.mark.parametrize("alpha", [None, 5.0], ids=["dense", "set"])
def test_compiled_loop_in_a_cuda_graph_equals_the_plain_loop(monkeypatch, alpha):
    """The reference round (10 clients): eager with the plain loop; then compiled three times (eager, captured,
    replayed): the same numbers each time, within the fp32 round tolerance of the plain loop."""
    from .test_cuda import ROUND_L2, _rel_l2
    from .test_cuda_population import CUDA

    data, m, plain = eager_reference(monkeypatch, alpha)
    m.torch_compile = True
    runs, warned = _warnings(lambda: [train_members([m], data.x_train, data.y_train, device=CUDA)[0].cpu()
                                      for _ in range(3)])
    assert not warned and isinstance(stacked_fused._COMPILED, tuple)  # compiled, not fallen back
    assert len(stacked_graphs.cache(CUDA).graphs) == 1
    assert all(torch.equal(r, runs[0]) for r in runs[1:])
    assert _rel_l2(runs[0], plain.cpu()) <= ROUND_L2  # other rounding (fused reductions), no more


def test_a_result_after_a_failed_compile_names_the_fallback(monkeypatch):
    """A result's engine says torch_compile only while compiling works; after this process's compile failed (its
    warning), the results trained after it name the fallback, not the compiled loop."""
    engine = {"device": "cuda", "torch_compile": True}
    assert stacked_fused.engine_label(engine) == engine  # not compiled yet: as asked
    monkeypatch.setattr(torch, "compile", _raise)
    _warnings(stacked_fused.compiled)
    assert stacked_fused.engine_label(engine) == {"device": "cuda", "torch_compile": stacked_fused.FELL_BACK}
    assert stacked_fused.engine_label({"device": "cuda"}) == {"device": "cuda"}  # not asked for: nothing to say
