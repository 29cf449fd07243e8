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


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"fedevo {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="Print fedevo's version and exit.")) -> None:
    pass


def stderr_is_terminal() -> bool:
    """Whether a progress bar can be drawn on stderr: a transient rich bar in a log or a pipe is never drawn but
    leaves an empty line when it stops (before an error's one line, or after a result)."""
    from rich.console import Console

    return Console(stderr=True).is_terminal
