"""Calling user code (a model factory, an evaluator) so that what it does ends with *it* (issue #35): sys.exit and
a KeyboardInterrupt it raises become :class:`UserExit`, an exception like any other; a real Ctrl-C (a SIGINT to
this process, flagged by the handler :func:`watch_interrupts` installs) and SIGTERM stay interrupts; what it
changes of the process's shared state (the working directory, the streams, warning filters, torch's defaults) is
put back (:func:`kept_state`); its output can be collected or sent to stderr. The bottom layer: every other
module may use it (fedevo.searching.containment builds the search's containment on it)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import warnings
from typing import Callable, Optional

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
    """User code called sys.exit or raised KeyboardInterrupt: the end of one evaluation, never of the search.
    `what`: what the code did, e.g. 'sys.exit(3)' (for a message of another context than an evaluation)."""

    def __init__(self, message: str, what: str = ""):
        super().__init__(message)
        self.what = what or message


def call_user(fn: Callable, *args, **kwargs):
    """fn(*args, **kwargs) with SystemExit, os._exit (called in this thread), a KeyboardInterrupt that no signal
    caused and any other BaseException (GeneratorExit, the user's own subclass) turned into UserExit, and the
    process state it may change put back (:func:`kept_state`)."""
    try:
        with kept_state(), _os_exit_raises():
            return fn(*args, **kwargs)
    except KeyboardInterrupt as e:
        if real_interrupt(e):
            raise
        raise _raised(e) from None
    except _OsExit as e:
        raise UserExit(f"os._exit({e.code!r}) called by the evaluation's code (it ends that evaluation, not the "
                       "search)", f"called os._exit({e.code!r})") from None
    except SystemExit as e:
        raise UserExit(f"sys.exit({e.code!r}) called by the evaluation's code (it ends that evaluation, not the "
                       "search)", f"called sys.exit({e.code!r})") from None
    except Exception:
        raise
    except BaseException as e:  # noqa: BLE001 - GeneratorExit, a BaseException subclass: not the search's end
        raise _raised(e) from None


def _raised(e: BaseException) -> UserExit:
    said = f": {e}" if str(e) else ""
    return UserExit(f"{type(e).__name__} raised by the evaluation's code{said}", f"raised {type(e).__name__}{said}")


class _OsExit(SystemExit):
    """os._exit called by user code inside call_user: unwound as sys.exit is, instead of ending the process."""


_REAL_OS_EXIT = os._exit
_exit_lock = threading.Lock()
_exit_threads: dict[int, int] = {}  # thread id -> call_user depth in it, while os._exit is replaced
_exit_pid = 0  # the process that replaced it (a child forked by user code exits for real)


def _os_exit(code):
    if os.getpid() == _exit_pid and threading.get_ident() in _exit_threads:
        raise _OsExit(code)
    _REAL_OS_EXIT(code)  # another thread (Ray's own, one the user left running) or process: as os._exit does


@contextlib.contextmanager
def _os_exit_raises():
    """While inside, os._exit called by this thread raises _OsExit (in-process, it ended the search with exit
    code 0 and no word: a failure that looked like a finished run)."""
    global _exit_pid
    me = threading.get_ident()
    with _exit_lock:
        if not _exit_threads:
            _exit_pid = os.getpid()
            os._exit = _os_exit
        _exit_threads[me] = _exit_threads.get(me, 0) + 1
    try:
        yield
    finally:
        with _exit_lock:
            _exit_threads[me] -= 1
            if not _exit_threads[me]:
                del _exit_threads[me]
            if not _exit_threads:
                os._exit = _REAL_OS_EXIT


_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # how a search is stopped (resumable)

# torch's process-wide settings as a fresh import has them (user code may import torch for the first time)
_TORCH_DEFAULTS = {"dtype": "float32", "deterministic": (False, False)}


def _torch_state(torch) -> dict:
    return {"dtype": torch.get_default_dtype(), "threads": torch.get_num_threads(), "grad": torch.is_grad_enabled(),
            "deterministic": (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())}


def _set_torch_state(torch, state: dict) -> None:
    """Each setting put back only where it changed (torch.use_deterministic_algorithms takes seconds at its first
    call: it imports torch's compiler)."""
    now = _torch_state(torch)
    dtype = getattr(torch, state["dtype"]) if isinstance(state["dtype"], str) else state["dtype"]
    if now["dtype"] != dtype:
        torch.set_default_dtype(dtype)
    if "threads" in state and now["threads"] != state["threads"]:
        torch.set_num_threads(state["threads"])
    if now["grad"] != state.get("grad", True):
        torch.set_grad_enabled(state.get("grad", True))
    if now["deterministic"] != state["deterministic"]:
        on, warn_only = state["deterministic"]
        torch.use_deterministic_algorithms(on, warn_only=warn_only)


@contextlib.contextmanager
def kept_state():
    """Inside, user code may change what the process shares; after it, fedevo's next step (the next evaluation,
    the run directory's writes, the progress lines) finds it as before: the working directory (a relative run
    directory), sys.stdout and sys.stderr, the SIGINT and SIGTERM handlers (in the main thread), the warning
    filters, numpy's floating-point error handling, and
    torch's default dtype (float64 made every later simulator evaluation 'diverged'), deterministic mode, grad
    mode and intra-op threads."""
    cwd = _getcwd()
    streams = sys.stdout, sys.stderr
    torch = sys.modules.get("torch")
    state = _torch_state(torch) if torch is not None else _TORCH_DEFAULTS
    filters = list(warnings.filters)
    handlers = ({n: signal.getsignal(n) for n in _SIGNALS}
                if threading.current_thread() is threading.main_thread() else {})
    np = sys.modules.get("numpy")
    floating = np.geterr() if np is not None else None
    try:
        yield
    finally:
        if warnings.filters != filters:  # only then: a change clears the registries of warnings shown once
            warnings.filters[:] = filters
            warnings._filters_mutated()
        if cwd is not None and _getcwd() != cwd:
            with contextlib.suppress(OSError):
                os.chdir(cwd)
        sys.stdout, sys.stderr = streams
        for n, handler in handlers.items():  # Ctrl-C and SIGTERM stop the search again (SIG_IGN: nothing did)
            if signal.getsignal(n) is not handler and handler is not None:
                signal.signal(n, handler)
        if floating is not None:
            np.seterr(**floating)
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "set_default_dtype"):  # not a half-imported torch
            _set_torch_state(torch, state)


def _getcwd():
    """The working directory, or None where it was removed (nothing to go back to)."""
    try:
        return os.getcwd()
    except OSError:
        return None


EXIT_GRACE_S = 10.0  # how long the program's exit waits for threads that are not daemons before it ends anyway


def exit_without_threads_left(code, grace: Optional[float] = None) -> None:
    """Where threads that are not daemons are running when the program's work is done (sys.exit's `code`), watch
    Python's exit, which waits for them: if some still run `grace` seconds later (default EXIT_GRACE_S, read at the
    call; user code left them: a time.sleep(1e9) in one held `fedevo search` forever after its results), say so in
    one line on stderr, run the exit handlers and end the process with `code`. Threads that end on their own (a
    pool's, shut down by Python's exit) end it as usual. Returns at once: the caller goes on exiting."""
    if not _threads_left():
        return
    grace = EXIT_GRACE_S if grace is None else grace
    code = 0 if code is None else code if isinstance(code, int) else 1  # as Python's own exit reads sys.exit's

    def watch():
        import time

        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _threads_left():
                return
            time.sleep(0.1)
        left = _threads_left()
        names = ", ".join(t.name for t in left[:3]) + (", ..." if len(left) > 3 else "")
        print(f"fedevo: {len(left)} thread{'s' if len(left) != 1 else ''} that user code left running ({names}) "
              f"still held the process {grace:g} s after its work; not waiting for them", file=sys.stderr)
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        _REAL_OS_EXIT(code)

    threading.Thread(target=watch, name="fedevo-exit-watch", daemon=True).start()


def _threads_left() -> list:
    return [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]


@contextlib.contextmanager
def captured_stdout(stderr: bool = False):
    """Python-level stdout of the code inside (and its sys.stderr, in order with it, where `stderr`), collected (a
    StringIO) instead of printed."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), (contextlib.redirect_stderr(buf) if stderr else contextlib.nullcontext()):
        yield buf


def flush_c_stdio() -> None:
    """C's stdio buffers flushed (``fflush(NULL)``) to the file descriptors they write to: a ``printf`` of user
    code (C, ctypes) is fully buffered when fd 1 is a file or a pipe, and would otherwise reach whatever fd 1 points
    at when the buffer fills or the process exits (after the redirect that was meant to catch it has ended).
    Called before fd 1 is pointed elsewhere and before it is put back. Nothing where there is no C library to ask
    (not POSIX)."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(Exception):
            libc.fflush(None)


_LIBC: list = []  # [the C library, or None where there is none], once looked up


def _libc():
    if not _LIBC:
        lib = None
        if os.name == "posix":
            with contextlib.suppress(Exception):  # (OSError, or no fflush in it)
                import ctypes

                lib = ctypes.CDLL(None)
                lib.fflush  # noqa: B018 - looked up here: a library without it is none
        _LIBC.append(lib)
    return _LIBC[0]


@contextlib.contextmanager
def fd1_into(fd: int):
    """Inside: fd 1 is a duplicate of `fd`; yields whether it is (False where fd 1 cannot be saved: no stdout at all,
    left as it is). C's stdio buffers are flushed before fd 1 is pointed at `fd` (earlier output to where it was
    going) and before it is put back (the block's own printf into `fd`), as is Python's sys.stdout."""
    sys.stdout.flush()
    saved = None
    with contextlib.suppress(OSError):  # no fd 1 at all
        saved = os.dup(1)
    if saved is None:  # (yielded outside the except: an exception of the block carries no OSError as context)
        yield False
        return
    try:
        flush_c_stdio()
        os.dup2(fd, 1)
        try:
            yield True
        finally:
            try:
                with contextlib.suppress(Exception):  # (a closed or broken sys.stdout: fd 1 is put back all the same)
                    sys.stdout.flush()
                flush_c_stdio()
            finally:  # (put back even when a second Ctrl-C lands in the flushes)
                os.dup2(saved, 1)
    finally:
        os.close(saved)


_EVALUATING = [0]  # how many `evaluation_output` blocks this process is inside


@contextlib.contextmanager
def evaluation_output():
    """Inside: an evaluation runs whose output its caller collects for the run's user.log (its sys.stdout captured,
    fd 1 pointed at the log or at a file read back into it): user code that `stdout_to_stderr` guards there (a
    model sized or loaded during the evaluation) writes where the rest of the evaluation's output goes."""
    _EVALUATING[0] += 1
    try:
        yield
    finally:
        _EVALUATING[0] -= 1


@contextlib.contextmanager
def stdout_to_stderr():
    """File descriptor 1 pointed at stderr while inside (C-level output too): stdout stays for one JSON object.
    Inside an evaluation (`evaluation_output`) nothing: its output, collected, goes to the run's user.log."""
    if _EVALUATING[0]:
        yield
        return
    with fd1_into(2) as moved, (contextlib.redirect_stdout(sys.stderr) if moved else contextlib.nullcontext()):
        yield


def stdout_done() -> None:
    """From here on, file descriptor 1 and sys.stdout point at stderr: stdout keeps what was written to it so far
    alone (a user's thread that prints after its evaluation returned writes to stderr, not after `--json`'s
    object). For the program's own end only (cli.main): it takes the process's stdout away."""
    with contextlib.suppress(Exception):  # a closed pipe (`fedevo front | head`): nothing more reaches it anyway
        sys.stdout.flush()
    with contextlib.suppress(OSError):  # no stdout or stderr at all: nothing to keep apart
        os.dup2(2, 1)
    sys.stdout = sys.stderr




SLOW_NOTE_S = 10.0  # seconds user code called at load time may run before one line says what fedevo waits for


@contextlib.contextmanager
def noted_if_slow(what: str):
    """Inside: if the code runs past SLOW_NOTE_S seconds, one line on stderr says what fedevo is waiting for (a
    model factory that hangs at a gene's bound, checked when the problem loads, is otherwise a silent hang before
    anything is printed); nothing if it returns sooner."""
    def note():
        with contextlib.suppress(Exception):  # no stderr: nothing to tell
            print(f"fedevo: {what} has not returned after {SLOW_NOTE_S:g} s; still waiting for it (Ctrl-C stops)",
                  file=sys.__stderr__, flush=True)
    timer = threading.Timer(SLOW_NOTE_S, note)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


__all__ = ["SLOW_NOTE_S", "UserExit", "call_user", "captured_stdout", "evaluation_output", "exit_without_threads_left",
           "fd1_into", "flush_c_stdio", "kept_state", "noted_if_slow", "real_interrupt", "stdout_done",
           "stdout_to_stderr", "watch_interrupts"]
