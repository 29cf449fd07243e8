"""User-facing errors: the CLI prints their message on one line and exits with code 2. `arg`: an argument named in
a message as its caller spells it (`--workers 4` on the command line, `workers=4` from Python)."""

import contextlib
import sys
import warnings

_UNSET = object()
_command_line = [False]  # True while a command of fedevo's command line runs (`command_line`)


@contextlib.contextmanager
def command_line():
    """Messages name arguments as command-line options while this holds (fedevo.cli around a command; every
    thread of the process: a search's own threads too), as the Python API's keyword arguments otherwise."""
    before = _command_line[0]
    _command_line[0] = True
    try:
        yield
    finally:
        _command_line[0] = before


def arg(name: str, value=_UNSET, *, cli: str = "") -> str:
    """The argument `name` (the Python API's keyword: "workers", "eval_timeout") as the caller knows it, with its
    value where given: `--workers`, `--workers 4`, `--eval-timeout`, `--batch-generation` / `--no-batch-generation`
    (a bool) on the command line; `workers=`, `workers=4`, `batch_generation=False` from Python. `cli`: its
    command-line spelling where that is not the option's (a positional argument: "RUN_DIR")."""
    if not _command_line[0]:
        return f"{name}=" + ("" if value is _UNSET else str(value))
    if cli:
        return cli + ("" if value is _UNSET else f" {value}")
    flag = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{'' if value else 'no-'}{flag}"
    return f"--{flag}" + ("" if value is _UNSET else f" {value}")


def resume_call(run_dir, *options: str) -> str:
    """How the caller continues a run, as it calls fedevo: `fedevo resume RUN --budget N` on the command line,
    `fedevo.resume('RUN', budget=N)` from Python (`options`: `arg(...)` spellings)."""
    if _command_line[0]:
        return f"`fedevo resume {run_dir}{''.join(' ' + o for o in options)}`"
    return f"`fedevo.resume({str(run_dir)!r}{''.join(', ' + o for o in options)})`"


def one_line(e: BaseException) -> str:
    """An exception's message on one line (for a FedevoError about the user's code), "(no message)" if it has none."""
    return " ".join(str(e).split()) or "(no message)"


class FedevoError(Exception):
    """Bad input a user can fix (bad problem file, missing data, out-of-range gene...)."""


class DataNotFoundError(FedevoError):
    """A dataset is not where it was looked for; the message says how to get it."""


class SetupError(FedevoError):
    """A setup problem of the machine or its environment, not of one configuration (an environment variable
    fedevo reads as a choice, an on/off or a count with a value it does not take, fedevo/envvars.py; a GPU asked
    for where torch sees none): a search stops at the first evaluation that meets it, resumable once fixed, as for
    a missing dataset."""


class NoDeviceError(SetupError):
    """device = 'cuda' where torch sees no GPU: a setup problem of the machine, like a missing dataset."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned by the CLI into what Ctrl-C does: the search stops resumable, with one line. Ray's core
    re-raises any interrupt it sees while waiting as a plain KeyboardInterrupt: `received` tells them apart."""

    received = False


class DivergedError(Exception):
    """Training produced NaN/inf; evaluation reports it as `status: diverged`."""


class RunInUseError(FedevoError):
    """Another fedevo process holds the run directory's lock: nothing of that directory may be touched."""


class DiskFullError(FedevoError):
    """No space left (ENOSPC/EDQUOT) while writing a run's file: the file is left as it was before the write."""


def disk_full(e: BaseException) -> bool:
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


class SearchStoppedError(FedevoError):
    """A setup problem every evaluation would meet stopped a search (missing data, no GPU): `cause` says what;
    the message adds how to continue (`fedevo resume`), true while the run directory is kept."""

    def __init__(self, cause: str, run_dir, options: str = ""):
        super().__init__(f"{cause} (the search stopped; once fixed, continue with `fedevo resume {run_dir}{options}`)")
        self.cause = cause
        self.run_dir = run_dir


class SearchFailedError(FedevoError):
    """Every evaluation of a search failed; `run` is the run directory's fedevo.Run (every failure is logged)."""

    def __init__(self, message: str, run=None):
        super().__init__(message)
        self.run = run


class RetrainFailedError(FedevoError):
    """No picked solution's retraining gave a result (each diverged or failed), as a search's SearchFailedError;
    `report` is the RetrainReport, written (its report.md names each one's status)."""

    def __init__(self, message: str, report=None):
        super().__init__(message)
        self.report = report


class ChannelsLastWarning(UserWarning):
    """Images that look channels-last, (N, H, W, C), read as fedevo reads images, (N, C, H, W) (data.sources): a
    Python warning, so that Python's filters silence it where the model takes them so
    (`warnings.filterwarnings("ignore", category=fedevo.ChannelsLastWarning)`, or
    `PYTHONWARNINGS=ignore::fedevo.ChannelsLastWarning` for the command line)."""


def warn(message: str, category: type) -> None:
    """`warnings.warn(message, category)` under the process's filters (ignored, shown, raised as they say), shown
    as one line `fedevo: warning: MESSAGE` on stderr, as fedevo's other warnings are, not as Python's file, line and
    source."""
    with warnings.catch_warnings(record=True) as caught:  # (the filters as they are: an 'ignore' records nothing)
        warnings.warn(message, category, stacklevel=3)
    for w in caught:
        print(f"fedevo: warning: {w.message}", file=sys.stderr)
