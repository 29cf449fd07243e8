"""A resume searches the problem as run.json recorded it, not the problem file as it is now: a user who edited the
file (another objectives list, a wider range) and resumed saw the run go on exactly as before, without a word.
Now the resume says, in one note on stderr, that the file changed and which problem it goes on with."""

from __future__ import annotations

from fedevo.problem import problems_dir
from tests.helpers import cli

from .search_helpers import read_csv


def test_a_changed_problem_file_is_noted_and_the_recorded_problem_searched(tmp_path):
    prob = tmp_path / "mine.toml"
    prob.write_text((problems_dir() / "digits_mlp.toml").read_text())
    r = cli("search", "--problem", prob, "--pop", "4", "--gen", "1", "--rounds", "1", "--workers", "0",
                "--quiet", "--out", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    r = cli("resume", tmp_path / "R", "--gen", "2", "--workers", "0", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "note:" not in r.stderr, r.stderr  # unchanged: nothing to say

    prob.write_text('objectives = ["error", "comm"]\n' + prob.read_text())
    r = cli("resume", tmp_path / "R", "--gen", "3", "--workers", "0", "--quiet")
    assert r.returncode == 0, r.stderr
    (note,) = [line for line in r.stderr.splitlines() if "note:" in line]
    assert note == (f"fedevo: note: {prob} changed since this search began; the search goes on with the problem as "
                    f"{tmp_path / 'R' / 'run.json'} recorded it (start a new search to search the changed file)")
    rows = read_csv(tmp_path / "R" / "evaluations.csv")
    assert len(rows) == 12 and all(row["eps"] for row in rows)  # still error, comm and ε


def test_a_refused_resume_of_a_changed_problem_file_says_one_line(tmp_path):
    """The note was printed before the resume's own checks: a resume refused afterwards (a budget reached already,
    a changed data or code file) printed the note, which said the search goes on, above its one error line."""
    prob = tmp_path / "mine.toml"
    prob.write_text((problems_dir() / "digits_mlp.toml").read_text())
    r = cli("search", "--problem", prob, "--pop", "4", "--gen", "1", "--rounds", "1", "--workers", "0",
                "--quiet", "--out", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    prob.write_text('objectives = ["error", "comm"]\n' + prob.read_text())
    rows = (tmp_path / "R" / "evaluations.csv").read_bytes()
    r = cli("resume", tmp_path / "R", "--budget", "2", "--workers", "0", "--quiet")  # 4 evaluated already
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("fedevo: error: "), r.stderr
    assert (tmp_path / "R" / "evaluations.csv").read_bytes() == rows
