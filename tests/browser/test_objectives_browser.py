"""front.html and importance.html follow the run's objectives, and label them one way (the 2026-11 browser audit),
in headless Chromium, checked on what the browser DRAWS:

* a run of four objectives (error, comm, ε, worst_client_error): the Pareto table, the selection table (rows clicked
  with the mouse), the CSV / JSON download, the hypervolume note and axis title (4-D, reference point 1.1 in each)
  and importance.html's header and panels name the fourth;
* comm is "comm (params/round/client slot)" on every axis (3D, projections, parallel coordinates), in the hover
  label (real mouse) and the colour choice;
* the chance band of the projections reaches the error axis' end, which never runs past what an error can be (1);
* the parallel coordinates' titles clear of each other and inside the figure at 1,000 and 1,600 px.

A run of five objectives: test_five_objectives_browser.py.

Browser fixture: tests/browser/conftest.py; skip rule and helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, MOVE_MS, hover_at, no_network_and_no_errors,
                                              open_fresh, open_page, pareto_positions, settle)
from tests.browser.test_layout_browser import at_width
from tests.browser.test_selection_browser import CAPTURE_JS, _download
from tests.viz.fedevo_runs import four_objective_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")

FOURTH = "worst_client_error"
FOURTH_LABEL = "worst-10 % client error"
COMM = "comm (params/round/client slot)"


@pytest.fixture(scope="module")
def four_pages(tmp_path_factory):
    """(front.html, importance.html, run dir) of a real search whose objectives are error, comm, ε and the
    worst-served clients' error."""
    from fedevo.viz import write_front_html
    from fedevo.viz.importance import write_importance_html

    run_dir = four_objective_run(tmp_path_factory)
    return write_front_html(run_dir), write_importance_html(run_dir), run_dir


def _cells(driver, table: str) -> tuple[list[str], dict[int, list[str]]]:
    """(headers, id -> cell texts) of a table as drawn."""
    heads = driver.execute_script(f"return Array.from(document.querySelectorAll('{table} thead th'))"
                                  ".map(th => th.textContent)")
    rows = driver.execute_script(f"return Array.from(document.querySelectorAll('{table} tbody tr'))"
                                 ".map(tr => Array.from(tr.cells).map(td => td.textContent))")
    return heads, {int(r[0]): r for r in rows}


def test_a_fourth_objective_is_in_every_table_the_export_and_the_notes(browser, four_pages):
    """The fourth objective (worst_client_error) is a column of the Pareto table and, for rows clicked with the
    mouse, of the selection table, in the page's formatter; the CSV and JSON downloads hold it raw; the hypervolume
    note and the drawn axis title name the four objectives hypervolume.csv is measured in, and the reference point
    (1.1, 1.1, 1.1, 1.1); importance.html lists the four (each minimised) and slices the fourth. Before the audit all
    of them said error, comm, ε only."""
    from selenium.webdriver.common.action_chains import ActionChains

    from fedevo.searching.rundata import load_run
    from fedevo.viz.numfmt import num

    page, importance, run_dir = four_pages
    data = load_run(run_dir)
    assert data.objectives.names == ("error", "comm", "eps", FOURTH)
    with open(run_dir / "hypervolume.csv", newline="") as f:
        assert f"lo_{FOURTH}" in next(csv.reader(f))  # the run's hypervolume is 4-D
    front = {r["id"]: r for r in data.front}
    open_fresh(browser, page)

    heads, rows = _cells(browser, "#front-table")
    assert FOURTH_LABEL in heads, heads
    col = heads.index(FOURTH_LABEL)
    assert set(rows) == set(front) and all(rows[i][col] == num(front[i][FOURTH]) for i in front)
    picked = sorted(front)[:2]
    for i in picked:  # real mouse clicks on the Pareto table's rows
        tr = browser.find_element("css selector", f'#front-table tbody td[data-v="{i}"]')
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", tr)
        ActionChains(browser, duration=MOVE_MS).move_to_element(tr).click().perform()
        settle(browser)
    assert browser.execute_script("return fedevoSelection()") == picked
    heads, rows = _cells(browser, "#selected-table")
    assert FOURTH_LABEL in heads, heads
    assert {i: r[heads.index(FOURTH_LABEL)] for i, r in rows.items()} == {i: num(front[i][FOURTH]) for i in picked}

    browser.execute_script(CAPTURE_JS)
    _, text = _download(browser, "export-csv")
    got = {int(r["id"]): r for r in csv.DictReader(io.StringIO(text))}
    assert sorted(got) == picked and all(float(got[i][FOURTH]) == pytest.approx(front[i][FOURTH], rel=1e-12)
                                         for i in picked)
    _, text = _download(browser, "export-json")
    got = {r["id"]: r for r in json.loads(text)}
    assert all(got[i][FOURTH] == pytest.approx(front[i][FOURTH], rel=1e-12) for i in picked)

    space = f"(error, comm, log10 ε, {FOURTH_LABEL})"
    note = browser.find_element("id", "hypervolume-note").text
    assert space in note and "(1.1, 1.1, 1.1, 1.1)" in note, note
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "hypervolume"))
    settle(browser)
    title = browser.execute_script("return Array.from(document.querySelectorAll('#hypervolume .g-ytitle text'))"
                                   ".map(t => t.textContent).join(' ')")
    assert FOURTH_LABEL in title and "log10 ε" in title, title
    browser.find_element("id", "selection").screenshot(str(ARTIFACTS / "front-four-selection.png"))
    no_network_and_no_errors(browser)

    open_page(browser, importance, "slices")
    meta = browser.find_element("css selector", "p.meta").text
    assert f"{FOURTH_LABEL} minimised" in meta and "ε (accountant) minimised" in meta, meta
    assert "(all minimised): error (1 − mean client accuracy), comm" not in meta
    titles = browser.execute_script("return Array.from(document.querySelectorAll('#slices .annotation-text'))"
                                    ".map(t => t.textContent)")
    assert any(t.startswith(f"{FOURTH_LABEL} vs ") for t in titles), titles
    said = browser.execute_script("const e = document.getElementById('importance-none') || "
                                  "document.getElementById('importance'); return e.textContent")
    assert FOURTH_LABEL in said, said
    note = browser.find_element("id", "hypervolume-note").text
    assert space in note and "(1.1, 1.1, 1.1, 1.1)" in note, note
    no_network_and_no_errors(browser)


AXIS_TITLES_JS = """
// the axis titles the browser draws: the 3D scene's (plotly's full layout: WebGL draws them), the projections' and
// the parallel coordinates' (SVG text), the colour-by choices
const g3 = document.getElementById('front3d'), s = g3._fullLayout.scene;
const svg = sel => Array.from(document.querySelectorAll(sel)).map(t => t.textContent);
return {scene: ['xaxis', 'yaxis', 'zaxis'].map(a => s[a].title.text).concat(s.annotations.map(a => a.text)),
        projections: Array.from(document.querySelectorAll('#projections .infolayer text'))
          .filter(t => /^[xy][0-9]*title$/.test(t.getAttribute('class') || '')).map(t => t.textContent),
        parallel: svg('#parallel .axis-title'),
        colour: svg('#colour-by option')};
"""

BAND_JS = """
// each chance band (a shape) of the projections: its data ends, its axis' drawn range, and on screen the band's
// right edge and the panel's
const g = document.getElementById('projections'), l = g._fullLayout, r = g.getBoundingClientRect();
return l.shapes.map((s, i) => {
  const xa = l[s.xref === 'x' ? 'xaxis' : 'xaxis' + s.xref.slice(1)];
  const path = g.querySelector('.shapelayer path[data-index="' + i + '"]').getBoundingClientRect();
  return {x0: s.x0, x1: s.x1, range: xa.range, log: xa.type === 'log', right: path.right,
          panelRight: r.left + xa._offset + xa._length};
});
"""


def test_comm_has_one_label_and_the_chance_band_reaches_the_axis_end(browser, chance_page):
    """comm reads "comm (params/round/client slot)" -- the unit the header and the hover give -- on the 3D axis, on
    every projection axis and the parallel axis as drawn, in the colour choice, and in the hover label of a 3D point
    under the real mouse (before: "comm (params/round)" in 3D and 2D, "comm" on the parallel axis). The region no
    better than chance is shaded from the knee bar to the error axis' drawn end, and that end is no further than
    an error can be (1; before: the band stopped at 0.94 and the axis ran on to 1.21)."""
    from fedevo.searching.rundata import load_run

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    open_fresh(browser, page)
    got = browser.execute_script(AXIS_TITLES_JS)
    for where in ("scene", "projections", "parallel", "colour"):
        named = [t for t in got[where] if t.startswith("comm")]
        assert named and all(t.startswith(COMM) for t in named), (where, got[where])
    assert len([t for t in got["projections"] if t.startswith("comm")]) == 2  # error–comm and comm–ε
    hover = ""
    for p in pareto_positions(browser):
        hover = " ".join(hover_at(browser, p).split())
        if hover:
            break
    assert "params/round/client slot" in hover, hover

    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "projections"))
    settle(browser)
    bands = browser.execute_script(BAND_JS)
    errors = [r["error"] for r in data.ok_rows]
    assert len(bands) == 2 and not any(b["log"] for b in bands), bands  # error–comm and error–ε
    for b in bands:
        assert b["x0"] == pytest.approx(data.knee_bar)
        assert b["x1"] == pytest.approx(b["range"][1], abs=1e-9), b
        assert max(errors) < b["range"][1] <= max(1.0, max(errors) + 0.01) + 1e-9, (b, max(errors))
        assert abs(b["right"] - b["panelRight"]) <= 1.0, b  # drawn up to the panel's edge
    browser.find_element("id", "projections").screenshot(str(ARTIFACTS / "front-chance-band.png"))
    no_network_and_no_errors(browser)


OVERLAP_JS = """
// the parallel view's axis titles and the range labels above the axes, as glyph quads on screen: the pairs of a
// title and another title or label that intersect, and the titles that leave the figure (plotly clips them)
const gp = document.getElementById('parallel');
function quads(el) {
  const m = el.getScreenCTM(), out = [];
  for (let i = 0; i < el.getNumberOfChars(); i++) {
    const r = el.getExtentOfChar(i);
    if (!r.width || !r.height) continue;
    out.push([[r.x, r.y], [r.x + r.width, r.y], [r.x + r.width, r.y + r.height], [r.x, r.y + r.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]));
  }
  return out;
}
function apart(P, Q) {  // separating axis: some edge normal of either quad separates them (by half a pixel)
  for (const poly of [P, Q]) for (let i = 0; i < 4; i++) {
    const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % 4], nx = y2 - y1, ny = x1 - x2;
    const n = Math.hypot(nx, ny), p = P.map(([x, y]) => (x * nx + y * ny) / n), q = Q.map(([x, y]) => (x * nx + y * ny) / n);
    if (Math.max(...p) < Math.min(...q) + 0.5 || Math.max(...q) < Math.min(...p) + 0.5) return true;
  }
  return false;
}
const titles = Array.from(gp.querySelectorAll('.axis-title')).map(t => ({name: t.textContent, q: quads(t)}));
const others = titles.concat(Array.from(gp.querySelectorAll('.axis-extent-top-text'))
  .map(t => ({name: 'range ' + t.textContent, q: quads(t)})));
const hits = [];
titles.forEach((a, i) => others.slice(i + 1).forEach(b => {
  if (a.q.some(P => b.q.some(Q => !apart(P, Q)))) hits.push([a.name, b.name]);
}));
const box = gp.querySelector('svg.main-svg').getBoundingClientRect();
const outside = titles.filter(t => t.q.some(P => P.some(([x, y]) => y < box.top - 0.5 || x < box.left - 0.5
                                                                   || x > box.right + 0.5))).map(t => t.name);
return {hits: hits, outside: outside, titles: titles.map(t => t.name)};
"""


@pytest.mark.parametrize("width", [1000, 1600])
def test_parallel_titles_clear_of_each_other_on_a_four_objective_run(browser, four_pages, width):
    """At 1,000 and 1,600 px the parallel coordinates of the four-objective run draw every axis title -- comm with
    its unit, the worst-served clients' error -- clear of every other title and range label (glyph by glyph, as
    drawn at 30°) and inside the figure (the room above grows with the longest title)."""
    page, _, _ = four_pages
    open_fresh(browser, page)
    at_width(browser, width)
    try:
        browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "parallel"))
        settle(browser)
        got = browser.execute_script(OVERLAP_JS)
        assert any(t.startswith(COMM) for t in got["titles"]) and FOURTH_LABEL in got["titles"], got["titles"]
        assert got["hits"] == [] and got["outside"] == [], got
        browser.find_element("id", "parallel").screenshot(str(ARTIFACTS / f"front-four-parallel-{width}.png"))
    finally:
        at_width(browser, 1400)
    no_network_and_no_errors(browser)


# a front of 12 on which the knee over (error, comm, ε) is id 9 and over (error, comm, ε, ε paper) id 1: pymoo's
# high trade-off points count the objectives (their neighbourhood is min(2·m, n − 1) points)
KNEE_FRONT = [[0.057079, 4256.4, 318.4], [0.087397, 413.59, 104.03], [0.1114, 4227.4, 185.8],
              [0.086447, 922.54, 131.21], [0.50255, 1975.7, 0.71175], [0.61287, 1683.7, 0.1353],
              [0.64266, 3556.7, 0.041684], [0.67645, 992.86, 0.090194], [0.70956, 2081.3, 0.05863],
              [0.7091, 129.12, 0.090461], [0.75542, 1412.5, 0.056451], [0.79578, 2205.9, 0.013429]]


def test_the_pages_knee_counts_an_objective_no_row_defines(browser, tmp_path):
    """A problem whose objectives list ε paper beside ε, under a trust where ε paper is undefined for every
    evaluation: the page leaves ε paper out of its caps and columns, and its knee left it out too, so it chose
    another solution than `fedevo front --pick knee` while its note said 'the same as --pick knee'."""
    import fedevo
    from fedevo.viz import write_front_html

    (tmp_path / "ev.py").write_text(
        "import json\nVALUES = json.loads(" + repr(json.dumps(KNEE_FRONT)) + ")\nN = []\n"
        "def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
        "    N.append(1)\n"
        "    return tuple(VALUES[len(N) - 1])\n")
    (tmp_path / "p.toml").write_text('name = "eps_both"\nobjectives = ["error", "comm", "eps", "eps_paper"]\n'
                                     'evaluator = "python:ev.py:evaluate"\n[genes]\n'
                                     'x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    run = fedevo.search(str(tmp_path / "p.toml"), pop=12, gen=1, workers=0, seed=0, out=tmp_path / "r", page=False)
    knee = run.pick("knee")[0]["id"]
    page = write_front_html(run.path)
    open_fresh(browser, page)
    note = browser.execute_script("return document.getElementById('knee-note').textContent")
    assert knee == 1 and note.startswith(f"Chosen: id {knee} "), note
