"""The typer application object; command modules register themselves on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="fedevo",
    help="Multi-objective (error, communication, privacy ε) search for private federated learning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
