"""User code that misbehaves in ways a plain exception does not (the 2026-11-27 containment audit): exceptions that
are not Exceptions, os._exit, changes to the process's global state (the working directory, the streams, warnings,
torch's defaults) and output at import time. Each ends as that evaluation's result, never as the search's end or
as a change to the next evaluation's numbers."""

from __future__ import annotations

import pytest

import fedevo
from tests.helpers import read_csv
from tests.searching.test_containment import own_problem


class _Mine(BaseException):
    """A user's own BaseException subclass."""


def _raises_base(problem, params, *, seed, rounds=None, data_dir=None):
    if params["x"] > 0.5:
        raise {"generator": GeneratorExit("closed"), "mine": _Mine("my own")}[problem.fixed["mode"]]
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)


@pytest.mark.parametrize("mode, message", [("generator", "GeneratorExit raised by the evaluation's code: closed"),
                                           ("mine", "_Mine raised by the evaluation's code: my own")])
def test_a_base_exception_fails_its_evaluation_only(tmp_path, mode, message):
    """GeneratorExit or a BaseException subclass of the user's ended the search with a traceback (exit 1)."""
    out = tmp_path / "R"
    fedevo.search(str(own_problem(tmp_path, mode)), pop=4, gen=2, workers=0, out=out, page=False,
                  evaluator=_raises_base)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(float(r["x"]) > 0.5 and r["message"] == message for r in failed)
    assert all(r["status"] == "ok" for r in rows if float(r["x"]) <= 0.5)


OBJECTIVE = """objectives = ["error", "comm", "lat"]
[objective.lat]
read = "python:obj.py:lat"
worst = 1e4
"""


@pytest.mark.parametrize("body, note", [
    ("sys.exit(4)", "objective lat: UserExit: sys.exit(4) called by the evaluation's code"),
    ("raise KeyboardInterrupt", "objective lat: UserExit: KeyboardInterrupt raised by the evaluation's code"),
])
def test_a_user_objective_that_exits_fails_its_value_only(tmp_path, body, note):
    """A user objective's read is user code as an evaluator is: sys.exit(4) in it ended the search with exit code 4
    and no message, a raised KeyboardInterrupt stopped it as Ctrl-C does."""
    (tmp_path / "obj.py").write_text(f"import sys\n\ndef lat(result):\n    if result.error > 0.45:\n        {body}\n"
                                     "    return 3 * result.error\n")
    out = tmp_path / "R"
    fedevo.search(str(own_problem(tmp_path, "ok", extra=OBJECTIVE)), pop=4, gen=2, workers=0, out=out, page=False)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    hit = [r for r in rows if float(r["error"]) > 0.45]
    assert hit and all(r["lat"] == "" and r["message"].startswith(note) for r in hit)
    assert all(float(r["lat"]) == pytest.approx(3 * float(r["error"])) for r in rows if float(r["error"]) <= 0.45)
