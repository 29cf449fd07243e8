"""docs/data.md stays true: its problem file loads (with the data it describes) and its Python example runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from fedevo.problem import load_problem

DOC = Path(__file__).resolve().parents[2] / "docs" / "data.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_problem_file_example_loads_and_evaluates(tmp_path):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 7, 400)
    y = rng.integers(0, 10, 400)
    np.savez(tmp_path / "clients.npz", x=rng.normal(size=(400, 1, 8, 8)).astype(np.float32), y=y, client_id=ids)
    (toml,) = _blocks("toml")
    (tmp_path / "my_problem.toml").write_text(toml)
    prob = load_problem(str(tmp_path / "my_problem.toml"))
    assert prob.data_source.clients == 7 and prob.data_source.input_shape == (1, 8, 8)
    assert prob.sim_config().data.partition == "natural"
    from fedevo.fl.simulate import simulate

    r = simulate(prob.sim_config(rounds=1), seed=0)
    assert r.status == "ok" and 0 <= r.error <= 1 and r.eps > 0


def test_the_python_example_runs():
    (code,) = _blocks("python")
    exec(compile(code, str(DOC), "exec"), {})
