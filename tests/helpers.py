"""Helpers shared by the test modules."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedevo.cli import main


def run_cli(argv, capsys) -> tuple:
    """Run `fedevo ARGV` in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


REPO = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args, timeout: int = 300) -> subprocess.CompletedProcess:
    """benchmarks/SCRIPT run with ARGS by this Python, this checkout's fedevo first on its path: its exit code,
    stdout and stderr (text)."""
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
