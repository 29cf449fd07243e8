"""The stacked trainer's opt-ins for speed (fl/stacked.py, docs/engine.md): the batch schedule drawn on the device
(`FEDEVO_SCHEDULE=device`), TF32 matmuls on CUDA (`FEDEVO_CUDA_TF32=1`) and, as settings here, the step loop's
pointwise work torch.compile'd on CUDA (`FEDEVO_CUDA_COMPILE=1`; its numbers: test_stacked_fused.py).

A device schedule draws other batches than the CPU engine, so its results equal the engine's statistically, not
within rounding: every client makes E passes over each of its samples once per pass, with the engine's per-sample
weights; the same seed gives the same numbers; and FedAvg trained with it reaches the engine's test error: the
mean over 6 seeds within 0.03 (the tolerance docs/engine.md states for per-step noise: other draws, same
distribution). On the CPU always; on CUDA (`pytest -m cuda`) where a GPU is present, there also with TF32.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedevo.config import MLPArch
from fedevo.data.datasets import synthetic
from fedevo.errors import FedevoError
from fedevo.fl import stacked_fused, stacked_settings
from fedevo.fl.engine import batch_schedule
from fedevo.fl.stacked import Member, train_members
from fedevo.fl.stacked_schedule import device_draws, layout_into
from fedevo.models import build_model

SIZES = (37, 50, 64, 20, 41, 8, 30, 45)  # unequal clients
DATA = synthetic(n_train=sum(SIZES), n_test=600, shape=(1, 8, 8), seed=0, noise=1.5)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]
TOLERANCE = 0.03  # |mean error (device schedule) − mean error (engine schedule)| over SEEDS
SEEDS = range(6)


def _chunks(per=3):
    offsets = np.cumsum((0,) + SIZES)
    clients = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(SIZES))]
    return [clients[s:s + per] for s in range(0, len(clients), per)]


def _member(params, schedule, seeds, epochs=2, lr=0.1, dims=None):
    return Member(dims=dims, params=params, masks={}, lr=lr, chunks=_chunks(), seeds=seeds, epochs=epochs,
                  batch_size=16, schedule=schedule)


def _model():
    return build_model(MLPArch(layers=1, units=32), (1, 8, 8), 10)


def test_layout_is_the_engines():
    """The structure (which slots are real, their weights) is batch_schedule's: only the draws differ."""
    sizes, E, B = [10, 23, 23, 0, 5], 3, 4
    pos, w = batch_schedule(sizes, epochs=E, batch_size=B, gen=torch.Generator().manual_seed(0))
    src, ws = np.zeros(pos.shape, dtype=np.int64), np.zeros(pos.shape, dtype=np.float32)
    layout_into(sizes, E, B, src, ws)
    assert np.array_equal(ws, w.numpy())
    for k, n in enumerate(sizes):  # epoch e's slots read draws e·max(sizes) + 0..n-1, each once
        for e in range(E):
            pe = -(-n // B)
            got = src[k, e * pe:(e + 1) * pe].reshape(-1)[:n]
            assert sorted(got) == list(range(e * max(sizes), e * max(sizes) + n))



def test_one_rule_for_the_weights_and_the_rows(monkeypatch):
    """A step averages its samples (1/B, 1/len in an epoch's short last batch): `engine.step_weights` is that rule
    for the CPU engine, the stacked trainer's layout and (through batch_schedule) the device path, and
    `engine.client_rows` the one gather of the clients' rows for the engine and the device path."""
    from fedevo.fl import device, engine, stacked_schedule

    assert np.array_equal(engine.step_weights(5, 2), [[0.5, 0.5], [0.5, 0.5], [1.0, 0.0]])
    table, rows = engine.client_rows([np.array([7, 8, 9]), np.array([4])], torch.tensor([[[2, 0]], [[0, 0]]]))
    assert table.tolist() == [[7, 8, 9], [4, 0, 0]] and rows.tolist() == [[[9, 7]], [[4, 4]]]

    def marked(n, batch_size):
        return np.full((-(-n // batch_size), batch_size), 7.0, dtype=np.float32)
    monkeypatch.setattr(engine, "step_weights", marked)
    monkeypatch.setattr(stacked_schedule, "step_weights", marked)
    _, w = batch_schedule([5, 3], epochs=2, batch_size=2, gen=torch.Generator().manual_seed(0))
    ws = np.zeros(w.shape, dtype=np.float32)
    layout_into([5, 3], 2, 2, np.zeros(w.shape, dtype=np.int64), ws)
    assert set(w.unique().tolist()) == set(np.unique(ws).tolist()) == {0.0, 7.0}
    gathered = []
    monkeypatch.setattr(device, "client_rows", lambda ix, pos: gathered.append(len(ix)) or engine.client_rows(ix, pos))
    device.plan_group(torch.arange(10), [[np.arange(5)], [np.arange(5, 8)]],
                      [torch.Generator().manual_seed(s) for s in (1, 2)], epochs=1, batch_size=2)
    assert gathered == [2]

@pytest.mark.parametrize("device", DEVICES)
def test_device_draws_are_permutations_and_seeded(device):
    m = _member(_model().init(torch.Generator().manual_seed(0)), "device", [1, 2, 3], epochs=3, dims=_model().dims)
    a = device_draws(m, device).cpu()
    assert a.shape == (len(SIZES), 3, max(SIZES))
    rows = [ix for ch in m.chunks for ix in ch]
    for k, ix in enumerate(rows):
        for e in range(3):
            assert sorted(a[k, e, :len(ix)].tolist()) == sorted(ix.tolist())
    assert not torch.equal(a[:, 0], a[:, 1])  # each epoch its own shuffle
    assert torch.equal(device_draws(m, device).cpu(), a)
    m.seeds = [1, 2, 4]
    assert not torch.equal(device_draws(m, device).cpu(), a)


def _fedavg_error(schedule, seed, device, rounds=3):
    """FedAvg through train_members (all clients each round), the global model's test error."""
    model = _model()
    params = [p.to(device) for p in model.init(torch.Generator().manual_seed(seed))]
    weights = torch.tensor(SIZES, dtype=torch.float32, device=device).view(-1, 1) / sum(SIZES)
    for r in range(rounds):
        m = _member(params, schedule, [1000 * seed + 10 * r + i for i in range(3)], dims=model.dims)
        (flat,) = train_members([m], DATA.x_train, DATA.y_train, device=device)
        mean, off = (flat * weights).sum(0), 0
        for i, p in enumerate(params):
            params[i] = p + mean[off:off + p.numel()].view_as(p)
            off += p.numel()
    h = DATA.x_test.reshape(len(DATA.x_test), -1).to(device)
    for l in range(0, len(params), 2):
        h = h @ params[l] + params[l + 1]
        if l + 2 < len(params):
            h = h.relu()
    return float((h.argmax(1).cpu() != DATA.y_test).float().mean())


@pytest.mark.parametrize("device", DEVICES)
def test_device_schedule_same_seed_same_numbers_other_batches(device):
    params = _model().init(torch.Generator().manual_seed(0))
    dims = _model().dims
    run = lambda sched: train_members([_member(params, sched, [5, 6, 7], dims=dims)], DATA.x_train,  # noqa: E731
                                      DATA.y_train, device=device)[0]
    a, b, eng = run("device"), run("device"), run("engine")
    assert torch.equal(a, b)
    assert float(a.abs().max()) > 1e-3
    assert not torch.allclose(a, eng, atol=1e-4)  # other batches


@pytest.mark.parametrize("tf32", [False, pytest.param(True, marks=pytest.mark.cuda)], ids=["fp32", "tf32"])
@pytest.mark.parametrize("device", DEVICES)
def test_device_schedule_error_equals_engine_statistically(device, tf32, monkeypatch):
    if tf32 and device == "cpu":
        pytest.skip("TF32 is CUDA's")
    monkeypatch.setenv("FEDEVO_CUDA_TF32", "1" if tf32 else "0")
    engine = [_fedavg_error("engine", s, "cpu") for s in SEEDS]
    dev = [_fedavg_error("device", s, device) for s in SEEDS]
    assert 0.05 < np.mean(engine) < 0.8  # learnt, not saturated: a test that can tell
    assert abs(np.mean(dev) - np.mean(engine)) <= TOLERANCE, (engine, dev)


def test_schedule_setting(monkeypatch):
    monkeypatch.delenv("FEDEVO_SCHEDULE", raising=False)
    assert stacked_settings.schedule_setting() == "engine"
    monkeypatch.setenv("FEDEVO_SCHEDULE", "device")
    assert stacked_settings.schedule_setting() == "device"
    assert Member(dims=(64, 10), params=[], masks={}, lr=0.1, chunks=[], seeds=[], epochs=1,
                  batch_size=16).schedule == "device"  # the default: the variable's
    monkeypatch.setenv("FEDEVO_SCHEDULE", "gpu")
    with pytest.raises(FedevoError, match="FEDEVO_SCHEDULE must be"):
        stacked_settings.schedule_setting()


@pytest.mark.parametrize("device", DEVICES)
def test_device_schedule_members_together_equal_alone(device):
    """Each member draws from its own generator: in one bucket its numbers are those it has alone."""
    model = _model()
    members = [_member(model.init(torch.Generator().manual_seed(s)), "device", [s, s + 1, s + 2], lr=lr,
                       dims=model.dims) for s, lr in ((0, 0.1), (3, 0.05), (7, 0.2))]
    together = train_members(members, DATA.x_train, DATA.y_train, device=device, exact=True)
    for m, got in zip(members, together):
        (alone,) = train_members([m], DATA.x_train, DATA.y_train, device=device, exact=True)
        assert torch.equal(got, alone)
    assert not torch.equal(together[0], together[1])


# ---------------------------------------------------------------------------------------------- as settings
TINY = """
name = "tiny_opt_ins"
dataset = "synthetic"
model = "mlp"
[data]
clients = 4
[train]
rounds = 2
epochs = 2
batch_size = 16
precision = "fp32"
{extra}
[privacy]
mechanism = "none"
[genes]
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
"""


def _problem(tmp_path, extra=""):
    from fedevo.problem import load_problem

    p = tmp_path / "p.toml"
    p.write_text(TINY.format(extra=extra))
    return load_problem(str(p))


def test_the_opt_ins_are_train_keys_the_variables_override(tmp_path, monkeypatch):
    for var in ("FEDEVO_SCHEDULE", "FEDEVO_CUDA_TF32", "FEDEVO_CUDA_COMPILE"):
        monkeypatch.delenv(var, raising=False)
    plain = _problem(tmp_path).sim_config()
    # fp32, the CPU engine's batches, the plain loop: the default
    assert (plain.batch_schedule, plain.tf32, plain.torch_compile) == ("engine", False, False)
    cfg = _problem(tmp_path, 'batch_schedule = "device"\ntf32 = true\ntorch_compile = true').sim_config()
    assert stacked_settings.settings_of(cfg) == {"schedule": "device", "tf32": True, "torch_compile": True}
    assert stacked_settings.settings_of(plain) == {"schedule": "engine", "tf32": False, "torch_compile": False}
    monkeypatch.setenv("FEDEVO_SCHEDULE", "engine")
    monkeypatch.setenv("FEDEVO_CUDA_TF32", "0")
    monkeypatch.setenv("FEDEVO_CUDA_COMPILE", "0")
    # the variables win where set
    assert stacked_settings.settings_of(cfg) == {"schedule": "engine", "tf32": False, "torch_compile": False}
    monkeypatch.setenv("FEDEVO_SCHEDULE", "device")
    monkeypatch.setenv("FEDEVO_CUDA_TF32", "1")
    monkeypatch.setenv("FEDEVO_CUDA_COMPILE", "1")
    assert stacked_settings.settings_of(plain) == {"schedule": "device", "tf32": True, "torch_compile": True}
    assert Member(dims=(64, 10), params=[], masks={}, lr=0.1, chunks=[], seeds=[], epochs=1,
                  batch_size=16).torch_compile is True  # the default: the variable's


def test_opt_ins_name_the_cuda_ones_on_cuda_only(tmp_path, monkeypatch):
    for var in ("FEDEVO_SCHEDULE", "FEDEVO_CUDA_TF32", "FEDEVO_CUDA_COMPILE"):
        monkeypatch.delenv(var, raising=False)
    assert stacked_settings.opt_ins(_problem(tmp_path).sim_config(), "cuda") == {}
    cfg = _problem(tmp_path, "tf32 = true\ntorch_compile = true").sim_config()
    assert stacked_settings.opt_ins(cfg, "cuda") == {"tf32": True, "torch_compile": True}
    assert stacked_settings.opt_ins(cfg, "cpu") == {}
    # a per-step hook's loop has no compiled pointwise work: its result does not claim it
    assert stacked_settings.opt_ins(cfg, "cuda", hooked=True) == {"tf32": True}
    monkeypatch.setenv("FEDEVO_CUDA_COMPILE", "0")
    assert stacked_settings.opt_ins(cfg, "cuda") == {"tf32": True}


@pytest.mark.parametrize("var", ["FEDEVO_CUDA_TF32", "FEDEVO_CUDA_COMPILE"])
def test_an_opt_in_variable_with_a_typo_is_one_line_not_silently_off(tmp_path, monkeypatch, var):
    from fedevo.errors import SetupError

    cfg = _problem(tmp_path).sim_config()
    for value, want in (("ON", True), ("yes", True), (" 0 ", False), ("False", False)):
        monkeypatch.setenv(var, value)
        assert stacked_settings.settings_of(cfg)["tf32" if var.endswith("TF32") else "torch_compile"] is want
    monkeypatch.setenv(var, "ture")
    with pytest.raises(SetupError, match=f"^{var} must be 1 or 0 .*got 'ture'$"):
        stacked_settings.settings_of(cfg)


@pytest.mark.parametrize("line, message", [
    ('batch_schedule = "gpu"', '[train] batch_schedule: expected one of "engine", "device"'),
    ('tf32 = "yes"', "[train] tf32: expected true or false"),
    ("tf32 = 1", "[train] tf32: expected true or false"),
    ('torch_compile = "yes"', "[train] torch_compile: expected true or false"),
    ("torch_compile = 1", "[train] torch_compile: expected true or false"),
])
def test_bad_opt_ins_are_one_line(tmp_path, line, message):
    with pytest.raises(FedevoError) as e:
        _problem(tmp_path, line)
    assert str(e.value).startswith(f"problem 'p': {message}") and "\n" not in str(e.value)


def test_a_batched_generation_draws_its_schedule_as_its_problem_says(tmp_path, monkeypatch):
    """batch_schedule = "device" reaches the stacked trainer through the population path: other numbers than the
    engine's schedule, the same ones again with the same seed."""
    from fedevo.evaluation import evaluate_population

    monkeypatch.delenv("FEDEVO_SCHEDULE", raising=False)
    engine, device = _problem(tmp_path), _problem(tmp_path, 'batch_schedule = "device"')
    run = lambda prob: [r.accuracy_global for r in evaluate_population(  # noqa: E731
        prob, [{}, {"lr": 0.2}], [1, 2], device="cpu")]
    a, b = run(device), run(device)
    assert a == b and a != run(engine)


@pytest.mark.parametrize("device", DEVICES)
def test_a_result_names_the_opt_ins_it_trained_with(tmp_path, monkeypatch, device):
    from fedevo.evaluation import evaluate_population

    for var in ("FEDEVO_SCHEDULE", "FEDEVO_CUDA_TF32", "FEDEVO_CUDA_COMPILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch, "compile", lambda f, **kw: f)  # the setting's plumbing, not seconds of compiling
    monkeypatch.setattr(stacked_fused, "_COMPILED", None)  # (and the process's compiled functions after as before)
    (plain,) = evaluate_population(_problem(tmp_path), [{}], [1], device=device)
    opted_problem = _problem(tmp_path, 'batch_schedule = "device"\ntf32 = true\ntorch_compile = true')
    (opted,) = evaluate_population(opted_problem, [{}], [1], device=device)
    assert not {"batch_schedule", "tf32", "torch_compile"} & set(plain.engine)
    assert opted.engine["batch_schedule"] == "device"
    assert opted.engine.get("tf32", False) is (device == "cuda")  # TF32: CUDA's only
    assert opted.engine.get("torch_compile", False) is (device == "cuda")  # likewise
