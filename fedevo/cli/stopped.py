"""What a command says when Ctrl-C or SIGTERM stops it: one line on stderr, then exit 130 (Ctrl-C) or 143
(SIGTERM), as `fedevo search` does."""

from __future__ import annotations

import sys

import typer

from ..errors import Terminated


def how_stopped(e: KeyboardInterrupt) -> tuple[str, int]:
    """("interrupted", 130) for Ctrl-C, ("stopped by SIGTERM", 143) for SIGTERM (fedevo.errors.Terminated, or a
    plain KeyboardInterrupt Ray's core re-raised for it)."""
    term = isinstance(e, Terminated) or Terminated.received
    return ("stopped by SIGTERM", 143) if term else ("interrupted", 130)


def stopped(e: KeyboardInterrupt, what: str) -> typer.Exit:
    """Print `fedevo: interrupted; WHAT` (or `stopped by SIGTERM; WHAT`) and return the Exit to raise."""
    how, code = how_stopped(e)
    print(f"fedevo: {how}; {what}", file=sys.stderr)
    return typer.Exit(code)
