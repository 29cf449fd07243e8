"""An HTML page of plotly figures that opens offline: plotly.js loaded from one copy beside the page, shared by the
pages of a directory (the default for a run's pages, `plotly_src_for`, `shared_plotly`), or embedded in the page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

FRONT_HTML = "front.html"  # a run's front page (viz/front.py)
IMPORTANCE_HTML = "importance.html"  # which genes matter (viz/importance.py), beside it


def importance_path(front_page) -> Path:
    """Where the importance page of a front page goes: importance.html beside front.html, NAME-importance.html
    beside any other NAME.html."""
    front_page = Path(front_page)
    name = IMPORTANCE_HTML if front_page.name == FRONT_HTML else f"{front_page.stem}-importance.html"
    return front_page.parent / name

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 1.2em 2em; color: #222; }
h1 { font-size: 1.4em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.meta { color: #555; font-size: 0.9em; } .note { color: #555; font-size: 0.85em; max-width: 70em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 7px; text-align: right; } th { background: #f3f3f3; }
td.l, th.l { text-align: left; } tr.front td { background: #fff7e6; }
.fig { margin: 0.4em 0 1em 0; }
table.sortable th { cursor: pointer; } table.sortable th.asc::after { content: " ▲"; }
table.sortable th.desc::after { content: " ▼"; }
table.sortable th:focus-visible, #front-table tbody tr:focus-visible {
  outline: 2px solid #1f77b4; outline-offset: -2px; }
.controls { font-size: 0.9em; } #retrain-cmd { background: #f3f3f3; padding: 3px 6px; font-size: 0.95em; }
#selection-table tr.front td { background: #fff7e6; } .live { color: #a60; }
.kv, .meta b, .scroll td:not(.l) { white-space: nowrap; } .meta b.prose { white-space: normal; }
.scroll, #selection-table { overflow-x: auto; max-width: 100%; }
#retrain-cmd, #knee-note, code { overflow-wrap: anywhere; white-space: normal; }
.pending { padding: 2em; color: #999; }
.nb { white-space: nowrap; } tr.outside td { color: #aaa; } tr.outside td.l { text-decoration: line-through #ccc; }
input.invalid { border: 2px solid #c00; background: #fff0f0; } p.invalid, span.invalid { color: #a00; }
p.invalid:empty { display: none; }
"""

CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"format": "png", "scale": 2}}


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def kv_list(pairs: Iterable[tuple[Any, Any]]) -> str:
    """Settings as "name value · name value", each pair one unbreakable box (CSS `.kv`: a setting and its value
    never break apart, nor does a value such as "1e-6"). Both are escaped; the value is bold."""
    return " · ".join(f'<span class="kv">{esc(k)} <b>{esc(v)}</b></span>' for k, v in pairs)


def fmt(v: Any) -> str:
    """A number for people (`fedevo.viz.numfmt.num`; integers below 1000 as they are)."""
    from .numfmt import num

    if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1000:
        return str(v)
    return num(v) if isinstance(v, (int, float)) or v is None else str(v)


def figure_div(fig, div_id: str) -> str:
    import plotly.io as pio

    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=CONFIG,
                       default_width="100%")


def figure_deferred(fig, div_id: str, placeholder: str = "drawing…",
                    shared_text: tuple[str, ...] = ()) -> tuple[str, str]:
    """A graph div drawn later by the page's own script (front.html draws its views one after another, the visible
    ones first): the empty div, at the figure's height, holding `placeholder` until plotly draws it, and the figure
    as JSON ``{"data", "layout", "config"}`` for ``Plotly.newPlot`` -- what `figure_div` inlines as a script.

    shared_text: the `meta` of traces whose hover `text` the page holds once, by id (front.html's window.FEDEVO.hover,
    filled in from each point's `customdata` before the figure is drawn): written without it, where every trace
    of every view repeated it (the 3D view and each projection: most of the page at thousands of evaluations)."""
    from plotly.io.json import to_json_plotly

    d = fig.to_dict()
    for t in d.get("data", []):
        if t.get("meta") in shared_text and isinstance(t.get("customdata"), (list, tuple)) and "text" in t:
            del t["text"]
    height = d.get("layout", {}).get("height")
    style = f"height:{int(height)}px; width:100%;" if height else "width:100%;"
    div = (f'<div id="{esc(div_id)}" class="plotly-graph-div" style="{style}">'
           f'<p class="pending note">{esc(placeholder)}</p></div>')
    spec = '{"data": %s, "layout": %s, "config": %s}' % (to_json_plotly(d.get("data", [])),
                                                          to_json_plotly(d.get("layout", {})), to_json_plotly(CONFIG))
    return div, spec


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, left: Sequence[int] = (),
          row_classes: Optional[Sequence[str]] = None) -> str:
    th = "".join(f'<th class="{"l" if i in left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for n, r in enumerate(rows):
        cls = f' class="{row_classes[n]}"' if row_classes and row_classes[n] else ""
        td = "".join(f'<td class="{"l" if i in left else ""}">{esc(c)}</td>' for i, c in enumerate(r))
        body.append(f"<tr{cls}>{td}</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


# a page whose plotly.js beside it is not there (the page copied or mailed alone) says so at its top, where its
# views stayed blank ("drawing the 2D projections…") without a word
PLOTLY_MISSING_JS = (
    "var s=this.getAttribute('src'),f=function(){var p=document.createElement('p');p.id='plotly-missing';"
    "p.className='invalid';p.textContent='The plots cannot be drawn: plotly.js ('+s+') is not beside this page. "
    "Copy or move the run directory as a whole, or write a page that holds it: fedevo plot RUN --plotly-js embed.';"
    "document.body.insertBefore(p,document.body.firstChild)};"
    "document.body?f():document.addEventListener('DOMContentLoaded',f)")


def page(title: str, body: str, *, plotly_src: Optional[str] = None, defer: bool = False) -> str:
    """The whole document. plotly.js is inlined in <head> (what include_plotlyjs=True does), so it opens offline;
    with `plotly_src` (a relative path, see `shared_plotly`) it is loaded from that file instead, and with `defer`
    after the document is parsed (the page's text shows first; the page's own script must then draw its figures
    on DOMContentLoaded, as front.html does)."""
    if plotly_src:
        js = (f'<script src="{esc(plotly_src)}" charset="utf-8"{" defer" if defer else ""} '
              f'onerror="{esc(PLOTLY_MISSING_JS)}"></script>')
    else:
        from plotly.offline import get_plotlyjs

        js = f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"{js}\n<title>{esc(title)}</title>\n<style>{CSS}</style>\n"
            "<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
            f"</head>\n<body>\n{body}\n</body>\n</html>\n")


def shared_plotly(js_dir: Path, page_dir: Path) -> str:
    """Write plotly.js once as JS_DIR/plotly-VERSION.min.js (kept if already there); its path relative to
    PAGE_DIR, for `page(plotly_src=...)`. Many runs in one directory then share one 4.8 MB file."""
    import os

    import plotly
    from plotly.offline import get_plotlyjs

    js_dir = Path(js_dir)
    target = js_dir / f"plotly-{plotly.__version__}.min.js"
    if not target.exists():
        js_dir.mkdir(parents=True, exist_ok=True)
        write(target, get_plotlyjs())
    return Path(os.path.relpath(target, Path(page_dir))).as_posix()


PLOTLY_MODES = ("shared", "embed", "keep")


def plotly_src_for(page_path: Path, plotly: Optional[str]) -> Optional[str]:
    """How the page at `page_path` loads plotly.js: "shared" (the default, also None) — one copy
    plotly-VERSION.min.js beside the page, written once and shared by every page of that directory (a run's
    front.html and importance.html); "embed" — inside the page (one self-contained file, 4.8 MB more); "keep" — as
    the page already at that path does (shared when there is none): what the search's live rewrite uses. Returns
    the script's relative path, or None to embed."""
    mode = plotly or "shared"
    if mode not in PLOTLY_MODES:
        raise ValueError(f"plotly must be one of {PLOTLY_MODES}, got {plotly!r}")
    page_path = Path(page_path)
    if mode == "keep":
        mode = "embed" if _embeds_plotly(page_path) else "shared"
    if mode == "embed":
        return None
    here = page_path.parent.resolve()
    return shared_plotly(here, here)


def _embeds_plotly(path: Path) -> bool:
    """Whether an existing page at `path` carries plotly.js inside it (False when there is no page)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return not (b'<script src="' in head and b"plotly-" in head)


def write(path: Path, text: str) -> Path:
    """Write atomically (a reader never sees half a page)."""
    from ..searching.log import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text)
    return path
