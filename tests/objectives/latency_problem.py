"""digits_mlp searched on (error, ε, latency), latency a problem file's own objective (`python:my_obj.py:latency`,
in ms): the problem file and the objective's file, written in a test's folder."""

from __future__ import annotations

from pathlib import Path

from fedevo.problem import problems_dir


def latency_problem(folder: Path, code: str) -> Path:
    """`folder`/d3.toml, with `code` (a function `latency(result)`) as `folder`/my_obj.py."""
    (folder / "my_obj.py").write_text(code)
    prob = folder / "d3.toml"
    prob.write_text('objectives = ["error", "eps", "latency"]\n' + (problems_dir() / "digits_mlp.toml").read_text()
                    + '\n[objective.latency]\nread = "python:my_obj.py:latency"\nworst = 1e4\nunit = "ms"\n')
    return prob
