"""A self-contained HTML page of plotly figures: plotly.js embedded once, nothing loaded from the network."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.meta { color: #555; font-size: 0.9em; } .note { color: #555; font-size: 0.85em; max-width: 70em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 7px; text-align: right; } th { background: #f3f3f3; }
td.l, th.l { text-align: left; } tr.front td { background: #fff7e6; }
.fig { margin: 0.4em 0 1em 0; }
"""

CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png", "scale": 2}}


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt(v: Any, digits: int = 4) -> str:
    """A number for people: 4 significant digits, ∞ for inf, – for missing."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.{digits}g}"
    return str(v)


def figure_div(fig, div_id: str) -> str:
    import plotly.io as pio

    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG,
                       default_width="100%")


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, left: Sequence[int] = (),
          row_classes: Optional[Sequence[str]] = None) -> str:
    th = "".join(f'<th class="{"l" if i in left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for n, r in enumerate(rows):
        cls = f' class="{row_classes[n]}"' if row_classes and row_classes[n] else ""
        td = "".join(f'<td class="{"l" if i in left else ""}">{esc(c)}</td>' for i, c in enumerate(r))
        body.append(f"<tr{cls}>{td}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str) -> str:
    """The whole document; plotly.js is inlined in <head> (what include_plotlyjs=True does), so it opens offline."""
    from plotly.offline import get_plotlyjs

    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n"
            "<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>\n"
            f"</head>\n<body>\n{body}\n</body>\n</html>\n")


def write(path: Path, text: str) -> Path:
    """Write atomically (a reader never sees half a page)."""
    from ..search.run import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    return path
