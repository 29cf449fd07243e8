"""front.html kept current while a search runs.

* `LivePage`: the search callback (fedevo.searching.callbacks) that `fedevo search` / `fedevo resume` hand the search:
  after every generation it rewrites RUN_DIR/front.html atomically (with front.stamp.js, the signal an open page
  polls to reload itself) from the rows, front, hypervolume table, run.json and problem the running search holds
  in memory: the run directory is not read again. A plotting problem never stops a search: it is reported once
  on stderr.
* `watch(run_dir)`: `fedevo plot --watch RUN`: rewrite the page whenever evaluations.csv changes (every
  finished evaluation, not only every generation), until the run holds all its evaluations, or Ctrl-C. Works
  for a search running in this process's machine or on a cluster that writes the run directory to a shared
  file system; it only reads the run (from disk: it runs in a process of its own).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable, Optional

from ..searching.callbacks import SearchCallback
from ..dirlock import is_held
from ..searching.rundata import RunData


class LivePage(SearchCallback):
    """Rewrites front.html after every generation of a running search; never raises."""

    def __init__(self) -> None:
        self.warned = False

    def on_generation(self, generation: int, run: RunData) -> None:
        try:
            from .front import write_front_html

            write_front_html(run.run_dir, plotly="keep", data=run)
        except Exception as e:  # noqa: BLE001 - the search's results stand without the page
            if not self.warned:
                self.warned = True
                print(f"fedevo: warning: could not update front.html ({type(e).__name__}: {e}); "
                      f"`fedevo plot {run.run_dir}` writes it later", file=sys.stderr)


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
    """Rewrite the page whenever the run changes; return when the run is complete, when no fedevo process holds
    the run (a stopped search: nothing will change until `fedevo resume`), or after `timeout` s.

    A run without evaluations yet is waited for while its search holds it. on_write(path, data) is called after
    each write.
    """
    from ..errors import FedevoError
    from ..searching.rundata import load_run
    from .front import FRONT_HTML, is_complete, write_front_html

    run_dir = Path(run_dir)
    load_run(run_dir, require_evaluations=False, reading=True)  # a bad directory fails now, with one line
    path = Path(out) if out is not None else run_dir / FRONT_HTML
    t0 = time.monotonic()
    seen = None
    while True:
        held = is_held(run_dir)  # read before the run: what a search wrote before letting go is seen below
        sig = _signature(run_dir)
        if sig != seen:
            try:
                data = load_run(run_dir, require_evaluations=True, reading=True)
            except FedevoError:
                data = None  # no evaluation yet
            if data is not None:
                write_front_html(run_dir, path, plotly=plotly or "keep")
                if on_write is not None:
                    on_write(path, data)
                # complete (resume's rule reads the newest checkpoint now), and nothing written since these rows
                # were read: a search that logged its last row and finished meanwhile is read again first
                if is_complete(data) and _signature(run_dir) == sig:
                    return path
            seen = sig
        if not held:
            return path
        if timeout is not None and time.monotonic() - t0 > timeout:
            return path
        time.sleep(interval)
