"""What a time limit's child process (containment's, started once and kept; started again after an evaluation
killed at its limit) runs is what run.json records: a reload a notebook takes reaches it, a file saved since does not."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

from tests.test_plugins import _model_project


def test_a_reload_taken_reaches_the_time_limits_child(tmp_path, monkeypatch):
    """review17 F11: with eval_timeout, evaluate and search ran the child that had imported the model file and its
    helper before the edit: Ω stayed the old model's after importlib.reload while the run recorded the new text."""
    import fedevo
    from fedevo.searching.containment import close_child

    helper = f"width_child_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    project = _model_project(tmp_path, helper)
    monkeypatch.syspath_prepend(str(project))
    try:
        omega = fedevo.evaluate(fedevo.Problem.from_file(str(project / "p.toml")), rounds=1, eval_timeout=120).omega
        (project / f"{helper}.py").write_text("HIDDEN = 128\n")
        importlib.reload(sys.modules[helper])
        problem = fedevo.Problem.from_file(str(project / "p.toml"))
        bigger = fedevo.evaluate(problem, rounds=1).omega
        assert bigger > omega
        assert fedevo.evaluate(problem, rounds=1, eval_timeout=120).omega == bigger
    finally:
        close_child()
        sys.modules.pop(helper, None)


SAVES_ITSELF = '''
import os, time
VALUE = 0.10
CNT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count.txt")

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    n = int(open(CNT).read()) if os.path.exists(CNT) else 0
    open(CNT, "w").write(str(n + 1))
    if n == 0:  # an editor saves the file while the search runs
        src = open(__file__).read().replace("VALUE = 0.10", "VALUE = 0.35")
        open(__file__, "w").write(src)
    if n == 1:
        time.sleep(60)  # overruns the time limit: the child is killed and started again
    return {"error": VALUE, "comm": 1.0 + params["width"], "eps": 1.0}
'''


def test_a_child_started_after_a_save_does_not_log_the_new_code_under_the_old_record(tmp_path):
    """review17 F10: after an evaluation overran its limit, the fresh child imported the evaluator file saved since
    and its rows (error 0.35) were logged under run.json's record of the old text (0.10), silently. The search
    stops, resumable, and logs none of them."""
    import fedevo
    from fedevo.errors import FedevoError

    (tmp_path / "ev.py").write_text(SAVES_ITSELF)
    (tmp_path / "own.toml").write_text('name = "child"\nevaluator = "python:ev.py:evaluate"\neval_timeout = 3\n'
                                       '[genes]\nwidth = { type = "int", low = 1, high = 16, default = 4 }\n')
    with pytest.raises(FedevoError, match=r"ev\.py changed while the search ran, and the process that runs "
                                          r"evaluations under the time limit, started since, imported the new text"):
        fedevo.search(str(tmp_path / "own.toml"), optimizer="random", pop=5, gen=1, workers=0, out=tmp_path / "R",
                      page=False, progress=False)
    rows = fedevo.open_run(tmp_path / "R").evaluations
    assert [r["status"] for r in rows] == ["ok", "failed"], rows  # the first, then the one stopped at its limit
    assert rows[0]["error"] == pytest.approx(0.10)


def test_the_child_starts_without_a_word_on_stderr(capfd):
    """Every start of the time limit's child printed '<frozen runpy>:128: RuntimeWarning: 'fedevo.searching.
    containment' found in sys.modules after import of package 'fedevo.searching' ...' to the user's stderr (started
    as `python -m` of a module its package imports first)."""
    import fedevo
    from fedevo.searching.containment import close_child

    close_child()  # a fresh start
    capfd.readouterr()
    try:
        assert fedevo.evaluate("digits_mlp", rounds=1, eval_timeout=120).status == "ok"
    finally:
        close_child()
    assert "RuntimeWarning" not in capfd.readouterr().err


def test_the_child_imports_the_fedevo_its_parent_runs(tmp_path, monkeypatch):
    """review18 F7: the child put the folder the search was started in first on its path, so a search started at
    another checkout's root ran that checkout's fedevo in the child while run.json recorded the parent's source. A
    fedevo/ folder in the working directory that cannot even be imported: the evaluation runs as before."""
    import fedevo
    from fedevo.searching.containment import close_child

    (tmp_path / "fedevo").mkdir()
    (tmp_path / "fedevo" / "__init__.py").write_text("raise ImportError('the wrong fedevo')\n")
    monkeypatch.chdir(tmp_path)
    close_child()
    try:
        assert fedevo.evaluate("digits_mlp", rounds=1, eval_timeout=120).status == "ok"
    finally:
        close_child()
