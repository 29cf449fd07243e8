"""Helpers shared by the test modules."""

import csv
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
