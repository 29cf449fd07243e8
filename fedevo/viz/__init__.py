"""Plots of a search run and of retraining: self-contained HTML pages (plotly.js embedded, open offline).

`write_front_html(run_dir)` writes RUN_DIR/front.html (`fedevo plot`, and the end of `fedevo search`);
`write_curves_html(...)` writes the accuracy-per-round page of `fedevo retrain`.
"""

from .curves import write_curves_html
from .front import FRONT_HTML, write_front_html
from .rundata import RunData, load_run

__all__ = ["FRONT_HTML", "RunData", "load_run", "write_curves_html", "write_front_html"]
