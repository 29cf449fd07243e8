"""fedevo/usercode.py's fd-1 redirect puts fd 1 back whatever ends the block (its other uses are tested where the
output goes: tests/searching/test_c_output.py, test_containment.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

from fedevo import usercode


def _fd1():
    st = os.fstat(1)
    return st.st_dev, st.st_ino


@pytest.mark.parametrize("where", ["block", "exit flush"])
def test_fd1_is_put_back_when_ctrl_c_lands_in_the_block_or_in_its_closing_flushes(monkeypatch, where):
    before = _fd1()
    fd, path = tempfile.mkstemp()
    calls = []
    real = usercode.flush_c_stdio

    def flush():  # the second call is the one on the way out
        calls.append(1)
        if where == "exit flush" and len(calls) == 2:
            raise KeyboardInterrupt
        real()

    monkeypatch.setattr(usercode, "flush_c_stdio", flush)
    try:
        with pytest.raises(KeyboardInterrupt):
            with usercode.fd1_into(fd) as moved:
                assert moved and _fd1() == (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
                if where == "block":
                    raise KeyboardInterrupt
        assert _fd1() == before
    finally:
        os.close(fd)
        os.unlink(path)
