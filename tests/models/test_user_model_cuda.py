"""On a real GPU (marked `cuda`, skipped where torch sees none): a user model through the CUDA device path
(fl/device.py) against the CPU engine, within docs/engine.md's tolerance; a lowered user MLP equals the built-in MLP
on CUDA too."""

from __future__ import annotations

import pytest
import torch

from fedevo.config import MLPArch, SimConfig
from fedevo.evaluation import evaluate
from fedevo.fl.simulate import simulate
from fedevo.models import build_model
from fedevo.models.lowering import LoweredMLP
from fedevo.models.user import GenericModel
from fedevo.problem import load_problem

from .test_user_model import _builtin, _same, files  # noqa: F401  (the fixture)

pytestmark = pytest.mark.cuda
ROUND_L2 = 1e-3  # tests/fl/test_cuda.py: ‖a − b‖ ≤ ROUND_L2·‖b‖ per parameter tensor after a round


@pytest.mark.parametrize("factory", ["make_mlp", "make_gated", "make_cnn"])
def test_generic_model_on_cuda_equals_the_cpu_engine(files, monkeypatch, factory):  # noqa: F811
    from tests.fl.test_device import _rounds

    monkeypatch.setenv("FEDEVO_LOWER", "0")
    prob = load_problem(str(files(f"python:sub/my_models.py:{factory}", train="alpha = 2.0\nxi = 0.2")))
    cfg = prob.sim_config().with_(rounds=1)
    assert isinstance(build_model(cfg.arch, (1, 8, 8), 10), GenericModel)
    a, b = _rounds(cfg, None), _rounds(cfg, torch.device("cuda"))
    for x, y in zip(a.params, b.params):
        assert float((x - y).norm()) <= ROUND_L2 * float(y.norm()), factory
    assert a.comm == pytest.approx(b.comm) and a.omega == b.omega


def test_generic_evaluation_on_cuda(files, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FEDEVO_LOWER", "0")
    prob = load_problem(str(files("python:sub/my_models.py:make_gated")))
    cpu = evaluate(prob, seed=2)
    gpu = evaluate(prob, {"device": "cuda"}, seed=2)
    assert gpu.status == "ok" and gpu.engine["device"] == "cuda"
    assert abs(gpu.error - cpu.error) <= 0.02 and (gpu.comm, gpu.eps, gpu.omega) == (cpu.comm, cpu.eps, cpu.omega)


def test_lowered_user_mlp_equals_the_builtin_mlp_on_cuda(files):  # noqa: F811
    prob = load_problem(str(files(train='model_init = "fedevo"')))
    assert isinstance(build_model(prob.sim_config().arch, (1, 8, 8), 10), LoweredMLP)
    ref = simulate(SimConfig(**{**vars(_builtin(prob, {"device": "cuda"})), "arch": MLPArch(layers=2, units=32)}),
                   seed=3)
    got = evaluate(prob, {"device": "cuda"}, seed=3)
    _same(got, ref)
