"""front.html and importance.html of a run of five objectives (error, comm, ε, model size Ω and a user's latency in
ms) in headless Chromium, checked on what the browser DRAWS (the 2026-11 browser audit; split from
test_objectives_browser.py, so that pytest-xdist's --dist loadfile, a file a worker, does not end the suite on one
long file):

* the "Chosen:" line, the caps' words and the parallel axes name each value with its unit; the screenshot tool's
  --brush finds an axis by key or title and a real-mouse drag selects exactly the solutions in range;
* at 1,280-1,920 px importance.html's five panels and front.html's ten projections are drawn whole.

Browser fixture: tests/browser/conftest.py; skip rule and helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import math

import pytest

from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, no_network_and_no_errors, open_fresh, open_page,
                                              settle)
from tests.browser.test_layout_browser import at_width
from tests.viz.fedevo_runs import five_objective_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")


@pytest.fixture(scope="module")
def five_page(tmp_path_factory):
    """(front.html, run dir) of the five-objective run: error, comm, ε, model size Ω and a user's latency (ms)."""
    from fedevo.viz import write_front_html

    run_dir = five_objective_run(tmp_path_factory)
    return write_front_html(run_dir), run_dir


def _between(values, log: bool = False) -> tuple[float, float]:
    """A range whose ends lie in the widest gap between two values in the lower third and in the upper third (log10
    of the values on a log axis): a brush dragged with the mouse, exact to the pixel, has them well clear of any."""
    v = sorted(set(values))
    f = (lambda x: math.log10(x)) if log else (lambda x: x)
    n = len(v)

    def mid(ks):
        k = max(ks, key=lambda k: f(v[k + 1]) - f(v[k]))
        return (v[k] + v[k + 1]) / 2 if not log else math.sqrt(v[k] * v[k + 1])
    return mid(range(0, n // 3)), mid(range(2 * n // 3 - 1, n - 1))


def test_the_units_of_five_objectives_and_a_brush_by_key_or_title(browser, five_page):
    """The "Chosen:" line and the caps' words name each value with its unit ("latency 3.59 ms, comm 797
    params/round/client slot, model size Ω 796 parameters"; before: bare numbers), the parallel axes draw
    "latency (ms)" and "model size Ω (parameters)" (before: no unit). The screenshot tool's --brush found an axis by
    its exact title, which units and "(log)" change: now by key ("latency", "eps") or title, its values in the
    quantity's units (log10 taken on a log axis), and the real-mouse drag selects exactly the solutions in range."""
    from fedevo.searching.rundata import load_run
    from fedevo.viz.numfmt import num
    from tests.browser.screenshots import brush
    from tests.browser.test_front_browser import find_axis

    page, run_dir = five_page
    data = load_run(run_dir)
    rows = {r["id"]: r for r in data.ok_rows}
    open_fresh(browser, page)
    note = browser.execute_script("return document.getElementById('knee-note').textContent")
    chosen = rows[int(note.split("Chosen: id ")[1].split(" ")[0])]
    assert (f"(error {num(chosen['error'])}, comm {num(chosen['comm'])} params/round/client slot, "
            f"ε {num(chosen['eps'])}, model size Ω {num(chosen['model_size'])} parameters, "
            f"latency {num(chosen['latency'])} ms)") in note, note
    cap = sorted(r["latency"] for r in data.front)[-1]
    browser.execute_script("fedevoCaps({latency: arguments[0]})", cap)
    note = browser.execute_script("return document.getElementById('knee-note').textContent")
    assert f"the knee within latency ≤ {num(cap)} ms: " in note, note
    browser.execute_script("fedevoCaps({})")

    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "parallel"))
    settle(browser)
    titles = browser.execute_script("return Array.from(document.querySelectorAll('#parallel .axis-title'))"
                                    ".map(t => t.textContent)")
    assert "latency (ms)" in titles and "model size Ω (parameters)" in titles, titles
    assert find_axis(browser, "latency")[1] == find_axis(browser, "latency (ms)")[1] == "latency (ms)"
    assert find_axis(browser, "ε")[1:] == find_axis(browser, "eps")[1:] == ("ε (log)", True)
    with pytest.raises(AssertionError, match="no parallel axis 'latency_ms'"):
        find_axis(browser, "latency_ms")

    for name, key in (("latency", "latency"), ("latency (ms)", "latency"), ("eps", "eps"),
                      ("model size Ω (parameters)", "model_size")):
        lo, hi = _between([r[key] for r in rows.values()], log=find_axis(browser, name)[2])
        browser.execute_script("fedevoSelect([])")
        settle(browser)
        got = brush(browser, name, lo, hi)
        want = sorted(i for i, r in rows.items() if lo <= r[key] <= hi)
        assert got == want and want, (name, lo, hi, got, want)
    browser.find_element("id", "parallel").screenshot(str(ARTIFACTS / "front-five-parallel-brushed.png"))
    no_network_and_no_errors(browser)


DRAWN_JS = """
// what a figure draws: its svg's box, every axis title's and panel title's box, and each panel's background box
const gd = document.getElementById(arguments[0]);
const box = gd.querySelector('svg.main-svg').getBoundingClientRect();
const rect = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
return {box: [box.left, box.top, box.right, box.bottom],
        titles: Array.from(gd.querySelectorAll('g[class^="g-x"][class$="title"] text, '
                                              + 'g[class^="g-y"][class$="title"] text, .annotation-text'))
          .filter(t => t.textContent).map(t => [t.textContent, rect(t)]),
        panels: Array.from(gd.querySelectorAll('.bglayer rect.bg')).map(rect)};
"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


@pytest.fixture(scope="module")
def five_importance(five_page):
    """importance.html of the five-objective run, written once (its forests are fitted once, not at each width)."""
    from fedevo.viz.importance import write_importance_html

    return write_importance_html(five_page[1])


@pytest.mark.parametrize("width", [1280, 1600, 1920])
def test_five_objectives_pages_draw_every_panel_whole(browser, five_page, five_importance, width):
    """At 1,280–1,920 px: importance.html's five bar panels (a row of five cut the last one's axis title at the
    figure's edge at 1,600 px) keep every axis and panel title inside the figure and clear of each other; front.html's
    ten projections are at least 300 px high with rows at most 110 px apart (they were 200 px high, 250 px apart)."""
    page, run_dir = five_page
    importance = five_importance
    at_width(browser, width)
    try:
        open_page(browser, importance, "importance")
        got = browser.execute_script(DRAWN_JS, "importance")
        left, top, right, bottom = got["box"]
        out = [t for t, r in got["titles"] if r[0] < left - 0.5 or r[2] > right + 0.5 or r[1] < top - 0.5]
        hits = [(a[0], b[0]) for i, a in enumerate(got["titles"]) for b in got["titles"][i + 1:] if _overlap(a[1], b[1])]
        assert len(got["panels"]) >= 5 and out == [] and hits == [], got
        browser.find_element("id", "importance").screenshot(str(ARTIFACTS / f"importance-five-{width}.png"))

        open_fresh(browser, page)
        browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "projections"))
        settle(browser)
        panels = browser.execute_script(DRAWN_JS, "projections")["panels"]
        tops = sorted({round(p[1]) for p in panels})
        assert len(panels) == 10 and len(tops) == 4, panels
        assert min(p[3] - p[1] for p in panels) >= 300, panels
        rows = [[p for p in panels if round(p[1]) == t] for t in tops]
        gaps = [lo[0][1] - hi[0][3] for hi, lo in zip(rows, rows[1:])]
        assert all(0 < g <= 110 for g in gaps), gaps
    finally:
        at_width(browser, 1400)
    no_network_and_no_errors(browser)
