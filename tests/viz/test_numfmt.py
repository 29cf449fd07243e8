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


HALVES = [528.5, 527.5, 0.0625, 0.3125, 2.5, 12.25, 12.75, 99.5, 100.5, 128.5, 1234.5, 12345.0, 1250.0, 1350.0,
          2.5e3, 1.25e15, 2.5e15, 999.5, 0.0009765625, 3.125e-5, 4.5, 0.5625]


def _node(script: str):
    return json.loads(subprocess.run(["node"], input=script, capture_output=True, text=True, check=True).stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_formatter_rounds_exact_halves_as_python():
    """Python's format rounds a value lying exactly halfway to the even neighbour (528.5 → "528", 0.0625 →
    "0.062"); JavaScript's toPrecision / toFixed round it up ("529", "0.063"): the page's twin must not. Every exact
    half at three significant digits (and at the decimals below 1) from 2^-12 to 2^12 scales, both signs, and random
    values: the same text in both."""
    import random

    rng = random.Random(28)
    vals = list(HALVES)
    for _ in range(2000):
        v = (rng.randint(1, 20000) + 0.5) * 2.0 ** rng.randint(-12, 12)
        vals += [v, -v, rng.random() * 10 ** rng.randint(-8, 16)]
    got = _node(JS_NUM + f"console.log(JSON.stringify({json.dumps(vals)}.map(fedevoNum)))")
    bad = [(v, js, num(v)) for v, js in zip(vals, got) if js != num(v)]
    assert not bad, bad[:10]
    assert num(528.5) == "528" and num(0.0625) == "0.062"  # the audit's case, and a decimal one


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_reads_back_what_the_formatter_writes():
    """fedevoParseNum (the page's caps and typed ranges) reads the numbers the page writes -- num's own text of many
    values reads back within num's rounding -- and the forms people type: thousands separators, a unit word of the
    quantity, inf / Infinity / ∞; anything else is an error, never a part of the text."""
    units = ["params/round/client slot", "params", "parameters"]
    cases = {"1k": 1000, "1.3k": 1300, "1.1k": 1100, "1,000": 1000, "1,234.5": 1234.5, "1000 params": 1000,
             "1000 params/round": 1000, "2.5M": 2.5e6, "1G": 1e9, "1B": 1e9, "1T": 1e12, "1e3": 1000, "0.05": 0.05,
             ".5": 0.5, "−3": -3, " 7 ": 7, "inf": "inf", "Infinity": "inf", "∞": "inf", "+inf": "inf", "-inf": "-inf",
             "": None}
    bad = ["1,0x", "1,00", "1,0000", "abc", "1e3k", "1kparams", "12 foo", "null", "1..2", "0,5"]
    vals = [0.0123, 0.5, 3.2, 12.3, 250, 999.4, 1234, 12345.6, 1e5, 2.5e9, 7e7, 1e12, 2.3e-6, -0.0831]
    script = JS_NUM + (
        "const show = r => r.error ? {error: r.error} : r.value === Infinity ? 'inf' : r.value === -Infinity ? "
        "'-inf' : r.value;"
        f"console.log(JSON.stringify([{json.dumps(list(cases))}.map(t => show(fedevoParseNum(t, {json.dumps(units)}))),"
        f"{json.dumps(bad)}.map(t => show(fedevoParseNum(t, {json.dumps(units)}))),"
        f"{json.dumps(vals)}.map(v => show(fedevoParseNum(fedevoNum(v), [])))]))")
    good, refused, back = _node(script)
    assert dict(zip(cases, good)) == cases
    assert all(isinstance(r, dict) and "error" in r for r in refused), dict(zip(bad, refused))
    for v, r in zip(vals, back):
        assert num(r) == num(v), (v, r)  # what the page wrote reads back as the number it stands for
