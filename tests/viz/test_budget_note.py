"""A search bounded by --time-budget (or --patience) says so wherever its generations or evaluations are counted
against --gen: with a time budget alone --gen is no count at all (1000 batches nobody asked for, no longer a cap
either), and the pages said 'generations 4/1000' of a search that --time-budget had ended (fashion_mlp_dp
--optimizer gp --time-budget 15, 2026-11-27): they say 'generations 4'."""

import fedevo
from fedevo.errors import command_line
from fedevo.searching.rundata import load_run

from tests.helpers import run_cli
from tests.searching.search_helpers import FAKE, toy_problem_file


def slow(problem, params, *, seed, rounds=None, data_dir=None):
    import time

    time.sleep(0.1)
    return {"error": 0.5, "comm": 10.0 + params["lr"], "eps": 1.0 + params["sigma"]}


def test_a_time_budget_search_says_what_ended_it(tmp_path, capsys):
    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=2, time_budget=0.3, seed=0,
                        workers=0, out=tmp_path / "R", evaluator=slow, page=False)
    g = run.summary.generations
    assert run.summary.stop == "time_budget" and 1 <= g < 1000
    said = f"generations {g} (ended: --time-budget seconds reached)"
    assert said in fedevo.plot(run).read_text() and said in (run.path / "importance.html").read_text()
    # fedevo front's last line too, as docs/plots.md says (it said nothing of a run that had ended)
    assert front_lines(run.path, capsys)[-1] == said
    (run.path / "stop.json").unlink()  # as while the search runs, or after a kill: what may end it
    assert load_run(run.path).budget_note() == "may end sooner: time_budget=0.3 s"  # a Python caller's spelling
    with command_line():  # fedevo's command line (`fedevo front`, `fedevo plot`): its options
        assert load_run(run.path).budget_note() == "may end sooner: --time-budget 0.3 s"


def test_patience_is_spelled_as_the_caller_spells_it(tmp_path):
    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=2, gen=2, patience=5, seed=0,
                        workers=0, out=tmp_path / "R", evaluator=FAKE, page=False)
    (run.path / "stop.json").unlink()  # as while the search runs
    assert load_run(run.path).budget_note() == "may end sooner: patience=5"
    with command_line():
        assert load_run(run.path).budget_note() == "may end sooner: --patience 5"


def front_lines(run_dir, capsys) -> list:
    code, out, err = run_cli(["front", run_dir], capsys)
    assert code == 0, err
    return out.rstrip("\n").splitlines()


def test_a_gen_search_says_nothing_more(tmp_path, capsys):
    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=2, gen=1, seed=0, workers=0,
                        out=tmp_path / "R", evaluator=FAKE, page=False)
    assert load_run(run.path).budget_note() == ""
    assert not any(line.startswith("generations ") for line in front_lines(run.path, capsys))
    assert "generations 1/1 · " in fedevo.plot(run, importance=False).read_text()
