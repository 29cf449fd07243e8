"""`fedevo plot RUN` and `fedevo front RUN` of one finished run with two checkouts of fedevo (before and after a
change), side by side: each command's wall seconds (one process per command, the checkouts alternating)
and the pages' sizes (front.html, importance.html; plotly.js shared beside them, the default).

The run is copied once per checkout (each writes its own pages into its copy; the rows, the log's chain and the
checkpoints are the same), e.g. a 10,000-evaluation search made with benchmarks/search_scale.py's analytic problem.

    python benchmarks/page_cli.py --base /tmp/fedevo-base [--head .] --run RUN [--repeats 2]

(--base: an older checkout, e.g. `git archive REV | tar -x -C /tmp/fedevo-base`.) Prints the CPU (lscpu) and load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402


def command(checkout: str, args: list[str]) -> float:
    """The wall seconds of `fedevo ARGS` run with `checkout` first on the path."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", "from fedevo.cli import main; main()", *args], cwd=os.path.abspath(checkout),
                       env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode:
        sys.exit(f"{checkout}: fedevo {' '.join(args)}: {r.stderr[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--head", default=".")
    ap.add_argument("--run", required=True, help="a finished run directory (copied, never written)")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    print(f"cpu: {cpu()}; load average before {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as d:
        runs = {}
        for name in ("base", "head"):
            runs[name] = Path(d) / name
            shutil.copytree(a.run, runs[name], ignore=shutil.ignore_patterns("*.html", "*.stamp.js", "plotly-*.js"))
        paths = {"base": a.base, "head": a.head}
        for k in range(a.repeats):
            for name in (("base", "head") if k % 2 == 0 else ("head", "base")):
                run = runs[name]
                for page in run.glob("*.html"):
                    page.unlink()
                plot_s = command(paths[name], ["plot", str(run)])
                front_s = command(paths[name], ["front", str(run)])
                sizes = {p: (run / p).stat().st_size for p in ("front.html", "importance.html")}
                print(f"{k + 1} {name}: fedevo plot {plot_s:6.2f} s, fedevo front {front_s:5.2f} s; front.html {sizes['front.html']:,} B, "
                      f"importance.html {sizes['importance.html']:,} B (load {os.getloadavg()[0]:.1f})", flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
