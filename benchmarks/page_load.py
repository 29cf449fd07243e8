"""How long front.html takes to become usable in headless Chromium (issue #36: "interactive within 2 s").

Builds the browser tests' chance run (tests/viz/fedevo_runs.chance_run: 60 individuals, 4 generations, ε over four
decades; plotly.js shared beside the page, the default) once under --dir, writes its front.html, loads it --loads
times in headless Chromium (the tests' flags: software WebGL, offline) and prints, per load and as medians (ms
since the navigation began, `performance.now()`):

  first paint        the first contentful paint (Chromium's paint timing)
  interactive        window.fedevoInteractiveAt: the views in the first screen drawn and answering (selection,
                     caps, colour, tables) -- absent on pages written before it existed
  ready              window.fedevoReadyAt: every view drawn and linked

with the CPU's model name and the load average before and after the loads (other work on the machine slows
every number: quote them together). --profile also prints the page's own performance marks (`fedevo:*`, the
page writes them around each view's drawing).

    python benchmarks/page_load.py [--loads 7] [--dir /tmp/fedevo-page-load] [--profile]
    python benchmarks/page_load.py --page some/run/front.html      # an existing page instead
    python benchmarks/page_load.py --page old/front.html --page new/front.html   # two pages, loads alternating
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

READ = """
const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint');
const marks = performance.getEntriesByType('mark').filter(m => m.name.startsWith('fedevo:'))
  .map(m => [m.name, Math.round(m.startTime)]);
const measures = performance.getEntriesByType('measure').filter(m => m.name.startsWith('fedevo:'))
  .map(m => [m.name, Math.round(m.startTime), Math.round(m.duration)]);
return {fcp: p ? p.startTime : null, interactive: window.fedevoInteractiveAt === undefined ? null :
        window.fedevoInteractiveAt, ready: window.fedevoReadyAt === undefined ? null : window.fedevoReadyAt,
        marks: marks, measures: measures};
"""


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Model name")), "?")
    except OSError:
        return "?"


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build_page(base: Path) -> Path:
    from tests.viz.fedevo_runs import _make, chance_evaluate
    from fedevo.viz import write_front_html

    run = _make(base, "chance_run", evaluator=chance_evaluate, pop=15, gen=4, seed=3)
    return write_front_html(run)


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    from tests.browser.test_front_browser import CHROMEDRIVER, CHROMIUM, FLAGS

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_network_conditions(offline=True, latency=0, download_throughput=0, upload_throughput=0)
    return driver


def load_once(driver, page: Path, timeout: float = 60.0) -> dict:
    driver.get("about:blank")
    driver.get(page.resolve().as_uri())
    t0 = time.time()
    while not driver.execute_script("return !!window.fedevoReady"):
        if time.time() - t0 > timeout:
            raise SystemExit(f"{page}: not ready after {timeout} s")
        time.sleep(0.02)
    return driver.execute_script(READ)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loads", type=int, default=7)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fedevo-page-load"))
    ap.add_argument("--page", type=Path, action="append",
                    help="an existing front.html (default: build the chance run's); given several times, the pages "
                         "are loaded in turn, so that each sees the same machine load")
    ap.add_argument("--profile", action="store_true", help="print the page's performance marks of each load")
    a = ap.parse_args(argv)

    pages = a.page or [build_page(a.dir)]
    for page in pages:
        print(f"page: {page} ({page.stat().st_size / 1e3:.0f} kB)")
    print(f"cpu: {cpu_model()}, {os.cpu_count()} cores; chromium headless, software WebGL (swiftshader)")
    fmt = lambda v: "   -  " if v is None else f"{v / 1000:6.2f}"  # noqa: E731
    driver = browser()
    try:
        for page in pages:
            load_once(driver, page)  # warm the disk cache and the browser once (not counted)
        before = loadavg()
        rows: dict[Path, list] = {page: [] for page in pages}
        for k in range(a.loads):
            for page in pages:
                r = load_once(driver, page)
                rows[page].append(r)
                print(f"load {k + 1}{' ' + str(page) if len(pages) > 1 else ''}: first paint "
                      f"{fmt(r['fcp'])} s  interactive {fmt(r['interactive'])} s  ready {fmt(r['ready'])} s   "
                      f"(load average {loadavg()})")
                if a.profile:
                    for name, t, d in r["measures"]:
                        print(f"    {name:32s} {t / 1000:6.2f} s  +{d / 1000:5.2f} s")
                    for name, t in r["marks"]:
                        print(f"    {name:32s} {t / 1000:6.2f} s")
        after = loadavg()
        for page in pages:
            rs = rows[page]
            med = lambda key: (None if any(r[key] is None for r in rs)  # noqa: E731
                               else statistics.median(r[key] for r in rs) / 1000)
            show = lambda v: "-" if v is None else f"{v:.2f} s"  # noqa: E731
            inter = med("interactive")
            note = "" if inter is not None else " (no fedevoInteractiveAt: the page wires itself after every view)"
            print(f"median of {a.loads} ({page}): first paint {show(med('fcp'))}, interactive {show(inter)}, "
                  f"ready {show(med('ready'))}{note}")
        print(f"load average (1, 5, 15 min): before {before}, after {after}")
    finally:
        driver.quit()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
