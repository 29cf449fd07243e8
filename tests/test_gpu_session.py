"""benchmarks/gpu_session.sh's steps (issue #37's GPU figures) stay runnable.

A lent GPU has about 15 minutes a session, starts included, and most sessions have none: a step that fails for a
reason of its own (a function renamed, a return value changed, a test file moved) costs the next GPU session that
step. Here: every test file and benchmark script a step names exists (each script imports and parses its options:
tests/test_benchmark_scripts.py), and the steps that need no GPU run as the script writes them (fewer repeats)."""

from __future__ import annotations

import re
import shlex

import pytest

from .helpers import REPO, run_benchmark

SCRIPT = REPO / "benchmarks" / "gpu_session.sh"
#: the steps that run on any machine, and what shortens them here
HOST_STEPS = {"plan": ["--repeats", "1"], "accountant": ["--repeats", "1"], "secagg": ["--repeats", "1"],
              "convoy": ["--ops", "200"]}


def steps() -> dict[str, list[str]]:
    """{step name: its command's words} as gpu_session.sh's `step NAME SECONDS COMMAND...` lines write them."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    return {m.group(1): shlex.split(m.group(2)) for m in re.finditer(r"^step (\S+) \d+ (.*)$", text, re.M)}


def _benchmark(words: list[str]) -> tuple[str, list[str]]:
    """The benchmark script a step runs and its arguments."""
    i = next(i for i, w in enumerate(words) if w.startswith("benchmarks/") and w.endswith(".py"))
    return words[i].removeprefix("benchmarks/"), words[i + 1:]


def test_the_steps_are_read():
    got = steps()
    assert {"tests", "round", "generation", "plan", "accountant", "secagg", "convoy", "generation-cnn"} <= set(got)
    assert all(name in got for name in HOST_STEPS)


def test_every_test_file_a_step_names_exists():
    files = [w for words in steps().values() for w in words if w.startswith("tests/")]
    assert files and all((REPO / f).is_file() for f in files), [f for f in files if not (REPO / f).is_file()]


def test_every_benchmark_a_step_runs_exists():
    """(tests/test_benchmark_scripts.py: each answers --help.)"""
    scripts = {_benchmark(words)[0] for name, words in steps().items() if name != "tests"}
    assert scripts and all((REPO / "benchmarks" / s).is_file() for s in scripts)


@pytest.mark.parametrize("name", sorted(HOST_STEPS))
def test_the_host_side_steps_run_here(name):
    script, args = _benchmark(steps()[name])
    out = run_benchmark(script, *args, *HOST_STEPS[name], timeout=300)
    assert out.returncode == 0, (out.stdout[-1500:], out.stderr[-2500:])
    assert out.stdout.strip()
