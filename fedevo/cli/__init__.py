"""Command-line interface: `fedevo problems | evaluate | search | resume | front | plot | retrain`.

Every FedevoError (bad input a user can fix) becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

from ..errors import FedevoError, Terminated, command_line
from .app import app
from . import evaluate as _evaluate  # noqa: F401  (registers commands)
from . import search as _search  # noqa: F401
from . import plot as _plot  # noqa: F401
from . import audit as _audit  # noqa: F401


def _short_helps() -> None:
    """Each command's line in `fedevo --help`: its docstring's first paragraph as one line, for the terminal to wrap
    (typer's rich mode keeps the docstring's own line breaks there: 'out of the installed' / 'package, ...')."""
    import inspect

    for info in app.registered_commands:
        if info.short_help is None and info.callback is not None and info.callback.__doc__:
            info.short_help = " ".join(inspect.cleandoc(info.callback.__doc__).split("\n\n")[0].split())


_short_helps()


def _terminate(signum, frame) -> None:
    Terminated.received = True
    raise Terminated()


def _usage_line(e) -> str:
    """A click error as one line: the message and where help is (`fedevo search --help`)."""
    msg = " ".join(e.format_message().split())
    ctx = getattr(e, "ctx", None)
    return f"{msg} (see `{ctx.command_path} --help`)" if ctx is not None else msg


def main(argv=None) -> None:
    if argv is None:  # the program itself: a crash in native code (a user's extension) prints where it happened
        import faulthandler

        if not faulthandler.is_enabled():
            faulthandler.enable(all_threads=False)
    try:
        _main(argv)
    except SystemExit as e:
        if argv is None:  # the program itself (not called from Python): its work is done, end it now
            from ..usercode import exit_without_threads_left, stdout_done

            stdout_done()  # what a user's thread prints from now on goes to stderr, not after `--json`'s object
            exit_without_threads_left(e.code)
        raise


def _main(argv=None) -> None:
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    Terminated.received = False  # a SIGTERM that stopped an earlier command in this process is not this one's
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None  # SIGTERM: as Ctrl-C
    from importlib import import_module

    try:  # recent typer carries its own copy of click; an older one uses click itself
        click = import_module("typer._click.exceptions")
    except ImportError:  # pragma: no cover
        click = import_module("click.exceptions")

    try:
        with command_line():  # messages name the options (--workers), not the Python API's keywords (workers=)
            code = app(args=argv, standalone_mode=False)
    except FedevoError as e:
        print(f"fedevo: error: {e}", file=sys.stderr)
        sys.exit(2)
    except click.NoArgsIsHelpError as e:  # `fedevo` alone, `fedevo search --help`-like: the help
        print(e.ctx.get_help(), file=sys.stderr)
        sys.exit(2)
    except click.ClickException as e:  # the command line's own option errors: the same one line (not a panel)
        print(f"fedevo: error: {_usage_line(e)}", file=sys.stderr)
        sys.exit(e.exit_code)
    else:  # as click's standalone mode: the process ends here, with the command's exit code
        sys.exit(code if isinstance(code, int) else 0)
    finally:
        if main_thread:  # called in-process (tests, scripts): the caller's handler again
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
