"""tests.helpers.cli, the in-process `fedevo` of the tests: what a command imported of the user's own code is forgotten
after it, as a fresh process would not have it, wherever the test stands and whatever is on the import path."""

from __future__ import annotations

import json
import sys

from tests.helpers import cli

EVALUATOR = """
from fedevo_test_beside import ERROR


def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    return {"error": ERROR, "comm": 1.0 + params["x"], "eps": None}
"""
PROBLEM = """
name = "beside"
evaluator = "python:ev.py:evaluate"
[genes]
x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }
"""


def test_a_module_beside_the_users_file_in_the_tests_folder_is_read_again(tmp_path, monkeypatch):
    """A test that stands in the folder of the user's files, with '' (the working directory) on the import path as
    `python -c` puts it: the module beside the evaluator is the user's, forgotten after the call, and an edit of it
    is what the next command runs (a helper that counted every folder on the path as not the user's kept it)."""
    (tmp_path / "ev.py").write_text(EVALUATOR)
    (tmp_path / "p.toml").write_text(PROBLEM)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    for error in (0.25, 0.75):
        (tmp_path / "fedevo_test_beside.py").write_text(f"ERROR = {error}\n")
        r = cli("evaluate", "--problem", tmp_path / "p.toml", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["error"] == error
        assert "fedevo_test_beside" not in sys.modules
