"""The browser tests' shared fixtures: one headless Chromium for the whole session (started by the first test that
asks for it; each test starts with its window at 1,400 × 1,000 px and an empty browser log, and ends on an empty
page) and the chance run's front.html, written once (tests/viz/fedevo_runs.chance_run)."""

from __future__ import annotations

import os

import pytest

from tests.browser.test_front_browser import ARTIFACTS, CHROMEDRIVER, CHROMIUM, FLAGS, ok_and_front_ids



@pytest.fixture(scope="session")
def browser(tmp_path_factory):
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
    size = driver.get_window_size()
    driver.fedevo_window = (size["width"], size["height"])  # FLAGS' --window-size: restored after each test
    driver.fedevo_blank = tmp_path_factory.mktemp("browser") / "blank.html"  # where each test leaves the browser
    driver.fedevo_blank.write_text("<!doctype html><title>blank</title>\n")
    ARTIFACTS.mkdir(exist_ok=True)
    yield driver
    driver.quit()


@pytest.fixture(autouse=True)
def _browser_between_tests(request):
    """A test that uses the browser starts with the window size of a fresh one and sees only its own console
    messages (no_network_and_no_errors reads the log), and leaves the browser on an empty file:// page: a plotly
    page left open kept drawing (about 5 % of a core, its WebGL views on the CPU) through every test after it on
    that worker; a file:// page, so that open_fresh still clears sessionStorage from it and loads its page once."""
    if "browser" not in request.fixturenames:
        yield
        return
    driver = request.getfixturevalue("browser")
    driver.get_log("browser")  # drained: an earlier test's messages are not this test's
    yield
    size = driver.get_window_size()
    if (size["width"], size["height"]) != driver.fedevo_window:
        driver.set_window_size(*driver.fedevo_window)
    driver.get(driver.fedevo_blank.as_uri())


@pytest.fixture(scope="session")
def chance_page(tmp_path_factory):
    """(front.html, run dir, sorted ok ids, front ids) of the chance run: a front whose most private end is at
    chance, ε over four decades, diverged evaluations."""
    from fedevo.viz import write_front_html
    from tests.viz.fedevo_runs import chance_run

    run_dir = chance_run(tmp_path_factory)
    ok_ids, front_ids, _ = ok_and_front_ids(run_dir)
    return write_front_html(run_dir), run_dir, sorted(ok_ids), front_ids
