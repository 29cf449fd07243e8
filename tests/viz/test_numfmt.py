"""The number formatter of every table, tooltip and tick (Python and its JavaScript twin)."""

import json
import math
import shutil
import subprocess

import pytest

from fedevo.viz.numfmt import JS_NUM, num

CASES = [
    (1e5, "100k"), (0.0831, "0.083"), (2.3e-6, "2.3e-6"),  # the three
    (1234, "1.23k"), (12345.6, "12.3k"), (999.4, "999"), (999.5, "1k"), (999_950, "1M"), (2.5e9, "2.5B"),
    (7e7, "70M"), (1e12, "1T"), (3e15, "3e15"), (0.942, "0.942"), (0.5, "0.5"), (0.9, "0.9"), (0.00123, "0.0012"),
    (0.001, "0.001"), (0.0009, "9e-4"), (12.345, "12.3"), (250, "250"), (3.2, "3.2"), (1, "1"), (0, "0"),
    (-0.0831, "-0.083"), (math.inf, "∞"), (-math.inf, "−∞"), (math.nan, "–"), (None, "–"),
]


@pytest.mark.parametrize("v,want", CASES)
def test_python_formatter(v, want):
    assert num(v) == want


def test_no_scientific_notation_for_errors_and_no_mixed_suffixes():
    for e in (0.01, 0.0123, 0.05, 0.0831, 0.1, 0.35, 0.9, 0.999):
        assert "e" not in num(e)
    for v in (1e5, 1e8, 3.7e10, 1e14):
        s = num(v)
        assert "e" not in s and s[-1] in "kMBT" and len(s) <= 5, s


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_formatter_agrees():
    vals = [v for v, _ in CASES if v is not None and not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))]
    script = JS_NUM + f"console.log(JSON.stringify({json.dumps(vals)}.map(fedevoNum)))"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [num(v) for v in vals]
