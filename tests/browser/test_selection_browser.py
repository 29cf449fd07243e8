"""front.html's linked selection and export in headless Chromium (issue #28), read from what plotly DRAWS (the knee
caps: test_caps_browser.py):

* the parallel coordinates: the ``constraintrange`` of every dimension in ``gd._fullData`` and which lines the
  focus layer (the highlighted lines; unselected ones go to the context layer) paints where they meet the ``id``
  axis, read from the canvas pixels (`drawn_parallel`);
* the projections: ``selectedpoints`` of every panel and the lasso / box outlines left in ``layout.selections``;
* the 3D view: the ``selected`` ring trace; the knee: the ``knee`` traces of the 3D view and the projections.

Real mouse (selenium's W3C actions) for the lasso, the box, the double-click, the table click and the 3D click.
Browser fixture: tests/browser/conftest.py; skip rule and helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

import pytest

from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, MOVE_MS, drag, hover_at,
                                              no_network_and_no_errors, ok_and_front_ids, open_fresh,
                                              pareto_positions, settle, until_stable, wait_ready)
from tests.viz.fedevo_runs import synthetic_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")

DRAWN_PARALLEL_JS = """
// What the parallel coordinates draw: each dimension's constraint ranges as plotly holds them (_fullData), and
// the ids of the lines the focus layer paints at the id axis (the canvas pixels under each line's end point).
const gp = document.getElementById('parallel');
const ranges = {};
gp._fullData[0].dimensions.forEach(d => { if (d.constraintrange && d.constraintrange.length) ranges[d.label] = d.constraintrange; });
const a = Array.from(gp.querySelectorAll('.y-axis')).find(x => x.__data__ && x.__data__.label === 'id');
const ax = a.__data__;
const dom = (a.querySelector('path.domain') || a).getBoundingClientRect();
const cv = gp.querySelector('canvas.gl-canvas-focus');
const cr = cv.getBoundingClientRect(), sx = cv.width / cr.width, sy = cv.height / cr.height;
const c2 = document.createElement('canvas');
c2.width = cv.width; c2.height = cv.height;
const ctx = c2.getContext('2d');
ctx.drawImage(cv, 0, 0);
const X = Math.round((dom.left + dom.width / 2 - cr.left) * sx);
const col = ctx.getImageData(X, 0, 1, cv.height).data;
const ys = ax.values.map((v, i) => (dom.top - cr.top + dom.height * (1 - ax.paddedUnitValues[i])) * sy);
const sorted = ys.slice().sort((p, q) => p - q);
const gap = Math.min(...sorted.slice(1).map((y, k) => y - sorted[k]));
const tol = 4;
const lit = ax.values.filter((v, i) => {
  for (let y = Math.round(ys[i]) - tol; y <= Math.round(ys[i]) + tol; y++) if (y >= 0 && y < cv.height && col[y * 4 + 3] > 0) return true;
  return false;
});
return {ranges: ranges, lit: lit, gap: gap, tol: tol, n: ax.values.length};
"""


def drawn_parallel(driver) -> dict:
    """`DRAWN_PARALLEL_JS` once the parcoords drawing has settled (it paints in batches): two equal reads in a row,
    a settled frame apart."""
    driver.execute_script("arguments[0].scrollIntoView()", driver.find_element("id", "parallel"))
    got = until_stable(driver, DRAWN_PARALLEL_JS)
    assert got["gap"] > 2 * got["tol"] + 1, got  # neighbouring ids are told apart at the id axis
    return got


def id_ranges_hold(ranges: dict, ids) -> None:
    """The only brushed dimension is id, one range per selected id around it (nothing else inside)."""
    assert set(ranges) == {"id"}, ranges
    rs = ranges["id"] if isinstance(ranges["id"][0], list) else [ranges["id"]]
    assert sorted(round((lo + hi) / 2) for lo, hi in rs) == sorted(ids)
    assert all(hi - lo < 1 for lo, hi in rs), rs


STATE_JS = """
const g3 = document.getElementById('front3d'), g2 = document.getElementById('projections');
const sp = {};
g2.data.forEach(t => { if (t.meta === 'evaluations') {
  sp[t.xaxis || 'x'] = (sp[t.xaxis || 'x'] || []).concat(t.selectedpoints ? Array.from(t.selectedpoints).map(j => t.customdata[j]) : []);
  if (!t.selectedpoints) sp[(t.xaxis || 'x') + ':none'] = true; } });
return {selection: fedevoSelection(), in3d: Array.from(g3.data.find(t => t.meta === 'selection').customdata),
        sp: sp, outlines: (g2.layout.selections || []).length,
        table: Array.from(document.querySelectorAll('#selected-table tbody tr')).map(tr => Number(tr.cells[0].textContent)),
        shaded: Array.from(document.querySelectorAll('#front-table tbody tr')).filter(tr => tr.style.background).map(tr => Number(tr.cells[0].dataset.v)),
        csvDisabled: document.getElementById('export-csv').disabled};
"""


def every_view_shows(driver, ids, all_ids) -> None:
    """The 3D rings, every projection panel, the table and the parallel coordinates (as drawn) hold exactly `ids`;
    with no ids: no panel has selected points, no outline is left, no axis is brushed and every line is drawn."""
    settle(driver)
    st = driver.execute_script(STATE_JS)
    ids = sorted(ids)
    assert st["selection"] == ids, st
    assert sorted(st["in3d"]) == ids and sorted(st["table"]) == ids, st
    for axis in ("x", "x2", "x3"):
        assert sorted(st["sp"][axis]) == ids, (axis, st)
        assert (axis + ":none" in st["sp"]) == (not ids), (axis, st)
    assert st["outlines"] == 0, "a lasso / box outline is left in the projections (plotly merges it back)"
    assert st["csvDisabled"] == (not ids)
    drawn = drawn_parallel(driver)
    if ids:
        id_ranges_hold(drawn["ranges"], ids)
        assert sorted(drawn["lit"]) == ids, drawn
    else:
        assert drawn["ranges"] == {} and sorted(drawn["lit"]) == sorted(all_ids), drawn


def panel_box(driver, n: int) -> tuple[float, float, float, float]:
    """(left, top, width, height) on screen of projection panel n (1..3), scrolled into view."""
    driver.execute_script("arguments[0].scrollIntoView()", driver.find_element("id", "projections"))
    settle(driver)
    ax = "" if n == 1 else str(n)
    return tuple(driver.execute_script(
        "const g = document.getElementById('projections'), l = g._fullLayout, r = g.getBoundingClientRect();"
        f"const xa = l.xaxis{ax}, ya = l.yaxis{ax}; return [r.left + xa._offset, r.top + ya._offset, xa._length, ya._length]"))


def points_in(driver, n: int, x0: float, y0: float, x1: float, y1: float, margin: float = 2.0):
    """(ids clearly inside, ids clearly outside) the screen rectangle in panel n, from the points' pixel positions
    (plotly's own axis maps); points within `margin` px of its border are in neither."""
    ax = "" if n == 1 else str(n)
    pts = driver.execute_script(
        "const g = document.getElementById('projections'), l = g._fullLayout, r = g.getBoundingClientRect();"
        f"const xa = l.xaxis{ax}, ya = l.yaxis{ax}; const out = [];"
        f"g.data.forEach(t => {{ if (t.meta === 'evaluations' && (t.xaxis || 'x') === 'x{ax}') t.customdata.forEach((id, j) =>"
        " out.push([id, r.left + xa._offset + xa.l2p(xa.d2l(t.x[j])), r.top + ya._offset + ya.l2p(ya.d2l(t.y[j]))])); });"
        "return out;")
    lo_x, hi_x, lo_y, hi_y = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
    inside = {i for i, x, y in pts if lo_x + margin < x < hi_x - margin and lo_y + margin < y < hi_y - margin}
    outside = {i for i, x, y in pts if not (lo_x - margin <= x <= hi_x + margin and lo_y - margin <= y <= hi_y + margin)}
    return inside, outside


def lasso_rect(driver, n: int, fx0: float, fy0: float, fx1: float, fy1: float):
    """A real-mouse lasso around a rectangle (fractions of panel n); returns `points_in` of that rectangle."""
    x, y, w, h = panel_box(driver, n)
    a, b, c, d = x + w * fx0, y + h * fy0, x + w * fx1, y + h * fy1
    path = [(a, b)] + [(a + (c - a) * k / 6, b) for k in range(1, 7)] + [(c, b + (d - b) * k / 6) for k in range(1, 7)]
    path += [(c - (c - a) * k / 6, d) for k in range(1, 7)] + [(a, d - (d - b) * k / 6) for k in range(1, 7)]
    drag(driver, path)
    settle(driver)
    return points_in(driver, n, a, b, c, d)


def box_rect(driver, n: int, fx0: float, fy0: float, fx1: float, fy1: float):
    driver.execute_script("Plotly.relayout('projections', {dragmode: 'select'})")
    x, y, w, h = panel_box(driver, n)
    a, b, c, d = x + w * fx0, y + h * fy0, x + w * fx1, y + h * fy1
    drag(driver, [(a, b), ((a + c) / 2, (b + d) / 2), (c, d)])
    settle(driver)
    return points_in(driver, n, a, b, c, d)


def double_click(driver, x: float, y: float) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    ab = ActionBuilder(driver, duration=MOVE_MS)
    ab.pointer_action.move_to_location(int(x), int(y))
    ab.pointer_action.click()
    ab.pointer_action.click()
    ab.perform()
    settle(driver)


# ============================================================================================ tests
def test_selection_from_elsewhere_is_drawn_as_the_same_lines(browser, chance_page):
    """Issue #28's failing cases: ids 41 and 46 (drawn over 38–39 before) and 1 and 11 (nothing drawn before), set
    by clicks in the Pareto-set table and by the script API; then a real-mouse lasso in a projection."""
    page, run_dir, ok_ids, front_ids = chance_page
    open_fresh(browser, page)
    for ids in ([41, 46], [1, 11]):
        assert set(ids) <= set(ok_ids), "the fixture run must hold these ids"
        browser.execute_script("fedevoSelect(arguments[0])", ids)
        every_view_shows(browser, ids, ok_ids)
    browser.find_element("id", "clear-selection").click()
    every_view_shows(browser, [], ok_ids)

    # a click on a row of the Pareto-set table adds that id; a second click drops it
    rows = [i for i in sorted(front_ids)][:2]
    for i in rows:
        tr = browser.find_element("xpath", f"//table[@id='front-table']/tbody/tr[td[1][@data-v='{i}']]")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", tr)
        tr.find_element("tag name", "td").click()
    every_view_shows(browser, rows, ok_ids)
    assert sorted(browser.execute_script(STATE_JS)["shaded"]) == rows
    tr.find_element("tag name", "td").click()
    every_view_shows(browser, rows[:1], ok_ids)
    browser.find_element("id", "clear-selection").click()

    # a lasso with the mouse in the error-vs-ε panel: exactly the points inside, drawn as those lines
    inside, outside = lasso_rect(browser, 2, 0.05, 0.05, 0.6, 0.6)
    sel = browser.execute_script("return fedevoSelection()")
    assert sel and inside <= set(sel) and not (set(sel) & outside), (sel, inside, outside)
    every_view_shows(browser, sel, ok_ids)
    browser.find_element("id", "parallel").screenshot(str(ARTIFACTS / "front-parallel-lasso.png"))
    no_network_and_no_errors(browser)


@pytest.mark.parametrize("how", ["double-click", "button"])
def test_clear_empties_every_view_and_the_next_box_does_not_merge(browser, chance_page, how):
    """A lasso in panel 2, then clear (a real double-click in panel 1, or the clear button): nothing is selected
    anywhere, no outline is left; a box in panel 1 then selects exactly its own points, in every panel."""
    page, run_dir, ok_ids, _ = chance_page
    open_fresh(browser, page)
    lasso_rect(browser, 2, 0.05, 0.05, 0.6, 0.6)
    before = browser.execute_script("return fedevoSelection()")
    assert before
    every_view_shows(browser, before, ok_ids)
    if how == "double-click":
        x, y, w, h = panel_box(browser, 1)
        double_click(browser, x + w * 0.9, y + h * 0.9)
    else:
        browser.find_element("id", "clear-selection").click()
    every_view_shows(browser, [], ok_ids)

    inside, outside = box_rect(browser, 1, 0.35, 0.02, 0.98, 0.98)
    sel = browser.execute_script("return fedevoSelection()")
    assert sel and inside <= set(sel) and not (set(sel) & outside), (sel, inside, outside)
    assert set(before) - set(sel) - inside, "the box must leave out some of the lasso's ids for this test to tell"
    every_view_shows(browser, sel, ok_ids)
    browser.execute_script("Plotly.relayout('projections', {dragmode: 'lasso'})")
    no_network_and_no_errors(browser)


def test_3d_click_selects_the_point(browser, chance_page):
    """A real mouse press on a Pareto point of the 3D view (software WebGL) selects it; a second press drops it.
    gl3d emits plotly_click from its render loop only while the button is down, so the press lasts 0.3 s."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    page, run_dir, ok_ids, _ = chance_page
    open_fresh(browser, page)
    browser.execute_script("document.getElementById('front3d').scrollIntoView({block: 'center'})")  # the view, wherever the header ends

    def press():
        ab = ActionBuilder(browser)
        ab.pointer_action.pointer_down()
        ab.pointer_action.pause(0.3)
        ab.pointer_action.pointer_up()
        ab.perform()
        settle(browser)

    for p in pareto_positions(browser):
        m = re.search(r"id (\d+) ", hover_at(browser, p))
        if not m:
            continue
        hovered = int(m.group(1))
        press()
        every_view_shows(browser, [hovered], ok_ids)
        browser.execute_script("document.getElementById('front3d').scrollIntoView({block: 'center'})")  # the view, wherever the header ends
        settle(browser)
        hover_at(browser, p)  # the pointer back on the point (its hover label shows within 2 s)
        press()
        every_view_shows(browser, [], ok_ids)
        break
    else:
        raise AssertionError("no hover label appeared over any Pareto point of the 3D view")
    no_network_and_no_errors(browser)


CAPTURE_JS = """
// the page's download as text: the anchor's click is caught (no file is written) and its blob read back
window.__dl = [];
HTMLAnchorElement.prototype.click = function () { window.__dl.push({href: this.href, name: this.download}); };
"""


def _download(driver, button: str) -> tuple[str, str]:
    driver.find_element("id", button).click()
    got = driver.execute_async_script(
        "const done = arguments[arguments.length - 1]; const d = window.__dl.pop();"
        "fetch(d.href).then(r => r.text()).then(t => done([d.name, t]));")
    return got[0], got[1]


def test_export_csv_and_json_hold_the_selected_rows(browser, tmp_path_factory):
    """The CSV and JSON buttons download exactly the selected rows with every column of the table and every gene,
    raw values as in evaluations.csv (ε = ∞ written "inf")."""
    from fedevo.viz import write_front_html

    run_dir = synthetic_run(tmp_path_factory)
    page = write_front_html(run_dir)
    _, _, ev = ok_and_front_ids(run_dir)
    ok = {int(r["id"]): r for r in ev if r["status"] == "ok"}
    open_fresh(browser, page)
    genes = browser.execute_script("return FEDEVO.genes")
    inf_ids = [i for i, r in ok.items() if r["eps"] == "inf"]
    assert inf_ids, "the fixture must have ε = ∞ rows"
    ids = sorted([inf_ids[0]] + [i for i in ok if i not in inf_ids][:4])
    browser.execute_script("fedevoSelect(arguments[0])", ids)
    browser.execute_script(CAPTURE_JS)
    headers = browser.execute_script("return Array.from(document.querySelectorAll('#selected-table thead th'))"
                                      ".map(th => th.textContent)")

    name, text = _download(browser, "export-csv")
    assert name.endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(int(r["id"]) for r in rows) == ids
    cols = list(rows[0])
    assert len(cols) == len(headers) and set(genes) <= set(cols)
    assert {"id", "generation", "on_front", "mark", "error", "accuracy_global", "comm", "eps", "eps_paper"} <= set(cols)
    for r in rows:
        src = ok[int(r["id"])]
        for k in ("error", "comm", "eps", "eps_paper", *genes):
            try:
                assert float(r[k]) == pytest.approx(float(src[k]), rel=1e-12), (k, r[k], src[k])
            except ValueError:
                assert r[k] == src[k], (k, r[k], src[k])  # a choice gene
    assert next(r for r in rows if int(r["id"]) == inf_ids[0])["eps"] == "inf"

    name, text = _download(browser, "export-json")
    assert name.endswith(".json")
    got = json.loads(text)  # strict JSON: no Infinity / NaN literals
    assert sorted(r["id"] for r in got) == ids and set(got[0]) == set(cols)
    assert next(r for r in got if r["id"] == inf_ids[0])["eps"] == "inf"
    assert all(r["error"] == pytest.approx(float(ok[r["id"]]["error"]), rel=1e-12) for r in got)
    no_network_and_no_errors(browser)


DIMMED_JS = """
// what plotly draws for the caps: per id, whether its marker (3D, each projection) and its line (parallel) has the
// colour value below the scale (drawn grey), the ids of the rings, the rows of the Pareto table greyed, its marks
const g3 = document.getElementById('front3d'), g2 = document.getElementById('projections');
const gp = document.getElementById('parallel');
const out = {views: {}, rings: {}};
const dimOn = cs => Array.isArray(cs) && cs.length > 0 && cs[0][1] === '#d2d2d2';  // the page's grey below the scale
[['3d', g3], ['2d', g2]].forEach(([name, gd]) => gd._fullData.forEach(t => {
  if (t.meta === 'evaluations') {
    const key = name + (t.xaxis || '');
    out.views[key] = out.views[key] || {};
    Array.from(t.customdata).forEach((id, j) => {
      out.views[key][id] = dimOn(t.marker.colorscale) && t.marker.color[j] <= t.marker.cmin; });
  }
  if (t.meta === 'mark') out.rings[name + ':' + t.name + (t.xaxis || '')] = Array.from(t.customdata);
}));
const pl = gp._fullData[0].line;
out.views.parallel = {};
FEDEVO.rows.forEach((r, i) => { out.views.parallel[r.id] = dimOn(pl.colorscale) && pl.color[i] <= pl.cmin; });
out.grey = Array.from(document.querySelectorAll('#front-table tbody tr.outside')).map(tr => Number(tr.cells[0].dataset.v));
const mc = Array.from(document.querySelectorAll('#front-table thead th')).findIndex(th => th.textContent === 'mark');
out.marks = Object.fromEntries(Array.from(document.querySelectorAll('#front-table tbody tr'))
  .map(tr => [tr.cells[0].dataset.v, tr.cells[mc].textContent]).filter(x => x[1]));
out.note = document.getElementById('knee-note').textContent;
return out;
"""


def _pick_ids(data, spec):
    from fedevo.errors import FedevoError

    try:
        return [p.id for p in data.pick(spec)]
    except FedevoError:
        return []


def test_a_restored_state_is_drawn_in_the_views_drawn_after_the_first_screen(browser, chance_page):
    """The projections and the parallel coordinates are drawn after the page is interactive: a page that restores a
    colour, caps and a selection (what the live reload keeps) before they are drawn draws them there as well -- the
    same rings, dimming, colour bars, marks and selected ids in every view as the page that set them."""
    from fedevo.searching.rundata import load_run

    page, run_dir, ok_ids, _ = chance_page
    data = load_run(run_dir)
    ek = data.eps_key
    open_fresh(browser, page)
    eps = sorted(r[ek] for r in data.front if math.isfinite(r[ek]))
    caps = {ek: eps[len(eps) // 2]}
    inside = sorted(r["id"] for r in data.ok_rows if r[ek] <= caps[ek])
    ids = inside[:3]
    assert len(ids) == 3 and len(inside) < len(ok_ids), "the caps must dim some evaluations for this test to tell"
    browser.execute_script("fedevoColour('sigma'); fedevoCaps(arguments[0], 'lowest-error')", caps)
    browser.execute_script("fedevoSelect(arguments[0])", ids)
    every_view_shows(browser, ids, ok_ids)
    bars = ("return [document.getElementById('projections').data.find(t => t.marker && t.marker.showscale)"
            ".marker.colorbar.title.text, document.getElementById('parallel')._fullData[0].line.colorbar.title.text]")
    before = (browser.execute_script(DIMMED_JS), browser.execute_script(bars))
    assert before[1] == ["gene sigma (log)"] * 2, before[1]
    browser.refresh()  # sessionStorage kept: the page restores colour, caps and selection at once
    wait_ready(browser)
    every_view_shows(browser, ids, ok_ids)
    after = (browser.execute_script(DIMMED_JS), browser.execute_script(bars))
    assert after == before
    assert any(after[0]["views"]["parallel"].values()) and any(after[0]["views"]["2dx2"].values())
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


