"""fedevo.dirlock: one process writes a directory; a reader's probe never refuses it."""

import fcntl
import threading
import time

import pytest

from fedevo import dirlock
from fedevo.errors import FedevoError


def test_a_probe_never_refuses_the_writer(tmp_path):
    # is_held's probe takes a shared flock for an instant; a search, resume or retrain starting in that instant was
    # refused "in use by another fedevo process" (LOCK_EX | LOCK_NB fails against any lock)
    probe = open(tmp_path / dirlock.LOCK, "a+")
    fcntl.flock(probe, fcntl.LOCK_SH)  # a probe in progress
    threading.Timer(0.05, probe.close).start()  # ... which ends, as a probe does
    with dirlock.hold(tmp_path, FedevoError("busy")):  # waited the probe out (it raised "busy" at once)
        pass


def test_a_holder_is_refused_in_one_line(tmp_path):
    with open(tmp_path / dirlock.LOCK, "a+") as other:  # another process holding it for good
        fcntl.flock(other, fcntl.LOCK_EX)
        t0 = time.monotonic()
        with pytest.raises(FedevoError, match="busy"):
            dirlock.hold(tmp_path, FedevoError("busy"))
        assert time.monotonic() - t0 < 5
        assert dirlock.is_held(tmp_path)
    assert not dirlock.is_held(tmp_path)
