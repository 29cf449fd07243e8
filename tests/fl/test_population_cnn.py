"""A CNN generation as one batched program (fl/population.py through fl/stacked_cnn.py) on the CPU: the same code
as on a GPU, against each individual evaluated alone (a population of one: the same trainer with one member) and
against the CPU engine (ε, comm and Ω exactly, the error within docs/engine.md's 0.02)."""

from __future__ import annotations

import pytest

from fedevo.evaluation import evaluate, evaluate_population
from fedevo.problem import load_problem

from .test_population import DP, _objectives, _untimed, batched_and_alone

# the MLP tests' small problem (central and secagg trust, SET, the same privacy genes) with a CNN and its genes
CNN = DP.replace('"tiny_dp"', '"tiny_cnn"').replace('"mlp"', '"cnn"').replace("rounds = 3", "rounds = 4").replace(
    'layers = { type = "int", low = 1, high = 3, default = 2 }\n'
    'units = { type = "int", low = 8, high = 40, default = 24 }',
    """conv_layers = { type = "int", low = 1, high = 2, default = 2 }
channels = { type = "int", low = 2, high = 8, default = 4 }
kernel = { type = "choice", choices = [3, 5], default = 3 }
layers = { type = "int", low = 0, high = 2, default = 1 }
units = { type = "int", low = 8, high = 32, default = 16 }""").replace(
    'lr = { type = "real", low = 0.01, high = 0.3, default = 0.3 }',
    'lr = { type = "real", low = 0.01, high = 0.5, default = 0.3 }')
assert CNN.count("conv_layers") == 1 and "high = 0.5" in CNN

# central and secagg trust, SET, other channels (padded in one bucket), FC widths, depths, kernels, rates
GENERATION = [dict(p, precision="fp32") for p in (
    dict(channels=4, lr=0.4), dict(channels=3, units=20, alpha=8, trust="secagg"), dict(channels=4, sigma=0.3),
    dict(channels=6, units=12, participation=1.0, clip=0.5), dict(conv_layers=1, channels=5),
    dict(kernel=5, layers=0))]
SEEDS = [1, 2, 3, 4, 5, 6]


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    path = tmp_path_factory.mktemp("popcnn") / "cnn.toml"
    path.write_text(CNN)
    return load_problem(str(path))


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_a_cnn_generation_equals_each_alone(problem, exact):
    pairs = batched_and_alone(problem, GENERATION, SEEDS, device="cpu", exact=exact)
    for p, s, got, alone in pairs:
        assert _objectives(got) == _objectives(alone), p
        assert _untimed(got.privacy) == _untimed(alone.privacy)
    assert len({got.error for _, _, got, _ in pairs}) > 3  # they trained, each its own way
    assert min(got.error for _, _, got, _ in pairs) < 0.5  # and learnt


def test_a_cnn_generation_equals_the_cpu_engine(problem):
    together = evaluate_population(problem, GENERATION, SEEDS, device="cpu")
    for p, s, got in zip(GENERATION, SEEDS, together):
        cpu = evaluate(problem, p, seed=s)
        assert "population" not in cpu.engine
        assert (got.status, got.comm, got.eps, got.omega) == (cpu.status, cpu.comm, cpu.eps, cpu.omega), p
        assert abs(got.error - cpu.error) <= 0.02, (p, got.error, cpu.error)


def test_cnns_batch_unless_turned_off(problem, monkeypatch):
    """FEDEVO_STACKED_CNN=0: a CNN generation evaluated one individual after another, as before (the CPU engine
    here); the search's batching decides the same from the settings alone."""
    from fedevo.fl.population import batchable_config

    cfg = problem.sim_config(GENERATION[0])
    assert batchable_config(cfg) and batchable_config(problem.sim_config(dict(GENERATION[0], precision="bf16")))
    monkeypatch.setenv("FEDEVO_STACKED_CNN", "0")
    assert not batchable_config(cfg)
    (got,) = evaluate_population(problem, GENERATION[:1], SEEDS[:1], device="cpu")
    assert "population" not in got.engine
    assert _objectives(got) == _objectives(evaluate(problem, GENERATION[0], seed=SEEDS[0]))


STEP = CNN.replace('mechanism = "update"', 'mechanism = "step"\nclip_rule = "median"').replace(
    'trust = { type = "choice", choices = ["central", "secagg"], default = "central" }\n', "").replace(
    'sigma = { type = "real", low = 0.3, high = 30.0, default = 1.0, log = true }',
    'sigma = { type = "real", low = 0.001, high = 0.5, default = 0.01, log = true }')

# mnist_cnn's and cifar10_cnn's mechanism (seed 004's per-step LDP, the median rule's S): each member's hook in the
# stacked program, its own S and noise
STEP_GENERATION = [dict(p, precision="fp32") for p in (
    dict(channels=4), dict(channels=3, units=20, sigma=0.05, lr=0.1), dict(channels=4, sigma=0.002),
    dict(channels=4, participation=1.0, alpha=8))]


@pytest.mark.parametrize("exact", [True, False], ids=["equal-widths", "padded"])
def test_a_per_step_hook_cnn_generation_equals_each_alone(tmp_path, exact):
    path = tmp_path / "step.toml"
    path.write_text(STEP)
    prob = load_problem(str(path))
    pairs = batched_and_alone(prob, STEP_GENERATION, [1, 2, 3, 4], device="cpu", exact=exact)
    for p, s, got, alone in pairs:
        # fp32 rounding (the group's size sets the convolutions' blocking), also in the gradient norms whose median
        # is the next round's S (ε's)
        assert (got.status, got.comm, got.omega) == (alone.status, alone.comm, alone.omega), p
        assert got.eps == pytest.approx(alone.eps, rel=1e-5), p
        assert abs(got.error - alone.error) <= 0.02, (p, got.error, alone.error)
        cpu = evaluate(prob, p, seed=s)  # other noise draws: the same uploads and model size
        assert (got.status, got.comm, got.omega) == (cpu.status, cpu.comm, cpu.omega), p
    assert len({got.error for _, _, got, _ in pairs}) > 2


def _bench(*args):
    from tests.helpers import run_benchmark

    return run_benchmark("cnn_generation.py", *args)


def test_the_benchmark_runs_on_the_cpu(problem):
    r = _bench("--device", "cpu", "--problem", str(problem.path), "--generation", "3", "--rounds", "2",
               "--repeats", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "one by one / batched:" in out and "ratio" in out
    assert "ε, comm and Ω equal for 3/3" in out and "engines [3]" in out


def test_the_benchmark_says_there_is_no_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    r = _bench("--generation", "2")
    assert r.returncode == 1 and r.stdout == "" and "torch sees no GPU" in r.stderr


def test_a_cnn_result_claims_none_of_the_mlp_trainers_opt_ins(problem, monkeypatch):
    """The MLP buckets' opt-ins (the device schedule, TF32, torch.compile) and fused update are not a CNN's: its
    result's `engine` names none of them, where an MLP's in the same process would."""
    from fedevo.fl import stacked_settings, stacked_update

    monkeypatch.setenv("FEDEVO_SCHEDULE", "device")
    (got,) = evaluate_population(problem, GENERATION[:1], SEEDS[:1], device="cpu")
    assert got.engine["population"] == 1 and "batch_schedule" not in got.engine
    monkeypatch.setattr(stacked_update, "_CHECKED", {"cuda:0": True})
    cuda = {"device": "cuda", "precision": "fp32"}
    assert stacked_settings.engine_label(cuda) != cuda  # an MLP's: the fused update's kernel named
    assert stacked_settings.engine_label(cuda, mlp=False) == cuda


def test_a_diverging_cnn_leaves_the_others_as_alone(tmp_path):
    """A member whose updates blow up (lr 1e5) is `diverged` at its round, as alone; its bucket's other members
    train on, each as alone (a client's numbers do not depend on the clients beside it)."""
    path = tmp_path / "cnn.toml"
    path.write_text(CNN.replace("high = 0.5, default = 0.3", "high = 1e6, default = 0.3"))
    prob = load_problem(str(path))
    gen = [dict(channels=4, precision="fp32"), dict(channels=4, lr=1e5, precision="fp32"),
           dict(channels=3, precision="fp32")]
    together = evaluate_population(prob, gen, [1, 2, 3], device="cpu")
    assert [r.status for r in together] == ["ok", "diverged", "ok"]
    for p, s, got in zip(gen, [1, 2, 3], together):
        (alone,) = evaluate_population(prob, [p], [s], device="cpu")
        assert _objectives(got) == _objectives(alone), p
