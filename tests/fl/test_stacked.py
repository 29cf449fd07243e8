"""The stacked trainer (fl/stacked.py) on the CPU (the same code the GPU runs): one member against the CPU engine;
several members trained together against each trained alone (exact for equal widths, within fp32 rounding when
padded to a wider member); padding and inactive SET weights stay zero."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.fl.engine import flat_deltas, train_chunks
from fedevo.fl.stacked import Member, bucket_key, train_members
from fedevo.models import build_model
from fedevo.models.sparse import erdos_renyi_masks

CPU = torch.device("cpu")
SIZES = (37, 50, 64, 20, 41, 8, 30)  # unequal clients: chunks idle at different steps
DATA = synthetic(n_train=sum(SIZES), n_test=10, shape=(1, 8, 8), seed=0)


def _clients(sizes=SIZES, per=3, shift=0):
    offsets = np.cumsum((0,) + tuple(sizes))
    clients = [(np.arange(offsets[i], offsets[i + 1]) + shift) % offsets[-1] for i in range(len(sizes))]
    return [clients[s:s + per] for s in range(0, len(clients), per)]


def _member(layers=2, units=24, alpha=None, lr=0.1, seed=0, shift=0, epochs=2):
    model = build_model(MLPArch(layers=layers, units=units), (1, 8, 8), 10)
    g = torch.Generator().manual_seed(seed)
    params = model.init(g)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, alpha, g)
    for i, m in masks.items():
        params[i].mul_(m)
    chunks = _clients(shift=shift)
    return model, Member(dims=model.dims, params=params, masks=masks, lr=lr, chunks=chunks,
                         seeds=[11 + seed, 22 + seed, 33 + seed][:len(chunks)], epochs=epochs, batch_size=16)


@pytest.mark.parametrize("alpha", [None, 2.0], ids=["dense", "set"])
def test_one_member_equals_cpu_engine(alpha):
    model, m = _member(alpha=alpha)
    cpu = torch.cat([flat_deltas(c, m.params) for c in train_chunks(
        model, m.params, m.masks, DATA.x_train, DATA.y_train, m.chunks, epochs=2, batch_size=16, lr=m.lr,
        seeds=m.seeds)])
    (got,) = train_members([m], DATA.x_train, DATA.y_train, device=CPU)
    assert got.shape == cpu.shape
    torch.testing.assert_close(got, cpu, atol=1e-6, rtol=1e-5)
    assert float(got.abs().max()) > 1e-3  # the clients moved
    other = Member(dims=m.dims, params=m.params, masks=m.masks, lr=0.9 * m.lr, chunks=m.chunks, seeds=m.seeds,
                   epochs=2, batch_size=16)  # a 10% error in the step: far outside
    assert not torch.allclose(train_members([other], DATA.x_train, DATA.y_train, device=CPU)[0], cpu, atol=1e-4)


def test_equal_widths_together_equal_alone_exactly():
    """Members of one shape (other seeds, clients, learning rates and masks) in one bucket: bit for bit each
    member alone."""
    members = [_member(alpha=a, lr=lr, seed=s, shift=sh)[1]
               for a, lr, s, sh in ((None, 0.1, 0, 0), (2.0, 0.05, 1, 7), (3.0, 0.2, 2, 13))]
    members = [members[0], members[0]] + members[1:]  # masks and no masks: the unmasked one gets ones
    assert len({bucket_key(m, exact=True)[0] for m in members}) == 1
    together = train_members(members, DATA.x_train, DATA.y_train, device=CPU, exact=True)
    for m, got in zip(members, together):
        (alone,) = train_members([m], DATA.x_train, DATA.y_train, device=CPU, exact=True)
        assert torch.equal(got, alone)


def test_padded_members_equal_alone_within_rounding():
    """Other widths in one bucket (17, 20 and 24 units pad to 24 — and a 1-layer member in a bucket of its own): each
    member's updates within fp32 rounding of training it alone; its padding stays zero."""
    members = [_member(units=24)[1], _member(units=17, alpha=2.0, lr=0.05, seed=1, shift=5)[1],
               _member(units=20, lr=0.2, seed=2, shift=9)[1], _member(layers=1, units=30, seed=3)[1]]
    assert len({bucket_key(m) for m in members[:3]}) == 1
    together = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    for m, got in zip(members, together):
        (alone,) = train_members([m], DATA.x_train, DATA.y_train, device=CPU)
        torch.testing.assert_close(got, alone, atol=1e-6, rtol=1e-5)
        assert float(got.abs().max()) > 1e-3
    m = members[1]  # its inactive weights did not move
    W0 = together[1][:, :m.params[0].numel()].view(-1, *m.params[0].shape)
    assert torch.all(W0[:, m.masks[0] == 0] == 0)


def test_no_arrived_client():
    _, m = _member()
    empty = Member(dims=m.dims, params=m.params, masks={}, lr=0.1, chunks=[], seeds=[], epochs=1, batch_size=16)
    got = train_members([empty, m], DATA.x_train, DATA.y_train, device=CPU)
    assert got[0].shape == (0, sum(p.numel() for p in m.params)) and got[1].shape[0] == m.clients


def test_each_bucket_reported_as_queued_largest_first():
    """on_bucket: every member's updates exactly once, bucket by bucket as each is queued (before the next is
    built), the largest bucket first and the members without a client last; the same updates as returned."""
    from fedevo.fl.stacked import work_of

    _, m = _member()
    empty = Member(dims=m.dims, params=m.params, masks={}, lr=0.1, chunks=[], seeds=[], epochs=1, batch_size=16)
    members = [_member(layers=1, units=30, seed=3)[1], empty, m, _member(units=20, lr=0.2, seed=2, shift=9)[1]]
    seen = []
    got = train_members(members, DATA.x_train, DATA.y_train, device=CPU,
                        on_bucket=lambda idx, flats: seen.append((list(idx), flats)))
    assert [idx for idx, _ in seen] == [[2, 3], [0], [1]]  # the 2-layer bucket does more work than the 1-layer one
    assert sum(work_of(members[i]) for i in (2, 3)) > work_of(members[0])
    for idx, flats in seen:
        for i, f in zip(idx, flats):
            assert f is got[i]


def test_a_bucket_larger_than_the_memory_left_trains_in_parts(monkeypatch):
    """On CUDA a bucket whose stacked state (`client_bytes` a client at its padded widths) would take more than half
    the memory the process may still use trains in parts of whole members (`fitting`), each reported as queued:
    each member's updates as in the whole bucket, within fp32 rounding (the parts pad to their own widest)."""
    from fedevo.fl import stacked
    from fedevo.fl.local_round import steps_of

    members = [_member(units=24)[1], _member(units=17, alpha=2.0, lr=0.05, seed=1, shift=5)[1],
               _member(units=20, lr=0.2, seed=2, shift=9)[1]]
    per = stacked.client_bytes([64, 24, 24, 10], max(steps_of(m) for m in members), 16)
    assert stacked.fitting(members, None) == [[0, 1, 2]]
    assert stacked.fitting(members, 100 * per) == [[0, 1, 2]]
    assert stacked.fitting(members, 14 * per) == [[0, 1], [2]]  # 7 clients each
    assert stacked.fitting(members, per) == [[0], [1], [2]]  # a member larger than the budget: alone
    assert stacked._bucket_budget(CPU) is None
    whole = train_members(members, DATA.x_train, DATA.y_train, device=CPU)
    monkeypatch.setattr(stacked, "_bucket_budget", lambda device: 8 * per)
    seen = []
    parts = train_members(members, DATA.x_train, DATA.y_train, device=CPU,
                          on_bucket=lambda idx, flats: seen.append(list(idx)))
    assert seen == [[0], [1], [2]]
    for a, b in zip(parts, whole):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    (alone,) = train_members([members[1]], DATA.x_train, DATA.y_train, device=CPU)
    assert torch.equal(parts[1], alone)  # a part of one: as alone


def test_mlp_client_bytes_counts_state_plan_and_activations():
    from fedevo.fl import stacked

    ref = stacked.client_bytes([784, 200, 200, 10], 50, 64)  # the reference round's client: ~3.4 MB
    assert 3e6 < ref < 4e6
    assert stacked.client_bytes([784, 400, 400, 10], 50, 64) > 2 * ref
    assert stacked.client_bytes([784, 200, 200, 10], 100, 128) > ref
    # a first-layer window of 4 steps: its inputs, products and δs (4·64 rows × (784 + 2·200) floats) on top
    assert stacked.client_bytes([784, 200, 200, 10], 50, 64, window=4) == ref + 4 * 4 * 64 * (784 + 400)
    assert stacked.client_bytes([784, 200, 200, 10], 50, 64, window=1) == ref


def test_schedules_drawn_ahead_give_the_same_updates():
    """predraw (a run's thread draws its next schedule) then a bucket copying it: bit for bit the bucket drawing
    every schedule itself, with all, some or none of its members drawn ahead; a device schedule is not drawn."""
    import dataclasses

    from fedevo.fl.stacked import predraw

    def members():
        return [_member(units=24)[1], _member(units=17, alpha=2.0, lr=0.05, seed=1, shift=5, epochs=3)[1],
                _member(units=20, lr=0.2, seed=2, shift=9)[1]]
    want = train_members(members(), DATA.x_train, DATA.y_train, device=CPU)
    for ahead in ((0, 1, 2), (1,), ()):
        ms = members()
        for i in ahead:
            assert predraw(ms[i]).drawn is not None
        got = train_members(ms, DATA.x_train, DATA.y_train, device=CPU)
        assert all(torch.equal(a, b) for a, b in zip(got, want)), ahead
    assert predraw(dataclasses.replace(members()[0], schedule="device")).drawn is None


def _schedule_reference(sizes, *, epochs, batch_size, gen):
    """engine.batch_schedule as first written (epoch by epoch, slice by slice): the draws it must keep."""
    c = len(sizes)
    per_epoch = [-(-n // batch_size) for n in sizes]
    steps = epochs * max(per_epoch)
    pos = torch.zeros(c, steps, batch_size, dtype=torch.int64)
    wts = torch.zeros(c, steps, batch_size)
    for k, n in enumerate(sizes):
        full, rest = divmod(n, batch_size)
        for e in range(epochs):
            perm = torch.randperm(n, generator=gen)
            s = e * per_epoch[k]
            pos[k, s:s + full] = perm[: full * batch_size].view(full, batch_size)
            wts[k, s:s + full] = 1.0 / batch_size
            if rest:
                pos[k, s + full, :rest] = perm[full * batch_size:]
                wts[k, s + full, :rest] = 1.0 / rest
    return pos, wts


@pytest.mark.parametrize("sizes,epochs,batch", [((600,) * 5, 5, 64), ((37, 50, 64, 20, 0, 8, 128), 3, 16),
                                                ((5,), 1, 64), ((0, 3), 2, 4)])
def test_batch_schedule_keeps_its_draws(sizes, epochs, batch):
    from fedevo.fl.engine import batch_schedule

    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    a = _schedule_reference(list(sizes), epochs=epochs, batch_size=batch, gen=g1)
    b = batch_schedule(list(sizes), epochs=epochs, batch_size=batch, gen=g2)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert torch.equal(torch.rand(4, generator=g1), torch.rand(4, generator=g2))  # the generator left alike


def _bench(*args):
    from tests.helpers import run_benchmark

    return run_benchmark("cuda_population.py", *args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_population_benchmark_says_there_is_no_gpu():
    r = _bench()
    assert r.returncode == 1 and r.stdout == "" and r.stderr.startswith("cuda_population.py: torch sees no GPU")


def test_population_benchmark_smoke_on_the_cpu():
    r = _bench("--device", "cpu", "--clients", "5", "--repeats", "1", "--no-generation", "--no-today", "--window", "3",
               "--bias-in-weights")
    assert r.returncode == 0, r.stderr
    lines = {ln.split("  ")[0]: ln for ln in r.stdout.splitlines()}
    assert float(lines["stacked, eager"].split()[-2]) < 1e-4  # against the CPU engine, max rel Δ
    # the first-layer window: fp32 rounding of a reassociation, which a ReLU switching on these 50 steps may
    # amplify (3.7e-4 max here, against 3.3e-6 for the plain loop; exact in float64: test_stacked_window.py), within
    # the fp32 round tolerance (tests/fl/test_cuda.py's ROUND_L2, relative L2)
    assert float(lines["stacked, CUDA graph, window 3"].split()[-1]) < 1e-3
    assert not any("window" in k and "SET" in k for k in lines)  # the masked round has no window lines
    # the biases inside the weights (fl/stacked_bias.py), alone and with the window, dense and masked
    for k in ("bias in weights", "window 3, bias in weights", "bias in weights, SET masks 10%"):
        assert float(lines[f"stacked, CUDA graph, {k}"].split()[-1]) < 1e-3, k


@pytest.mark.parametrize("native_draws", [True, False], ids=["native", "torch"])
def test_chunk_draws_are_torch_randperms_of_each_clients_rows(native_draws, monkeypatch):
    """engine.chunk_draws (the stacked plan's draws; native where it equals torch) gives each client's rows in the
    order torch.randperm draws them from the chunk's seed, client by client, epoch by epoch, as batch_schedule."""
    from fedevo import native
    from fedevo.fl import engine

    if native_draws and native.load() is None:
        pytest.skip("no native kernels here")
    if native_draws:  # this torch's randperm is the one perm.c reproduces: the fast path is on
        assert engine._native_randperms() is not None
    else:
        monkeypatch.setitem(engine._RANDPERMS, "kernels", None)
    rng = np.random.default_rng(5)
    for seed in (0, 7, 2**33 + 5, 2**63 + 11):
        sizes = [int(n) for n in rng.integers(0, 90, 4)] + [1, 0, 64]
        clients = [rng.choice(10_000, n, replace=False) for n in sizes]
        got = engine.chunk_draws(clients, epochs=3, seed=seed)
        assert got.shape == (len(sizes), 3, max(sizes))
        gen = torch.Generator().manual_seed(seed)
        for k, ix in enumerate(clients):
            for e in range(3):
                assert np.array_equal(got[k, e, :len(ix)], ix[torch.randperm(len(ix), generator=gen).numpy()])
                assert not got[k, e, len(ix):].any()


def test_bucket_plan_is_the_cpu_engines_batch_schedule():
    """The engine schedule's plan (the members' draws through the cached layout) holds, slot for slot, the rows,
    labels and −lr-scaled weights of each chunk's engine.batch_schedule: the CPU engine's batches."""
    from fedevo.fl.engine import batch_schedule
    from fedevo.fl.stacked import _Bucket
    from fedevo.fl.local_round import steps_of
    from fedevo.fl.stacked_schedule import compact, per_slot

    ms = [_member(units=24)[1], _member(units=17, lr=0.05, seed=1, shift=5, epochs=3)[1]]
    ms[1].epochs = 2  # one bucket (equal epochs), other clients and seeds
    bucket = _Bucket(ms, DATA.y_train, CPU)
    C, S, B = sum(m.clients for m in ms), max(steps_of(m) for m in ms), 16
    rows, ws = np.zeros((C, S, B), dtype=np.int64), np.zeros((C, S, B), dtype=np.float32)
    k = 0
    for m in ms:
        for ch, seed in zip(m.chunks, m.seeds):
            pos, w = batch_schedule([len(ix) for ix in ch], epochs=m.epochs, batch_size=B,
                                    gen=torch.Generator().manual_seed(seed))
            for j, ix in enumerate(ch):
                rows[k + j, :pos.shape[1]] = ix[pos[j].numpy()]
                ws[k + j, :pos.shape[1]] = w[j].numpy()
            k += len(ch)
    used, (want_rows, want_ws) = compact(rows, ws)
    want_ws = want_ws * per_slot(np.concatenate([np.full(m.clients, -m.lr, dtype=np.float32) for m in ms]), used)
    assert bucket.used == used
    got_rows, got_y, got_ws = (t.numpy() for t in bucket.plan)
    assert np.array_equal(got_ws, want_ws)
    real = want_ws != 0
    assert real.sum() == sum(m.epochs * len(ix) for m in ms for ch in m.chunks for ix in ch)
    assert np.array_equal(got_rows[real], want_rows[real])
    assert np.array_equal(got_y[real], DATA.y_train.numpy()[want_rows[real]])


def test_tf32_window_keeps_other_threads_matmuls_out():
    """torch's cuBLAS TF32 flag is process-wide, not per thread: while a bucket's window has changed it, another
    thread's `fp32` waits, and then sees the process's setting; a window that changes nothing takes no
    lock (a thread inside fp32 does not hold it up); the setting comes back after (fl/tf32.py)."""
    import threading
    import time

    from fedevo.fl.tf32 import fp32, window

    before = torch.backends.cuda.matmul.allow_tf32
    seen = []

    def side():
        with fp32():
            seen.append((time.perf_counter(), torch.backends.cuda.matmul.allow_tf32))
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        with fp32():  # held by "a side": a window that changes nothing does not wait for it
            with window(False):
                assert torch.backends.cuda.matmul.allow_tf32 is False
        with window(True):
            t = threading.Thread(target=side)
            t.start()
            time.sleep(0.2)
            assert seen == [] and torch.backends.cuda.matmul.allow_tf32 is True  # the side waits
            closed = time.perf_counter()
        t.join(5)
        assert len(seen) == 1 and seen[0][0] >= closed and seen[0][1] is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


@pytest.mark.parametrize("case", ["one bucket", "first-layer window", "in parts"])
def test_a_whole_round_on_fake_cuda(monkeypatch, case):
    """train_members end to end — the buckets' plans copied to the device, their state loaded, the step loop run
    through the graph cache (eager at a shape's first sight), the members' deltas — on fake CUDA tensors
    (FakeTensorMode: shapes and devices, no data): a CPU tensor meeting a CUDA one raises, and so does a host
    synchronisation (`.item()`, `bool()`, boolean indexing). The batch schedules are drawn on the host beforehand
    (`predraw`, as a run's thread does); no pinned memory and no Triton check without a GPU."""
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode

    from fedevo import hardware
    from fedevo.fl import stacked, stacked_graphs, stacked_update, stacked_window

    monkeypatch.setattr(stacked_graphs, "CACHES", {})  # every shape at its first sight: eager (no capture here)
    members = [_member(units=24)[1], _member(units=17, alpha=2.0, lr=0.05, seed=1, shift=5)[1],
               _member(units=20, lr=0.2, seed=2, shift=9)[1], _member(layers=1, units=30, seed=3)[1]]
    members = [stacked.predraw(m) for m in members]
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **kw: self)
    monkeypatch.setattr(stacked_update, "usable", lambda device: False)
    per = stacked.client_bytes(stacked.padded_dims(members[:3]), 50, 16)
    budget = 2 * per * members[0].clients if case == "in parts" else 1 << 40
    monkeypatch.setattr(hardware, "gpu_available", lambda device=None: 2 * budget)  # a bucket may take half
    if case == "first-layer window":
        monkeypatch.setenv(stacked_window.VARIABLE, "3")
    seen = []
    cuda = torch.device("cuda")
    with FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the graph cache's key reads x's data pointer: a warning
        out = train_members(members, DATA.x_train, DATA.y_train, device=cuda,
                            on_bucket=lambda idx, flats: seen.append(list(idx)))
        assert [tuple(o.shape) for o in out] == [(m.clients, sum(p.numel() for p in m.params)) for m in members]
        assert all(o.device.type == "cuda" for o in out)
    assert sorted(i for idx in seen for i in idx) == [0, 1, 2, 3]
    assert len(seen) == {"one bucket": 2, "first-layer window": 3, "in parts": 3}[case]
