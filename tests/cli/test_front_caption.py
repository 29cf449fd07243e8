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


def _some_fail(problem, params, *, seed, rounds=None, data_dir=None):
    if seed % 2:
        raise RuntimeError("boom")
    return _private(problem, params, seed=seed)


def test_a_failed_evaluation_picked_alone_has_no_holds_under_line(tmp_path, capsys):
    """`fedevo front --pick ID` of a failed evaluation shows no ε: no 'every ε above holds under' line (it printed
    one under a row whose ε cells are blank); an ok evaluation's pick keeps it."""
    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=4, gen=1, seed=0, workers=0,
                        out=tmp_path / "F", evaluator=_some_fail, page=False)
    rows = run.evaluations
    bad = next(r["id"] for r in rows if r["status"] != "ok")
    ok = next(r["id"] for r in rows if r["status"] == "ok")
    code, out, err = run_cli(["front", run.path, "--pick", str(bad)], capsys)
    assert code == 0, err
    assert str(bad) in out and "holds under" not in out, out
    code, out, err = run_cli(["front", run.path, "--pick", str(ok)], capsys)
    assert code == 0, err
    assert "every ε above holds under" in out, out
