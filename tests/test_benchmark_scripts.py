"""Every benchmark script imports and parses its options (`--help`) on any machine, a GPU's included.

Most benchmarks run by hand or on a lent GPU (benchmarks/gpu_session.sh), never in this suite: a name they import
that moved, or a script that needs a GPU before it reads its options, shows only when someone runs it. All are
asked for --help in one process (torch imported once)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from .helpers import REPO

#: modules the benchmarks import, not scripts
LIBRARIES = {"machine.py", "side_by_side.py"}
#: scripts that need a package of their own environment (benchmarks/moasha.py: syne-tune, in its own venv)
OWN_ENV = {"moasha.py": "syne_tune"}

_HELP = """
import runpy, sys
failed = []
for script in sys.argv[1:]:
    sys.argv = [script, "--help"]
    try:
        runpy.run_path(script, run_name="__main__")
        failed.append(script + ": ran on past --help")
    except SystemExit as e:
        if e.code not in (0, None):
            failed.append(f"{script}: exit {e.code}")
    except BaseException as e:  # noqa: BLE001 - reported
        failed.append(f"{script}: {type(e).__name__}: {e}")
print(chr(10).join(failed))
sys.exit(1 if failed else 0)
"""


def scripts() -> list[str]:
    out = []
    for p in sorted((REPO / "benchmarks").glob("*.py")):
        needs = OWN_ENV.get(p.name)
        if p.name in LIBRARIES or (needs and importlib.util.find_spec(needs) is None):
            continue
        out.append(str(p))
    return out


def test_every_benchmark_answers_help():
    got = scripts()
    assert len(got) > 30
    out = subprocess.run([sys.executable, "-c", _HELP, *got], capture_output=True, text=True, timeout=400,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-2000:])  # the failures are its last lines
