"""Plots of a search run and of retraining: HTML pages that open offline (a run's pages share one plotly.js beside
them; curves.html and audit.html embed it).

`write_front_html(run_dir)` writes RUN_DIR/front.html (`fedevo plot`, and the end of `fedevo search`);
`write_curves_html(...)` writes the accuracy-per-round page of `fedevo retrain`; `live.LivePage` is the search
callback that keeps front.html current while `fedevo search` runs. Runs are read through
:mod:`fedevo.searching.rundata` (`load_run`, `RunData`).
"""

from .curves import write_curves_html
from .front import FRONT_HTML, write_front_html

__all__ = ["FRONT_HTML", "write_curves_html", "write_front_html"]
