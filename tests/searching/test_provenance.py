"""Which fedevo wrote a run's rows: run.json's versions record fedevo's source hash beside its version string, and
a resume by another fedevo (a pip upgrade, a checkout with edits) says so in one warning line and records itself in
resumed_by.json with the rows logged before it. Before, the run recorded only the version string, and a resume by
another source mixed rows of two programs without a word."""

from __future__ import annotations

import json

import pytest

import fedevo.searching.run as run_mod
from fedevo.errors import FedevoError
from fedevo.searching import Runtime, SearchSettings, search
from fedevo.searching.provenance import RESUMED_BY, change, writers
from fedevo.searching.run import SearchRun
from fedevo.searching.versions import program, source_hash

from . import search_fakes
from .search_helpers import read_csv

SERIAL = Runtime(workers=0)


def _search(out, gen=1):
    return search(SearchSettings(problem="digits_mlp_local", pop=4, gen=gen, seed=1), out, SERIAL,
                  evaluator=search_fakes.fake_evaluate)


def _resume(out, gen):
    run = SearchRun.open(out)
    run.raise_budgets(gen=gen)
    return run.run(SERIAL)


def test_run_json_records_the_source_and_a_resume_by_another_says_so_and_records_it(tmp_path, monkeypatch, capsys):
    out = tmp_path / "R"
    _search(out)
    meta = json.loads((out / "run.json").read_text())
    assert meta["versions"]["fedevo_source"] == source_hash() == program()["fedevo_source"]
    capsys.readouterr()
    _resume(out, 2)  # the same program: nothing said, nothing recorded
    assert "warning" not in capsys.readouterr().err and not (out / RESUMED_BY).exists()
    here = program()
    monkeypatch.setattr(run_mod, "program", lambda: {**here, "fedevo_source": "0123456789abcdef"})
    _resume(out, 3)
    err = capsys.readouterr().err
    (line,) = [ln for ln in err.splitlines() if "warning" in ln]
    assert line == (f"fedevo: warning: resuming {out}: its rows so far were written by fedevo {here['fedevo']} "
                    f"(source {here['fedevo_source']}), this resume runs fedevo {here['fedevo']} (source "
                    "0123456789abcdef): rows logged before and after the resume come from different sources of fedevo; "
                    "numbers may not be comparable")
    (entry,) = json.loads((out / RESUMED_BY).read_text())["resumed_by"]
    assert entry["fedevo_source"] == "0123456789abcdef" and entry["rows_before"] == 8
    assert len(read_csv(out / "evaluations.csv")) == 12
    _resume(out, 4)  # the same program again: said once
    assert "warning" not in capsys.readouterr().err
    assert [w["fedevo_source"] for w in writers(out, meta)] == [here["fedevo_source"], "0123456789abcdef"]


def test_a_run_made_before_the_source_was_recorded_says_so_once_and_records_it(tmp_path, monkeypatch, capsys):
    """run.json without fedevo_source (made before it was recorded): its first resume says, in one line, that its
    rows may come from another source (review17 F5: the version string has been 0.1.0 throughout while numbers
    changed under it, so 'the same version string' said nothing, and such a resume was silent); the source that
    writes from now on is recorded, and the next resume by it is silent. Another version string is said too."""
    here = program()
    old = {"fedevo": here["fedevo"], "fedevo_source": None}
    assert "before runs recorded fedevo's source, this resume runs fedevo" in change(old, here)
    assert "fedevo 0.0.9 (source not recorded), this resume runs" in change({**old, "fedevo": "0.0.9"}, here)
    out = tmp_path / "R"
    real = run_mod.versions
    monkeypatch.setattr(run_mod, "versions", lambda: {k: v for k, v in real().items() if k != "fedevo_source"})
    _search(out)  # made as before: run.json's versions without the source
    assert "fedevo_source" not in json.loads((out / "run.json").read_text())["versions"]
    capsys.readouterr()
    _resume(out, 2)
    err = capsys.readouterr().err
    assert err.count("before runs recorded fedevo's source") == 1, err
    (entry,) = json.loads((out / RESUMED_BY).read_text())["resumed_by"]
    assert entry["fedevo_source"] == here["fedevo_source"] and entry["rows_before"] == 4
    _resume(out, 3)
    assert "warning" not in capsys.readouterr().err


def test_an_unreadable_record_refuses_the_resume_in_one_line(tmp_path):
    out = tmp_path / "R"
    _search(out)
    (out / RESUMED_BY).write_text("{")
    with pytest.raises(FedevoError, match=rf"{RESUMED_BY} is unreadable .*: it records which fedevo resumed the run"):
        _resume(out, 2)



def test_the_same_command_knows_a_run_an_earlier_fedevo_made_of_it(tmp_path, monkeypatch):
    """--budget (or --time-budget, --patience) without --gen: settings.gen_derived, in the run id since, gave the same
    command another id than the fedevo before it did, so the same command on that run's directory said 'holds a
    different run; choose another --out' instead of how to go on. It knows it now, and says its --gen ends it; a
    run made by --gen given is still another run, and the old run opens and resumes as it was made."""
    from dataclasses import asdict

    from fedevo.searching.rundata import legacy_identity, run_identity

    def settings(derived):
        return SearchSettings(problem="digits_mlp_local", pop=4, gen=1, budget=4, seed=1, gen_derived=derived)

    text = "x = 1"
    assert legacy_identity(text, settings(False)) is None
    assert legacy_identity(text, settings(True)) == run_identity(text, settings(False)) != run_identity(
        text, settings(True))
    out = tmp_path / "R"
    monkeypatch.setattr(run_mod, "asdict", lambda s: {k: v for k, v in asdict(s).items() if k != "gen_derived"})
    search(settings(False), out, SERIAL, evaluator=search_fakes.fake_evaluate)  # run.json as before gen_derived
    monkeypatch.undo()
    assert "gen_derived" not in json.loads((out / "run.json").read_text())["settings"]
    with pytest.raises(FedevoError, match=r"already holds this run \(made by an earlier fedevo, in which gen= derived "
                                          r"from the other budgets ends the search\), finished"):
        search(settings(True), out, SERIAL, evaluator=search_fakes.fake_evaluate)
    run = SearchRun.open(out)
    assert run.settings.gen_derived is False and run.finished()
    run.raise_budgets(budget=8, gen=2)
    assert run.run(SERIAL).evaluations == 8
    new = tmp_path / "N"  # a run of --gen 1 --budget 4 made now records gen_derived: another run than --budget 4's
    search(settings(False), new, SERIAL, evaluator=search_fakes.fake_evaluate)
    with pytest.raises(FedevoError, match="holds a different run"):
        search(settings(True), new, SERIAL, evaluator=search_fakes.fake_evaluate)


def test_known_sources_decide_whatever_the_version_strings_say():
    """review17 F13: the version string comes from the first fedevo metadata on the path (an older wheel's beside
    a checkout on PYTHONPATH), so two processes running one source could name two versions: the resume warned of
    'different sources of fedevo' with equal source hashes. Where both are known, the sources decide."""
    here = program()
    assert change({"fedevo": "0.0.9", "fedevo_source": here["fedevo_source"]}, here) is None
    assert "different sources of fedevo" in change({"fedevo": here["fedevo"], "fedevo_source": "0" * 16}, here)
