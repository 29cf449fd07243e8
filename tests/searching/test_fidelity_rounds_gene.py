"""Multi-fidelity promotion with a `rounds` gene: a rung trains every individual the same rounds (a fraction of the
most any plans), so that the early errors ranked against each other were measured after equal training. Each
rung was its own fraction of each individual's T: 2 rounds of one planning 5 were ranked against 17 of one planning
50 (the error falls with the rounds: the short ones lost every promotion)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from fedevo.searching import Runtime, SearchSettings, search

from .search_helpers import read_csv
from .test_nonprivate_search import PLAIN

FAKE = "tests.searching.search_fakes:GENE_ROUNDS"
GENES = 'rounds = { type = "int", low = 3, high = 30, default = 10 }\nsigma = { type = "real", low = 0.5, high = 2.0, default = 1.0 }'


def _problem(tmp_path):
    p = tmp_path / "rounds.toml"
    p.write_text(PLAIN.format(top="", privacy='mechanism = "update"\nclip = 1.0', genes=GENES)
                 .replace("rounds = 1\n", ""))
    return p


def test_a_rung_trains_every_individual_the_same_rounds(tmp_path):
    search(SearchSettings(problem=str(_problem(tmp_path)), pop=9, gen=2, seed=5, fidelity=(1 / 3, 1.0),
                          evaluator=FAKE), tmp_path / "R", Runtime(workers=0))
    rows = read_csv(tmp_path / "R" / "evaluations.csv")
    lower = [r for r in rows if float(r["fidelity"]) < 1]
    assert lower and {int(r["rounds_trained"]) for r in lower} == {10}  # ⌊30/3 + ½⌋ for everyone below full
    by_id = defaultdict(list)
    for r in rows:
        by_id[r["id"]].append(r)
    short = [rs for rs in by_id.values() if int(rs[0]["rounds"]) <= 10]
    assert short, "no individual planned 10 rounds or fewer: choose another seed"
    for rs in short:  # trained its own T at rung 0: at full fidelity there, never continued
        assert len(rs) == 1 and float(rs[0]["fidelity"]) == 1.0 and rs[0]["rung"] == "0"
        assert int(rs[0]["rounds_trained"]) == int(rs[0]["rounds"])
    for rs in by_id.values():
        full = [r for r in rs if float(r["fidelity"]) == 1.0]
        assert len(full) <= 1 and all(int(r["rounds_trained"]) == int(r["rounds"]) for r in full)
    assert json.loads((tmp_path / "R" / "run.json").read_text())["fidelity"]["same_rounds"] is True


def test_rung_rounds_of_a_run_made_before_are_each_individuals_fraction(tmp_path):
    """A run made before (run.json without fidelity.same_rounds) resumes with the rungs its log holds."""
    from fedevo.problem import load_problem
    from fedevo.searching.rungs import RungScheduler, equal_rung_rounds

    prob = load_problem(str(_problem(tmp_path)))
    (tmp_path / "states").mkdir()
    kw = dict(run_dir=tmp_path, problem=prob, ladder=(1 / 3, 1.0), rounds=None, evaluator=None, eps_key="eps",
              log=None, seed=0)
    assert RungScheduler(**kw, equal_rounds=False).rung_rounds({"rounds": 6}) == (2, 6)
    assert RungScheduler(**kw).rung_rounds({"rounds": 6}) == (6,)
    assert RungScheduler(**kw).rung_rounds({"rounds": 30}) == (10, 30)
    assert equal_rung_rounds((1 / 9, 1 / 3, 1.0), 27, 12) == (3, 9, 12)


def test_killed_anywhere_in_a_generation_it_resumes_to_the_uninterrupted_log(tmp_path, monkeypatch):
    """Rungs of equal rounds, some individuals done at rung 0 (their own T): a kill after any evaluation of the
    first generation resumes to the uninterrupted search's log and front."""
    from fedevo.searching import resume

    from . import search_fakes

    search_fakes.let_kills_through(monkeypatch)
    prob = str(_problem(tmp_path))
    settings = SearchSettings(problem=prob, pop=9, gen=1, seed=5, fidelity=(1 / 3, 1.0), evaluator=FAKE)
    search(settings, tmp_path / "ref", Runtime(workers=0))
    ref = read_csv(tmp_path / "ref" / "evaluations.csv")
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("wall_s", "chain")} for r in rows]  # noqa: E731
    for n in range(3, len(ref), 3):
        out = tmp_path / f"killed-{n}"
        search_fakes.ContinuingFake.calls = 0
        monkeypatch.setenv("FAKE_RAISE_AFTER", str(n))
        with pytest.raises(search_fakes.Killed):
            search(settings, out, Runtime(workers=0))
        monkeypatch.delenv("FAKE_RAISE_AFTER")
        assert len(read_csv(out / "evaluations.csv")) == n
        assert resume(out, Runtime(workers=0)).complete
        assert strip(read_csv(out / "evaluations.csv")) == strip(ref)
        assert read_csv(out / "front.csv") == read_csv(tmp_path / "ref" / "front.csv")
