"""stdout of the program holds its output alone: a thread of the user's evaluator that prints after the evaluation
returned (in this process: `fedevo evaluate` runs it here) wrote its line after `--json`'s object, so that
`json.loads(stdout)` failed. Once a command's work is done, the program points stdout at stderr."""

from __future__ import annotations

import json

from tests.searching.search_helpers import run_cli

EVALUATOR = '''import threading, time


def late():
    time.sleep(0.5)
    print("late line of a user thread")


def evaluate(problem, params, *, seed=0, rounds=None, data_dir=None):
    threading.Thread(target=late).start()
    return {"error": 0.1, "comm": 10.0, "eps": 1.0}
'''


def test_a_user_threads_late_print_never_follows_the_json(tmp_path):
    (tmp_path / "ev.py").write_text(EVALUATOR)
    (tmp_path / "p.toml").write_text('name = "late"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                                     'lr = { type = "real", low = 0.05, high = 2.0, default = 0.5 }\n')
    r = run_cli("evaluate", "--problem", tmp_path / "p.toml", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["error"] == 0.1, r.stdout
    assert "late line of a user thread" in r.stderr
