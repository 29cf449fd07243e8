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


def run_dir_path(value) -> "Path":
    """A run directory argument as a Path; an empty one refused (`fedevo front "$run"` where `$run` held nothing
    would otherwise read the current folder: Path("") is ".")."""
    from pathlib import Path

    if isinstance(value, str) and not value.strip():
        raise typer.BadParameter("empty: name a run directory (a shell variable that held nothing?)")
    return Path(value)


def stderr_is_terminal() -> bool:
    """Whether a progress bar can be drawn on stderr: a transient rich bar in a log or a pipe is never drawn but
    leaves an empty line when it stops (before an error's one line, or after a result)."""
    from rich.console import Console

    return Console(stderr=True).is_terminal
