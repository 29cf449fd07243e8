"""The suite's tests of Ctrl-C work where the suite itself was started with SIGINT ignored (in the background)."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

INNER = "FEDEVO_TEST_INNER_SIGINT"


@pytest.mark.skipif(not os.environ.get(INNER), reason="run by the test below, in a pytest started with SIGINT ignored")
def test_inner_ctrl_c_reaches_the_test_and_the_commands_it_starts():
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
    child = subprocess.run([sys.executable, "-c", "import os, signal, time; os.kill(os.getpid(), signal.SIGINT); "
                            "time.sleep(2)"], capture_output=True, timeout=60)
    assert child.returncode != 0  # interrupted, not slept through


def test_a_suite_started_with_sigint_ignored_still_tests_ctrl_c():
    # in an xdist worker, as the suite runs (setup.cfg's -n auto): the worker and pytest's own process both ignored it
    here = Path(__file__)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-n", "1",
                        f"{here}::test_inner_ctrl_c_reaches_the_test_and_the_commands_it_starts"],
                       cwd=here.parent.parent, env={**os.environ, INNER: "1"}, capture_output=True, text=True,
                       timeout=300, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
