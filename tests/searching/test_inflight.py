"""A search process that dies inside an in-process evaluation (a segfault in a user's native code, kill -9, the
OOM killer) ended with no line of fedevo's and left nothing to say why: the crash now prints where it happened
(faulthandler), and the next `fedevo resume` names the evaluation and the way to contain it (searching.inflight)."""

from __future__ import annotations

import pytest

from fedevo.searching.inflight import NAME, in_flight, left_behind
from tests.helpers import read_csv

CRASH = """
import ctypes

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    if params["x"] > 0.5:
        ctypes.string_at(0)  # a segfault, as a user's broken extension gives
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)
"""


def test_the_mark_is_there_only_while_an_evaluation_runs(tmp_path):
    with in_flight(tmp_path, "evaluation 3 (generation 1, seed 7)"):
        assert (tmp_path / NAME).exists()
    assert not (tmp_path / NAME).exists() and left_behind(tmp_path) is None
    with pytest.raises(RuntimeError), in_flight(tmp_path, "evaluation 4"):  # a failed or stopped one: taken too
        raise RuntimeError("boom")
    assert not (tmp_path / NAME).exists()


def test_a_mark_left_behind_is_read_once(tmp_path):
    (tmp_path / NAME).write_text('{"label": "evaluation 3 (generation 1, seed 7)", "pid": 1}\n')
    assert left_behind(tmp_path) == "evaluation 3 (generation 1, seed 7)"
    assert left_behind(tmp_path) is None  # taken: said by one resume only
    (tmp_path / NAME).write_text("garbled")
    assert left_behind(tmp_path) == "an evaluation"


def test_a_segfault_in_process_is_named_and_the_resume_says_how_to_contain_it(tmp_path):
    from tests.searching.test_containment import run_cli_sub

    (tmp_path / "crash.py").write_text(CRASH)
    problem = tmp_path / "crash.toml"
    problem.write_text('name = "crash"\nevaluator = "python:crash.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.2 }\n')
    out = tmp_path / "R"
    r = run_cli_sub("search", "--problem", problem, "--pop", 4, "--gen", 2, "--workers", 0, "--out", out, "-q")
    assert r.returncode != 0
    assert "Segmentation fault" in r.stderr and f'File "{tmp_path / "crash.py"}", line 6 in evaluate' in r.stderr
    assert (out / NAME).exists()

    r = run_cli_sub("resume", out, "--workers", 0, "--eval-timeout", 60, "-q")
    assert r.returncode == 0, r.stderr
    note = [ln for ln in r.stderr.splitlines() if "last process ended during" in ln]
    assert len(note) == 1 and "ended during evaluation " in note[0] and "in a child process" in note[0], r.stderr
    assert not (out / NAME).exists()
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8 and all(r["status"] == "failed" for r in rows if float(r["x"]) > 0.5)
    r = run_cli_sub("resume", out, "--workers", 0, "--eval-timeout", 60, "--budget", 12, "-q")
    assert r.returncode == 0 and "last process ended during" not in r.stderr, r.stderr  # said once: not again


SEES_MARK = """
import os

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    seen = os.path.exists(os.environ["FEDEVO_TEST_MARK"])
    return (0.9 if seen else 0.1, 1.0 + params["x"], 1.0)
"""


@pytest.mark.parametrize("timeout, marked", [(None, True), (60, False)])
def test_the_mark_is_kept_only_where_the_evaluation_runs_in_this_process(tmp_path, monkeypatch, timeout, marked):
    """With eval_timeout the evaluation runs in a child process, whose death cannot end the search: no mark, so a
    resume after the search process was killed does not blame an in-process evaluation."""
    import fedevo

    (tmp_path / "sees.py").write_text(SEES_MARK)
    problem = tmp_path / "sees.toml"
    problem.write_text('name = "sees"\nevaluator = "python:sees.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.2 }\n')
    monkeypatch.setenv("FEDEVO_TEST_MARK", str(tmp_path / "R" / NAME))
    fedevo.search(str(problem), pop=3, gen=1, workers=0, out=tmp_path / "R", page=False, eval_timeout=timeout)
    rows = read_csv(tmp_path / "R" / "evaluations.csv")
    assert {float(r["error"]) for r in rows} == {0.9 if marked else 0.1}


def test_an_evaluation_under_a_time_limit_sees_the_environment_as_it_is_now(tmp_path, monkeypatch):
    """The process that runs evaluations with a time limit lives on after `fedevo.evaluate(..., eval_timeout=)`: a
    later one, after a change of os.environ (a notebook's next cell), ran with the old environment."""
    import fedevo

    (tmp_path / "sees.py").write_text(SEES_MARK)
    problem = tmp_path / "sees.toml"
    problem.write_text('name = "sees"\nevaluator = "python:sees.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.2 }\n')
    mark = tmp_path / "mark"
    mark.write_text("")
    monkeypatch.setenv("FEDEVO_TEST_MARK", str(tmp_path / "no-such-file"))
    assert fedevo.evaluate(str(problem), eval_timeout=60).error == 0.1
    monkeypatch.setenv("FEDEVO_TEST_MARK", str(mark))
    assert fedevo.evaluate(str(problem), eval_timeout=60).error == 0.9
    fedevo.search(str(problem), pop=3, gen=1, workers=0, out=tmp_path / "R", page=False, eval_timeout=60)
    assert {float(r["error"]) for r in read_csv(tmp_path / "R" / "evaluations.csv")} == {0.9}
