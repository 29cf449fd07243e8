"""`fedevo front`'s caption explains ∞ only where the table shows one (it said "ε = ∞: no privacy" under every
table, also where every ε was finite)."""

import math

import fedevo

from tests.helpers import run_cli
from tests.searching.search_helpers import toy_problem_file


def _private(problem, params, *, seed, rounds=None, data_dir=None):
    return {"error": 0.5 - 0.1 * params["lr"], "comm": 10.0 + params["lr"], "eps": 1.0 + params["sigma"]}


def _some_without_privacy(problem, params, *, seed, rounds=None, data_dir=None):
    r = _private(problem, params, seed=seed)
    return {**r, "error": r["error"] - 0.2, "eps": math.inf} if seed % 2 else r


def _front(tmp_path, capsys, evaluator, name):
    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=4, gen=1, seed=0, workers=0,
                        out=tmp_path / name, evaluator=evaluator, page=False)
    code, out, err = run_cli(["front", run.path], capsys)
    assert code == 0, err
    return out


def test_the_caption_says_what_infinity_means_only_where_the_table_shows_it(tmp_path, capsys):
    out = _front(tmp_path, capsys, _private, "A")
    assert "no privacy" not in out and "∞" not in out, out
    out = _front(tmp_path, capsys, _some_without_privacy, "B")
    assert "∞" in out and "ε = ∞: no privacy" in out, out
