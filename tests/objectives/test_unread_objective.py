"""An objective of a problem file's own whose value cannot be read (it raises, returns a string, NaN-free but
outside its range) gets its worst value in that evaluation, with a note in the row's message; a search where that
happened ran its whole budget with `latency –` in the progress line and ended without a word. The Summary
(`run.summary.unread`) and the closing lines now say which objective, in how many of the ok evaluations, and the
first note."""

from __future__ import annotations

import fedevo
from fedevo.searching.log import unread_objectives

from tests.helpers import cli

from .latency_problem import latency_problem

BROKEN = ("def latency(r):\n"
          "    if r.omega > 0:\n"
          "        return 'fast'\n"
          "    return 1.0\n")


def _problem(tmp_path):
    return latency_problem(tmp_path, BROKEN)


def test_an_objective_never_read_is_named_at_the_end(tmp_path):
    prob = _problem(tmp_path)
    run = fedevo.search(str(prob), pop=4, gen=1, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False)
    ok = sum(r.ok for r in run.evaluations)
    assert ok == 4
    ((name, n, of, first),) = run.summary.unread
    assert (name, n, of) == ("latency", 4, 4)
    assert first.startswith("ValueError") or first.startswith("TypeError"), first

    r = cli("search", "--problem", prob, "--pop", "4", "--gen", "1", "--rounds", "1", "--workers", "0", "--quiet",
            "--out", tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    line = next(s for s in r.stderr.splitlines() if s.startswith("objective latency:"))
    assert line.startswith("objective latency: not read in 4 of 4 ok evaluations (its worst value stood in; "
                           "the first: "), line


def test_an_objective_read_everywhere_is_not_named():
    rows = [{"status": "ok", "message": ""}, {"status": "failed", "message": "objective latency: TypeError: x"},
            {"status": "ok", "message": "some warning\nobjective size: ValueError: below 0"}]
    assert unread_objectives(rows, ["latency", "size"]) == [("size", 1, 2, "ValueError: below 0")]


def test_an_objective_that_returns_nan_is_named_as_unread(tmp_path):
    """A problem file's objective function that returns NaN (0/0 in it) was silently its worst value in every
    evaluation: no note, no closing line, `latency –` all the search long. NaN is now a value that could not be
    read, as a string is; None stays the function's way to say "not measured", without a note."""
    prob = latency_problem(tmp_path, "def latency(r):\n    return float('nan') if r.omega > 0 else None\n")
    run = fedevo.search(str(prob), pop=4, gen=1, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False)
    assert run.summary.unread == (("latency", 4, 4, "ValueError: returned nan; expected a number or None (None: "
                                   "not measured)"),)
    assert all(r["latency"] is None for r in run.evaluations)
    (tmp_path / "none").mkdir()
    none = latency_problem(tmp_path / "none", "def latency(r):\n    return None\n")
    quiet = fedevo.search(str(none), pop=4, gen=1, rounds=1, seed=0, workers=0, out=tmp_path / "q", page=False)
    assert quiet.summary.unread == () and not any(r["message"] for r in quiet.evaluations)


def test_an_objective_registered_from_python_that_returns_nan_is_named_as_unread(tmp_path):
    """The same for an objective registered from Python (a notebook's lambda dividing by 0): its NaN was silently
    the worst value, no note, where a problem file's function's is named (above)."""
    from fedevo.objectives import Objective, register, unregister
    from fedevo.problem import problems_dir

    prob = tmp_path / "nan.toml"
    prob.write_text('objectives = ["error", "eps", "ratio_t"]\n' + (problems_dir() / "digits_mlp.toml").read_text())
    register(Objective(name="ratio_t", label="ratio", worst=10.0, read=lambda r: float("nan")), replace=True)
    try:
        run = fedevo.search(str(prob), pop=4, gen=1, rounds=1, seed=0, workers=0, out=tmp_path / "run", page=False)
    finally:
        unregister("ratio_t")
    assert run.summary.unread == (("ratio_t", 4, 4, "ValueError: returned nan; expected a number or None (None: "
                                   "not measured)"),)
    assert all(r["ratio_t"] is None for r in run.evaluations)
