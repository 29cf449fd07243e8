"""Calling user code (a model factory, an evaluator) so that what it does ends with *it* (issue #35): sys.exit and
a KeyboardInterrupt it raises become :class:`UserExit`, an exception like any other; a real Ctrl-C (a SIGINT to
this process, flagged by the handler :func:`watch_interrupts` installs) and SIGTERM stay interrupts; its output
can be collected or sent to stderr. The bottom layer: every other module may use it (fedevo.searching.containment
builds the search's containment on it)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
from typing import Callable

from .errors import Terminated


class _Sigint:
    received = False  # set by the handler watch_interrupts installs: a KeyboardInterrupt now is the user's Ctrl-C


@contextlib.contextmanager
def watch_interrupts():
    """While inside, SIGINT first records that it was received, then does what it did before (Python's default:
    KeyboardInterrupt). Only in the main thread, and only over a Python-level handler."""
    previous = signal.getsignal(signal.SIGINT)
    install = threading.current_thread() is threading.main_thread() and callable(previous)
    if install:
        def handler(signum, frame):
            _Sigint.received = True
            previous(signum, frame)

        _Sigint.received = False
        signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGINT, previous)


def real_interrupt(e: BaseException) -> bool:
    """True when `e` (a KeyboardInterrupt) comes from a signal to this process, not from user code raising it."""
    return isinstance(e, Terminated) or Terminated.received or _Sigint.received


class UserExit(Exception):
    """User code called sys.exit or raised KeyboardInterrupt: the end of one evaluation, never of the search."""


def call_user(fn: Callable, *args, **kwargs):
    """fn(*args, **kwargs) with SystemExit, a KeyboardInterrupt that no signal caused and any other BaseException
    (GeneratorExit, the user's own subclass) turned into UserExit."""
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt as e:
        if real_interrupt(e):
            raise
        raise UserExit(f"KeyboardInterrupt raised by the evaluation's code{f': {e}' if str(e) else ''}") from None
    except SystemExit as e:
        raise UserExit(f"sys.exit({e.code!r}) called by the evaluation's code (it ends that evaluation, not the "
                       "search)") from None
    except Exception:
        raise
    except BaseException as e:  # noqa: BLE001 - GeneratorExit, a BaseException subclass: not the search's end
        raise UserExit(f"{type(e).__name__} raised by the evaluation's code{f': {e}' if str(e) else ''}") from None


@contextlib.contextmanager
def captured_stdout():
    """Python-level stdout of the code inside, collected (a StringIO) instead of printed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        yield buf


@contextlib.contextmanager
def stdout_to_stderr():
    """File descriptor 1 pointed at stderr while inside (C-level output too): stdout stays for one JSON object."""
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all
        yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


__all__ = ["UserExit", "call_user", "captured_stdout", "real_interrupt", "stdout_to_stderr", "watch_interrupts"]
