"""front.html kept current while a search runs.

* `after_generation(run_dir, reporter)`: called by the search after every generation (fedevo.search.run): it
  shows the front size and hypervolume in the progress display and rewrites RUN_DIR/front.html atomically
  (with front.stamp.js, the signal an open page polls to reload itself). A plotting problem never stops a
  search: it is reported once on stderr.
* `watch(run_dir)`: `fedevo plot --watch RUN`: rewrite the page whenever evaluations.csv changes (every
  finished evaluation, not only every generation), until the run holds all its evaluations, or Ctrl-C. Works
  for a search running in this process's machine or on a cluster that writes the run directory to a shared
  file system; it only reads the run.
"""

from __future__ import annotations

import csv
import io
import sys
import time
from pathlib import Path
from typing import Callable, Optional

_warned: set[str] = set()


def last_hypervolume(run_dir: Path) -> Optional[dict]:
    """The last row of RUN_DIR/hypervolume.csv as numbers (front_size, hypervolume, generation), or None."""
    try:
        text = (Path(run_dir) / "hypervolume.csv").read_text()
    except OSError:
        return None
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows:
        return None
    r = rows[-1]
    return {"generation": int(r["generation"]), "front_size": int(r["front_size"]),
            "hypervolume": float(r["hypervolume"])}


def after_generation(run_dir: Path, reporter=None) -> None:
    """Progress (front size, hypervolume) and a fresh front.html after a generation; never raises."""
    hv = last_hypervolume(run_dir)
    if hv is not None and reporter is not None and hasattr(reporter, "front_status"):
        reporter.front_status(hv["front_size"], hv["hypervolume"])
    try:
        from .front import write_front_html

        write_front_html(run_dir, plotly="keep")
    except Exception as e:  # noqa: BLE001 - the search's results stand without the page
        key = str(run_dir)
        if key not in _warned:
            _warned.add(key)
            print(f"fedevo: warning: could not update front.html ({type(e).__name__}: {e}); "
                  f"`fedevo plot {run_dir}` writes it later", file=sys.stderr)


def _signature(run_dir: Path) -> tuple:
    out = []
    for name in ("evaluations.csv", "hypervolume.csv"):
        try:
            st = (Path(run_dir) / name).stat()
            out.append((st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def watch(run_dir: Path | str, *, out: Optional[Path] = None, plotly: Optional[str] = None, interval: float = 2.0,
          timeout: Optional[float] = None, on_write: Optional[Callable[[Path, object], None]] = None) -> Path:
    """Rewrite the page whenever the run changes; return when the run is complete (or after `timeout` s).

    A run without evaluations yet is waited for. on_write(path, data) is called after each write.
    """
    from ..errors import FedevoError
    from .front import FRONT_HTML, is_complete, write_front_html
    from .rundata import load_run

    run_dir = Path(run_dir)
    load_run(run_dir, require_evaluations=False)  # a bad directory fails now, with one line
    path = Path(out) if out is not None else run_dir / FRONT_HTML
    t0 = time.monotonic()
    seen = None
    while True:
        sig = _signature(run_dir)
        if sig != seen:
            try:
                data = load_run(run_dir, require_evaluations=True)
            except FedevoError:
                data = None  # no evaluation yet
            if data is not None:
                write_front_html(run_dir, path, plotly=None if plotly == "embed" else plotly or "keep")
                if on_write is not None:
                    on_write(path, data)
                if is_complete(data):
                    return path
            seen = sig
        if timeout is not None and time.monotonic() - t0 > timeout:
            return path
        time.sleep(interval)
