"""A run's rows written by more than one fedevo source (a resume by another: resumed_by.json) are said in one line
on front.html's header, as in `fedevo front`'s footer (tests/cli/test_front_sources.py): "rows 0–3 by fedevo 0.1.0
(source 3f2a…), 4–7 by fedevo 0.1.0 (source 0123456789…); numbers may not be comparable". Before, only the resume's
warning said it, once, on the terminal of the resume."""

import json

import fedevo
from fedevo.searching.provenance import RESUMED_BY, sources_line
from fedevo.searching.rundata import load_run
from fedevo.searching.versions import program

from tests.viz.fedevo_runs import resumed_by_another_fedevo


def _w(version, source, before):
    return {"fedevo": version, "fedevo_source": source, "rows_before": before}


def test_sources_line_names_each_sources_rows_and_nothing_for_one_source():
    a, b = _w("0.1.0", "aaaaaaaaaaaaaaaa", 0), _w("0.2.0", "bbbbbbbbbbbbbbbb", 48)
    assert sources_line([a, b], 96) == ("rows 0–47 by fedevo 0.1.0 (source aaaaaaaaaa…), 48–95 by fedevo 0.2.0 "
                                        "(source bbbbbbbbbb…); numbers may not be comparable")
    assert sources_line([a], 96) is None
    assert sources_line([a, {**a, "rows_before": 48}], 96) is None  # the same program again: one source
    # a source not recorded then one of the same version: may differ, as the resume's warning says (the version
    # string has been 0.1.0 while numbers changed under it); two recorded sources decide whatever the versions say
    assert sources_line([_w("0.1.0", None, 0), _w("0.1.0", "cccccccccccccccc", 10)], 20) == (
        "rows 0–9 by fedevo 0.1.0 (source not recorded), 10–19 by fedevo 0.1.0 (source cccccccccc…); numbers may "
        "not be comparable")
    assert sources_line([a, _w("0.2.0", "aaaaaaaaaaaaaaaa", 48)], 96) is None
    # a resume that logged no row is left out; one that logged them all leaves the maker's none
    assert sources_line([a, _w("0.3.0", "dddddddddddddddd", 48), {**b, "rows_before": 48}], 96) == \
        sources_line([a, b], 96)
    assert sources_line([a, {**b, "rows_before": 0}], 96) is None
    three = sources_line([a, b, {**a, "rows_before": 60}], 96)
    assert three.startswith("rows 0–47 by fedevo 0.1.0") and ", 48–59 by fedevo 0.2.0" in three
    assert ", 60–95 by fedevo 0.1.0 (source aaaaaaaaaa…);" in three


def test_front_html_says_in_one_line_which_rows_each_source_wrote(tmp_path, monkeypatch):
    run = resumed_by_another_fedevo(tmp_path, monkeypatch)
    (entry,) = json.loads((run / RESUMED_BY).read_text())["resumed_by"]
    assert entry["rows_before"] == 4
    here = program()
    want = (f"rows 0–3 by fedevo {here['fedevo']} (source {here['fedevo_source'][:10]}…), 4–7 by fedevo "
            f"{here['fedevo']} (source 0123456789…); numbers may not be comparable")
    assert load_run(run).sources_note() == want
    html = fedevo.plot(run, importance=False).read_text()
    assert html.count("numbers may not be comparable") == 1
    header = html[html.index('<p class="meta">'):]
    assert want in header[:header.index("</p>")]


def test_front_html_says_nothing_of_one_source(tmp_path, monkeypatch):
    run = resumed_by_another_fedevo(tmp_path, monkeypatch, other=False)
    assert not (run / RESUMED_BY).exists() and load_run(run).sources_note() is None
    assert "numbers may not be comparable" not in fedevo.plot(run, importance=False).read_text()


def test_an_unreadable_record_is_said_not_a_failed_page(tmp_path, monkeypatch):
    run = resumed_by_another_fedevo(tmp_path, monkeypatch)
    (run / RESUMED_BY).write_text("{not json")
    assert f"{run / RESUMED_BY} is unreadable" in fedevo.plot(run, importance=False).read_text()
