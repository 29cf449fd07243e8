"""--eval-timeout counts the evaluation, not the start-up of the process it runs in (containment.py): importing the
evaluator's code and its warm-up (what a process loads once) are not counted — a fresh child pays them again after
every kill, and counted, a limit near them failed every evaluation that followed a slow one."""

from __future__ import annotations

import fedevo
from fedevo.problem import load_problem
from fedevo.searching import containment
from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem, warm_up
from fedevo.searching.runner import run_one

SLOW_START = '''
import time

time.sleep(1.5)  # an import that takes its time (a framework, a dataset read at import)
WARM = []


class Evaluate:
    def warm(self, problem, params, *, rounds=None, data_dir=None):
        if not WARM:  # once per process: load the data
            time.sleep(1.5)
            WARM.append(1)

    def __call__(self, problem, params, *, seed, rounds=None, data_dir=None):
        assert WARM, "warm() ran first"
        if params["x"] > 0.8:
            time.sleep(1e9)  # overruns: its process is killed, the next one starts afresh
        return {"error": 0.2 + 0.5 * params["x"], "comm": 1.0 + params["x"], "eps": None}


evaluate = Evaluate()
'''

PROBLEM = """
name = "slow_start"
evaluator = "python:slow_start.py:evaluate"
eval_timeout = 1
[genes]
x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }
"""


def test_imports_and_warm_up_are_not_counted_against_the_limit(tmp_path):
    (tmp_path / "slow_start.py").write_text(SLOW_START)
    (tmp_path / "slow_start.toml").write_text(PROBLEM)
    try:
        # seed 12: x 0.25, 0.95, 0.19, 0.18 -- one overrun, killed, and two evaluations in the child started after it
        # (each child's start sleeps 3 s, three times the limit; seed 5's pop 8 had two kills and so a third child)
        run = fedevo.search(str(tmp_path / "slow_start.toml"), pop=4, gen=1, workers=0, seed=12, out=tmp_path / "R",
                            page=False, optimizer="random")
    finally:
        containment.close_child()
    rows = run.evaluations
    slow = [r for r in rows if r["x"] > 0.8]
    assert slow and len(slow) < len(rows)
    assert all(r["status"] == "failed" and "time limit of 1 s" in r["message"] for r in slow)
    assert all(r["status"] == "ok" for r in rows if r["x"] <= 0.8), [r["message"] for r in rows]
    assert any(r["status"] == "ok" for r in rows[rows.index(slow[0]) + 1:])  # in the child started after the kill


def _what_is_loaded() -> tuple[bool, int]:
    """In the child: whether the simulator's modules are imported, and how many datasets load_dataset holds."""
    import sys

    from fedevo.data.datasets import load_dataset

    return "fedevo.fl.simulate" in sys.modules, load_dataset.cache_info().currsize


def test_the_simulator_warms_its_modules_and_data_before_the_clock():
    """Cold, the first evaluation in a fresh child spent 1.1 s of a digits evaluation's 0.04 s warm on imports
    (sklearn, the simulator): the warm-up loads them, and the data, before the time limit counts."""
    problem = load_problem("digits_mlp")
    ev = for_problem(DEFAULT_EVALUATOR, problem)
    params = {g.name: g.default for g in problem.genes}
    warm = warm_up(ev, problem, params, {"rounds": 1, "data_dir": None})
    try:
        containment.close_child()  # a fresh child
        assert containment.in_child(_what_is_loaded, (), 60) == (False, 0)
        assert containment.in_child(_what_is_loaded, (), 60, warm) == (True, 1)
        kind, result, _ = run_one(ev, problem, params, 0, {"rounds": 1, "data_dir": None}, timeout=600)
    finally:
        containment.close_child()
    assert kind == "ok" and result.status == "ok"
