"""A run of one evaluation: front.html draws its one point in every view (headless Chromium, real mouse, what the
page draws).

* the 3D view draws the point and a real mouse on it shows its hover label (plotly's WebGL drew no marker at all
  where the vertical axis' title, a scene annotation, lay on every point: the scene was empty);
* each parallel axis stands the right way up, its labels around the one value (plotly pads a single value by
  ±10 % of itself: a log axis of a value below 1 (log10 negative: ε 0.033, the gene clip 0.5) ran upside down,
  ε from 0.047 at the bottom to 0.024 at the top).

Browser fixture: tests/browser/conftest.py; helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import pytest

from tests.browser.test_decide_browser import axis
from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, PROJECT_JS, hover_at, no_network_and_no_errors,
                                              open_fresh)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")


@pytest.fixture(scope="module")
def one_page(tmp_path_factory):
    from fedevo.viz import write_front_html
    from tests.viz.fedevo_runs import one_run

    run_dir = one_run(tmp_path_factory)
    return write_front_html(run_dir), run_dir


def _dark_pixels_near(png: bytes, x: float, y: float, r: int = 8) -> int:
    """Pixels darker than any of the scene's background and grid (its marker, ring outlines) within r px."""
    import io

    from PIL import Image

    im = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for i in range(int(x) - r, int(x) + r + 1) for j in range(int(y) - r, int(y) + r + 1)
               if sum(im.getpixel((i, j))) < 300)


def test_the_3d_view_draws_and_hovers_the_one_point(browser, one_page):
    path, _ = one_page
    open_fresh(browser, path)
    browser.execute_script("document.getElementById('front3d').scrollIntoView()")
    p = browser.execute_script(PROJECT_JS, "Pareto front", 0)
    assert p["n"] == 1
    png = browser.get_screenshot_as_png()
    (ARTIFACTS / "front-one-point-3d.png").write_bytes(png)
    assert _dark_pixels_near(png, p["x"], p["y"]) >= 10, "the 3D view draws no point where its one point lies"
    assert "id 0" in hover_at(browser, p, wait=4.0)
    no_network_and_no_errors(browser)


def test_each_parallel_axis_stands_upright_around_its_one_value(browser, one_page):
    from fedevo.picking import bound
    from fedevo.searching.rundata import load_run

    path, run_dir = one_page
    row = load_run(run_dir).ok_rows[0]
    open_fresh(browser, path)
    labels = browser.execute_script("return document.getElementById('parallel').data[0].dimensions"
                                    ".map(d => d.label)")
    keys = {"ε": "eps", "error": "error", "lr": "lr", "clip": "clip"}  # ε and clip (0.5 here) on log axes
    checked = []
    for label in labels:
        key = keys.get(label.split(" (")[0])
        if key is None:
            continue
        shown = [(y, bound(t)) for y, _, t in axis(browser, label)["ticks"] if t]
        assert len(shown) >= 2, (label, shown)
        ys = [y for y, _ in sorted(shown, key=lambda s: s[1])]
        assert ys == sorted(ys, reverse=True), f"{label}: higher values are drawn lower: {shown}"
        assert min(v for _, v in shown) <= row[key] <= max(v for _, v in shown), (label, row[key], shown)
        checked.append(key)
    assert sorted(checked) == sorted(keys.values()), labels


def test_the_chosen_note_of_one_solution(browser, one_page):
    """The 'Chosen:' note of a front of one says it is the only Pareto solution better than chance (it said
    'measured over all 1 Pareto solutions better than chance')."""
    path, _ = one_page
    open_fresh(browser, path)
    note = browser.find_element("id", "knee-note").text
    assert "the only Pareto solution better than chance" in note and "all 1 " not in note, note
