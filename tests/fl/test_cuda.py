"""On a real GPU: the device path on CUDA against the CPU engine, within the tolerance docs/engine.md documents.

Every test here is marked `cuda`: skipped (not failed) where torch sees no GPU (tests/conftest.py). They ran on
lent H100 GPUs (benchmarks/results-2026-11-24-cuda-h100-tests.txt, results-2026-11-25-cuda-h100-population.txt;
the tolerances come from the CPU's own fp32 implementations, which differ from one another as CUDA's do from
them). MLPs without a per-step hook train through the stacked trainer (fl/stacked.py) on CUDA; the generation
path is tested in test_cuda_population.py.

The tolerance (docs/engine.md). fp32 SGD amplifies rounding differences wherever a ReLU or a max-pool switches,
so two correct fp32 implementations drift apart step by step: on the CPU, the CNN's per-client loop and its
vmap'd grouped convolutions (equal to 1e-16 in fp64) differ by 1e-7 after one step and 8e-3 after ten; the
MLP's native and torch paths by up to 3e-4 after one reference round. Hence: after one local step every
parameter tensor within 1e-4 of its largest magnitude (max|a − b| ≤ 1e-4·max|b|: the same computation); after
one reference round (E = 5) within 1e-3 in L2 (‖a − b‖ ≤ 1e-3·‖b‖; the CPU's paths: ≤ 4e-5); whole evaluations:
the error objective within 0.02, ε and communication equal (the CPU computes both either way); with per-step
noise (other draws, same distribution) the noise's std is σ·√steps within 5% and the mean error over 5 seeds the
CPU's within 0.03.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from fedevo import hardware
from fedevo.config import CNNArch, DataConfig, MLPArch, PrivacyConfig, SimConfig
from fedevo.data.datasets import synthetic
from fedevo.data.partition import partition
from fedevo.fl.device import train_groups
from fedevo.fl.rounds import client_accuracies, run_rounds
from fedevo.privacy.privatizer import RoundPrivatizer
from fedevo.fl.simulate import simulate
from fedevo.models import build_model
from fedevo.privacy.mechanisms import StepLDP

pytestmark = pytest.mark.cuda

STEP_RTOL = 1e-4  # max|a − b| ≤ STEP_RTOL·max|b| per parameter tensor after one local step, fp32
ROUND_L2 = 1e-3  # ‖a − b‖ ≤ ROUND_L2·‖b‖ per parameter tensor after one reference round (E = 5)
ERROR_ATOL = 0.02  # |error_cuda − error_cpu| of a whole plain evaluation
NOISY_ERROR_ATOL = 0.03  # mean error over 5 seeds with per-step noise (other draws)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-30)


def _rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm()) / max(float(b.norm()), 1e-30)


def _train(cfg: SimConfig, data, device: str, seed: int = 0, step_hook=None):
    """run_rounds on `data` with cfg.device = `device` (the CPU engine for 'cpu', the device path for 'cuda')."""
    cfg = cfg.with_(device=device)
    part = partition(data.y_train.numpy(), data.y_test.numpy(), scheme="iid", clients=cfg.data.clients,
                     num_classes=data.num_classes, seed=seed)
    model = build_model(cfg.arch, data.input_shape, data.num_classes)
    out = run_rounds(cfg, model, data, part, gen=torch.Generator().manual_seed(seed),
                     privatizer=RoundPrivatizer(step_hook=step_hook))
    per_client, _ = client_accuracies(model, out.params, data, part)
    return out, float(1.0 - np.nanmean(per_client))


def _compare(cfg, data, tol, metric=_rel):
    cpu, err_cpu = _train(cfg, data, "cpu")
    gpu, err_gpu = _train(cfg, data, "cuda")
    assert all(p.device.type == "cpu" for p in gpu.params)
    rel = [metric(a, b) for a, b in zip(gpu.params, cpu.params)]
    assert max(rel) <= tol, rel
    other = _train(cfg.with_(lr=0.9 * cfg.lr), data, "cpu")[0]  # a 10% error in the step: outside the tolerance
    assert max(metric(a, b) for a, b in zip(other.params, cpu.params)) > tol
    return err_cpu, err_gpu


REFERENCE = dict(arch=MLPArch(2, 200), rounds=1, epochs=5, batch_size=64, lr=0.05, participation=1.0,
                 upload_loss=0.0, precision="fp32")  # MLP 784-200-200-10, 600 samples a client, B = 64, E = 5


@pytest.fixture(scope="module")
def reference_data():
    return synthetic(n_train=20 * 600, n_test=1000, shape=(1, 28, 28), seed=0, noise=3.0)


def _one_step(data, clients: int):
    """Every client holds one batch (B = 64 samples) and trains one epoch: one local step."""
    return synthetic(n_train=clients * 64, n_test=200, shape=(1, 28, 28), seed=data, noise=3.0)


@pytest.mark.parametrize("alpha", [None, 5.0], ids=["dense", "set"])
def test_reference_step_on_cuda_equals_cpu(alpha):
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=20), **{**REFERENCE, "epochs": 1}, alpha=alpha)
    _compare(cfg, _one_step(0, 20), STEP_RTOL)


def test_reference_round_on_cuda_equals_cpu(reference_data):
    """One round of the reference workload's training (20 of its 100 clients)."""
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=20), **REFERENCE)
    _compare(cfg, reference_data, ROUND_L2, metric=_rel_l2)


def test_cnn_step_on_cuda_equals_cpu():
    """The experiments' CNN (conv 32→64, 5×5, FC 128) on 28×28 inputs, 10 clients, one local step (cuDNN's
    convolutions against the CPU's)."""
    cfg = SimConfig(data=DataConfig(dataset="synthetic", clients=10), arch=CNNArch(2, 32, 5, 1, 128), rounds=1,
                    epochs=1, batch_size=64, lr=0.05, participation=1.0, upload_loss=0.0, precision="fp32")
    _compare(cfg, _one_step(2, 10), STEP_RTOL)


@pytest.mark.parametrize("arch", [MLPArch(2, 200), CNNArch(2, 32, 5, 1, 128)], ids=["mlp", "cnn"])
def test_evaluation_on_cuda_equals_cpu(arch):
    """Whole evaluations (simulate: the `update` mechanism's uploads, aggregation, accounting) on the digits data."""
    cfg = SimConfig(data=DataConfig(dataset="digits", clients=10), arch=arch, rounds=3, epochs=2, batch_size=32,
                    lr=0.05, participation=0.5, precision="fp32",
                    privacy=PrivacyConfig(mechanism="update", sigma=0.01, clip=2.0))
    cpu = simulate(cfg.with_(device="cpu"), seed=3)
    gpu = simulate(cfg.with_(device="cuda"), seed=3)
    assert cpu.status == gpu.status == "ok", (cpu.message, gpu.message)
    assert abs(gpu.error - cpu.error) <= ERROR_ATOL, (gpu.error, cpu.error)
    assert gpu.eps == pytest.approx(cpu.eps) and gpu.comm == pytest.approx(cpu.comm)


def test_step_noise_std_on_cuda():
    """clip ~0: the step is pure noise: 4 steps of N(0, 0.5²) on CUDA's generator → std 1.0 within 5%."""
    data = synthetic(n_train=64, n_test=10, shape=(1, 8, 8), seed=0)
    model = build_model(MLPArch(1, 64), (1, 8, 8), 10)
    params = model.init(torch.Generator().manual_seed(0))
    hook = StepLDP(sigma=0.5, clip=1e-9, seed=3)
    clients = [np.arange(0, 16), np.arange(16, 32), np.arange(32, 48), np.arange(48, 64)]
    (got,) = train_groups(model, params, {}, data.x_train, data.y_train, [clients], epochs=4, batch_size=16, lr=0.1,
                          seeds=[5], device=torch.device("cuda"), group_hook_for=hook.for_group)
    diff = torch.cat([(a - p.unsqueeze(0)).reshape(-1) for a, p in zip(got, params)])
    assert abs(float(diff.std()) - 1.0) < 0.05
    assert abs(float(diff.mean())) < 0.02


def test_step_ldp_error_on_cuda_close_to_cpu():
    """Per-step LDP (σ = 0.01, S = 1) on digits: other noise draws, the same error within a few points over
    seeds."""
    cfg = SimConfig(data=DataConfig(dataset="digits", clients=20), arch=MLPArch(1, 64), rounds=10, epochs=2,
                    batch_size=16, lr=0.1, participation=0.5, precision="fp32",
                    privacy=PrivacyConfig(mechanism="step", sigma=0.01, clip=1.0))
    err = {d: np.mean([simulate(cfg.with_(device=d), seed=s).error for s in range(5)]) for d in ("cpu", "cuda")}
    assert abs(err["cuda"] - err["cpu"]) <= NOISY_ERROR_ATOL, err


def test_same_seed_same_numbers_on_cuda():
    cfg = SimConfig(data=DataConfig(dataset="digits", clients=10), arch=MLPArch(1, 64), rounds=2, epochs=1,
                    participation=1.0, precision="fp32", device="cuda",
                    privacy=PrivacyConfig(mechanism="step", sigma=0.05, clip=1.0))
    a, b = simulate(cfg, seed=1), simulate(cfg, seed=1)
    assert (a.error, a.accuracy_global, a.eps) == (b.error, b.accuracy_global, b.eps)


def test_evaluate_json_on_cuda(tiny_problem, capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(["evaluate", "--problem", tiny_problem.path, "--json", "--params",
                              '{"device": "cuda"}'], capsys)
    assert code == 0, err
    eng = json.loads(out)["engine"]
    assert eng["device"] == "cuda" and eng["gpu"] and eng["precision"] == "fp32"
    assert "TF32 off" in eng["precision_reason"]


def probe_evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    """A Ray task's view: the device `device = "auto"` resolves to, and CUDA_VISIBLE_DEVICES."""
    from fedevo.result import EvaluationResult

    dev = hardware.device("auto")
    return EvaluationResult(error=0.0, comm=0.0, eps=0.0, eps_paper=0.0, accuracy_global=1.0, omega=0, status="ok",
                            wall_s=0.0, message=f"{dev.type} {os.environ.get('CUDA_VISIBLE_DEVICES')!r}")


@pytest.mark.parametrize("gpus", [0.5, 0.0])
def test_ray_tasks_get_their_gpu(gpus, tiny_problem, monkeypatch, tmp_path):
    """--gpus-per-task 0.5: two evaluations a GPU, each sees (only) its GPU and trains there; 0: none sees one."""
    from fedevo.searching.runner import Task, make_runner

    monkeypatch.delenv("FEDEVO_DEVICE", raising=False)  # the workers' 'auto' decides for itself
    runner = make_runner(probe_evaluate, tiny_problem, {}, workers=2, gpus_per_task=gpus, log_dir=tmp_path)
    seen = []
    try:
        runner.run([Task(id=i, generation=1, index=i, params={}, seed=i) for i in range(4)],
                   lambda t, r: seen.append(r.message))
    finally:
        runner.close()
    assert len(seen) == 4
    if gpus:
        assert all(m.startswith("cuda ") and m != "cuda ''" for m in seen), seen
    else:
        assert all(m == "cpu ''" for m in seen), seen


@pytest.mark.parametrize("mechanism", ["none", "update", "step"])
def test_continued_training_on_cuda_equals_one_run(mechanism):
    """The multi-fidelity search's continuation on the device path: 1 round, saved, continued to 3 gives the
    numbers of one 3-round run on the GPU (the device path is deterministic for a seed: the test above)."""
    cfg = SimConfig(data=DataConfig(dataset="digits", clients=10), arch=MLPArch(1, 64), rounds=3, epochs=1,
                    batch_size=32, lr=0.05, participation=0.5, precision="fp32", device="cuda",
                    privacy=PrivacyConfig(mechanism=mechanism, sigma=0.05, clip=1.0))
    full = simulate(cfg, seed=2)
    first = simulate(cfg, seed=2, until=1)
    rest = simulate(cfg, seed=2, resume_from=first.state)
    assert full.status == first.status == rest.status == "ok", (full.message, first.message, rest.message)
    assert first.rounds == 1 and rest.rounds == 3
    assert (rest.error, rest.accuracy_global, rest.eps, rest.comm, rest.omega) == \
        (full.error, full.accuracy_global, full.eps, full.comm, full.omega)
