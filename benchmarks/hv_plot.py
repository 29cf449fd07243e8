"""The hypervolume-vs-wall-clock plot of a multi-fidelity benchmark: an offline plotly HTML page and a PNG of it.

    python benchmarks/hv_plot.py benchmarks/results/multi_fidelity-fashion-2026-11-25-curves.csv \\
        --title "fashion_mlp_step, 2 cores" --out benchmarks/results/multi_fidelity-fashion-2026-11-25

reads a curves.csv written by benchmarks/multi_fidelity.py (and benchmarks/moasha.py: columns method, seed, t_s,
full_evaluations, hypervolume; one fixed normalisation and reference point for every method in it) and writes
OUT.html (plotly.js embedded: opens offline) and OUT.png (the page as headless Chromium draws it, 1020 × 580 px;
needs Debian's chromium + chromium-driver and selenium; skipped with a message without them). Each method × seed
is a step line (the hypervolume only changes when a full-fidelity evaluation finishes); a dotted vertical line
marks each seed's plain-search time (the common budget) and a dashed one a third of it (the issue's goal).
"""

from __future__ import annotations

import argparse
import csv
import shutil
from collections import defaultdict
from pathlib import Path

COLOURS = {"plain": "#1f77b4", "multi-fidelity": "#d62728", "moasha": "#2ca02c"}
DASH = ["solid", "dot", "dash", "longdash", "dashdot"]


def read_curves(path: Path) -> dict[tuple[str, int], list[tuple[float, float]]]:
    curves: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            curves[(row["method"], int(row["seed"]))].append((float(row["t_s"]), float(row["hypervolume"])))
    return {k: sorted(v) for k, v in curves.items()}


def figure(curves, title: str):
    import plotly.graph_objects as go

    fig = go.Figure()
    seeds = sorted({s for _, s in curves})
    longest = max((pts[-1][0] for pts in curves.values() if pts), default=0.0)
    unit, div = ("s", 1.0) if longest < 180 else ("min", 60.0)
    for (method, seed), pts in sorted(curves.items()):
        t = [p[0] / div for p in pts]
        hv = [max(h for _, h in pts[: i + 1]) for i in range(len(pts))]  # the front only grows
        fig.add_trace(go.Scatter(x=t, y=hv, mode="lines", line_shape="hv", name=f"{method}, seed {seed}",
                                 line=dict(color=COLOURS.get(method, "#555"), dash=DASH[seeds.index(seed) % 5])))
    for seed in seeds:
        plain = curves.get(("plain", seed))
        if plain:
            end = plain[-1][0] / div
            fig.add_vline(x=end, line=dict(color="#888", dash="dot", width=1))
            fig.add_vline(x=end / 3, line=dict(color="#888", dash="dash", width=1))
    top = max((h for pts in curves.values() for _, h in pts), default=1.0)
    low = min((h for pts in curves.values() for _, h in pts if h > 0), default=0.0)
    fig.update_layout(title=title, width=1000, height=560, template="plotly_white",
                      xaxis_title=f"wall-clock time ({unit})",
                      yaxis_title="hypervolume of the full-fidelity front (fixed normalisation)",
                      yaxis_range=[max(0.0, low - 0.05 * (top - low)), top + 0.05 * (top - low)],
                      legend=dict(orientation="h", y=-0.18), margin=dict(l=70, r=20, t=60, b=110))
    fig.add_annotation(text="dotted: the plain search's time (the budget); dashed: a third of it",
                       xref="paper", yref="paper", x=0, y=1.06, showarrow=False, font=dict(size=11))
    return fig


def screenshot(html: Path, png: Path) -> bool:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("no chromium: PNG not written (apt-get install chromium chromium-driver)")
        return False
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1000,560", "--hide-scrollbars",
              "--force-device-scale-factor=1"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"),
                              options=opts)
    try:
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the viewport itself, not the window
                               {"width": 1020, "height": 580, "deviceScaleFactor": 1, "mobile": False})
        driver.get(html.resolve().as_uri())
        driver.implicitly_wait(5)
        driver.find_element("css selector", ".main-svg")
        driver.save_screenshot(str(png))
    finally:
        driver.quit()
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("curves", type=Path)
    ap.add_argument("--out", type=Path, required=True, help="OUT: writes OUT.html and OUT.png")
    ap.add_argument("--title", default="Hypervolume against wall-clock time")
    args = ap.parse_args()
    fig = figure(read_curves(args.curves), args.title)
    html = args.out.with_suffix(".html")
    fig.write_html(html, include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    print(f"wrote {html}")
    if screenshot(html, args.out.with_suffix(".png")):
        print(f"wrote {args.out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
