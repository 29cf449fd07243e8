"""Screenshots of each view of front.html (and of curves.html) as a person sees them, for docs/img/.

    python -m tests.browser.screenshots RUN_DIR OUT_DIR [--brush error:0.0:0.45] [--curves RETRAIN_DIR]
    python -m tests.browser.screenshots RUN_DIR OUT_DIR --widths 1000,1600

Opens RUN_DIR/front.html in headless Chromium (the flags of the browser test), brushes a range of one axis of
the parallel coordinates with the mouse (so the selection shows in every view), and writes OUT_DIR/front-3d.png,
front-projections.png, front-parallel.png, front-selection.png, front-hypervolume.png, front-header.png (and
retrain-curves.png with --curves, in its error-on-a-log-axis view).

--widths: instead, the whole page as a window of each width shows it, OUT_DIR/front-1000.png and front-1600.png (the
layout of issue #28, checked by tests/browser/test_layout_browser.py), stored with a 128-colour palette so that each
stays small (Pillow).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tests.browser.test_front_browser import (CHROMEDRIVER, CHROMIUM, FLAGS, axis_geometry, brush_axis, open_page,
                                             wait_ready)


def driver():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for f in FLAGS:
        opts.add_argument(f)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def brush(d, label: str, lo: float, hi: float) -> None:
    """Drag along the axis `label` of the parallel coordinates from value lo to value hi."""
    geo = axis_geometry(d, label)
    r0, r1 = geo[3], geo[4]
    brush_axis(d, label, *(1 - (v - r0) / (r1 - r0) for v in (hi, lo)), geometry=geo)


def shoot(run_dir: Path, out: Path, brush_spec: str = "", curves: Path | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    d = driver()
    shots = []
    try:
        open_page(d, run_dir / "front.html", "front3d")
        wait_ready(d)
        if brush_spec:
            label, lo, hi = brush_spec.split(":")
            brush(d, label, float(lo), float(hi))
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


def shoot_widths(run_dir: Path, out: Path, widths=(1000, 1600), colours: int = 128) -> list[Path]:
    """The whole of RUN_DIR/front.html in a window of each width (the page's full height), as OUT/front-WIDTH.png."""
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    d = driver()
    shots = []
    try:
        for w in widths:
            d.set_window_size(w, 1000)
            open_page(d, run_dir / "front.html", "front3d")
            wait_ready(d)
            h = d.execute_script("return document.documentElement.scrollHeight")
            d.set_window_size(w, h)
            time.sleep(1.5)  # plotly's responsive relayout at the new size
            p = out / f"front-{w}.png"
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
    a = ap.parse_args()
    shots = (shoot_widths(a.run_dir, a.out, [int(w) for w in a.widths.split(",")]) if a.widths
             else shoot(a.run_dir, a.out, a.brush, a.curves))
    for p in shots:
        print(p)


if __name__ == "__main__":
    main()
