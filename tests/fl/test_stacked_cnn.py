"""CNN buckets (fl/stacked_cnn.py): a generation's CNNs of one layout trained as one program, on the CPU (the code a
GPU runs). Each member's updates equal its training alone (a bucket of one), which is the device path's
(fl/device.py), within fp32 rounding (not bit for bit even at equal shapes: the group's batch of samples per step,
its most at that step, sets the convolutions' blocking); padding (other channels and FC widths in one bucket) changes
nothing beyond it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedevo.config import CNNArch
from fedevo.data.datasets import synthetic
from fedevo.fl import stacked, stacked_cnn, stacked_settings
from fedevo.fl.device import plan_group, train_groups
from fedevo.fl.engine import flat_deltas
from fedevo.models import build_model
from fedevo.models.sparse import erdos_renyi_masks

CPU = torch.device("cpu")
SHAPE = (1, 8, 8)
DATA = synthetic(n_train=400, n_test=10, shape=SHAPE, seed=0)


def _member(arch: CNNArch, *, lr=0.1, alpha=None, sizes=(37, 50, 20, 41), seed=0, per=2, epochs=2, dtype=None):
    model = build_model(arch, SHAPE, 10)
    if dtype is not None:
        model.compute_dtype = dtype
    g = torch.Generator().manual_seed(seed)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, alpha, g)
    for i, m in masks.items():
        params[i].mul_(m)
    rows = np.random.default_rng(seed).permutation(len(DATA.x_train))
    offsets = np.cumsum((0,) + tuple(sizes))
    clients = [rows[offsets[i]:offsets[i + 1]] for i in range(len(sizes))]
    chunks = [clients[s:s + per] for s in range(0, len(clients), per)]
    return stacked_cnn.CNNMember(model=model, params=params, masks=masks, lr=lr, chunks=chunks,
                                 seeds=[100 * seed + i for i in range(len(chunks))], epochs=epochs, batch_size=16)


BASE = CNNArch(conv_layers=2, channels=4, kernel=3, layers=1, units=16)
GENERATION = [  # one bucket: 2 conv layers of 3×3, one FC layer; channels 3-4 and units 12-16 in one class each
    dict(arch=BASE, lr=0.1),
    dict(arch=CNNArch(2, 3, 3, 1, 12), lr=0.2, alpha=2.0, seed=1, sizes=(9, 30, 44)),
    dict(arch=CNNArch(2, 4, 3, 1, 13), lr=0.05, alpha=4.0, seed=2, sizes=(64,), per=1),
    dict(arch=BASE, lr=0.3, seed=3, sizes=(17, 17, 17, 17, 17), per=3),
]


def _alone(m):
    (flat,) = stacked_cnn.train([m], DATA.x_train, DATA.y_train, device=CPU)
    return flat


def test_a_bucket_equals_each_member_alone_padded_or_not():
    members = [_member(**kw) for kw in GENERATION]
    assert len({stacked_cnn.bucket_key(m) for m in members}) == 1
    assert len({stacked_cnn.bucket_key(m, exact=True) for m in members}) == 3
    together = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)
    for m, got in zip(members, together):
        want = _alone(m)
        assert got.shape == (m.clients, sum(p.numel() for p in m.params))
        torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-5)
        assert got.abs().max() > 1e-3  # the clients moved
        off = 0
        for i, p in enumerate(m.params):  # SET: inactive weights did not move
            if i in m.masks:
                d = got[:, off:off + p.numel()].view(m.clients, *p.shape)
                assert torch.all(d[:, m.masks[i] == 0] == 0)
            off += p.numel()


@pytest.mark.parametrize("cap", [None, "3"])
def test_one_member_is_the_device_paths_training(cap, monkeypatch):
    """Alone, a member trains as fl/device.py's `train_groups` (its groups of FEDEVO_GPU_CLIENTS too)."""
    if cap:
        monkeypatch.setenv("FEDEVO_GPU_CLIENTS", cap)
    m = _member(BASE, alpha=2.0, sizes=(37, 50, 20, 41, 12))
    got = _alone(m)
    want = torch.cat([flat_deltas(local, m.params) for local in train_groups(
        m.model, m.params, m.masks, DATA.x_train, DATA.y_train, m.chunks, epochs=m.epochs, batch_size=m.batch_size,
        lr=m.lr, seeds=m.seeds, device=CPU)])
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)


def test_bucket_keys_keep_apart_what_cannot_share_a_program():
    key = stacked_cnn.bucket_key
    base = key(_member(BASE))
    for other in (CNNArch(1, 4, 3, 1, 16), CNNArch(2, 4, 5, 1, 16), CNNArch(2, 4, 3, 2, 16),  # depth, kernel, FC depth
                  CNNArch(2, 8, 3, 1, 16), CNNArch(2, 4, 3, 1, 17)):  # the next channel class, FC width class
        assert key(_member(other)) != base, other
    assert key(_member(BASE, epochs=3)) != base
    assert key(_member(BASE, dtype=torch.bfloat16)) != base
    assert key(_member(BASE, lr=0.3, alpha=3.0, sizes=(5,))) == base
    # the stacked trainer's dispatch: CNN members their own buckets, the MLP's untouched
    m = _member(BASE)
    assert stacked.bucket_key(m) == base and stacked.work_of(m) == stacked_cnn.work_of(m) > 0
    assert stacked.predraw(m) is m


def test_the_stacked_trainer_takes_cnn_members_beside_mlp_ones():
    """train_members: CNN members in their buckets, MLP members in theirs, results in the members' order."""
    from fedevo.config import MLPArch

    cnn = [_member(**kw) for kw in GENERATION[:2]]
    mlp_model = build_model(MLPArch(layers=1, units=16), SHAPE, 10)
    mlp = stacked.Member(dims=mlp_model.dims, params=mlp_model.init(torch.Generator().manual_seed(0)), masks={},
                         lr=0.1, chunks=cnn[0].chunks, seeds=cnn[0].seeds, epochs=2, batch_size=16)
    got = stacked.train_members([cnn[0], mlp, cnn[1]], DATA.x_train, DATA.y_train, device=CPU)
    (mlp_alone,) = stacked.train_members([mlp], DATA.x_train, DATA.y_train, device=CPU)
    torch.testing.assert_close(got[1], mlp_alone)
    for m, g in zip(cnn, (got[0], got[2])):
        torch.testing.assert_close(g, _alone(m), atol=2e-6, rtol=1e-5)


def test_applies_to_built_in_cnns_without_a_per_step_hook(monkeypatch):
    from fedevo.privacy.privatizer import RoundPrivatizer

    cnn = build_model(BASE, SHAPE, 10)
    assert stacked.applies(cnn, RoundPrivatizer(), torch.float32)
    assert stacked.applies(cnn, RoundPrivatizer(), torch.bfloat16)  # the device path's bf16 compute
    monkeypatch.setenv("FEDEVO_STACKED_CNN", "0")
    assert not stacked.applies(cnn, RoundPrivatizer(), torch.float32)


def test_the_step_loop_on_fake_cuda(monkeypatch):
    """A bucket on fake CUDA tensors (FakeTensorMode: shapes and devices, no data): no CPU tensor meets a CUDA one,
    nothing needs the data on the host (a synchronisation). The plans are made on the host beforehand, and the
    gradients are stand-ins of their shapes (autograd's backward needs a real CUDA device; grads_vmap is the device
    path's own, run on a GPU by test_cuda.py)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    members = [_member(**kw) for kw in GENERATION]
    plans = {}
    real = plan_group

    def made_ahead(y, chunks, gens, **kw):
        return plans[tuple(id(c) for c in chunks)]
    chunks = [ch for m in members for ch in m.chunks]
    seeds = [s for m in members for s in m.seeds]
    plans[tuple(id(c) for c in chunks)] = real(DATA.y_train, chunks, [torch.Generator().manual_seed(s) for s in seeds],
                                               epochs=2, batch_size=16)
    monkeypatch.setattr(stacked_cnn, "plan_group", made_ahead)
    monkeypatch.setenv("FEDEVO_GPU_CLIENTS", "1000")  # one group (no GPU to ask for its memory)
    for m in members:
        m.model.grads_vmap = lambda params, x, y, w: [p * w.sum() for p in params]
    cuda = torch.device("cuda")
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = stacked_cnn.train(members, DATA.x_train.to(cuda), DATA.y_train, device=cuda)
        assert [tuple(o.shape) for o in out] == [(m.clients, sum(p.numel() for p in m.params)) for m in members]
        assert all(o.device.type == "cuda" for o in out)


def _hooked(m, hook):
    return stacked_cnn.CNNMember(model=m.model, params=m.params, masks=m.masks, lr=m.lr, chunks=m.chunks,
                                 seeds=m.seeds, epochs=m.epochs, batch_size=m.batch_size,
                                 hook=hook.for_group(m.seeds, [len(c) for c in m.chunks], CPU))


@pytest.mark.parametrize("sigma,clip", [(0.05, 0.5), (0.05, None), (0.0, 0.05)],
                         ids=["fixed-S", "median-S", "clip-binds-no-noise"])
def test_hooked_members_equal_each_alone_and_the_device_path(sigma, clip):
    """StepLDP's clipping and noise per member (other channels, widths, masks and rates in one bucket): each member
    as alone (its own hook, the same noise draws on views of its own shapes) and as the device path's one group."""
    from fedevo.privacy.mechanisms import StepLDP

    members = [_member(**kw) for kw in GENERATION]
    hooks = [StepLDP(sigma=sigma, clip=clip, seed=7 + j) for j in range(len(members))]
    hooked = [_hooked(m, h) for m, h in zip(members, hooks)]
    assert stacked_cnn.bucket_key(hooked[0]) != stacked_cnn.bucket_key(members[0])  # hooked apart
    together = stacked_cnn.train(hooked, DATA.x_train, DATA.y_train, device=CPU)
    for j, (m, got) in enumerate(zip(members, together)):
        alone_hook, ref_hook = StepLDP(sigma=sigma, clip=clip, seed=7 + j), StepLDP(sigma=sigma, clip=clip, seed=7 + j)
        torch.testing.assert_close(got, _alone(_hooked(m, alone_hook)), atol=2e-6, rtol=1e-5)
        want = torch.cat([flat_deltas(local, m.params) for local in train_groups(
            m.model, m.params, m.masks, DATA.x_train, DATA.y_train, m.chunks, epochs=m.epochs,
            batch_size=m.batch_size, lr=m.lr, seeds=m.seeds, device=CPU, group_hook_for=ref_hook.for_group)])
        torch.testing.assert_close(got, want, atol=2e-6, rtol=1e-5)
        for h in (hooks[j], ref_hook):
            h.end_round()
        assert hooks[j].clips == pytest.approx(ref_hook.clips, rel=1e-5)  # the S it used (the accountant's)
        off = 0
        for i, p in enumerate(m.params):  # no noise and no step on inactive weights
            if i in m.masks:
                d = got[:, off:off + p.numel()].view(m.clients, *p.shape)
                assert torch.all(d[:, m.masks[i] == 0] == 0)
            off += p.numel()
    plain = stacked_cnn.train(members[:1], DATA.x_train, DATA.y_train, device=CPU)[0]
    assert not torch.allclose(together[0], plain, atol=1e-4)  # the hook changed the steps


def test_adaptive_learning_rates_per_member():
    """The adaptive mechanism's hook (_ChunkLR: client k steps with lr·factor_k) per member, as alone."""
    from fedevo.privacy.adaptive import _ChunkLR

    class Rates:  # for_group's signature, factors drawn per member
        def __init__(self, seed):
            self.seed = seed

        def for_group(self, seeds, counts, device):
            return _ChunkLR(torch.rand(sum(counts), generator=torch.Generator().manual_seed(self.seed)) + 0.5)
    members = [_member(**kw) for kw in GENERATION]
    together = stacked_cnn.train([_hooked(m, Rates(j)) for j, m in enumerate(members)], DATA.x_train, DATA.y_train,
                                 device=CPU)
    for j, (m, got) in enumerate(zip(members, together)):
        torch.testing.assert_close(got, _alone(_hooked(m, Rates(j))), atol=2e-6, rtol=1e-5)
        assert not torch.allclose(got, _alone(m), atol=1e-4)


def test_a_bucket_in_groups_equals_it_whole(monkeypatch):
    """FEDEVO_GPU_CLIENTS (or, on CUDA, the memory estimate) splits a bucket into groups of whole chunks, members
    split between groups: the same updates."""
    members = [_member(**kw) for kw in GENERATION]
    whole = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)
    monkeypatch.setenv("FEDEVO_GPU_CLIENTS", "3")
    assert len(stacked_cnn._groups(members, [(j, ch, s) for j, m in enumerate(members)
                                             for ch, s in zip(m.chunks, m.seeds)], False, 3)) > len(members)
    for a, b in zip(stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU), whole):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-5)


def _fake_gpu(monkeypatch, *, total, free, allocated=0, reserved=0):
    """torch.cuda's memory figures for a 'cuda' device, with no GPU."""
    from types import SimpleNamespace

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=total))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda d: (free, total))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda d: allocated)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda d: reserved)


def test_a_group_holds_what_half_the_memory_it_may_use_holds(monkeypatch):
    from fedevo import hardware

    m = build_model(CNNArch(2, 32, 5, 1, 128), (1, 28, 28), 10)  # fashion_cnn's default
    per = stacked_cnn.client_bytes(m, m.shapes, 64)
    params = sum(int(np.prod(s)) for s in m.shapes)
    assert 4 * 4 * params < per < 200e6  # its parameters four times over, and its batch's activations
    assert stacked_cnn.client_bytes(m, m.shapes, 128) > per
    assert stacked_cnn.group_clients(m, m.shapes, 64, "cpu") is None
    GiB = 2 ** 30
    _fake_gpu(monkeypatch, total=80 * GiB, free=80 * GiB)
    assert stacked_cnn.group_clients(m, m.shapes, 64, "cuda") == int(40 * GiB // per)
    _fake_gpu(monkeypatch, total=80 * GiB, free=20 * GiB, allocated=10 * GiB, reserved=14 * GiB)
    # another process holds 46 GiB: 20 free + 4 in this process's cache
    assert hardware.gpu_available(torch.device("cuda")) == 24 * GiB
    assert stacked_cnn.group_clients(m, m.shapes, 64, "cuda") == int(12 * GiB // per)
    _fake_gpu(monkeypatch, total=80 * GiB, free=70 * GiB, allocated=2 * GiB, reserved=2 * GiB)
    with hardware.gpu_share(0.25):  # a Ray task's quarter of the GPU: 20 GiB, 2 of them its own already
        assert hardware.gpu_available(torch.device("cuda")) == 18 * GiB
        assert stacked_cnn.group_clients(m, m.shapes, 64, "cuda") == int(9 * GiB // per)
    assert hardware.gpu_available(torch.device("cuda")) == 70 * GiB
    monkeypatch.setenv("FEDEVO_GPU_CLIENTS", "7")
    assert stacked_cnn.group_clients(m, m.shapes, 64, "cuda") == 7
    monkeypatch.delenv("FEDEVO_GPU_CLIENTS")
    _fake_gpu(monkeypatch, total=80 * GiB, free=0)
    assert stacked_cnn.group_clients(m, m.shapes, 64, "cuda") == 1  # at least a client (a chunk: group_chunks)


def _oom_above(monkeypatch, most: int) -> list:
    """run_steps raising CUDA's out-of-memory error for a group of more than `most` clients; the groups it ran."""
    real, ran = stacked_cnn.run_steps, []

    def run_steps(net, params, *args, **kw):
        if params[0].shape[0] > most:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (a group of {params[0].shape[0]})")
        ran.append(params[0].shape[0])
        return real(net, params, *args, **kw)
    monkeypatch.setattr(stacked_cnn, "run_steps", run_steps)
    return ran


def test_a_group_out_of_memory_trains_again_in_halves(monkeypatch):
    """A group that runs out of CUDA memory trains again in groups of half its clients (whole chunks), the
    bucket's later rounds at that size: the updates of those groups, one warning."""
    members = [_member(**kw) for kw in GENERATION]
    monkeypatch.setattr(stacked_cnn, "_LEARNED", {})
    monkeypatch.setenv("FEDEVO_GPU_CLIENTS", "6")  # the groups the halving comes to (13 clients in 7 chunks: 6)
    want = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)
    monkeypatch.delenv("FEDEVO_GPU_CLIENTS")
    ran = _oom_above(monkeypatch, 6)
    with pytest.warns(RuntimeWarning, match="ran out of GPU memory.* groups of at most"):
        got = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)
    assert ran and max(ran) <= 6
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert list(stacked_cnn._LEARNED.values()) == [6]
    ran.clear()
    again = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)  # starts at 6: nothing fails
    assert max(ran) <= 6 and all(torch.equal(a, b) for a, b in zip(again, want))


def test_out_of_memory_that_cannot_shrink_is_raised(monkeypatch):
    """One chunk, or members with per-step hooks (their hooks' state moved on in the failed group): torch's error."""
    monkeypatch.setattr(stacked_cnn, "_LEARNED", {})
    _oom_above(monkeypatch, 0)
    one = _member(BASE, sizes=(30, 20), per=2)  # one chunk of 2 clients
    with pytest.raises(torch.cuda.OutOfMemoryError):
        stacked_cnn.train([one], DATA.x_train, DATA.y_train, device=CPU)
    from fedevo.privacy.mechanisms import StepLDP

    hooked = [_hooked(_member(**kw), StepLDP(sigma=0.05, clip=0.5, seed=j)) for j, kw in enumerate(GENERATION[:2])]
    with pytest.raises(torch.cuda.OutOfMemoryError):
        stacked_cnn.train(hooked, DATA.x_train, DATA.y_train, device=CPU)


def test_bf16_members_equal_each_alone():
    """precision = "bf16" (the device path's bf16 compute, fp32 updates): a bucket of its own, each member as alone."""
    members = [_member(**dict(kw, dtype=torch.bfloat16)) for kw in GENERATION]
    assert len({stacked_cnn.bucket_key(m) for m in members}) == 1
    together = stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)
    for kw, m, got in zip(GENERATION, members, together):
        torch.testing.assert_close(got, _alone(m), atol=1e-4, rtol=1e-2)
        fp32 = _alone(_member(**kw))
        torch.testing.assert_close(got, fp32, atol=5e-2, rtol=0.5)  # bf16's rounding, the same training
        assert not torch.equal(got, fp32)


def test_tf32_where_the_config_allows_it_and_only_inside_the_bucket(monkeypatch):
    """`tf32 = true`: on CUDA a bucket's convolutions and matmuls in TF32 (fl/tf32.py's window), the process's fp32
    before and after; a result names TF32 alone of the MLP trainer's opt-ins (fake CUDA: no GPU here)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fedevo.config import SimConfig

    seen = []

    def record(net, params, *args, **kw):
        seen.append((torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32))
        return params
    monkeypatch.setattr(stacked_cnn, "run_steps", record)
    monkeypatch.setattr(stacked_cnn, "plan_group", lambda y, chunks, gens, **kw: None)
    monkeypatch.setenv("FEDEVO_GPU_CLIENTS", "1000")
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False  # hardware.cuda_setup's
    try:
        members = [_member(BASE), _member(BASE, seed=1)]
        for m in members:
            m.tf32 = True
        assert stacked_cnn.bucket_key(members[0]) != stacked_cnn.bucket_key(_member(BASE))
        with FakeTensorMode(allow_non_fake_inputs=True):
            stacked_cnn.train(members, DATA.x_train.to("cuda"), DATA.y_train, device="cuda")
        stacked_cnn.train(members, DATA.x_train, DATA.y_train, device=CPU)  # the CPU has no TF32
        assert seen == [(True, True), (False, False)]
        assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == (False, False)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
    cfg = SimConfig(tf32=True, torch_compile=True, batch_schedule="device")
    assert stacked_settings.opt_ins(cfg, "cuda", cnn=True) == {"tf32": True}
    assert stacked_settings.opt_ins(cfg, "cpu", cnn=True) == {}
    assert stacked_settings.opt_ins(cfg, "cuda") == {"batch_schedule": "device", "tf32": True, "torch_compile": True}
