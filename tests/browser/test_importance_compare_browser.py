"""importance.html and compare.html in headless Chromium with the network off: they render with no console error,
and what plotly draws is what the run holds (bars, points, legend entries, a hypervolume axis that does not
start at 0). Patterns and skip rule: tests/browser/test_front_browser.py; the browser: tests/browser/conftest.py."""

from __future__ import annotations

import csv

import pytest

from tests.browser.test_front_browser import ARTIFACTS, CHROMIUM, no_network_and_no_errors, open_page, wait_drawn
from tests.searching.search_fakes import fake_evaluate
from tests.viz.test_importance import driven_evaluate

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return tmp_path_factory.mktemp("insight-browser")


def _ids(path, status=None):
    with open(path, newline="") as f:
        return sorted(int(r["id"]) for r in csv.DictReader(f) if status is None or r["status"] == status)


def test_importance_page_draws_the_bars_and_slices(browser, base):
    import fedevo

    run = base / "driven"
    fedevo.search("digits_mlp_local", pop=40, gen=1, workers=0, seed=5, out=run, evaluator=driven_evaluate,
                  page=False)
    fedevo.plot(run)
    page = run / "importance.html"
    open_page(browser, page, "importance")
    for div in ("slices", "hypervolume"):
        wait_drawn(browser, page, div)
    genes = browser.execute_script("return document.getElementById('importance').data[0].y.length")
    assert genes == 9  # digits_mlp_local's genes
    # the bars as drawn: per objective one bar per gene; the widest bar of each is its driving gene
    widest = browser.execute_script("""
        const g = document.getElementById('importance');
        return Array.from(g.querySelectorAll('.barlayer .trace')).map((tr, k) => {
            const w = Array.from(tr.querySelectorAll('.point path')).map(p => p.getBBox().width);
            return {n: w.length, top: g.data[k].y[w.indexOf(Math.max(...w))]};
        });""")
    assert [w["n"] for w in widest] == [9, 9, 9]
    assert [w["top"] for w in widest] == ["lr", "participation", "sigma"]
    # every ok evaluation drawn once in each of the 27 slices
    n_ok = len(_ids(run / "evaluations.csv", "ok"))
    drawn = browser.execute_script(
        "return Array.from(document.querySelectorAll('#slices .scatterlayer .trace')).map(t => "
        "t.querySelectorAll('.point').length)")
    assert drawn == [n_ok] * 27
    # each point's values are held once and shared by its panels (window.FEDEVO_SLICES): the traces the page's
    # script fills in are the figure's, point for point and hover text for hover text
    _same_slices(browser, run)
    browser.save_screenshot(str(ARTIFACTS / "importance.png"))
    no_network_and_no_errors(browser)


def _same_slices(browser, run):
    from fedevo.searching.rundata import load_run
    from fedevo.viz.importance import figure_slices

    want = [t for t in figure_slices(load_run(run)).to_plotly_json()["data"] if t["meta"] == "slice"]
    got = browser.execute_script("""
        return document.getElementById('slices').data.filter(t => t.meta === 'slice').map(t =>
            ({x: Array.from(t.x), y: Array.from(t.y), ids: Array.from(t.customdata), text: Array.from(t.text),
              color: Array.from(t.marker.color), symbol: Array.from(t.marker.symbol)}));""")
    assert len(got) == len(want) == 27
    for g, w in zip(got, want):
        assert g["ids"] == list(w["customdata"]) and g["text"] == list(w["text"])
        assert g["x"] == pytest.approx(list(w["x"])) and g["y"] == pytest.approx(list(w["y"]))
        assert g["color"] == list(w["marker"]["color"]) and g["symbol"] == list(w["marker"]["symbol"])


def test_importance_page_beyond_draw_max_draws_the_sample(browser, base, monkeypatch):
    """Beyond DRAW_MAX ok evaluations the slices draw a sample of DRAW_MAX, in every panel, and say so."""
    import fedevo
    from fedevo.searching.rundata import load_run
    from fedevo.viz import importance as imp

    run = base / "sampled"
    fedevo.search("digits_mlp_local", pop=40, gen=1, workers=0, seed=6, out=run, evaluator=driven_evaluate,
                  page=False)
    monkeypatch.setattr(imp, "DRAW_MAX", 15)
    fedevo.plot(run)
    page = run / "importance.html"
    open_page(browser, page, "importance")
    wait_drawn(browser, page, "slices")
    ids = sorted(r["id"] for r in imp.slice_rows(load_run(run)))
    drawn = browser.execute_script(
        "return Array.from(document.querySelectorAll('#slices .scatterlayer .trace')).map(t => "
        "t.querySelectorAll('.point').length)")
    assert drawn == [15] * 27 and len(ids) == 15
    assert browser.execute_script("return document.getElementById('slices').data.map(t => "
                                  "Array.from(t.customdata).sort((a, b) => a - b))") == [ids] * 27
    note = browser.execute_script("return document.getElementById('slices-note').textContent")
    assert note.startswith("Showing 15 of 40 ok evaluations: a sample")
    _same_slices(browser, run)
    no_network_and_no_errors(browser)


def test_compare_page_draws_each_runs_front(browser, base):
    import fedevo

    runs = []
    for name, seed, gen in (("one", 1, 2), ("two", 2, 3)):
        fedevo.search("digits_mlp_local", pop=8, gen=gen, workers=0, seed=seed, out=base / name,
                      evaluator=fake_evaluate, page=False)
        runs.append(base / name)
    page = fedevo.plot(runs, out=base / "compare.html")
    open_page(browser, page, "fronts")
    wait_drawn(browser, page, "hypervolume")
    legend = browser.execute_script(
        "return Array.from(document.querySelectorAll('#fronts .legendtext')).map(e => e.textContent)")
    assert legend == ["one", "two"]
    # the points drawn per trace (three panels × two runs) are each run's Pareto set
    drawn = browser.execute_script("""
        const g = document.getElementById('fronts');
        return Array.from(g.querySelectorAll('.scatterlayer .trace')).map((tr, k) =>
            ({name: g.data[k].name, n: tr.querySelectorAll('.point').length, ids: Array.from(g.data[k].customdata)}));""")
    for d in drawn:
        front = _ids(base / d["name"] / "front.csv")
        assert d["n"] == len(front) and sorted(d["ids"]) == front
    assert sorted(d["name"] for d in drawn) == ["one"] * 3 + ["two"] * 3
    # the hypervolume axis as drawn: its lowest tick is near the values, not 0
    hv = browser.execute_script("""
        const g = document.getElementById('hypervolume');
        return {lo: g._fullLayout.yaxis.range[0], ys: g.data.flatMap(t => Array.from(t.y)),
                ticks: Array.from(g.querySelectorAll('.ytick text')).map(e => e.textContent)};""")
    assert 0 < hv["lo"] < min(hv["ys"]) and "0" not in hv["ticks"]
    browser.save_screenshot(str(ARTIFACTS / "compare.png"))
    no_network_and_no_errors(browser)
