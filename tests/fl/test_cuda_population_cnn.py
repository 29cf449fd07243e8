"""A CNN generation as one batched program on a real GPU (fl/stacked_cnn.py; tests/fl/test_population_cnn.py runs
the same code on the CPU): each individual as alone on the GPU, and the CPU engine's ε, comm and Ω, its error within
docs/engine.md's 0.02. Skipped where torch sees no GPU."""

from __future__ import annotations

import pytest

from fedevo.evaluation import evaluate, evaluate_population
from fedevo.problem import load_problem

from .test_population import batched_and_alone
from .test_population_cnn import GENERATION, SEEDS, STEP, STEP_GENERATION, problem  # noqa: F401  (the fixture)

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_a_cnn_generation_on_cuda_equals_each_alone(problem, exact):  # noqa: F811
    for p, s, got, alone in batched_and_alone(problem, GENERATION, SEEDS, device="cuda", exact=exact):
        assert got.engine["device"] == "cuda"
        assert (got.status, got.comm, got.eps, got.omega) == (alone.status, alone.comm, alone.eps, alone.omega), p
        assert abs(got.error - alone.error) <= 0.02, (p, got.error, alone.error)
        cpu = evaluate(problem, dict(p, device="cpu"), seed=s)
        assert (got.comm, got.eps, got.omega) == (cpu.comm, cpu.eps, cpu.omega), p
        assert abs(got.error - cpu.error) <= 0.02, (p, got.error, cpu.error)


def test_a_per_step_hook_cnn_generation_on_cuda_equals_each_alone(tmp_path):
    path = tmp_path / "step.toml"
    path.write_text(STEP)
    prob = load_problem(str(path))
    for p, s, got, alone in batched_and_alone(prob, STEP_GENERATION, [1, 2, 3, 4], device="cuda"):
        assert (got.status, got.comm, got.omega) == (alone.status, alone.comm, alone.omega), p
        assert got.eps == pytest.approx(alone.eps, rel=1e-4), p
        assert abs(got.error - alone.error) <= 0.02, (p, got.error, alone.error)


def test_a_small_share_of_the_gpu_trains_in_small_groups_with_the_same_results(problem, monkeypatch):  # noqa: F811
    """FEDEVO_GPU_SHARE (a Ray task's --gpus-per-task 0.25, here far less) sizes the groups by the memory left to
    this process (hardware.gpu_available): one chunk a group, the results those of one group per bucket within
    the tolerance; the real memory figures read on a real GPU."""
    import torch

    from fedevo import hardware
    from fedevo.fl import stacked_cnn

    dev = torch.device("cuda")
    assert 0 < hardware.gpu_available(dev) <= hardware.gpu_total(dev)
    whole = evaluate_population(problem, GENERATION, SEEDS, device="cuda")
    monkeypatch.setenv("FEDEVO_GPU_SHARE", "0.00001")  # under a megabyte of an 80 GB card
    chunks = []
    real = stacked_cnn._train_group

    def counted(members, part, *args):
        chunks.append(len(part))
        return real(members, part, *args)
    monkeypatch.setattr(stacked_cnn, "_train_group", counted)
    small = evaluate_population(problem, GENERATION, SEEDS, device="cuda")
    assert chunks and max(chunks) == 1
    for got, want in zip(small, whole):
        assert (got.status, got.comm, got.eps, got.omega) == (want.status, want.comm, want.eps, want.omega)
        assert abs(got.error - want.error) <= 0.02
