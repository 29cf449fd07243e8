"""front.html in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, driven by selenium)
opens the page from disk with the network off, reads the plotly graph divs, hovers points, takes screenshots.

Needs:  apt-get install -y chromium chromium-driver   and   pip install selenium
Skipped (with that reason) only when chromium itself is not installed; chromium without chromedriver or
selenium is a failure, so a CI that installs chromium always runs this test.
Screenshots are kept in test-artifacts/ (git-ignored) at the repository root.
One Chromium serves every browser test of a session (the `browser` fixture, tests/browser/conftest.py).
"""

from __future__ import annotations

import csv
import math
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.viz.fedevo_runs import digits_run, synthetic_run

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         # WebGL (plotly's 3D) on the CPU without a GPU; the host rules make any network lookup fail
         "--enable-unsafe-swiftshader", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--window-size=1400,1000", "--force-device-scale-factor=1", "--hide-scrollbars"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver; pip install selenium)")


def open_page(driver, path: Path, div: str) -> None:
    driver.get(path.resolve().as_uri())
    wait_drawn(driver, path, div)


def wait_drawn(driver, path: Path, div: str) -> None:
    """Until plotly has drawn graph #div of the page open (`path`: for the message)."""
    t0 = time.time()
    while time.time() - t0 < 30:
        if driver.execute_script(f"const g = document.getElementById('{div}'); "
                                 "return !!(window.Plotly && g && g._fullLayout && g.data);"):
            return
        time.sleep(0.1)
    raise AssertionError(f"{path}: plotly graph #{div} did not render in 30 s")


def no_network_and_no_errors(driver) -> None:
    remote = driver.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name).filter(n => !n.startsWith('file:') "
        "&& !n.startsWith('data:') && !n.startsWith('blob:'))")
    assert remote == [], f"the page tried to load {remote}"
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == [], severe


def hover_text(driver, div: str) -> str:
    return driver.execute_script(
        f"return Array.from(document.querySelectorAll('#{div} .hovertext')).map(e => e.textContent).join('\\n')")


PROJECT_JS = """
// screen position of point k of trace `name` in the 3D scene (plotly's own camera matrices)
const gd = document.getElementById('front3d');
const sc = gd._fullLayout.scene._scene, fl = sc.fullSceneLayout, ds = sc.dataScale, cp = sc.glplot.cameraParams;
function mul(m, v) { const r = [0, 0, 0, 0]; for (let i = 0; i < 4; i++) for (let n = 0; n < 4; n++) r[n] += m[4*i+n]*v[i]; return r; }
const t = gd.data.find(t => t.name === arguments[0]), k = arguments[1];
const p = [fl.xaxis.d2l(t.x[k]) * ds[0], fl.yaxis.d2l(t.y[k]) * ds[1], fl.zaxis.d2l(t.z[k]) * ds[2], 1];
const c = mul(cp.projection, mul(cp.view, mul(cp.model, p)));
const rect = sc.container.getBoundingClientRect();
return {id: t.customdata[k], x: rect.left + (c[0]/c[3] + 1) / 2 * rect.width,
        y: rect.top + (1 - c[1]/c[3]) / 2 * rect.height, n: t.x.length};
"""


def ok_and_front_ids(run_dir: Path):
    with open(run_dir / "evaluations.csv", newline="") as f:
        ev = list(csv.DictReader(f))
    with open(run_dir / "front.csv", newline="") as f:
        front = {int(r["id"]) for r in csv.DictReader(f)}
    return {int(r["id"]) for r in ev if r["status"] == "ok"}, front, ev


# Pointer moves of the tests' real-mouse actions are instant (duration 0): selenium's default, 250 ms a move, made
# every move a quarter second of waiting (a brush of 11 moves: 2.75 s) and the page redraw at each step chromedriver
# interpolated; the pointer still passes through every point a test names, down, moving and up as a user's would.
MOVE_MS = 0


def mouse_to(driver, x: float, y: float) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    ab = ActionBuilder(driver, duration=MOVE_MS)
    ab.pointer_action.move_to_location(int(round(x)), int(round(y)))
    ab.perform()


def pareto_positions(driver) -> list[dict]:
    """Screen position (and id) of every point of the 3D view's Pareto-front trace."""
    n = driver.execute_script(PROJECT_JS, "Pareto front", 0)["n"]
    return [driver.execute_script(PROJECT_JS, "Pareto front", k) for k in range(n)]


def hover_at(driver, p: dict, wait: float = 2.0) -> str:
    """A real mouse move onto screen point `p` of the 3D view (from 3 px to its left, so that the pointer moves);
    the 3D hover label's text once one shows within `wait` seconds, else ''."""
    mouse_to(driver, p["x"] - 3, p["y"])
    mouse_to(driver, p["x"], p["y"])
    t0 = time.time()
    while time.time() - t0 < wait and not hover_text(driver, "front3d"):
        time.sleep(0.05)
    return hover_text(driver, "front3d")


def test_front_html_renders_and_hovers(browser, tmp_path_factory):
    from fedevo.viz import write_front_html

    run_dir = digits_run(tmp_path_factory)
    page = write_front_html(run_dir)
    ok_ids, front_ids, _ = ok_and_front_ids(run_dir)
    open_fresh(browser, page)  # every view drawn (the first screen is interactive before the others are drawn)
    for div in ("projections", "parallel", "hypervolume"):
        assert browser.execute_script(f"return !!document.getElementById('{div}')._fullLayout")

    # the 3D scatter: one point per evaluation (status ok), the front as its own trace, drawn with WebGL
    traces = browser.execute_script(
        "return document.getElementById('front3d').data.map(t => ({name: t.name, meta: t.meta, type: t.type, "
        "ids: Array.from(t.customdata || [])}))")
    ev = [t for t in traces if t["meta"] == "evaluations"]
    assert all(t["type"] == "scatter3d" for t in ev)
    plotted = [i for t in ev for i in t["ids"]]
    assert sorted(plotted) == sorted(ok_ids)
    assert set(next(t for t in ev if t["name"] == "Pareto front")["ids"]) == front_ids
    assert browser.execute_script(
        "const g = document.getElementById('front3d'); return !!g._fullLayout.scene._scene.glplot "
        "&& g.querySelectorAll('canvas').length > 0 && !g.querySelector('.no-webgl');"), "no WebGL 3D scene"

    # a real mouse move onto a Pareto point of the 3D scene shows its hover label with its id
    positions = pareto_positions(browser)
    hovered = None
    for p in positions:
        text = hover_at(browser, p)
        if text:
            m = re.search(r"id (\d+) ", text)
            assert m, text
            near = {q["id"] for q in positions if math.hypot(q["x"] - p["x"], q["y"] - p["y"]) < 10}
            assert int(m.group(1)) in near | {p["id"]}, (text, p)
            assert "ε (accountant)" in text and "ε (paper)" in text and "units = " in text
            hovered = p
            break
    assert hovered is not None, "no hover label appeared over any Pareto point of the 3D plot"
    browser.save_screenshot(str(ARTIFACTS / "front-3d-hover.png"))

    # 2D projections: Plotly.Fx.hover on a point shows its id
    pid = browser.execute_script(
        "const g = document.getElementById('projections'); const c = g.data.findIndex(t => t.meta === 'evaluations');"
        "Plotly.Fx.hover(g, [{curveNumber: c, pointNumber: 0}], 'xy'); return g.data[c].customdata[0];")
    settle(browser)
    assert f"id {pid} " in hover_text(browser, "projections")

    # the parallel coordinates hold every ok evaluation; the hypervolume one point per generation
    n_lines = browser.execute_script("return document.getElementById('parallel').data[0].dimensions[0].values.length")
    assert n_lines == len(ok_ids)
    gens = browser.execute_script(
        "return document.getElementById('hypervolume').data.find(t => t.name === 'hypervolume').x.length")
    assert gens == 2  # the digits run has 2 generations
    no_network_and_no_errors(browser)


def test_capped_eps_and_failed_rows_in_browser(browser, tmp_path_factory):
    from fedevo.viz import write_front_html

    run_dir = synthetic_run(tmp_path_factory)
    page = write_front_html(run_dir)
    ok_ids, _, ev = ok_and_front_ids(run_dir)
    open_fresh(browser, page)
    got = browser.execute_script(
        "return document.getElementById('front3d').data.filter(t => t.meta === 'evaluations')"
        ".flatMap(t => Array.from(t.customdata).map((id, k) => [id, t.z[k]]))")
    assert sorted(i for i, _ in got) == sorted(ok_ids)
    assert all(isinstance(z, (int, float)) and math.isfinite(z) for _, z in got)
    body = browser.execute_script("return document.body.innerText")
    assert "drawn at the cap" in body and "Not plotted: failed or diverged" in body
    n_bad = sum(r["status"] != "ok" for r in ev)
    assert f"({n_bad})" in body
    browser.save_screenshot(str(ARTIFACTS / "front-synthetic.png"))
    no_network_and_no_errors(browser)


def test_retrain_curves_page(browser, tmp_path_factory, tmp_path):
    from fedevo.retraining import retrain

    run_dir = digits_run(tmp_path_factory)
    rep = retrain(run_dir, "knee,lowest-error:1", rounds=3, workers=0, out=tmp_path / "rt")
    open_page(browser, tmp_path / "rt" / "curves.html", "curves")
    traces = browser.execute_script(
        "return document.getElementById('curves').data.map(t => [t.name, t.x.length, t.meta])")
    curves = [(n, k) for n, k, m in traces if m == "curve"]
    assert len(curves) == 2 * len(rep.solutions) and all(k == 3 for _, k in curves)
    assert any(name.startswith("standard") for name, _ in curves)
    browser.save_screenshot(str(ARTIFACTS / "retrain-curves.png"))
    no_network_and_no_errors(browser)


# ============================================================================================ decide from it
def wait_ready(driver) -> None:
    """Until front.html has every view drawn and linked (`fedevoReady`; the first screen is interactive before)."""
    t0 = time.time()
    while not driver.execute_script("return !!window.fedevoReady"):
        assert time.time() - t0 < 20, "the page's script did not start"
        time.sleep(0.05)


def open_fresh(driver, page: Path) -> None:
    """Open front.html `page` with none of the state an earlier test left (the page keeps selection, caps and colour
    per run in sessionStorage, which every file:// page of the tab shares: cleared from the page before, so the page
    loads once) and wait until every view is drawn."""
    if not driver.current_url.startswith("file:"):
        open_page(driver, page, "front3d")  # sessionStorage of file:// pages is reachable from such a page only
    driver.execute_script("sessionStorage.clear()")
    open_page(driver, page, "front3d")
    wait_ready(driver)
    assert driver.execute_script("return fedevoSelection()") == []


SETTLE_JS = """
const done = arguments[arguments.length - 1];
requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 30)));
"""


def settle(driver) -> None:
    """Until the page has run what the last action queued (plotly's events, the page's timeouts and deferred
    redraws) and painted two frames: the wait after a mouse action, a scroll or a script call."""
    driver.execute_async_script(SETTLE_JS)


def until_stable(driver, js: str, *args, timeout: float = 10.0):
    """`js`'s result once two reads a settled frame apart agree (plotly draws some views over several frames)."""
    last, t0 = None, time.time()
    while time.time() - t0 < timeout:
        settle(driver)
        got = driver.execute_script(js, *args)
        if got == last:
            return got
        last = got
    raise AssertionError(f"the page did not settle: {last}")


def drag(driver, points) -> None:
    """A real-mouse drag through `points` (screen px): press at the first, move to each of the others, release at the
    last. Each move is its own action, sent once the page has handled the one before and drawn (`settle`): Chromium
    merges the mouse moves that arrive within one frame into the last, which left a lasso its two ends, while a hand
    (or selenium's 250 ms moves) gives the page every point in turn."""
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    def act(step) -> None:
        ab = ActionBuilder(driver, duration=MOVE_MS)
        step(ab.pointer_action)
        ab.perform()

    act(lambda pa: pa.move_to_location(int(points[0][0]), int(points[0][1])).pointer_down())
    for x, y in points[1:]:
        act(lambda pa: pa.move_to_location(int(x), int(y)))
        settle(driver)
    act(lambda pa: pa.pointer_up())


FIND_AXIS_JS = r"""
// the parallel axis named by arguments[0]: an objective's or gene's key (FEDEVO.parallel, in the dimensions' order),
// its title as drawn ("latency (ms) (log)"), that title without " (log)" / " (∞ on top)", or its short label;
// [index, title, log] (index -1: none, with the titles and keys there are)
const gp = document.getElementById('parallel'), dims = gp.data[0].dimensions, q = arguments[0];
const P = (window.FEDEVO && window.FEDEVO.parallel) || [];
const bare = s => s.replace(/ \((?:log|(?:log, )?(?:∞|missing) on top)\)$/, '');
const tries = [k => P[k] && P[k].key === q, k => dims[k].label === q, k => bare(dims[k].label) === q,
               k => P[k] && P[k].label === q];
for (const t of tries) {
  const k = dims.findIndex((d, i) => t(i));
  if (k >= 0) return [k, dims[k].label, !!(P[k] && P[k].log)];
}
return [-1, dims.map(d => d.label), P.map(p => p.key)];
"""


def find_axis(driver, name: str) -> tuple[int, str, bool]:
    """(index, title, log) of the parallel-coordinates axis `name`: an objective's or gene's key ("latency", "eps"),
    its drawn title ("latency (ms)", "ε (log)"), that title without its "(log)", or its short label. Titles carry
    units and "(log)", so a key is the robust name; AssertionError naming what there is when none matches."""
    k, title, log = driver.execute_script(FIND_AXIS_JS, name)
    if k < 0:
        raise AssertionError(f"no parallel axis {name!r}: keys {log}, titles {title}")
    return k, title, log


def axis_geometry(driver, label: str) -> tuple[float, float, float, float, float]:
    """(x, top, height, range low, range high) of the parallel-coordinates axis `label` (a key or title, see
    find_axis) on screen (its domain line), scrolled into view; the range is the dimension's (log10 of the value on
    a log axis), else its values' min and max."""
    el = driver.find_element("id", "parallel")
    driver.execute_script("arguments[0].scrollIntoView()", el)
    settle(driver)
    k = find_axis(driver, label)[0]
    return tuple(driver.execute_script(
        "const gp = document.getElementById('parallel'); const k = arguments[0]; const dim = gp.data[0].dimensions[k];"
        "const a = Array.from(gp.querySelectorAll('.y-axis')).find(x => x.__data__ && x.__data__.xIndex === k);"
        "const line = a.querySelector('path.domain') || a; const r = line.getBoundingClientRect();"
        "const rg = dim.range || [Math.min(...dim.values), Math.max(...dim.values)];"
        "return [r.left + r.width / 2, r.top, r.height, rg[0], rg[1]];", k))


def brush_axis(driver, label: str, start: float, end: float, geometry=None) -> None:
    """Drag with the mouse along the parallel-coordinates axis `label` from `start` to `end`, fractions of its height
    from the top (geometry: `axis_geometry`'s, when the caller has it)."""
    x, top, h, _, _ = geometry or axis_geometry(driver, label)
    drag(driver, [(x, top + h * (start + (end - start) * k / 10)) for k in range(11)])
    settle(driver)


SELECTION_STATE_JS = """
const g3 = document.getElementById('front3d'), g2 = document.getElementById('projections');
const sel3 = g3.data.find(t => t.meta === 'selection');
const in2d = [];
g2.data.forEach(t => { if (t.meta === 'evaluations' && t.selectedpoints)
  t.selectedpoints.forEach(j => in2d.push([t.xaxis || 'x', t.customdata[j]])); });
const gp = document.getElementById('parallel');
const idDim = gp.data[0].dimensions.find(d => d.label === 'id');
const rows = Array.from(document.querySelectorAll('#selected-table tbody tr')).map(tr => Number(tr.cells[0].textContent));
return {selection: fedevoSelection(), in3d: Array.from(sel3.customdata), in2d: in2d,
        idRanges: idDim.constraintrange || null, table: rows,
        cmd: document.getElementById('retrain-cmd').textContent};
"""


def check_linked(driver, ids, run_dir) -> None:
    st = driver.execute_script(SELECTION_STATE_JS)
    assert st["selection"] == sorted(ids) and ids, st
    assert sorted(st["in3d"]) == sorted(ids)
    for axis in ("x", "x2", "x3"):
        assert sorted(i for a, i in st["in2d"] if a == axis) == sorted(ids), axis
    assert sorted(st["table"]) == sorted(ids)
    # the run by its absolute path (it works from any directory) and the rounds retrain trains for
    assert st["cmd"] == f"fedevo retrain {Path(run_dir).resolve()} --pick {','.join(map(str, sorted(ids)))} --rounds 150"


def test_chance_knee_log_axes_and_linked_selection(browser, chance_page):
    """The acceptance of issue 18 in a real browser: no knee at or below chance on a run that has such
    points; log axes where declared; brushing and lasso select the same ids in every view; the table shows the
    retrain command; readable numbers; no console error."""
    page, run_dir, _, _ = chance_page
    _, front_ids, ev = ok_and_front_ids(run_dir)
    err = {int(r["id"]): float(r["error"]) for r in ev if r["status"] == "ok"}
    assert any(err[i] >= 0.9 for i in front_ids), "the fixture must have Pareto points at or above chance"
    open_fresh(browser, page)

    # the knee: below chance, in 3D and 2D; the region at or above chance is shaded and named
    knees = browser.execute_script(
        "return ['front3d', 'projections'].flatMap(d => document.getElementById(d).data"
        ".filter(t => t.name === 'knee').flatMap(t => Array.from(t.customdata)))")
    assert knees and all(err[i] < 0.9 for i in knees), knees
    shapes = browser.execute_script("return document.getElementById('projections').layout.shapes"
                                    ".map(s => [s.xref, s.x0])")
    bar = 0.9 - 2.326 * (0.9 * 0.1 / 360) ** 0.5  # chance minus the 99 % margin of digits' 360 test images
    assert [k for k, _ in sorted(shapes)] == ["x", "x2"] and all(abs(v - bar) < 1e-9 for _, v in shapes)
    body = browser.execute_script("return document.body.innerText")
    assert "clearly better than chance: error < 0.863" in body and "never the knee" in body

    # log axes: ε (searched on log10) in 2D and 3D, the declared-log gene sigma in the parallel coordinates
    types = browser.execute_script(
        "const g = document.getElementById('projections')._fullLayout, s = document.getElementById('front3d')"
        "._fullLayout.scene; return [g.xaxis.type, g.yaxis2.type, g.yaxis3.type, s.zaxis.type]")
    assert types == ["linear", "log", "log", "log"]
    dims = browser.execute_script("return document.getElementById('parallel').data[0].dimensions"
                                  ".map(d => [d.label, d.tickvals || null])")
    assert next(lab for lab, _ in dims if lab.startswith("sigma")) == "sigma (log)"  # labelled in its units
    # plotly snaps a brush to explicit tick values (issue #28): continuous axes, the id axis included, have none
    snapping = [lab for lab, tv in dims if tv and lab != "Pareto"]
    assert not snapping, snapping

    # the header states the fixed privacy settings once, the hover the per-point trust / deployment
    assert "privacy and deployment (fixed): mechanism update" in body
    hov = browser.execute_script("return document.getElementById('front3d').data.find(t => t.name === "
                                 "'Pareto front').text[0]")
    assert "trust central" in hov and "population 10k" in hov and "cohort 100" in hov

    # brush a range on the error axis of the parallel coordinates with the mouse
    brush_axis(browser, "error", 0.55, 0.95)
    cr = browser.execute_script("return document.getElementById('parallel').data[0].dimensions"
                                ".find(d => d.label === 'error').constraintrange")
    assert cr, "the drag did not brush the error axis"
    ranges = cr if isinstance(cr[0], list) else [cr]
    want = sorted(i for i, e in err.items() if any(min(r) <= e <= max(r) for r in ranges))
    check_linked(browser, want, run_dir)
    browser.find_element("id", "selection").screenshot(str(ARTIFACTS / "front-selection.png"))

    # box-select in the first 2D projection: the parallel coordinates then brush exactly those ids
    browser.find_element("id", "clear-selection").click()
    assert browser.execute_script("return fedevoSelection()") == []
    browser.execute_script("Plotly.relayout('projections', {dragmode: 'select'})")
    g2 = browser.find_element("id", "projections")
    browser.execute_script("arguments[0].scrollIntoView()", g2)
    settle(browser)
    box = browser.execute_script(
        "const g = document.getElementById('projections'), l = g._fullLayout, r = g.getBoundingClientRect();"
        "const xa = l.xaxis, ya = l.yaxis; return [r.left + xa._offset, r.top + ya._offset, xa._length, ya._length]")
    x0, y0, w, hh = box
    drag(browser, [(x0 + w * 0.02, y0 + hh * 0.02), (x0 + w * 0.3, y0 + hh * 0.5), (x0 + w * 0.55, y0 + hh * 0.98)])
    settle(browser)
    picked = browser.execute_script("return fedevoSelection()")
    assert picked, "the box selected nothing"
    check_linked(browser, picked, run_dir)
    st = browser.execute_script(SELECTION_STATE_JS)
    got = sorted(round((a + b) / 2) for a, b in st["idRanges"])
    assert got == sorted(picked)  # the parallel coordinates brush the id axis to exactly the selection

    # colour by a gene: every view follows; the colour bar's labels are readable
    browser.execute_script("fedevoColour('sigma')")
    bar = browser.execute_script(
        "const t = document.getElementById('projections').data.find(t => t.marker && t.marker.showscale);"
        "return [t.marker.colorbar.title.text, t.marker.colorbar.ticktext]")
    assert bar[0] == "gene sigma (log)" and all("e+" not in t for t in bar[1])
    no_network_and_no_errors(browser)


def test_page_follows_a_running_search(browser, tmp_path):
    """A short search in a subprocess (slowed fake evaluations): the page open in the browser reloads itself
    and shows more evaluations after a later generation; `fedevo plot --watch` rewrites it and returns at the
    end."""
    import subprocess

    from tests.searching.search_helpers import FAKE, cli_cmd, env

    out = tmp_path / "live"
    search = subprocess.Popen(cli_cmd("search", "--pop", 6, "--gen", 4, "--workers", 0, "--seed", 5, "--out", out,
                                      "--quiet", "--evaluator", FAKE),
                              cwd=REPO, env=env(FAKE_SLEEP=0.5), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    watch = None
    try:
        page = out / "front.html"
        t0 = time.time()
        while not page.exists():
            assert search.poll() is None, search.communicate()
            assert time.time() - t0 < 120, "no front.html after the first generation"
            time.sleep(0.2)
        watch = subprocess.Popen(cli_cmd("plot", out, "--watch", "--interval", 0.3), cwd=REPO, env=env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        open_fresh(browser, page)
        n0 = browser.execute_script("return FEDEVO.rows.length")
        complete0 = browser.execute_script("return FEDEVO.complete")
        assert not complete0 and n0 < 24
        body = browser.execute_script("return document.body.innerText")
        assert "still running" in body
        t0 = time.time()
        n1 = n0
        while time.time() - t0 < 120:
            time.sleep(0.5)
            try:
                n1 = browser.execute_script("return window.fedevoReady && FEDEVO.rows.length")
            except Exception:  # noqa: BLE001 - mid-reload
                continue
            if n1 and n1 > n0:
                break
        assert n1 and n1 > n0, "the open page did not reload with newer evaluations"
        assert search.wait(timeout=180) == 0, search.communicate()
        w_out, w_err = watch.communicate(timeout=60)
        assert watch.returncode == 0, w_err
        assert "wrote" in w_out and "the run is complete" in w_err
        writes = [ln for ln in w_out.splitlines() if ln.startswith("wrote")]
        assert len(writes) >= 2 and "24 evaluations" in writes[-1], w_out
        t0 = time.time()
        while time.time() - t0 < 30:  # the final page says complete and stops polling
            try:
                if browser.execute_script("return window.fedevoReady && FEDEVO.complete"):
                    break
            except Exception:  # noqa: BLE001
                pass
            time.sleep(0.5)
        assert browser.execute_script("return FEDEVO.rows.length") == 24
        no_network_and_no_errors(browser)
    finally:
        for p in (search, watch):
            if p is not None and p.poll() is None:
                p.kill()


def test_error_brush_from_bottom_selects_every_error_below(browser, chance_page):
    """Issue #28: a real-mouse drag from below the bottom of the error axis up to the pixel of error 0.45 keeps every
    solution with error up to the dragged value (no snapping to tick marks; values below the lowest tick brushable)."""
    page, run_dir, _, _ = chance_page
    _, _, ev = ok_and_front_ids(run_dir)
    err = {int(r["id"]): float(r["error"]) for r in ev if r["status"] == "ok"}
    open_fresh(browser, page)
    x, top, h, lo, hi = axis_geometry(browser, "error")
    frac = (hi - 0.45) / (hi - lo)  # fraction of the height from the top where error 0.45 is drawn
    assert 0.05 < frac < 0.95, (lo, hi)
    # from 3 px below the axis' bottom end (the brush is exact since issue #36: the bottom pixel itself is the
    # lowest value of the axis, which a pointer on whole pixels may land just above)
    bottom = top + h + 3
    drag(browser, [(x, bottom - (bottom - (top + h * frac)) * k / 10) for k in range(11)])
    settle(browser)
    cr = browser.execute_script("return document.getElementById('parallel')._fullData[0].dimensions"
                                ".find(d => d.label === 'error').constraintrange")
    assert cr, "the drag did not brush the error axis"
    ranges = cr if isinstance(cr[0], list) else [cr]
    assert len(ranges) == 1 and min(ranges[0]) <= min(err.values())
    px = (hi - lo) / h * 3  # three pixels of value
    assert abs(max(ranges[0]) - 0.45) < px, ranges  # the brush ends where the mouse let go, not at a tick
    want = sorted(i for i, e in err.items() if e <= max(ranges[0]))
    assert want and any(e <= 0.2 for e in err.values())
    check_linked(browser, want, run_dir)
