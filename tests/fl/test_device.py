"""The device path (fl/device.py): the code that trains on a GPU, run here on the CPU (the same code, `device`
cpu), compared with the CPU engine; its step loop on fake CUDA tensors (no device mixing, no host sync); the
`device` setting; Ray's GPU hiding. Tests that need a real GPU are in test_cuda.py (marked `cuda`)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from fedevo import hardware
from fedevo.config import CNNArch, DataConfig, MLPArch, PrivacyConfig, SimConfig
from fedevo.errors import FedevoError
from fedevo.fl.device import group_chunks, plan_group, run_group, train_groups
from fedevo.fl.engine import train_chunks
from fedevo.privacy.mechanisms import StepLDP
from fedevo.privacy.noise import TorchNoise

from .test_engine import _setup

CPU = torch.device("cpu")
SIZES = (37, 50, 64, 20, 41, 8, 30)  # unequal clients; chunks of 3, 3, 1: a group's chunks idle at different steps


def _chunks(sizes=SIZES, per=3):
    offsets = np.cumsum((0,) + tuple(sizes))
    clients = [np.arange(offsets[i], offsets[i + 1]) for i in range(len(sizes))]
    return [clients[s:s + per] for s in range(0, len(clients), per)]


def _both(arch, *, alpha=None, step=None, sizes=SIZES, epochs=2, cap=None, shape=(1, 8, 8)):
    """Each chunk's trained parameters from the CPU engine (train_chunks) and from the device path on the CPU."""
    data, _, model, params, masks = _setup(arch, sizes=sizes, alpha=alpha, shape=shape)
    chunks = _chunks(sizes)
    seeds = [11, 22, 33][:len(chunks)]
    kw = dict(epochs=epochs, batch_size=16, lr=0.1, seeds=seeds)

    def hooks():
        return StepLDP(sigma=step[0], clip=step[1], seed=7) if step is not None else None

    h = hooks()
    cpu = list(train_chunks(model, params, masks, data.x_train, data.y_train, chunks, **kw,
                            hook_for=h.for_chunk if h else None))
    h_dev = hooks()
    dev = list(train_groups(model, params, masks, data.x_train, data.y_train, chunks, **kw, device=CPU,
                            group_hook_for=h_dev.for_group if h_dev else None, cap=cap))
    return cpu, dev, params, masks, (h, h_dev)


def _close(cpu, dev, params, atol=1e-6, rtol=1e-5):
    assert len(cpu) == len(dev)
    for a_chunk, b_chunk in zip(cpu, dev):
        for a, b, p0 in zip(a_chunk, b_chunk, params):
            assert b.device.type == "cpu" and a.shape == b.shape
            torch.testing.assert_close(b, a, atol=atol, rtol=rtol)
    assert any(not torch.allclose(a, p0.expand_as(a)) for a, p0 in zip(dev[0], params))  # the clients moved


@pytest.mark.parametrize("cap", [None, 3])  # all chunks in one group; one chunk a group
def test_mlp_equals_cpu_engine(cap):
    cpu, dev, params, _, _ = _both(MLPArch(layers=2, units=24), cap=cap)
    _close(cpu, dev, params)


def test_mlp_masked_equals_cpu_engine_and_stays_sparse():
    cpu, dev, params, masks, _ = _both(MLPArch(layers=1, units=32), alpha=2.0)
    assert masks
    _close(cpu, dev, params)
    for chunk in dev:
        for i, m in masks.items():
            assert torch.all(chunk[i][:, m == 0] == 0)


@pytest.mark.parametrize("clip", [0.05, None])  # fixed S; the median rule (each chunk's first-step median)
@pytest.mark.parametrize("alpha", [None, 2.0])
def test_step_ldp_without_noise_equals_cpu_engine(clip, alpha):
    """σ = 1e-30: the clipping alone (the noise is far below fp32 rounding of the weights)."""
    cpu, dev, params, _, (h, h_dev) = _both(MLPArch(layers=1, units=16), alpha=alpha, step=(1e-30, clip))
    _close(cpu, dev, params)
    h.end_round()
    h_dev.end_round()  # the clips the accountant reads: the largest S of any chunk, and the next round's median
    assert h_dev.clips == pytest.approx(h.clips, rel=1e-5)
    if clip is None:
        assert h_dev.S == pytest.approx(h.S, rel=1e-5)


def test_cnn_equals_cpu_engine():
    """The device path's CNN gradients are StackedCNN.grads_vmap (grouped convolutions), the CPU engine's a loop."""
    arch = CNNArch(conv_layers=2, channels=4, kernel=3, layers=1, units=16)
    cpu, dev, params, _, _ = _both(arch, alpha=2.0, sizes=(20, 33, 9, 17), epochs=1)
    _close(cpu, dev, params, atol=1e-5, rtol=1e-4)


def test_cnn_vmap_gradients_equal_the_loop():
    from fedevo.models import build_model

    model = build_model(CNNArch(conv_layers=2, channels=4, kernel=3, layers=1, units=16), (1, 8, 8), 10)
    g = torch.Generator().manual_seed(0)
    params = [p.unsqueeze(0).repeat(3, *([1] * p.dim())) + 0.01 * torch.randn(3, *p.shape, generator=g)
              for p in model.init(g)]
    x, y, w = torch.randn(3, 5, 1, 8, 8, generator=g), torch.randint(0, 10, (3, 5), generator=g), torch.full((3, 5), .2)
    for a, b in zip(model.grads(params, x, y, w), model.grads_vmap(params, x, y, w)):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)


def test_step_noise_has_sigma_std_on_the_device_path():
    """clip ~0: the step is pure noise, 4 steps of N(0, 0.5²) → std 1.0 (a factor-2 error in σ gives 0.5 or 2);
    with sparse masks only the active weights move."""
    data, clients, model, params, masks = _setup(MLPArch(layers=1, units=64), sizes=(16, 16, 16), alpha=1.0)
    assert float(masks[0].mean()) < 0.5
    hook = StepLDP(sigma=0.5, clip=1e-9, seed=3)
    (got,) = train_groups(model, params, masks, data.x_train, data.y_train, [clients], epochs=4, batch_size=16,
                          lr=0.1, seeds=[5], device=CPU, group_hook_for=hook.for_group)
    for i, (a, p) in enumerate(zip(got, params)):
        diff = a - p.unsqueeze(0)
        m = masks.get(i)
        if m is not None:
            assert torch.all(diff[:, m == 0] == 0)
            diff = diff[:, m == 1]
        assert abs(float(diff.std()) - 1.0) < 0.1, (i, float(diff.std()))
    assert isinstance(hook._chunks[0].noise, TorchNoise)


def test_idle_clients_get_no_noise():
    """A group runs as many steps as its longest chunk: the others' clients idle after their last step, unchanged
    by the noise drawn meanwhile (×0)."""
    data, _, model, params, masks = _setup(MLPArch(layers=1, units=16), sizes=(16, 64))
    chunks = [[np.arange(0, 16)], [np.arange(16, 80)]]  # 1 step an epoch vs 4
    hook = StepLDP(sigma=0.5, clip=1e-9, seed=3)
    short, long_ = train_groups(model, params, masks, data.x_train, data.y_train, chunks, epochs=1, batch_size=16,
                                lr=0.1, seeds=[1, 2], device=CPU, group_hook_for=hook.for_group)
    d_short = torch.cat([(a - p.unsqueeze(0)).reshape(-1) for a, p in zip(short, params)])
    d_long = torch.cat([(a - p.unsqueeze(0)).reshape(-1) for a, p in zip(long_, params)])
    assert abs(float(d_short.std()) - 0.5) < 0.05  # one step of noise
    assert abs(float(d_long.std()) - 1.0) < 0.1  # four


def test_results_depend_on_the_seed_only():
    def run(seeds):
        data, _, model, params, masks = _setup(MLPArch(layers=1, units=16), sizes=SIZES)
        hook = StepLDP(sigma=0.01, clip=0.5, seed=3)
        return list(train_groups(model, params, masks, data.x_train, data.y_train, _chunks(), epochs=1,
                                 batch_size=16, lr=0.1, seeds=seeds, device=CPU, group_hook_for=hook.for_group))

    a, b, c = run([1, 2, 3]), run([1, 2, 3]), run([4, 2, 3])
    assert all(torch.equal(x, y) for ca, cb in zip(a, b) for x, y in zip(ca, cb))
    assert not torch.equal(a[0][0], c[0][0])


def test_group_chunks():
    assert group_chunks([5, 5, 3], None) == [[0, 1, 2]]
    assert group_chunks([5, 5, 3], 10) == [[0, 1], [2]]
    assert group_chunks([5, 5, 3], 2) == [[0], [1], [2]]  # a chunk larger than the cap: alone
    assert group_chunks([], None) == []


# ------------------------------------------------------------------------------ the FedAvg loop, device path on
def _rounds(cfg, device, seed=0):
    from fedevo.fl.rounds import run_rounds
    from fedevo.fl.simulate import prepare

    su = prepare(cfg, seed=seed)
    try:
        return run_rounds(su.cfg, su.model, su.data, su.part, gen=su.gen, privatizer=su.privatizer,
                          engine=su.engine, device=device)
    finally:
        su.noise.close()


SIM = dict(data=DataConfig(dataset="synthetic", clients=12), rounds=3, participation=1.0, precision="fp32", device="cpu")


@pytest.mark.parametrize("name,cfg", [
    ("mlp", SimConfig(arch=MLPArch(2, 32), **SIM)),
    ("mlp-set", SimConfig(arch=MLPArch(2, 32), alpha=2.0, xi=0.2, **SIM)),
    ("cnn", SimConfig(arch=CNNArch(2, 4, 3, 1, 16), **{**SIM, "rounds": 2}, epochs=1)),
    ("step-median", SimConfig(arch=MLPArch(1, 32), privacy=PrivacyConfig(mechanism="step", sigma=1e-30,
                                                                         clip_rule="median"), **SIM)),
    ("adaptive", SimConfig(arch=MLPArch(1, 32), privacy=PrivacyConfig(mechanism="adaptive", sigma=0.5, clip=1.0),
                           **SIM)),
    ("secagg", SimConfig(arch=MLPArch(1, 32), privacy=PrivacyConfig(mechanism="update", sigma=0.5, clip=1.0,
                                                                    aggregation="secagg"), **SIM)),
])
def test_run_rounds_device_path_equals_cpu_engine(name, cfg):
    """Whole runs (uploads, aggregation, SET prune/regrow, the mechanism's server side) through the device path
    on the CPU and through the CPU engine: the same parameters within fp32 rounding (the documented tolerance
    for CUDA is 1e-4 of each tensor's largest magnitude, docs/engine.md)."""
    a, b = _rounds(cfg, None), _rounds(cfg, CPU)
    for x, y in zip(a.params, b.params):
        assert x.device.type == y.device.type == "cpu"
        assert float((x - y).abs().max()) <= 1e-5 * float(y.abs().max()), name
    assert a.comm == pytest.approx(b.comm)


def test_hook_without_device_path_is_refused():
    from fedevo.fl.rounds import run_rounds
    from fedevo.fl.simulate import prepare
    from fedevo.privacy.privatizer import RoundPrivatizer

    class CPUOnly:
        def for_chunk(self, seed):
            raise AssertionError("not called")

        def end_round(self):
            pass

    su = prepare(SimConfig(arch=MLPArch(1, 8), **SIM), seed=0)
    with pytest.raises(FedevoError, match="CPUOnly has no device path"):
        run_rounds(su.cfg, su.model, su.data, su.part, gen=su.gen, privatizer=RoundPrivatizer(step_hook=CPUOnly()),
                   device=CPU)


# ------------------------------------------------------------------- the step loop on fake CUDA tensors
class _FakeNoise(TorchNoise):
    """torch's default generator: a CUDA generator cannot be made without a GPU."""

    def __init__(self):
        self.device, self.gen = torch.device("cuda"), None

    def fill_(self, buf, std=1.0):
        return buf.normal_(0.0, std)


@pytest.mark.parametrize("case", ["plain", "masked-step", "median-step", "adaptive", "bf16"])
def test_step_loop_on_fake_cuda(case):
    """run_group on fake CUDA tensors (FakeTensorMode: shapes and devices, no data): a CPU tensor meeting a CUDA
    one raises, and so does anything that needs the data on the host (`.item()`, `bool()`, boolean indexing),
    i.e. a host synchronisation inside the step loop."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from fedevo.privacy.adaptive import _ChunkLR

    alpha = 2.0 if case == "masked-step" else None
    data, _, model, params, masks = _setup(MLPArch(layers=2, units=24), sizes=SIZES, alpha=alpha)
    chunks = _chunks()
    plan = plan_group(data.y_train, chunks, [torch.Generator().manual_seed(s) for s in (1, 2, 3)], epochs=2,
                      batch_size=16)
    cuda = torch.device("cuda")
    if case == "bf16":
        model.compute_dtype = torch.bfloat16
    with FakeTensorMode(allow_non_fake_inputs=True):
        hook = None
        if case.endswith("step"):
            hook = StepLDP(sigma=0.1, clip=None if case == "median-step" else 1.0).for_group(
                [1, 2, 3], plan.counts, cuda, noise=_FakeNoise())
        elif case == "adaptive":
            hook = _ChunkLR(torch.ones(plan.clients).to(cuda))
        out = run_group(model, params, masks, data.x_train, plan, lr=0.1, hook=hook, device=cuda)
        assert [tuple(p.shape) for p in out] == [(plan.clients, *p.shape) for p in params]
        assert all(p.device.type == "cuda" for p in out)
        assert all(p.cpu().device.type == "cpu" for p in out)


# ------------------------------------------------------------------------------------------ the setting
def test_device_setting_validated():
    assert SimConfig().device == "auto"
    assert SimConfig(device="cuda").device == "cuda"  # no GPU check here: a driver may load it for its workers
    with pytest.raises(FedevoError, match="device must be 'auto', 'cpu' or 'cuda', got 'banana'"):
        SimConfig(device="banana")


def test_device_resolution_here(monkeypatch):
    assert hardware.device("cpu") == CPU
    with pytest.raises(FedevoError, match="got 'gpu'"):
        hardware.device("gpu")
    assert hardware.device_choice("auto") == (CPU, "auto: FEDEVO_DEVICE=cpu")  # tests/conftest.py
    monkeypatch.setenv("FEDEVO_DEVICE", "tpu")
    with pytest.raises(FedevoError, match="FEDEVO_DEVICE must be 'cpu' or 'cuda'"):
        hardware.device("auto")
    assert hardware.device("cpu") == CPU  # an explicit setting does not read it
    monkeypatch.delenv("FEDEVO_DEVICE")
    if torch.cuda.is_available():
        assert hardware.device_choice("auto")[0].type == "cuda"
        return
    assert hardware.device_choice("auto") == (CPU, "auto: torch sees no GPU")
    with pytest.raises(FedevoError, match=r"^device='cuda' but torch sees no GPU"):
        hardware.device("cuda")
    monkeypatch.setenv("FEDEVO_DEVICE", "cuda")
    with pytest.raises(FedevoError, match=r"^device='cuda' but torch sees no GPU"):
        hardware.device("auto")


def test_cuda_setup_turns_tf32_off():
    """Set on every CUDA resolution; process-wide flags, readable without a GPU."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision(),
             torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    try:
        torch.backends.cudnn.allow_tf32 = True  # cuDNN's default: TF32 convolutions
        hardware.cuda_setup()
        assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "highest"
        assert torch.backends.cudnn.deterministic is True and torch.backends.cudnn.benchmark is False
    finally:
        (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, _, torch.backends.cudnn.deterministic,
         torch.backends.cudnn.benchmark) = flags
        torch.set_float32_matmul_precision(flags[2])


def test_auto_precision_on_cuda_is_fp32():
    assert hardware.precision("auto", "cuda").name == "fp32"
    assert hardware.precision("bf16", "cuda").name == "bf16"


def test_engine_info_names_the_device(monkeypatch):
    eng = hardware.engine_info("auto", "cpu")
    assert (eng["device"], eng["device_reason"]) == ("cpu", "device = 'cpu' in the configuration")
    assert eng["kernels"] and "gpu" not in eng
    assert hardware.engine_info("auto", "auto")["device_reason"] == "auto: FEDEVO_DEVICE=cpu"
    if not torch.cuda.is_available():
        monkeypatch.delenv("FEDEVO_DEVICE")
        eng = hardware.engine_info("auto", "auto")
        assert (eng["device"], eng["device_reason"]) == ("cpu", "auto: torch sees no GPU")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cli_cuda_without_gpu_is_one_line(capsys, tiny_problem):
    from tests.cli.test_bad_input import bad

    bad(capsys, ["evaluate", "--problem", tiny_problem.path, "--params", '{"device": "cuda"}', "--json"],
        r"device='cuda' but torch sees no GPU")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_search_with_cuda_problem_without_gpu_stops_with_one_line(capsys, tmp_path):
    """A setup problem (NoDeviceError), not an individual's fault: the search stops at the first evaluation."""
    from tests.cli.test_bad_input import bad

    path = tmp_path / "gpu.toml"
    # objectives without ε: the problem has no privacy (the note that leaves ε out is not this test's line)
    path.write_text('dataset = "digits"\nmodel = "mlp"\nobjectives = ["error", "comm"]\n[train]\ndevice = "cuda"\nrounds = 1\n'
                    '[genes]\nlr = { type = "real", low = 0.01, high = 0.5, default = 0.2 }\n')
    err = bad(capsys, ["search", "--problem", path, "--workers", 0, "--pop", 6, "--gen", 1, "--quiet", "--out",
                       tmp_path / "run"], r"device='cuda' but torch sees no GPU.*the search stopped")
    # the fresh run directory no evaluation reached is removed: the message says so, not to resume it
    assert "fedevo resume" not in err and "was removed" in err and not (tmp_path / "run").exists()


def test_cli_bad_device_is_one_line(capsys, tiny_problem):
    from tests.cli.test_bad_input import bad

    bad(capsys, ["evaluate", "--problem", tiny_problem.path, "--params", '{"device": "banana"}'],
        r'parameter device: expected one of "auto", "cpu", "cuda", got "banana"')


# ------------------------------------------------------------------------------------------ Ray's GPUs
def _env_seen(problem, params, *, seed, **kw):
    from fedevo.result import EvaluationResult

    return EvaluationResult(error=0.0, comm=0.0, eps=0.0, eps_paper=0.0, accuracy_global=1.0, omega=0,
                            status="ok", wall_s=0.0, message=repr(os.environ.get("CUDA_VISIBLE_DEVICES")))


def test_ray_task_without_gpus_hides_them(monkeypatch):
    """Ray 2.60 leaves CUDA_VISIBLE_DEVICES alone for a task that reserved no GPU: fedevo's task hides them
    itself (device = 'auto' then trains on the CPU) and restores the variable after."""
    from fedevo.searching.runner import _ray_task

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    kind, res, _ = _ray_task(None, _env_seen, {}, 0, {}, 1, 0.0)
    assert (kind, res.message) == ("ok", "''")
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    kind, res, _ = _ray_task(None, _env_seen, {}, 0, {}, 1, 0.25)  # Ray set it to the task's GPU: left alone
    assert res.message == "'0,1'"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    _ray_task(None, _env_seen, {}, 0, {}, 1, 0.0)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


@pytest.mark.parametrize("on_command_line", [False, True])
def test_no_gpu_in_a_ray_task_names_the_option_both_ways(monkeypatch, on_command_line):
    """device='cuda' in a Ray task that reserved no GPU (CUDA_VISIBLE_DEVICES empty, `_gpus_seen`): said on the
    worker, where errors.arg cannot know how the search was started, so both spellings, whichever the caller."""
    import contextlib

    from fedevo.errors import NoDeviceError, command_line

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    with command_line() if on_command_line else contextlib.nullcontext():
        with pytest.raises(NoDeviceError) as e:
            hardware.device_choice("cuda")
    assert str(e.value) == ("device='cuda' but torch sees no GPU (torch.cuda.is_available() is False: "
                            "CUDA_VISIBLE_DEVICES is empty (a Ray task that reserved no GPU: --gpus-per-task / "
                            "gpus_per_task)); use device = 'auto' or 'cpu'")


def _share_seen(problem, params, *, seed, **kw):
    from fedevo.result import EvaluationResult

    return EvaluationResult(error=0.0, comm=0.0, eps=0.0, eps_paper=0.0, accuracy_global=1.0, omega=0,
                            status="ok", wall_s=0.0, message=repr(os.environ.get("FEDEVO_GPU_SHARE")))


@pytest.mark.parametrize("gpus,seen", [(0.25, "'0.25'"), (0.5, "'0.5'"), (1.0, "None"), (2.0, "None"),
                                       (0.0, "None")])
def test_ray_task_plans_for_its_share_of_the_gpu(monkeypatch, gpus, seen):
    """A task that reserved part of a GPU (--gpus-per-task 0.25) plans for that share of its memory
    (FEDEVO_GPU_SHARE: a CNN batch's groups, hardware.gpu_total), the variable put back after."""
    from fedevo.searching.runner import _ray_task

    monkeypatch.delenv("FEDEVO_GPU_SHARE", raising=False)
    kind, res, _ = _ray_task(None, _share_seen, {}, 0, {}, 1, gpus)
    assert (kind, res.message) == ("ok", seen)
    assert "FEDEVO_GPU_SHARE" not in os.environ


def test_cuda_problem_without_gpus_per_task_is_refused(tmp_path):
    from fedevo.problem import load_problem
    from fedevo.searching.runner import make_runner

    path = tmp_path / "gpu.toml"
    path.write_text('dataset = "synthetic"\nmodel = "mlp"\n[train]\ndevice = "cuda"\n'
                    '[genes]\nlr = { type = "real", low = 0.01, high = 0.5, default = 0.2 }\n')
    prob = load_problem(str(path))  # loads without a GPU: the check is where training starts
    with pytest.raises(FedevoError, match="sets device = \"cuda\", but its Ray tasks reserve no GPU"):
        make_runner(_env_seen, prob, {}, workers=2, gpus_per_task=0.0)


# ------------------------------------------------------------------------------------------ benchmarks/cuda_round.py
def _bench(*args):
    from tests.helpers import run_benchmark

    return run_benchmark("cuda_round.py", *args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_cuda_benchmark_says_there_is_no_gpu():
    r = _bench()
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("cuda_round.py: torch sees no GPU") and r.stderr.count("\n") == 1


def test_cuda_benchmark_smoke_on_the_cpu():
    r = _bench("--device", "cpu", "--clients", "5", "--no-cnn", "--repeats", "1")
    assert r.returncode == 0, r.stderr
    assert "GPU: none" in r.stdout
    lines = {ln.split("  ")[0]: ln for ln in r.stdout.splitlines()}
    assert float(lines["MLP plain"].split()[-3]) < 1e-5  # the device path on the CPU vs the CPU engine, max rel Δ
    assert "noise" in lines["MLP per-step LDP σ=0.01 S=1"]
