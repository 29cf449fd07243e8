"""Pages with nothing drawn (headless Chromium, file://, offline):

* a run's page copied alone (without the plotly.js it shares beside it: the page mailed, or moved out of its run
  directory) says at its top why its plots are not drawn and what to do; it showed its text and "drawing the 2D
  projections…" under an empty space for ever, without a word;
* a live page written before any evaluation finished ok reloads itself when a newer page is written, as it says.

Browser fixture: tests/browser/conftest.py; helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.browser.test_front_browser import ARTIFACTS, CHROMIUM

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")

MISSING_JS = """
const p = document.getElementById('plotly-missing');
if (!p) return null;
const r = p.getBoundingClientRect(), st = getComputedStyle(p);
return {text: p.innerText, top: r.top, height: r.height, visible: st.display !== 'none' && st.visibility !== 'hidden'};
"""


def _said(driver, timeout: float = 10.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        got = driver.execute_script(MISSING_JS)
        if got:
            return got
        time.sleep(0.1)
    return None


@pytest.mark.parametrize("name", ["front.html", "importance.html"])
def test_a_page_copied_without_its_plotly_says_so(browser, tmp_path_factory, tmp_path, name):
    from fedevo.viz import write_front_html
    from fedevo.viz.importance import write_importance_html
    from tests.viz.fedevo_runs import one_run

    run_dir = one_run(tmp_path_factory)
    page = write_front_html(run_dir) if name == "front.html" else write_importance_html(run_dir)
    alone = tmp_path / name
    shutil.copy(page, alone)
    browser.get(alone.as_uri())
    got = _said(browser)
    browser.save_screenshot(str(ARTIFACTS / f"alone-{name}.png"))
    assert got is not None, "the page says nothing of its missing plotly.js"
    assert got["visible"] and got["height"] > 0 and 0 <= got["top"] < 200, got
    assert "plotly.js (plotly-" in got["text"] and "not beside this page" in got["text"], got
    assert "--plotly-js embed" in got["text"]
    browser.get(page.as_uri())  # the page where it was written draws, and says nothing of the kind
    time.sleep(1.0)
    assert browser.execute_script("return !!window.Plotly") and _said(browser, timeout=0.5) is None


def test_a_live_page_with_nothing_drawn_yet_reloads_when_a_newer_one_is_written(browser, tmp_path_factory,
                                                                                 monkeypatch):
    """A search's page written while it runs, before any evaluation finished ok (its first generation failed), says
    'this page reloads itself when a newer one is written' and now does: it had no script at all, so it stayed as
    it was however many evaluations followed."""
    import fedevo.viz.front as front
    from fedevo.viz import write_front_html
    from tests.viz.fedevo_runs import _make
    from tests.viz.test_front import _always_fails

    run_dir = _make(tmp_path_factory.getbasetemp(), "all_failed_run", problem="digits_mlp", evaluator=_always_fails,
                    pop=4, gen=1, optimizer="random")
    monkeypatch.setattr(front, "is_complete", lambda data: False)  # as while the search writes the run
    monkeypatch.setattr(front, "run_state", lambda data, complete=None: "running")
    page = write_front_html(run_dir)
    assert "reloads itself when a newer one is written" in page.read_text()
    browser.get(page.as_uri())
    browser.execute_script("window.fedevoTestMark = 1")
    time.sleep(3.0)  # polls that find the same page leave it as it is
    assert browser.execute_script("return window.fedevoTestMark") == 1
    (run_dir / "front.stamp.js").write_text('window.fedevoStamp && window.fedevoStamp("newer");\n')
    t0 = time.time()
    while time.time() - t0 < 10 and browser.execute_script("return window.fedevoTestMark") == 1:
        time.sleep(0.2)
    assert browser.execute_script("return window.fedevoTestMark") is None, "the page never reloaded itself"
