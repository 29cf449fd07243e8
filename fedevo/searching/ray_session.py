"""What fedevo does around Ray: where its logs go, its temporary folders, and whether a task can be scheduled.

* Logs: Ray's driver-side log records and whatever Ray's processes print while it starts or stops go to a log
  file (``ray.log`` in the run directory, ANSI colours removed) instead of fedevo's stdout/stderr, which keep
  fedevo's own results and messages; an error starting Ray quotes the log's last line.
* Temporary folders: a local Ray started by fedevo gets its own temporary root (``fedevo-ray-*`` in the system
  temp directory), removed when fedevo shuts that Ray down (and, if fedevo was killed, by the next fedevo that
  starts a local Ray); Ray's default folder and a cluster's folders are never touched.
* Schedulability: a task asking for more CPUs or GPUs than any single alive node has would wait forever;
  :func:`check_schedulable` refuses it in seconds.
* A cluster's head that goes away under a search: :class:`HeadWatch` notices it in seconds (Ray's driver itself
  waits 60 s, prints its own lines and ends the process with exit 1, before fedevo can say anything).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

from ..errors import FedevoError, arg

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SOCKET_ROOM = 40  # Ray's socket paths go under the temp root; Unix sockets allow ~107 characters
RAY_LOG = "ray.log"


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _temp_base() -> str:
    base = tempfile.gettempdir()
    return base if len(base) <= _SOCKET_ROOM else "/tmp"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def sweep_stale_roots(base: Optional[str] = None) -> list[str]:
    """Remove the temporary roots of local Rays that fedevo started in processes that died without cleaning up
    (killed): a root is stale when the process named by each of its session folders no longer exists."""
    removed = []
    for root in Path(base or _temp_base()).glob("fedevo-ray-*"):
        sessions = [p for p in root.glob("session_*") if p.is_dir() and not p.is_symlink()]
        pids = []
        for sdir in sessions:
            tail = sdir.name.rsplit("_", 1)[-1]
            pids.append(int(tail) if tail.isdigit() else None)
        if sessions and all(pid is not None and not _alive(pid) for pid in pids):
            shutil.rmtree(root, ignore_errors=True)
            removed.append(str(root))
    return removed


def local_temp_root() -> str:
    """A fresh temporary root for a local Ray (short enough for Ray's Unix socket paths); first removes the
    roots that killed fedevo processes left behind."""
    with contextlib.suppress(OSError):
        sweep_stale_roots()
    return tempfile.mkdtemp(prefix="fedevo-ray-", dir=_temp_base())


def remove_temp_root(root: Optional[str]) -> None:
    """Remove a temporary root made by `local_temp_root` (and nothing else)."""
    if root and Path(root).name.startswith("fedevo-ray-"):
        shutil.rmtree(root, ignore_errors=True)


class RayLog:
    """Collects Ray's output for one fedevo command; appended to `path` (if given) as it comes."""

    def __init__(self, path: Optional[Path] = None):
        self.path = Path(path) if path is not None else None
        self.text = ""
        self._handler: Optional[logging.Handler] = None
        self._printer = None  # (ray's worker module, its print_to_stdstream) while attached
        self._capturing_into_file = False  # `capture` reads the file back into `text` afterwards
        if self.path is not None:  # present (maybe empty) whenever Ray ran: where to look
            with contextlib.suppress(OSError):
                self.path.touch()

    def write(self, text: str) -> None:
        if not text:
            return
        if not self._capturing_into_file:  # (else the capture's read-back brings it into `text`, once)
            self.text += text
        if self.path is not None:
            with contextlib.suppress(OSError):
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(strip_ansi(text))

    def _ray_lines(self, data, ignore_prefix=False) -> None:
        """Ray's printer of raylet messages ("A worker died ...", "will be retried"): into the log."""
        lines = data.get("lines", []) if isinstance(data, dict) else [str(data)]
        who = data.get("pid", "ray") if isinstance(data, dict) else "ray"
        self.write("".join(f"({who}) {line}\n" for line in lines))

    def attach(self) -> None:
        """Ray's Python loggers and the driver's printer of raylet messages write to the log file (if any), never
        to the console: fedevo's stdout holds only fedevo's lines."""
        try:
            from ray._private import worker as ray_worker
        except ImportError:  # another Ray layout: its messages may reach the console
            ray_worker = None
        if ray_worker is not None and getattr(ray_worker, "print_to_stdstream", None) is not None \
                and self._printer is None:
            self._printer = (ray_worker, ray_worker.print_to_stdstream)
            ray_worker.print_to_stdstream = self._ray_lines
        for name in ("ray", "ray.data", "ray.tune", "ray.train", "ray.serve"):
            lg = logging.getLogger(name)
            for h in list(lg.handlers):
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
                    lg.removeHandler(h)
            lg.propagate = False
        if self.path is not None and self._handler is None:
            with contextlib.suppress(OSError):
                self._handler = logging.FileHandler(self.path, encoding="utf-8", delay=True)
                self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
                logging.getLogger("ray").addHandler(self._handler)

    def detach(self) -> None:
        if self._printer is not None:
            module, printer = self._printer
            module.print_to_stdstream = printer
            self._printer = None
        if self._handler is not None:
            logging.getLogger("ray").removeHandler(self._handler)
            self._handler.close()
            self._handler = None

    def _sink(self):
        """Where file descriptors 1 and 2 go during `capture`: the log file itself (appended to), so that what
        Ray's core writes is there even if it then ends the process (a failed check in its C++ core exits at
        once, with no Python cleanup), else (no file) a temporary file read back afterwards."""
        if self.path is not None:
            try:
                f = open(self.path, "a+b")
                f.seek(0, os.SEEK_END)
                return f, True
            except OSError:
                pass
        return tempfile.TemporaryFile(), False

    @contextlib.contextmanager
    def capture(self) -> Iterator[None]:
        """Send what is written to file descriptors 1 and 2 (Ray's C++ core, child processes) to this log: straight
        into its file, if it has one (`_sink`; its colour codes stripped once the capture ends), and into `text`
        afterwards, with whatever else reached the file meanwhile (Ray's Python log records, `write`s)."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            saved = (os.dup(1), os.dup(2))
        except (OSError, ValueError):  # no real stdout/stderr (embedded): nothing to redirect
            yield
            return
        sink, in_log = self._sink()
        with sink:
            start = sink.tell()
            self._capturing_into_file = in_log
            try:
                os.dup2(sink.fileno(), 1)
                os.dup2(sink.fileno(), 2)
                yield
            finally:
                with contextlib.suppress(OSError, ValueError):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])
                self._capturing_into_file = False
                sink.seek(start)
                text = sink.read().decode(errors="replace")
                if not in_log:
                    self.write(text)
                else:  # in the file already: into memory, and the file's copy without colour codes
                    self.text += text
                    plain = strip_ansi(text)
                    if plain != text:
                        with contextlib.suppress(OSError):
                            sink.truncate(start)
                            sink.write(plain.encode())


def node_resources(ray) -> list[dict[str, float]]:
    """Total resources of each alive node."""
    return [dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive", n.get("alive", False))]


def check_schedulable(nodes: list[dict[str, float]], cpus_per_task: float, gpus_per_task: float,
                      where: str) -> None:
    """FedevoError unless some single node has `cpus_per_task` CPUs and `gpus_per_task` GPUs."""
    if any(n.get("CPU", 0.0) >= cpus_per_task and n.get("GPU", 0.0) >= gpus_per_task for n in nodes):
        return
    have = "; ".join(f"{n.get('CPU', 0):g} CPU, {n.get('GPU', 0):g} GPU" for n in nodes) or "no alive node"
    ask = f"{cpus_per_task:g} CPU" + (f" and {gpus_per_task:g} GPU" if gpus_per_task else "")
    fix = []
    if not any(n.get("GPU", 0.0) >= gpus_per_task for n in nodes):
        fix.append(f"lower {arg('gpus_per_task')}" + (" (0 trains on the CPU)" if gpus_per_task else ""))
    if not any(n.get("CPU", 0.0) >= cpus_per_task for n in nodes):
        fix.append(f"lower {arg('cpus_per_task')}")
    fix = fix or [f"change {arg('cpus_per_task')} / {arg('gpus_per_task')}"]
    raise FedevoError(f"no node of {where} can run a task needing {ask} (nodes: {have}); the search would wait "
                      f"forever: {' or '.join(fix)}")


def connect(address: str, timeout: float) -> None:
    """Open and close a TCP connection to HOST:PORT (a Ray head's GCS port; no HOST: this machine): OSError where
    nothing accepts it (ValueError: no port)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
        pass


def answers(address: str, timeout: float = 1.0) -> bool:
    """Whether something accepts a TCP connection at HOST:PORT (connect)."""
    try:
        connect(address, timeout)
    except (OSError, ValueError):
        return False
    return True


class HeadWatch:
    """Whether the head of the cluster at `address` (HOST:PORT, its GCS) still answers, probed at most once every
    `every` seconds. When it is gone (a killed head, `ray stop` there), Ray's driver notices nothing for 60 s, then
    prints "Failed to connect to GCS within 60 seconds ... The program will terminate." and ends the process with
    exit 1: fedevo's search ended without its own line or the way to continue. `lost()` says so once the head has
    not answered for `grace` seconds, in time for the search to stop as for any lost cluster (one line, resumable);
    a head that comes back within `grace` (a restart) does not stop it."""

    def __init__(self, address: str, grace: float = 5.0, every: float = 1.0, clock=time.monotonic):
        self.address, self.grace, self.every, self.clock = address, grace, every, clock
        self._last = -float("inf")
        self._gone_since: Optional[float] = None

    def lost(self) -> Optional[str]:
        """None while the head answers (or has been silent for less than `grace`), else why the search must stop."""
        now = self.clock()
        if now - self._last < self.every:
            return None
        self._last = now
        if answers(self.address):
            self._gone_since = None
            return None
        if self._gone_since is None:
            self._gone_since = now
        if now - self._gone_since < self.grace:
            return None
        return (f"the Ray cluster at {self.address} went away under the search (its head has not answered for "
                f"{now - self._gone_since:.0f} s)")


@contextlib.contextmanager
def keep_signal_handlers() -> Iterator[None]:
    """ray.init replaces the driver's SIGTERM handler with one that exits (printing Ray's dump); keep the handler
    the caller had (fedevo's CLI stops a search on SIGTERM as on Ctrl-C: one line, resumable)."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    saved = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    except SystemExit:
        # ray.init exits only from the SIGTERM handlers it installs while it runs (sys.exit(15) before it
        # connects, its node's sys.exit(1) after killing what it started): that SIGTERM is the caller's to handle,
        # as any other (fedevo's CLI: one line, exit 143, resumable) -- not a silent exit 15 or 1
        if main and callable(saved):
            signal.signal(signal.SIGTERM, saved)
            saved(signal.SIGTERM, None)
        raise
    finally:
        if main and saved is not None:
            signal.signal(signal.SIGTERM, saved)
