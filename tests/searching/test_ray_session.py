"""Ray around fedevo (issue 14): unschedulable resources refused in seconds, Ray's logs in the run directory and
not on stdout, no temporary session folder left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fedevo.errors import FedevoError
from fedevo.searching.ray_session import check_schedulable, local_temp_root, remove_temp_root, sweep_stale_roots

from .search_helpers import FAKE, REPO, env

ANSI = re.compile(r"\x1b\[")


# ------------------------------------------------------------------------------------------------ unit
@pytest.mark.parametrize("cpus, gpus, ok", [(1, 0, True), (2, 0, True), (4, 0, True), (4.5, 0, False),
                                            (1, 1, True), (2, 1, True), (3, 1, False), (1, 2, False), (64, 0, False)])
def test_check_schedulable_needs_one_node_with_both(cpus, gpus, ok):
    nodes = [{"CPU": 2.0, "GPU": 1.0}, {"CPU": 4.0}]
    if ok:
        check_schedulable(nodes, cpus, gpus, "the cluster")
    else:
        with pytest.raises(FedevoError, match="no node of the cluster can run a task needing"):
            check_schedulable(nodes, cpus, gpus, "the cluster")


def test_check_schedulable_message_names_what_to_lower():
    with pytest.raises(FedevoError, match=r"1 CPU and 1 GPU \(nodes: 1 CPU, 0 GPU\).*lower gpus_per_task="):
        check_schedulable([{"CPU": 1.0}], 1, 1, "the local Ray")
    with pytest.raises(FedevoError, match=r"64 CPU \(nodes: 1 CPU, 0 GPU\).*lower cpus_per_task="):
        check_schedulable([{"CPU": 1.0}], 64, 0, "the local Ray")


def test_stale_temp_roots_of_dead_processes_are_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / "fedevo-ray-stale"
    (stale / f"session_2026-01-01_00-00-00_000000_{dead.pid}").mkdir(parents=True)
    live = tmp_path / "fedevo-ray-live"
    (live / f"session_2026-01-01_00-00-00_000000_{os.getpid()}").mkdir(parents=True)
    fresh = tmp_path / "fedevo-ray-fresh"  # made, its Ray not started yet: no session folder
    fresh.mkdir()
    other = tmp_path / "something-else"
    (other / f"session_2026-01-01_00-00-00_000000_{dead.pid}").mkdir(parents=True)
    assert sweep_stale_roots(str(tmp_path)) == [str(stale)]
    assert not stale.exists() and live.exists() and fresh.exists() and other.exists()
    root = local_temp_root()
    assert Path(root).name.startswith("fedevo-ray-") and len(root) < 60
    remove_temp_root(root)
    assert not Path(root).exists()
    remove_temp_root(str(other))  # never anything fedevo did not make
    assert other.exists()


@pytest.mark.parametrize("owns", [True, False])
def test_an_interrupted_drain_cancels_nothing_on_a_ray_fedevo_owns(owns):
    """ray.cancel races with a task's reply in Ray's core ("Tried to complete task that was not pending": the
    process exits 1, silently); a SIGTERM ended `fedevo search --workers 2` so about 1 in 5. A Ray fedevo started
    is shut down by close() anyway: nothing is cancelled there; the caller's own Ray session still is."""
    from types import SimpleNamespace

    from fedevo.errors import Terminated
    from fedevo.searching.runner import RayRunner, RunnerStats

    cancelled = []

    def wait(refs, num_returns, timeout):
        raise Terminated()  # SIGTERM while waiting

    fake_ray = SimpleNamespace(wait=wait, cancel=lambda ref, force=False: cancelled.append(ref),
                               exceptions=SimpleNamespace(RayError=RuntimeError))
    runner = RayRunner.__new__(RayRunner)
    runner._ray, runner._owns_ray, runner.stats, runner.slots = fake_ray, owns, RunnerStats(), 2
    with pytest.raises(Terminated):
        runner.drain({"a": [], "b": [], "c": []}, lambda t, r: None)
    assert cancelled == ([] if owns else ["a", "b", "c"])
    assert runner.stats.running == 0


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def test_a_head_that_stops_answering_is_lost_after_the_grace_only():
    """HeadWatch: a head silent for less than `grace` (a restart) does not stop the search; one silent for longer
    does, naming the cluster; one that answers again starts the count afresh."""
    import socket

    from fedevo.searching.ray_session import HeadWatch

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    up = f"127.0.0.1:{listening.getsockname()[1]}"
    now = [0.0]
    watch = HeadWatch(f"127.0.0.1:{_closed_port()}", grace=5.0, every=1.0, clock=lambda: now[0])
    assert watch.lost() is None  # first silence: the count starts
    now[0] = 4.0
    assert watch.lost() is None
    now[0] = 4.5
    assert watch.lost() is None  # probed at most once a second (and still within the grace)
    now[0] = 6.0
    assert watch.lost() == (f"the Ray cluster at {watch.address} went away under the search (its head has not "
                            "answered for 6 s)")
    with listening:
        back = HeadWatch(up, grace=5.0, every=1.0, clock=lambda: now[0])
        back._gone_since = 0.0  # it had been silent; now it answers
        now[0] = 60.0
        assert back.lost() is None and back._gone_since is None


def test_the_way_to_continue_a_stopped_cluster_search_names_the_cluster():
    """A search stopped on a cluster (its head gone, Ctrl-C) said `fedevo resume DIR`, which continues in this
    process instead; the way it gives now names the cluster and the resources its tasks took."""
    from fedevo.errors import SearchStoppedError
    from fedevo.searching import Runtime

    assert Runtime().resume_options() == ""
    # a local search with --workers N given: resume's --workers auto would have evaluated in-process on 2 cores
    assert Runtime(workers=2).resume_options() == " --workers 2"
    assert Runtime(workers=2, gpus_per_task=0.5).resume_options() == " --workers 2 --gpus-per-task 0.5"
    on = Runtime(ray_address="10.0.0.1:6379", cpus_per_task=2, gpus_per_task=0.25).resume_options()
    assert on == " --ray-address 10.0.0.1:6379 --cpus-per-task 2 --gpus-per-task 0.25"
    assert str(SearchStoppedError("gone", "RUN", on)).endswith(
        "continue with `fedevo resume RUN --ray-address 10.0.0.1:6379 --cpus-per-task 2 --gpus-per-task 0.25`)")


def test_a_cluster_whose_head_went_away_stops_the_drain_resumable():
    """The audit of 2026-11-27: a cluster's head killed under `fedevo search --ray-address` left the search waiting
    on its running tasks until Ray's driver, 60 s later, printed "Failed to connect to GCS within 60 seconds ...
    The program will terminate." and ended the process with exit 1: no fedevo line, no way to continue said. The
    drain now stops (an abort: the search stops, resumable) once the head has not answered for the grace, with
    nothing logged as failed."""
    from types import SimpleNamespace

    from fedevo.searching.ray_session import HeadWatch
    from fedevo.searching.runner import RayRunner, RunnerStats, Task, _Abort

    waits = []

    def wait(refs, num_returns, timeout):  # the task runs on, and on: nothing comes back
        waits.append(1)
        assert len(waits) < 1000, "the drain never stopped"
        return [], list(refs)

    runner = RayRunner.__new__(RayRunner)
    runner._ray = SimpleNamespace(wait=wait, exceptions=SimpleNamespace(RayError=RuntimeError))
    runner._owns_ray, runner.stats, runner.slots = True, RunnerStats(), 2
    runner._head = HeadWatch(f"127.0.0.1:{_closed_port()}", grace=0.0, every=0.0)
    done = []
    with pytest.raises(_Abort, match=r"the Ray cluster at 127\.0\.0\.1:\d+ went away under the search"):
        runner.drain({"ref": [Task(0, 1, 0, {}, 7)]}, lambda t, r: done.append(r))
    assert done == [] and runner.stats.running == 0


# ------------------------------------------------------------------------------------------------ a real Ray
@pytest.mark.timeout(90)
def test_gpu_request_on_a_gpu_less_local_ray_fails_within_60_s(tmp_path):
    out = tmp_path / "run"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", "from fedevo.cli import main; main()", "search", "--pop", "6", "--gen",
                        "1", "--workers", "1", "--gpus-per-task", "1", "--out", str(out), "--evaluator", FAKE],
                       cwd=REPO, env=env(CUDA_VISIBLE_DEVICES=""), capture_output=True, text=True, timeout=80)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "no node of the local Ray (1 worker) can run a task needing 1 CPU and 1 GPU" in r.stderr
    assert not out.exists()  # no stub run directory


@pytest.mark.timeout(90)
def test_cpus_per_task_beyond_a_1_cpu_ray_fails_fast(tmp_path):
    """An existing Ray of 1 CPU (the Python API's case: the caller started Ray) and --cpus-per-task 64."""
    import ray

    from fedevo.problem import load_problem
    from fedevo.searching.runner import make_runner

    from . import search_fakes

    root = local_temp_root()
    try:
        ray.init(num_cpus=1, include_dashboard=False, _temp_dir=root, log_to_driver=False)
        t0 = time.monotonic()
        with pytest.raises(FedevoError, match=r"no node of the existing Ray session can run a task needing 64 CPU"):
            make_runner(search_fakes.fake_evaluate, load_problem("digits_mlp"), {}, workers=1, cpus_per_task=64)
        assert time.monotonic() - t0 < 5
        runner = make_runner(search_fakes.fake_evaluate, load_problem("digits_mlp"), {}, workers=1, cpus_per_task=1)
        runner.close()
    finally:
        ray.shutdown()
        remove_temp_root(root)


def test_ray_logs_go_to_the_run_directory_and_no_session_folder_stays(tmp_path):
    tmp = tempfile.mkdtemp(prefix="fr", dir="/tmp")  # this search's temp dir (short: Ray's socket paths)
    try:
        out = tmp_path / "run"
        r = subprocess.run([sys.executable, "-c", "from fedevo.cli import main; main()", "search", "--pop", "6",
                            "--gen", "1", "--workers", "2", "--seed", "3", "--out", str(out), "--evaluator", FAKE],
                           cwd=REPO, env=env(TMPDIR=tmp), capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        assert not ANSI.search(r.stdout), r.stdout  # stdout: fedevo's results only
        assert r.stdout.startswith("search finished") and f"results in {out}/" in r.stdout
        assert not re.search(r"\b(INFO|WARNING)\b|ray\.|raylet", r.stdout + r.stderr), (r.stdout, r.stderr)
        assert (out / "ray.log").is_file()
        assert os.listdir(tmp) == []  # the local Ray's session folders were removed
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("ray_exit", [15, 1])  # Ray's handler before it connects: sys.exit(15); its node's: 1
def test_a_sigterm_while_ray_starts_reaches_the_callers_handler(ray_exit):
    """ray.init installs SIGTERM handlers that sys.exit while it runs; a SIGTERM then used to end `fedevo search`
    silently with exit 15 or 1. keep_signal_handlers hands it to the caller's handler (the CLI's: one line, 143)."""
    import os
    import signal
    import sys
    import time

    from fedevo.errors import Terminated
    from fedevo.searching.ray_session import keep_signal_handlers

    got = []

    def callers(signum, frame):
        got.append(signum)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, callers)
    try:
        with pytest.raises(Terminated):
            with keep_signal_handlers():
                signal.signal(signal.SIGTERM, lambda s, f: sys.exit(ray_exit))  # what ray.init installs
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)  # the handler runs at the next bytecode; never reached
        assert got == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is callers
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_captured_output_is_in_the_log_file_before_the_capture_ends(tmp_path):
    """What Ray's core writes to fd 2 is in ray.log at once: a failed check in its C++ core ends the process
    before any Python cleanup could copy it there (it used to go to a temporary file, and was lost)."""
    from fedevo.searching.ray_session import RayLog

    path = tmp_path / "ray.log"
    log = RayLog(path)
    log.write("before\n")
    with log.capture():
        os.write(2, b"Check failed: Tried to complete task that was not pending\n")
        os.write(1, b"(raylet) a line on stdout\n")
        assert "Tried to complete task" in path.read_text()  # there now, not only once the capture ends
    assert path.read_text() == ("before\nCheck failed: Tried to complete task that was not pending\n"
                                "(raylet) a line on stdout\n")
    assert log.text == path.read_text()
    with log.capture():  # what `write` adds meanwhile (Ray's printer) is in text once; colour codes leave the file
        log.write("(raylet) a worker died\n")
        os.write(2, b"\x1b[33mcoloured\x1b[0m\n")
    assert log.text.count("a worker died") == 1 and "\x1b[33mcoloured" in log.text
    assert path.read_text().endswith("(raylet) a worker died\ncoloured\n") and not ANSI.search(path.read_text())
    memory = RayLog()  # no file (retrain keeps Ray's log in memory): read back from a temporary file
    with memory.capture():
        os.write(2, b"only in memory\n")
    assert memory.text == "only in memory\n"
