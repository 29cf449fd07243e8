"""docs/api.md's examples run as written (each block in a fresh directory, in order), and the names it lists are
exactly fedevo's public names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fedevo

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_example_runs(n, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[n], f"docs/api.md block {n + 1}", "exec"), {"__name__": f"api_doc_{n}"})
    assert capsys.readouterr().out.strip(), "every example prints what it shows"


def test_public_names_are_the_documented_ones():
    table = DOC.read_text().split("## The public names", 1)[1].split("\n## ", 1)[0]
    documented = {m.group(1) for m in re.finditer(r"^\| `fedevo\.(\w+)", table, flags=re.M)}
    public = set(fedevo.__all__) - {"__version__"}
    assert documented == public
    for name in public:
        assert getattr(fedevo, name) is not None


def test_a_dict_problem_is_searched_and_run_json_records_its_toml(tmp_path):
    """fedevo.search takes the dict itself (issue #34: it ended in a TypeError in searching/run.py)."""
    import json

    from fedevo import _toml

    doc = {"name": "from_a_dict", "dataset": "digits", "model": "mlp", "data": {"clients": 4},
           "train": {"rounds": 1, "epochs": 1}, "privacy": {"mechanism": "none"},
           "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}}}
    run = fedevo.search(doc, pop=4, gen=1, workers=0, out=tmp_path / "R", page=False)
    meta = json.loads((run.path / "run.json").read_text())
    assert meta["problem"]["path"] is None and meta["problem"]["file_stem"] == "from_a_dict"
    assert _toml.loads(meta["problem"]["text"]) == doc
    assert fedevo.open_run(run.path).problem.name == "from_a_dict" and len(run.evaluations) == 4


def test_an_evaluator_may_return_a_list_as_the_page_says():
    """coerce_result reads a list [error, comm, eps] as the tuple; the page said a tuple, and that another type
    fails the evaluation: it says a list is one of the returns now (the audit of 2026-11-28)."""
    from fedevo.result import NotAResult, coerce_result

    returns = DOC.read_text().split("It returns (`fedevo.result.coerce_result` reads it)", 1)[1].split("\n\n", 1)[0]
    assert "or a tuple or a list `(error, comm, eps)`" in " ".join(returns.split())
    assert "fedevo times a dict, a tuple or a list itself" in " ".join(returns.split())
    assert coerce_result([0.25, 1.0, 2.0]) == coerce_result((0.25, 1.0, 2.0))
    with pytest.raises(NotAResult, match=r"evaluator returned a list of 2 values; expected \(error, comm, eps\)"):
        coerce_result([0.25, 1.0])
    with pytest.raises(NotAResult, match=r"or a tuple or a list \(error, comm, eps\)"):
        coerce_result({0.25, 1.0, 2.0})
