"""The stacked trainer with a per-step hook (StepLDP: clip each client's batch gradient to S, step, add N(0, σ²) to
its active weights; fl/stacked.py `_Bucket.hooked_loop`) on the CPU, the same code a GPU runs: against the device
path (fl/device.py, one group of all the round's chunks: the same hook, the same noise draws) within fp32
rounding — fixed S, the median rule, masks, several members of other widths in one bucket — and without noise
against the CPU engine; each member's numbers do not depend on the members beside it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tests.fl.test_stacked as ts
from fedevo.fl.device import train_groups
from fedevo.fl.engine import flat_deltas, train_chunks
from fedevo.fl.stacked import Member, bucket_key, train_members
from fedevo.privacy.mechanisms import StepLDP

CPU = torch.device("cpu")


def _device_path(model, m: Member, hook) -> torch.Tensor:
    """The member's round on fl/device.py (one group), flat updates (clients, D)."""
    out = train_groups(model, m.params, m.masks, ts.DATA.x_train, ts.DATA.y_train, m.chunks, epochs=m.epochs,
                       batch_size=m.batch_size, lr=m.lr, seeds=m.seeds, device=CPU,
                       group_hook_for=hook.for_group)
    return torch.cat([flat_deltas(c, m.params) for c in out])


def _with_hook(m: Member, hook) -> Member:
    return Member(dims=m.dims, params=m.params, masks=m.masks, lr=m.lr, chunks=m.chunks, seeds=m.seeds,
                  epochs=m.epochs, batch_size=m.batch_size,
                  hook=hook.for_group(m.seeds, [len(c) for c in m.chunks], CPU))


@pytest.mark.parametrize("sigma,clip,alpha", [(0.05, 0.5, None), (0.05, None, 2.0), (0.0, 0.05, 2.0)],
                         ids=["fixed-S", "median-S-masked", "clip-binds-no-noise"])
def test_one_member_equals_the_device_path(sigma, clip, alpha):
    model, m = ts._member(alpha=alpha)
    ref_hook, hook = StepLDP(sigma=sigma, clip=clip, seed=7), StepLDP(sigma=sigma, clip=clip, seed=7)
    want = _device_path(model, m, ref_hook)
    (got,) = train_members([_with_hook(m, hook)], ts.DATA.x_train, ts.DATA.y_train, device=CPU)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    ref_hook.end_round(), hook.end_round()
    assert hook.clips == pytest.approx(ref_hook.clips, rel=1e-5)  # the S each used (the accountant's)
    if clip is None:
        assert hook.S == pytest.approx(ref_hook.S, rel=1e-5)  # the median rule's next S
    if alpha is not None:  # inactive weights stay 0: no noise and no step there
        W0 = got[:, :m.params[0].numel()].view(-1, *m.params[0].shape)
        assert bool((W0[:, m.masks[0] == 0] == 0).all())
    plain = train_members([m], ts.DATA.x_train, ts.DATA.y_train, device=CPU)[0]
    assert not torch.allclose(got, plain, atol=1e-4)  # the hook changed the steps (clipping, noise)


def test_without_noise_it_equals_the_cpu_engine():
    """σ = 0: clipping alone, against the CPU engine's own hook path (native noise of σ 0 adds nothing)."""
    model, m = ts._member(alpha=2.0)
    cpu_hook, hook = StepLDP(sigma=0.0, clip=0.05, seed=7), StepLDP(sigma=0.0, clip=0.05, seed=7)
    want = torch.cat([flat_deltas(c, m.params) for c in train_chunks(
        model, m.params, m.masks, ts.DATA.x_train, ts.DATA.y_train, m.chunks, epochs=m.epochs,
        batch_size=m.batch_size, lr=m.lr, seeds=m.seeds, hook_for=cpu_hook.for_chunk)])
    (got,) = train_members([_with_hook(m, hook)], ts.DATA.x_train, ts.DATA.y_train, device=CPU)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_members_together_equal_each_alone():
    """Members of other widths, masks, learning rates and noise in one hooked bucket (a plain member in a bucket of
    its own): each one's updates those of training it alone, within fp32 rounding (its noise: its own hook's)."""
    specs = [dict(units=24, alpha=2.0), dict(units=17, lr=0.05, seed=1, shift=5), dict(units=20, alpha=3.0, seed=2)]
    hooks = [(0.05, 0.5), (0.02, None), (0.1, 0.2)]

    def members():
        out = []
        for spec, (sigma, clip) in zip(specs, hooks):
            m = ts._member(**spec)[1]
            out.append(_with_hook(m, StepLDP(sigma=sigma, clip=clip, seed=3)))
        return out
    together = members() + [ts._member(units=22, seed=4)[1]]
    assert len({bucket_key(m) for m in together[:3]}) == 1 and bucket_key(together[3]) != bucket_key(together[0])
    got = train_members(together, ts.DATA.x_train, ts.DATA.y_train, device=CPU)
    for i, alone in enumerate(members()):
        (want,) = train_members([alone], ts.DATA.x_train, ts.DATA.y_train, device=CPU)
        torch.testing.assert_close(got[i], want, atol=1e-6, rtol=1e-5)
    (plain,) = train_members([ts._member(units=22, seed=4)[1]], ts.DATA.x_train, ts.DATA.y_train, device=CPU)
    assert torch.equal(got[3], plain)


def test_the_noise_is_sigma_per_step_on_active_weights():
    """lr 0 (no gradient step) and clients that all step every time: each active weight moves by the sum of its
    steps' noise, std σ·√steps; inactive weights not at all."""
    model, m = ts._member(alpha=2.0, lr=0.0)
    sigma = 0.1
    (got,) = train_members([_with_hook(m, StepLDP(sigma=sigma, clip=1.0, seed=9))], ts.DATA.x_train,
                           ts.DATA.y_train, device=CPU)
    steps = np.array([m.epochs * -(-len(ix) // m.batch_size) for ch in m.chunks for ix in ch])
    W0 = got[:, :m.params[0].numel()].view(-1, *m.params[0].shape)
    on = W0[:, m.masks[0] == 1]
    std = (on.std(1) / torch.as_tensor(np.sqrt(steps), dtype=torch.float32))
    assert float(std.mean()) == pytest.approx(sigma, rel=0.05)
    assert bool((W0[:, m.masks[0] == 0] == 0).all())


@pytest.mark.cuda
def test_on_cuda_one_member_equals_the_device_path():
    """On a GPU: the hooked bucket against fl/device.py on CUDA (the same hook, the same CUDA noise draws), fixed
    S and the median rule, masked."""
    dev = torch.device("cuda")
    x = ts.DATA.x_train.to(dev)
    for sigma, clip in ((0.05, 0.5), (0.05, None)):
        model, m = ts._member(alpha=2.0)
        ref_hook, hook = StepLDP(sigma=sigma, clip=clip, seed=7), StepLDP(sigma=sigma, clip=clip, seed=7)
        out = train_groups(model, m.params, m.masks, x, ts.DATA.y_train, m.chunks, epochs=m.epochs,
                           batch_size=m.batch_size, lr=m.lr, seeds=m.seeds, device=dev,
                           group_hook_for=ref_hook.for_group)
        want = torch.cat([flat_deltas(c, m.params) for c in out])
        hooked = Member(dims=m.dims, params=m.params, masks=m.masks, lr=m.lr, chunks=m.chunks, seeds=m.seeds,
                        epochs=m.epochs, batch_size=m.batch_size,
                        hook=hook.for_group(m.seeds, [len(c) for c in m.chunks], dev))
        (got,) = train_members([hooked], x, ts.DATA.y_train, device=dev)
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-4)
        ref_hook.end_round(), hook.end_round()
        assert hook.clips == pytest.approx(ref_hook.clips, rel=1e-4)


@pytest.mark.parametrize("clip", [1.0, None], ids=["fixed-S", "median-S"])
def test_hooked_step_loop_on_fake_cuda(clip):
    """The hooked loop on fake CUDA tensors (FakeTensorMode: shapes and devices, no data), as tests/fl/test_device.py
    runs fl/device.py's: a CPU tensor meeting a CUDA one raises, and so does a host synchronisation (`.item()`,
    `bool()`, boolean indexing) inside the step loop — its hooks' coefficients and noise included."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fedevo.fl import stacked
    from tests.fl.test_device import _FakeNoise

    members = [ts._member(units=24, alpha=2.0)[1], ts._member(units=17, seed=1, shift=5)[1]]
    for m in members:  # a CPU hook so that the bucket builds here; replaced by fake CUDA ones below
        m.hook = StepLDP(sigma=0.1, clip=clip).for_group(m.seeds, [len(c) for c in m.chunks], CPU)
    bucket = stacked._Bucket(members, ts.DATA.y_train, CPU)
    state: dict = {}
    bucket.load(state)
    cuda = torch.device("cuda")
    with FakeTensorMode(allow_non_fake_inputs=True):
        for m in members:
            m.hook = StepLDP(sigma=0.1, clip=clip).for_group(m.seeds, [len(c) for c in m.chunks], cuda,
                                                             noise=_FakeNoise())
        state = {k: v.to(cuda) for k, v in state.items()}
        bucket.device, bucket.active = cuda, bucket.active.to(cuda)
        bucket.member_masks = [[None if t is None else t.to(cuda) for t in ms] for ms in bucket.member_masks]
        x = ts.DATA.x_train.reshape(len(ts.DATA.x_train), -1).to(cuda)
        bucket.hooked_loop(state, x)
        assert all(v.device.type == "cuda" for v in state.values())
