"""A directory held by the one fedevo process that writes it: an exclusive flock on DIR/.lock (a run directory:
a search or resume; a retrain's kept trainings). Torch-free; imports only errors."""

from __future__ import annotations

from pathlib import Path

from .errors import FedevoError

LOCK = ".lock"  # flock'ed by the process that writes the directory; never counts as its content


PROBE_WAIT_S = 0.25  # how long `hold` waits out a shared lock: `is_held`'s probe holds one for an instant


def hold(directory: Path | str, busy: FedevoError):
    """An exclusive lock on `directory` (an open file; closing it releases the lock); `busy` raised if another
    process holds it. A lock taken for less than PROBE_WAIT_S (`is_held`'s probe: the page's "still running",
    `fedevo plot --watch` every 2 s) is waited out, so that a probe never refuses a search, a resume or a
    retrain."""
    import fcntl
    import time

    fh = open(Path(directory) / LOCK, "a+")
    deadline = time.monotonic() + PROBE_WAIT_S
    try:
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fh
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise busy from None
                time.sleep(0.01)
    except BaseException:  # busy, or Ctrl-C meanwhile: no lock kept (a traceback held in a notebook keeps `fh`)
        fh.close()
        raise


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
