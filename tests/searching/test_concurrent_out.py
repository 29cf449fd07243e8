"""Two searches on one --out (issue #27's data loss): the run directory is locked before anything is written, a
second search is refused without touching it, and the first runs on to the same result as a lone run."""

from __future__ import annotations

from dataclasses import replace

import pytest

import fedevo
from fedevo.errors import FedevoError, RunInUseError
from fedevo.searching import run as run_mod
from fedevo.searching.run import SearchRun
from fedevo.searching.settings import SearchSettings

from .search_helpers import FAKE, read_csv, toy_problem_file, without


def _settings(tmp_path, seed):
    return SearchSettings(problem=str(toy_problem_file(tmp_path)), pop=4, gen=2, seed=seed, evaluator=FAKE)


def test_second_search_refused_first_runs_on(tmp_path, monkeypatch):
    out = tmp_path / "D"
    first = SearchRun.create(_settings(tmp_path, 0), out)  # holds the lock from here on
    meta = (out / "run.json").read_text()
    # the race: the second passed its emptiness check before the first wrote run.json
    real = run_mod._content
    calls = {"n": 0}

    def racing(d):
        calls["n"] += 1
        return [] if calls["n"] == 1 else real(d)
    monkeypatch.setattr(run_mod, "_content", racing)
    with pytest.raises(RunInUseError, match="in use by another fedevo process"):
        SearchRun.create(_settings(tmp_path, 7), out)
    monkeypatch.setattr(run_mod, "_content", real)
    # refused after the first wrote: another run's directory, nothing touched
    with pytest.raises(FedevoError, match="holds a different run"):
        fedevo.search(str(toy_problem_file(tmp_path)), pop=4, gen=2, seed=7, workers=0, out=out,
                      evaluator=FAKE, page=False)
    assert (out / "run.json").read_text() == meta
    first.run(fedevo.searching.settings.Runtime(workers=0))
    lone = fedevo.search(str(toy_problem_file(tmp_path)), pop=4, gen=2, seed=0, workers=0,
                         out=tmp_path / "lone", evaluator=FAKE, page=False)
    assert without(read_csv(out / "evaluations.csv"), "wall_s", "chain") == \
        without(read_csv(lone.path / "evaluations.csv"), "wall_s", "chain")


def test_a_run_in_another_process_hands_is_not_removed(tmp_path):
    """A search that cannot start (here: the directory is locked) removes nothing it did not create."""
    out = tmp_path / "D"
    first = SearchRun.create(_settings(tmp_path, 0), out)
    other = SearchRun.open(out)
    with pytest.raises(RunInUseError):
        other.run(replace(fedevo.searching.settings.Runtime(), workers=0))
    assert (out / "run.json").exists() and first._held is not None
