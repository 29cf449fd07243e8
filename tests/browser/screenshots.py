"""Screenshots of each view of front.html (and of curves.html) as a person sees them, for docs/img/.

    python -m tests.browser.screenshots RUN_DIR OUT_DIR [--brush error:0.0:0.45] [--curves RETRAIN_DIR]
    python -m tests.browser.screenshots RUN_DIR OUT_DIR --widths 1000,1600

Opens RUN_DIR/front.html in headless Chromium (the flags of the browser test), brushes a range of one axis of
the parallel coordinates with the mouse (so the selection shows in every view; --brush NAME:LO:HI, NAME an
objective's or gene's key -- error, eps, latency -- or the axis' title, LO and HI in the quantity's units, on a log
axis too; it prints the ids selected), and writes OUT_DIR/front-3d.png,
front-projections.png, front-parallel.png, front-selection.png, front-hypervolume.png, front-header.png (and
retrain-curves.png with --curves, in its error-on-a-log-axis view).

--widths: instead, the whole page as a window of each width shows it, OUT_DIR/front-1000.png and front-1600.png (the
layout of issue #28, checked by tests/browser/test_layout_browser.py), stored with a 128-colour palette so that each
stays small (Pillow). With --pages, each page given (a path; its name without .html names the picture, e.g.
importance-1000.png, compare-1600.png, curves-1000.png, audit-1600.png) instead of RUN_DIR/front.html:

    python -m tests.browser.screenshots RUN_DIR docs/img --widths 1000,1600 \
        --pages RUN/front.html,RUN/importance.html,compare.html,RUN/retrain/curves.html,RUN/audit/audit.html
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

from tests.browser.test_front_browser import (CHROMEDRIVER, CHROMIUM, FLAGS, axis_geometry, brush_axis, find_axis,
                                             open_page, wait_ready)


def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def brush(d, name: str, lo: float, hi: float) -> list[int]:
    """Drag with the mouse along the axis `name` of the parallel coordinates (an objective's or gene's key, or its
    title: tests.browser.test_front_browser.find_axis) from value lo to value hi, in the quantity's units (on a log
    axis too); returns the selection it made (ids)."""
    _, _, log = find_axis(d, name)
    if log and min(lo, hi) <= 0:
        raise SystemExit(f"--brush {name}: its axis is logarithmic; give values above 0, not {lo:g}:{hi:g}")
    lo, hi = (math.log10(v) for v in (lo, hi)) if log else (lo, hi)
    geo = axis_geometry(d, name)
    r0, r1 = geo[3], geo[4]
    brush_axis(d, name, *(1 - (v - r0) / (r1 - r0) for v in (hi, lo)), geometry=geo)
    return d.execute_script("return fedevoSelection()")


def shoot(run_dir: Path, out: Path, brush_spec: str = "", curves: Path | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    d = driver()
    shots = []
    try:
        open_page(d, run_dir / "front.html", "front3d")
        wait_ready(d)
        if brush_spec:
            name, lo, hi = brush_spec.rsplit(":", 2)
            ids = brush(d, name, float(lo), float(hi))
            print(f"brushed {name} {lo} to {hi}: {len(ids)} selected (ids {', '.join(map(str, ids)) or 'none'})")
        for div, name in (("front3d", "front-3d"), ("projections", "front-projections"),
                          ("parallel", "front-parallel"), ("selection", "front-selection"),
                          ("hypervolume", "front-hypervolume")):
            el = d.find_element("id", div)
            d.execute_script("arguments[0].scrollIntoView()", el)
            time.sleep(0.5)
            p = out / f"{name}.png"
            el.screenshot(str(p))
            shots.append(p)
        d.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.3)
        p = out / "front-header.png"
        d.save_screenshot(str(p))
        shots.append(p)
        if curves is not None:
            open_page(d, curves / "curves.html", "curves")
            d.execute_script("Array.from(document.querySelectorAll('#curves .updatemenu-button'))[1]"
                             ".dispatchEvent(new MouseEvent('click', {bubbles: true}))")  # error, log scale
            time.sleep(0.8)
            p = out / "retrain-curves.png"
            d.save_screenshot(str(p))
            shots.append(p)
    finally:
        d.quit()
    return shots


def _drawn(d, timeout: float = 60.0) -> None:
    """Every plotly graph of the page drawn (and front.html's script started, on that page)."""
    t0 = time.time()
    while not d.execute_script("const gs = Array.from(document.querySelectorAll('.plotly-graph-div'));"
                               "return gs.length > 0 && gs.every(g => g._fullLayout) && "
                               "(!document.getElementById('front3d') || !!window.fedevoReady);"):
        if time.time() - t0 > timeout:
            raise AssertionError("the page's plots did not render")
        time.sleep(0.1)


def shoot_widths(run_dir: Path, out: Path, widths=(1000, 1600), colours: int = 128,
                 pages: list[Path] | None = None) -> list[Path]:
    """The whole of each page (RUN_DIR/front.html by default) in a window of each width (the page's full height), as
    OUT/NAME-WIDTH.png."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    d = driver()
    shots = []
    try:
        for page in pages or [run_dir / "front.html"]:
            for w in widths:
                d.set_window_size(w, 1000)
                d.get(Path(page).resolve().as_uri())
                _drawn(d)
                h = d.execute_script("return document.documentElement.scrollHeight")
                d.set_window_size(w, min(h, 16000))
                time.sleep(1.5)  # plotly's responsive relayout at the new size
                p = out / f"{Path(page).stem}-{w}.png"
                d.save_screenshot(str(p))
                Image.open(p).convert("RGB").quantize(colours, method=Image.Quantize.MEDIANCUT).save(p, optimize=True)
                shots.append(p)
    finally:
        d.quit()
    return shots


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--brush", default="")
    ap.add_argument("--curves", type=Path, default=None)
    ap.add_argument("--widths", default="", help="e.g. 1000,1600: the whole page at each window width")
    ap.add_argument("--pages", default="", help="with --widths: comma-separated pages (default RUN_DIR/front.html)")
    a = ap.parse_args()
    pages = [Path(x) for x in a.pages.split(",") if x] or None
    shots = (shoot_widths(a.run_dir, a.out, [int(w) for w in a.widths.split(",")], pages=pages) if a.widths
             else shoot(a.run_dir, a.out, a.brush, a.curves))
    for p in shots:
        print(p)


if __name__ == "__main__":
    main()
