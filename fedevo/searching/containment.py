"""User code runs contained (issue #35): whatever an evaluator or a model factory does, it ends as *that*
evaluation's result, never as the search's.

* **Output.** What user code prints (Python's ``sys.stdout``) is captured per evaluation and written to the run's
  ``user.log`` (:class:`UserLog`), and so is what it writes below Python to file descriptor 1 (in this process, fd 1
  points at the log; in the child process of a time limit, at a file the search reads back: :func:`fd1_to`), never
  to fedevo's stdout: the progress lines stay fedevo's, and
  ``fedevo evaluate --json`` prints its one object.
* **Exits.** ``sys.exit(...)`` (any code) and a ``KeyboardInterrupt`` *raised by user code* end that evaluation
  (:class:`UserExit`, status ``failed`` with its message). A real Ctrl-C still stops the search resumable: the
  SIGINT handler installed by :func:`watch_interrupts` sets a flag first, and :func:`real_interrupt` reads it
  (SIGTERM: :class:`fedevo.errors.Terminated`).
* **Shared state.** What user code changes of the process (the working directory, ``sys.stdout`` / ``sys.stderr``,
  warning filters, numpy's error handling, torch's default dtype, deterministic mode, grad mode and threads) is put
  back after each call (:func:`fedevo.usercode.kept_state`): the next evaluation gives the numbers it gives alone.
* **Results.** An ``ok`` result's built-in objectives must lie in their valid ranges (:func:`out_of_range`, from
  their ``lower`` / ``upper``); one that does not is the evaluator's error, marked ``failed``. A user's objective
  is read once, in the search's process, its output to ``user.log`` too; a value outside its range, or a read
  that raises, is that objective's worst value, with a note in the row's message.
* **Time.** With a time limit (``--eval-timeout S``, a problem file's ``eval_timeout``) an evaluation runs in a
  child process (:class:`Child`: started once, reused, killed and started again when an evaluation overruns or
  dies). Only a process can be stopped whatever it does: a thread stuck in ``time.sleep(1e9)`` or a C loop cannot
  be. The child is a plain ``python -c`` process (not multiprocessing's spawn, which would import the caller's
  ``__main__`` again); the work travels with cloudpickle. The limit counts the evaluation, not the process's
  start-up: the child answers ``R`` once torch is imported, and ``S`` for each call once it has unpickled the
  call (importing the evaluator's code) and run its warm-up (the simulator's modules, the data into the
  process's cache: ``SimulatorEvaluator.warm``), which a fresh child pays again after every kill — counted, they
  failed every evaluation of a limit near them (a digits evaluation: 0.04 s warm, 1.1 s in a fresh child, mostly
  imports). The start-up has a limit of its own, ``START_LIMIT_S``.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import math
import os
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from ..plugins import on_reimport
from ..usercode import (UserExit, call_user, captured_stdout, evaluation_output, fd1_into,  # noqa: F401  (re-exported)
                        flush_c_stdio, real_interrupt, stdout_to_stderr, watch_interrupts)


class UserLog:
    """RUN/user.log: each evaluation's output under a header naming it (nothing when it printed nothing).

    In this process (:meth:`evaluation`) file descriptor 1 points at the log while the evaluation runs, so that
    output written below Python (C code, os.write) lands there too; what Python's sys.stdout received (captured
    by the runner, as on Ray or in the child process) is appended by :meth:`write`. Without a run directory the
    output goes to stderr."""

    NAME = "user.log"

    def __init__(self, run_dir: Optional[os.PathLike]):
        self.path = Path(run_dir) / self.NAME if run_dir is not None else None

    @contextlib.contextmanager
    def evaluation(self, label: str):
        """Inside: fd 1 appends to the log, under the evaluation's header (removed again if nothing came)."""
        if self.path is None:
            with stdout_to_stderr():
                yield
            return
        sys.stdout.flush()
        start = None
        try:
            with open(self.path, "ab") as fh:
                start = fh.tell()
                fh.write(f"--- {label} ---\n".encode())
                fh.flush()
                head = fh.tell()
                try:
                    with fd1_into(fh.fileno()) as moved:  # (C's buffers flushed on the way in and out)
                        if not moved:  # no fd 1 to point at the log: as os.dup(1) says
                            raise OSError(errno.EBADF, "file descriptor 1 cannot be duplicated")
                        yield
                finally:
                    fh.seek(0, os.SEEK_END)
                    if fh.tell() == head:  # nothing was written: no header either (and no empty log)
                        fh.truncate(start)
        finally:  # also when the search stops in this evaluation (Ctrl-C): no empty log left behind
            if start == 0 and self.path.stat().st_size == 0:
                self.path.unlink()
        self._label_open = (label, head)

    def write(self, label: str, text: str) -> None:
        if not text:
            return
        if self.path is None:
            sys.stderr.write(text)
            return
        with open(self.path, "a", encoding="utf-8") as fh:
            if not self._follows(label):
                fh.write(f"--- {label} ---\n")
            fh.write(text if text.endswith("\n") else text + "\n")

    _label_open: Optional[tuple] = None

    def _follows(self, label: str) -> bool:
        """True when the log ends with this evaluation's own header and output (written by `evaluation`)."""
        opened, self._label_open = self._label_open, None
        if opened is None or opened[0] != label or self.path is None:
            return False
        try:
            with open(self.path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                return fh.tell() >= opened[1]
        except OSError:
            return False


# ============================================================================ results
def out_of_range(result) -> Optional[str]:
    """Why an `ok` result cannot be one (a built-in objective outside the range its Objective declares, NaN
    error, or infinite values where only ε may be infinite: no privacy), or None. A user's objective is read
    once, in the search's process, by the evaluation log (log.EvalLog.objective_values: a value outside its
    range is that objective's worst, with a note), not here: its function may be registered only there."""
    from ..objectives import get
    from ..objectives.builtin import BUILTIN

    for name in BUILTIN:
        obj = get(name)
        try:
            v = obj.value(result)
        except Exception:  # noqa: BLE001 - an objective this result does not carry (another branch's)
            continue
        if v is None or math.isnan(v):
            if name == "error":
                return "the evaluation's error is undefined (None/NaN) in a result marked ok"
            continue
        if math.isinf(v):
            if obj.log and v > 0:  # ε = inf: no privacy
                continue
            return f"the evaluation's {name} is infinite; {_range(obj, finite=True)}, got {v}"
        if obj.outside(v):  # the objective's own range rule (finite here), as the log applies a user's
            return f"the evaluation's {name} = {v!r} is out of range; {_range(obj)}"
    return None


def _range(obj, finite: bool = False) -> str:
    """What an objective's value must be; `finite`: said of an infinite value (>= 0 alone reads as if inf met it)."""
    if obj.upper is None:
        return (f"{obj.name} must be {'a finite number ' if finite else ''}>= {obj.lower:g}"
                + (" (or inf: no privacy)" if obj.log else ""))
    return f"{obj.name} must lie in [{obj.lower:g}, {obj.upper:g}]"


# ============================================================================ a time limit: the child process
class Timeout(Exception):
    """An evaluation ran past its time limit (the child running it was killed)."""


class ChildDied(Exception):
    """The child process running an evaluation ended without answering (os._exit, a crash, the kernel)."""


_HEADER = struct.Struct("!Q")


def _read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            raise EOFError
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


START_LIMIT_S = 600.0  # seconds a call's start-up (unpickling, warm-up) may take before its time limit counts


class Child:
    """One python process that runs pickled calls one at a time (``python -c CHILD_MAIN``)."""

    def __init__(self):
        self.proc: Optional[subprocess.Popen] = None
        self.environ: dict[str, str] = {}  # os.environ as the child got it

    def _start(self) -> None:
        import cloudpickle

        self.environ = dict(os.environ)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # what this process imports, the child can
        # -c, not -m: run as __main__, this module (imported by its package first) printed runpy's RuntimeWarning
        # ("found in sys.modules ... prior to execution") to the user's stderr at every start
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD_MAIN], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, start_new_session=True)
        self._send(cloudpickle.dumps(list(sys.path)))
        # the child answers once it has imported what evaluations need (torch: seconds on a busy machine), so that
        # its start-up never counts against an evaluation's time limit
        try:
            _read_exact(self.proc.stdout.fileno(), 1)
        except EOFError:
            code = self.proc.wait()
            self.proc = None
            raise ChildDied(f"the process for evaluations with a time limit did not start (exit code {code})") from None

    def _send(self, data: bytes) -> None:
        self.proc.stdin.write(_HEADER.pack(len(data)) + data)
        self.proc.stdin.flush()

    def call(self, fn: Callable, args: tuple, timeout: float, warm: Optional[Callable] = None):
        """fn(*args) in the child; Timeout after `timeout` s (the child killed), ChildDied if it ends. The clock
        starts once the child has unpickled the call and run `warm()` (what a process loads once)."""
        import cloudpickle

        if self.proc is not None and self.environ != dict(os.environ):  # the evaluation sees this process's environment
            self.close()  # as it is now (a later search, or a notebook's next cell, may have changed it): a new child
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        try:
            self._send(cloudpickle.dumps((fn, args, warm)))
            fd = self.proc.stdout.fileno()
            self._wait(fd, START_LIMIT_S, f"the evaluation's process did not start it within {START_LIMIT_S:g} s "
                                          "(importing its code, loading its data)")
            if _read_exact(fd, 1) != b"S":
                raise EOFError
            self._wait(fd, timeout, f"the evaluation ran past its time limit of {timeout:g} s and was stopped "
                                    "(--eval-timeout / eval_timeout)")
            (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
            answer = cloudpickle.loads(_read_exact(fd, n))
        except (EOFError, BrokenPipeError):
            code = self.proc.wait() if self.proc is not None else None
            self.proc = None
            raise ChildDied(f"the evaluation's process ended without a result (exit code {code})") from None
        except BaseException:  # Ctrl-C while waiting: the child goes with the search
            self.close()
            raise
        if isinstance(answer, ChildDied):
            raise answer
        return answer

    def _wait(self, fd: int, seconds: float, overrun: str) -> None:
        """Until the child has written to `fd`; Timeout(overrun), the child killed, after `seconds`."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise Timeout(overrun)
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                return

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=10)
            for f in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    f.close()
            self.proc = None


# what the child runs: the current folder ('' first on a `-c` process's path) left out before fedevo is imported, so
# that the child imports the fedevo its parent runs (PYTHONPATH: the parent's path), not a fedevo/ folder where the
# search was started (review18 F7); then the parent's path, as it sends it
CHILD_MAIN = ("import sys; sys.path[:] = [p for p in sys.path if p]; "
              "from fedevo.searching.containment import _child_main; _child_main()")
_CHILD = Child()  # one per process (the search's, or a Ray worker's), started on first use
atexit.register(_CHILD.close)
# a reload taken (a module beside a user's file, fedevo.plugins): the child imported the old text, so it is ended and
# the next evaluation under a time limit starts one that imports the new
on_reimport(_CHILD.close)


@contextlib.contextmanager
def fd1_to(path: os.PathLike):
    """Inside: file descriptor 1 (output below Python: C code, ``os.write(1, ...)``) appends to the file `path`.
    The child process runs each evaluation so, the file named by the search's process, which reads it whether
    the evaluation returned or was stopped: the child's fd 1 is otherwise fedevo's stderr, where such output went
    instead of the run's user.log."""
    fh = None
    with contextlib.suppress(OSError):  # the file cannot be opened: the output goes where fd 1 goes
        fh = open(path, "ab")
    if fh is None:
        yield
        return
    with fh, fd1_into(fh.fileno()):
        yield


class _Below:
    text = ""  # what fd 1 received inside `fd1_captured` / `fd1_file`, once the block has ended
    path: Optional[str] = None  # `fd1_file`'s file (None: none could be made)


@contextlib.contextmanager
def sizing_output(run_dir: Optional[os.PathLike], label: str):
    """Inside: the search sizes candidates' models (their cost, to start the longest first) in its own process, not
    in an evaluation; what a user's model factory prints meanwhile (Python's sys.stdout and below Python, fd 1) goes
    to the run's user.log under `label`, as an evaluation's output does (it reached the terminal through stderr,
    between the progress display's lines)."""
    buf = below = None
    try:
        with evaluation_output(), fd1_captured() as below, captured_stdout() as buf:
            yield
    finally:
        UserLog(run_dir).write(label, (buf.getvalue() if buf is not None else "")
                               + (below.text if below is not None else ""))


@contextlib.contextmanager
def fd1_captured():
    """Inside: file descriptor 1 to a temporary file, whose text the yielded object's ``text`` holds once the
    block ends. A Ray worker runs each task so: its fd 1 is Ray's worker log, on the node. The file is unlinked as
    soon as it is made and read back through its descriptor: no kill of the process (a force-cancelled Ray task,
    SIGKILL) leaves it behind."""
    import tempfile

    below = _Below()
    fd = None
    with contextlib.suppress(OSError):  # no writable temporary folder: the output goes where fd 1 goes
        fd, path = tempfile.mkstemp(prefix="fedevo-fd1-")
        with contextlib.suppress(OSError):
            os.unlink(path)
    if fd is None:
        yield below
        return
    try:
        with fd1_into(fd):
            yield below
    finally:
        below.text = _read_back(fd)
        os.close(fd)


def _read_back(fd: int) -> str:
    chunks = []
    with contextlib.suppress(OSError):
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode("utf-8", errors="replace")


@contextlib.contextmanager
def fd1_file():
    """Inside: a temporary file for the child process of a time limit to point its fd 1 at (the yielded object's
    ``path``, None where none can be made); once the block ends, its text is the object's ``text`` and the file is
    gone. The child needs a path (it opens the file itself, and the file outlives a child that is killed), so the
    file exists while the evaluation runs: a normal end, an exception and Ctrl-C remove it; a SIGKILL of the
    search's process (or a machine's crash) leaves /tmp/fedevo-fd1-* behind, an empty or small file."""
    import tempfile

    below = _Below()
    fd = None
    with contextlib.suppress(OSError):  # no writable temporary folder: that output goes to stderr, as it did
        fd, below.path = tempfile.mkstemp(prefix="fedevo-fd1-")
    try:
        yield below
    finally:
        if fd is not None:
            below.text = _read_back(fd)  # (the child appends to the file by its path: read here through ours)
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(below.path)


def in_child_fd1(fn: Callable, args: tuple, path: Optional[str], timeout: float, warm: Optional[Callable] = None):
    """`in_child` of fn(*args), the child's fd 1 (output below Python) to the file `path` meanwhile (None: left as
    it is); `fd1_file` makes and reads it."""
    return in_child(_with_fd1, (path, fn, args), timeout, warm)


def _with_fd1(path: Optional[str], fn: Callable, args: tuple):
    """fn(*args) in the child, its fd 1 to `path`."""
    with fd1_to(path) if path else contextlib.nullcontext():
        return fn(*args)


def in_child(fn: Callable, args: tuple, timeout: float, warm: Optional[Callable] = None):
    """fn(*args) in this process's child, within `timeout` seconds (Timeout / ChildDied otherwise), counted from
    when `warm()` (what the process loads once: not counted) has run there."""
    return _CHILD.call(fn, args, timeout, warm)


def close_child() -> None:
    _CHILD.close()


def _child_main() -> None:
    """The child's loop: read (fn, args), answer fn(*args); an exception is answered as itself."""
    import cloudpickle

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (it kills this process)
    rfd, wfd = sys.stdin.fileno(), os.dup(sys.stdout.fileno())
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # C-level output of user code never reaches the pipe
    (n,) = _HEADER.unpack(_read_exact(rfd, _HEADER.size))
    sys.path[:] = cloudpickle.loads(_read_exact(rfd, n))
    import fedevo.result  # noqa: F401  (what every call returns)

    with contextlib.suppress(ImportError):
        import torch  # noqa: F401  (fedevo's simulator and most evaluators train with it)
    os.write(wfd, b"R")  # ready
    while True:
        try:
            (n,) = _HEADER.unpack(_read_exact(rfd, _HEADER.size))
        except EOFError:
            return
        data = _read_exact(rfd, n)
        try:
            fn, args, warm = cloudpickle.loads(data)
        except BaseException as e:  # noqa: BLE001 - answered, the parent decides
            fn, args, warm, answer = None, (), None, ChildDied(f"{type(e).__name__}: {e}")
        if warm is not None:
            with contextlib.suppress(Exception):  # what fails here fails again in the call itself, and is told
                warm()
        os.write(wfd, b"S")  # started: the time limit counts from here
        try:
            if fn is not None:
                answer = fn(*args)
        except BaseException as e:  # noqa: BLE001 - answered, the parent decides
            answer = ChildDied(f"{type(e).__name__}: {e}")
        try:
            out = cloudpickle.dumps(answer)
        except Exception as e:  # noqa: BLE001
            out = cloudpickle.dumps(ChildDied(f"the evaluation's result cannot be sent back: {type(e).__name__}: {e}"))
        os.write(wfd, _HEADER.pack(len(out)))
        view = memoryview(out)
        while view:
            view = view[os.write(wfd, view):]




__all__ = ["START_LIMIT_S", "Child", "ChildDied", "Timeout", "UserExit", "UserLog", "call_user",
           "captured_stdout", "close_child", "evaluation_output", "fd1_captured", "fd1_file", "fd1_into", "fd1_to",
           "flush_c_stdio", "in_child", "in_child_fd1", "out_of_range", "real_interrupt", "stdout_to_stderr",
           "watch_interrupts"]
