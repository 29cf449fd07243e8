"""Command-line interface: `fedevo problems | evaluate | search | resume | front | plot | retrain`.

Every FedevoError (bad input a user can fix) becomes one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

from ..errors import FedevoError, Terminated
from .app import app
from . import evaluate as _evaluate  # noqa: F401  (registers commands)
from . import search as _search  # noqa: F401
from . import plot as _plot  # noqa: F401
from . import audit as _audit  # noqa: F401


def _terminate(signum, frame) -> None:
    Terminated.received = True
    raise Terminated()


def main(argv=None) -> None:
    import signal
    import threading

    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if main_thread else None  # SIGTERM: as Ctrl-C
    try:
        app(args=argv, standalone_mode=True)
    except FedevoError as e:
        print(f"fedevo: error: {e}", file=sys.stderr)
        sys.exit(2)
    finally:
        if main_thread:  # called in-process (tests, scripts): the caller's handler again
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)
