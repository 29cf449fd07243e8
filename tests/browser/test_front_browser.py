"""front.html in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, driven by selenium)
opens the page from disk with the network off, reads the plotly graph divs, hovers points, takes screenshots.

Needs:  apt-get install -y chromium chromium-driver   and   pip install selenium
Skipped (with that reason) only when chromium itself is not installed; chromium without chromedriver or
selenium is a failure, so a CI that installs chromium always runs this test.
Screenshots are kept in test-artifacts/ (git-ignored) at the repository root.
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


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("chromium is installed but selenium is not: pip install selenium")
    if not os.path.exists(CHROMEDRIVER):
        pytest.fail("chromium is installed but chromedriver is not: apt-get install chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    driver.set_script_timeout(30)
    ARTIFACTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


def open_page(driver, path: Path, div: str) -> None:
    driver.get(path.resolve().as_uri())
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


def mouse_to(driver, x: float, y: float) -> None:
    from selenium.webdriver.common.actions.action_builder import ActionBuilder

    ab = ActionBuilder(driver)
    ab.pointer_action.move_to_location(int(round(x)), int(round(y)))
    ab.perform()


def test_front_html_renders_and_hovers(browser, tmp_path_factory):
    from fedevo.viz import write_front_html

    run_dir = digits_run(tmp_path_factory)
    page = write_front_html(run_dir)
    ok_ids, front_ids, _ = ok_and_front_ids(run_dir)
    open_page(browser, page, "front3d")
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
    n = browser.execute_script(PROJECT_JS, "Pareto front", 0)["n"]
    positions = [browser.execute_script(PROJECT_JS, "Pareto front", k) for k in range(n)]
    hovered = None
    for p in positions:
        mouse_to(browser, p["x"] - 3, p["y"])
        mouse_to(browser, p["x"], p["y"])
        t0 = time.time()
        while time.time() - t0 < 2.0:
            text = hover_text(browser, "front3d")
            if text:
                break
            time.sleep(0.05)
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
    time.sleep(0.2)
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
    open_page(browser, page, "front3d")
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
    from fedevo.retrain import retrain

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
