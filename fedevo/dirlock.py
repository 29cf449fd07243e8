"""A directory held by the one fedevo process that writes it: an exclusive flock on DIR/.lock (a run directory:
a search or resume; a retrain's kept trainings). Torch-free; imports only errors."""

from __future__ import annotations

from pathlib import Path

from .errors import FedevoError

LOCK = ".lock"  # flock'ed by the process that writes the directory; never counts as its content


def hold(directory: Path | str, busy: FedevoError):
    """An exclusive lock on `directory` (an open file; closing it releases the lock); `busy` raised if another
    process holds it."""
    import fcntl

    fh = open(Path(directory) / LOCK, "a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        raise busy from None
    return fh


def is_held(directory: Path | str) -> bool:
    """Whether a process holds `directory`'s lock; read without writing."""
    import fcntl

    try:
        fh = open(Path(directory) / LOCK, "rb")
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


__all__ = ["LOCK", "hold", "is_held"]
