"""What a command says when Ctrl-C or SIGTERM stops it: one line on stderr, then exit 130 (Ctrl-C) or 143
(SIGTERM), as `fedevo search` does."""

from __future__ import annotations

import sys

import typer

from ..errors import Terminated


def stopped(e: KeyboardInterrupt, what: str) -> typer.Exit:
    """Print `fedevo: interrupted; WHAT` (or `stopped by SIGTERM; WHAT`) and return the Exit to raise."""
    term = isinstance(e, Terminated) or Terminated.received
    print(f"fedevo: {'stopped by SIGTERM' if term else 'interrupted'}; {what}", file=sys.stderr)
    return typer.Exit(143 if term else 130)
