"""`fedevo front` says in one footer line which rows each fedevo source wrote where a run was resumed by another
(resumed_by.json), and nothing where one source wrote them all (front.html: tests/viz/test_sources_note.py)."""

from fedevo.searching.versions import program

from tests.helpers import run_cli
from tests.viz.fedevo_runs import resumed_by_another_fedevo


def _lines(run, capsys):
    code, out, err = run_cli(["front", run], capsys)
    assert code == 0, err
    return out.rstrip("\n").splitlines()


def test_fedevo_front_says_which_rows_each_source_wrote(tmp_path, monkeypatch, capsys):
    run = resumed_by_another_fedevo(tmp_path, monkeypatch)
    here = program()
    lines = _lines(run, capsys)
    said = [ln for ln in lines if "numbers may not be comparable" in ln]
    assert said == [f"rows 0–3 by fedevo {here['fedevo']} (source {here['fedevo_source'][:10]}…), 4–7 by fedevo "
                    f"{here['fedevo']} (source 0123456789…); numbers may not be comparable"], lines


def test_fedevo_front_says_nothing_of_one_source(tmp_path, monkeypatch, capsys):
    run = resumed_by_another_fedevo(tmp_path, monkeypatch, other=False)
    assert not any("numbers may not be comparable" in ln or "by fedevo" in ln for ln in _lines(run, capsys))
