"""Smoke tests of issue #34's benchmark scripts on a tiny problem (they time nothing here):
benchmarks/optimizer_run.py (one search, its batch size included), benchmarks/optimizers_report.py (the table and
the per-seed evaluations to the target), benchmarks/gp_proposal_cost.py and benchmarks/compare_checkouts.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .search_helpers import REPO, env

TINY = """
name = "tiny_optimizers"
dataset = "digits"
model = "mlp"
eps_objective = "eps"
[data]
partition = "iid"
clients = 4
[train]
rounds = 1
epochs = 1
batch_size = 16
precision = "fp32"
[privacy]
mechanism = "update"
trust = "central"
sampling = "poisson"
recall = false
delta = 1e-6
[deployment]
population = 100000
cohort = 1000
[genes]
units = { type = "int", low = 16, high = 32, default = 16 }
lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }
sigma = { type = "real", low = 0.1, high = 20.0, default = 1.0, log = true }
clip = { type = "real", low = 0.1, high = 5.0, default = 1.0, log = true }
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "tiny.toml"
    path.write_text(TINY)
    return path


def script(*args, timeout=300):
    p = subprocess.run([sys.executable, *map(str, args)], cwd=REPO, env=env(OMP_NUM_THREADS=1), capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_optimizer_run_batch_size_and_optimizers_report(tiny, tmp_path):
    runs = tmp_path / "runs"
    for opt, seed, budget, pop in (("random", 0, 4, 2), ("random", 1, 4, 2), ("gp", 0, 3, 1)):
        out = script(REPO / "benchmarks" / "optimizer_run.py", tiny, opt, seed, budget, 0, runs / f"{opt}-s{seed}", pop)
        assert out.startswith(f"{tiny} {opt} {seed} ")
        stop = json.loads((runs / f"{opt}-s{seed}" / "stop.json").read_text())
        assert stop["evaluations"] == budget and stop["budgets"]["pop"] == pop
    table = script(REPO / "benchmarks" / "optimizers_report.py", runs, "--budgets", "2", "4", "--target", "random@4")
    assert table.startswith("target: random's mean hypervolume at 4 evaluations")
    rows = [ln for ln in table.splitlines() if ln.startswith("| gp |") or ln.startswith("| random |")]
    assert len(rows) == 2 and "| gp | 1 (3) |" in table and "| random | 2 (4, 4) |" in table
    per_seed = table.split("per seed:\n", 1)[1].splitlines()
    assert per_seed[0].startswith("- gp: 0: ") and per_seed[1].startswith("- random: 0: ")
    assert ", 1: " in per_seed[1]


def test_gp_proposal_cost_runs(tiny):
    out = script(REPO / "benchmarks" / "gp_proposal_cost.py", "--problem", tiny, "--optimizers", "gp", "tpe",
                 "--told", "12", "--evaluations", "1")
    assert out.startswith("CPU: ") and "optuna " in out
    assert "gp   told   12 (" in out and "round 0: asks gp after 12: " in out and "round 0: evaluation " in out
    assert "median evaluation " in out and "gp   proposal after   12 told: median " in out
    assert "tpe  proposal after   12 told: median " in out and "proposal / median evaluation = " in out


def test_compare_checkouts_runs_and_one_checkout_equals_itself(tiny):
    """benchmarks/compare_checkouts.py (two worker processes, the same evaluations): a checkout against itself
    gives equal results for every drawn configuration (and the script runs)."""
    out = script(REPO / "benchmarks" / "compare_checkouts.py", "--base", REPO, "--head", REPO, "--problem", tiny,
                 "--generation", 3, "--rounds", 1)
    assert out.startswith("CPU: ") and out.count("fedevo from ") == 2
    rows = [ln for ln in out.splitlines() if ln[:3].strip().isdigit()]
    assert len(rows) == 3 and all(ln.endswith("True") for ln in rows)
    assert "results equal for 3/3" in out


def test_optimizers_benchmark_measures_your_own_optimiser_beside_the_built_ins(tiny, tmp_path):
    """benchmarks/optimizers.py --optimizers random python:FILE.py:Class: yours named by its class, in the table and
    in the run folders (a spec holds slashes and colons); a problem file's runs go under its name (its absolute
    path made the folder that path itself)."""
    (tmp_path / "mine.py").write_text((REPO / "tests" / "searching" / "user_optimizers.py").read_text())
    out = script(REPO / "benchmarks" / "optimizers.py", "--problems", tiny, "--optimizers", "random",
                 f"python:{tmp_path / 'mine.py'}:SmsEmoa", "--budgets", 2, 4, "--pop", 2, "--seeds", 0,
                 "--rounds", 1, "--out", tmp_path / "out")
    assert "\n| random | " in out and "\n| SmsEmoa | " in out
    assert sorted(p.name for p in (tmp_path / "out" / "runs" / "tiny").iterdir()) == ["SmsEmoa-s0", "random-s0"]
