"""`fedevo search` / `fedevo resume` end to end: real evaluator, SIGKILL + resume, Ctrl-C, a Ray cluster by
address, and bad input (one line on stderr, exit code 2, nothing overwritten)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from fedevo.cli import main
from fedevo.searching import Runtime, SearchSettings, search

from tests.helpers import cli

from . import search_fakes
from .search_helpers import FAKE, REPO, by_id, cli_cmd, env, read_csv, run_cli, without
from .test_search_run import check_front, digest


# ------------------------------------------------------------------------------------------------ helpers
def n_rows(csv_path: Path) -> int:
    try:
        return csv_path.read_bytes().count(b"\n") - 1
    except FileNotFoundError:
        return -1


def start(*args, **env_extra) -> subprocess.Popen:
    # own process group: after SIGKILL of the search, the Ray helpers it started can be ended with it
    return subprocess.Popen(cli_cmd(*args), cwd=REPO, env=env(**env_extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_when(p: subprocess.Popen, csv_path: Path, rows: int, timeout: float = 120) -> int:
    """SIGKILL the search once `rows` evaluations are logged; returns how many were."""
    t0 = time.monotonic()
    while n_rows(csv_path) < rows:
        assert p.poll() is None, f"search ended before {rows} rows: {p.communicate()}"
        assert time.monotonic() - t0 < timeout
        time.sleep(0.005)
    p.kill()
    p.communicate()
    kill_group(p)
    return n_rows(csv_path)


def logged_seeds(csv_path: Path) -> set[str]:
    lines = csv_path.read_text().splitlines(keepends=True)
    complete = "".join(ln for ln in lines if ln.endswith("\n"))
    csv_path.with_suffix(".snap").write_text(complete)
    return {r["seed"] for r in read_csv(csv_path.with_suffix(".snap"))}


def started_seeds(log: Path) -> set[str]:
    return set(log.read_text().split()) if log.exists() else set()


def reference(tmp_path: Path, *, seed: int, pop: int, gen: int) -> Path:
    out = tmp_path / "reference"
    search(SearchSettings(problem="digits_mlp", pop=pop, gen=gen, seed=seed), out, Runtime(workers=0),
           evaluator=search_fakes.fake_evaluate)
    return out


def assert_same_run(a: Path, b: Path) -> None:
    assert by_id(without(read_csv(a / "evaluations.csv"), "wall_s", "chain")) == by_id(without(read_csv(b / "evaluations.csv"), "wall_s", "chain"))
    for f in ("front.csv", "hypervolume.csv"):
        assert (a / f).read_text() == (b / f).read_text(), f


# ------------------------------------------------------------------------------------------------ real evaluator
def test_search_with_the_real_simulator(tmp_path):
    out = tmp_path / "run"
    r = run_cli("search", "--problem", "digits_mlp", "--pop", 8, "--gen", 3, "--workers", 2, "--seed", 1,
                "--out", out, "--rounds", 1, "--quiet")
    assert r.returncode == 0, r.stderr
    assert str(out) in r.stdout and "search finished" in r.stdout
    for f in ("run.json", "evaluations.csv", "front.csv", "hypervolume.csv", "checkpoints/gen-0003.pkl"):
        assert (out / f).is_file(), f
    rows, front = check_front(out)
    assert len(rows) == 8 + (3 - 1) * 8
    assert sorted(int(r["id"]) for r in rows) == list(range(24))
    assert all(r["status"] in ("ok", "diverged", "failed") for r in rows)
    assert sum(r["status"] == "ok" for r in rows) >= 12
    assert {r["rounds_trained"] for r in rows if r["status"] == "ok"} == {"1"}
    meta = json.loads((out / "run.json").read_text())
    assert meta["settings"]["rounds"] == 1 and meta["settings"]["evaluator"] == "fedevo.evaluate:evaluate"
    assert len(read_csv(out / "hypervolume.csv")) == 3
    # the same seed in-process (serial, other torch thread count, other completion order): same numbers
    serial = tmp_path / "serial"
    search(SearchSettings(problem="digits_mlp", pop=8, gen=3, seed=1, rounds=1), serial, Runtime(workers=0))
    strip = lambda d: by_id(without(read_csv(d / "evaluations.csv"), "wall_s", "chain", "message"))  # noqa: E731
    assert strip(serial) == strip(out)
    # a different seed: a different population (the first generation's genes come from the seed alone: the fake
    # evaluator draws the ones the simulator would train)
    other = tmp_path / "other"
    search(SearchSettings(problem="digits_mlp", pop=8, gen=1, seed=2, rounds=1), other, Runtime(workers=0),
           evaluator=search_fakes.fake_evaluate)
    genes = lambda d: {(r["layers"], r["units"], r["lr"]) for r in read_csv(d / "evaluations.csv") if r["generation"] == "1"}  # noqa: E731
    assert not genes(other) & genes(out)


# ------------------------------------------------------------------------------------------------ kill -9, Ctrl-C
def test_sigkill_at_any_moment_then_resume_gives_the_uninterrupted_front(tmp_path):
    ref = reference(tmp_path, seed=11, pop=8, gen=4)
    out = tmp_path / "run"
    csv_path = out / "evaluations.csv"
    args = ("--pop", 8, "--gen", 4, "--seed", 11, "--out", out, "--workers", 0, "--evaluator", FAKE, "--quiet")
    p = start("search", *args, FAKE_SLEEP=0.06, FAKE_CALL_LOG=tmp_path / "calls0")
    phase = 0
    for target in (3, 12, 21):  # inside generation 1, at the start of 2, inside 3
        kill_when(p, csv_path, target)
        before = logged_seeds(csv_path)
        phase += 1
        p = start("resume", out, "--workers", 0, "--quiet", FAKE_SLEEP=0.06, FAKE_CALL_LOG=tmp_path / f"calls{phase}")
        # nothing that was logged before the kill is evaluated again
        time.sleep(0.3)
        assert not (started_seeds(tmp_path / f"calls{phase}") & before)
    out_, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert not (started_seeds(tmp_path / f"calls{phase}") & before)
    assert "search finished" in out_
    rows = read_csv(csv_path)
    assert len(rows) == 32 and len({r["id"] for r in rows}) == 32  # none lost, none twice
    assert_same_run(ref, out)


def test_sigkill_with_ray_workers_in_flight(tmp_path):
    ref = reference(tmp_path, seed=11, pop=8, gen=3)
    out = tmp_path / "run"
    p = start("search", "--pop", 8, "--gen", 3, "--seed", 11, "--out", out, "--workers", 2, "--evaluator", FAKE,
              "--quiet", FAKE_SLEEP=0.25, FAKE_CALL_LOG=tmp_path / "calls0")
    kill_when(p, out / "evaluations.csv", 10)  # generation 2, with evaluations running on both workers
    before = logged_seeds(out / "evaluations.csv")
    r = run_cli("resume", out, "--workers", 2, "--quiet", FAKE_SLEEP=0.1, FAKE_CALL_LOG=tmp_path / "calls1")
    assert r.returncode == 0, r.stderr
    assert not (started_seeds(tmp_path / "calls1") & before)
    assert_same_run(ref, out)  # 2 Ray workers + a crash == serial, uninterrupted


def test_ctrl_c_stops_cleanly_and_resumably(tmp_path):
    out = tmp_path / "run"
    p = start("search", "--pop", 8, "--gen", 3, "--seed", 11, "--out", out, "--workers", 0, "--evaluator", FAKE,
              FAKE_SLEEP=0.1)
    while n_rows(out / "evaluations.csv") < 4:
        assert p.poll() is None
        time.sleep(0.01)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err.strip().splitlines()[-1] == (f"fedevo: interrupted; every finished evaluation is saved in {out}. "
                                           f"Continue with: fedevo resume {out} --workers 0")
    r = cli("resume", out, "--workers", 0, "--quiet")
    assert r.returncode == 0, r.stderr
    assert_same_run(reference(tmp_path, seed=11, pop=8, gen=3), out)


# ------------------------------------------------------------------------------------------------ Ray cluster
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_existing_ray_cluster_by_address(tmp_path):
    """`ray start --head` (as a user would), then `fedevo search --ray-address`; workers get fedevo and the
    evaluator's module through the job's PYTHONPATH (the cluster itself was started without it)."""
    port = _free_port()
    ray_bin = shutil.which("ray") or pytest.skip("no `ray` executable")
    head_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    head_env["FAKE_SLEEP"] = "0.05"  # the workers read the cluster's environment: a search to stop in flight
    head_env["FEDEVO_NATIVE"] = "0" if os.environ.get("FEDEVO_NATIVE") != "0" else "1"  # its nodes' kernels: not ours
    # its own (short: unix socket paths) temp dir, so that its `ray_current_cluster` file does not make other
    # processes' plain `ray.init()` try to join this short-lived cluster
    temp_dir = tempfile.mkdtemp(prefix="rayc-", dir="/tmp")
    head = subprocess.Popen([ray_bin, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                             f"--temp-dir={temp_dir}", "--num-cpus=2", "--include-dashboard=false",
                             "--disable-usage-stats", "--block"],
                            cwd=tmp_path, env=head_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        t0 = time.monotonic()
        while True:
            assert head.poll() is None, "ray start failed"
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() - t0 < 60, "Ray head did not come up"
                time.sleep(0.2)
        time.sleep(1.0)
        out = tmp_path / "run"
        # `ray start` enables token authentication; a driver given an explicit address must opt in
        r = run_cli("search", "--pop", 6, "--gen", 2, "--seed", 2, "--out", out, "--ray-address", f"127.0.0.1:{port}",
                    "--evaluator", FAKE, "--quiet", RAY_AUTH_MODE="token")
        assert r.returncode == 0, r.stderr
        rows = read_csv(out / "evaluations.csv")
        assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
        # the nodes were asked what they run: their kernels differ from this machine's, said in one note
        (note,) = [line for line in r.stderr.splitlines() if line.startswith("fedevo: note:")]
        assert f"the Ray cluster at 127.0.0.1:{port} runs other versions than this machine (node " in note and \
            "fedevo_kernels" in note, r.stderr
        assert json.loads((out / "run.json").read_text())["runtime_at_start"]["ray_address"] == f"127.0.0.1:{port}"
        # a task no node of the cluster can hold: refused in seconds (it would wait forever), no run directory
        t0 = time.monotonic()
        r = run_cli("search", "--pop", 6, "--gen", 1, "--out", tmp_path / "big", "--ray-address",
                    f"127.0.0.1:{port}", "--cpus-per-task", 64, "--evaluator", FAKE, RAY_AUTH_MODE="token")
        assert time.monotonic() - t0 < 60
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "no node of the Ray cluster at 127.0.0.1:" in r.stderr and "64 CPU (nodes: 2 CPU, 0 GPU)" in r.stderr
        assert not (tmp_path / "big").exists()
        # Ctrl-C on the cluster: the way to continue names the cluster (it said `fedevo resume DIR`, which continues
        # in this process instead, with this machine's cores and data)
        stopped = tmp_path / "stopped"
        p = start("search", "--pop", 6, "--gen", 50, "--seed", 2, "--out", stopped, "--ray-address",
                  f"127.0.0.1:{port}", "--cpus-per-task", 0.5, "--evaluator", FAKE, "--quiet", RAY_AUTH_MODE="token")
        while n_rows(stopped / "evaluations.csv") < 1:
            assert p.poll() is None, p.communicate()
            time.sleep(0.01)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 130, err
        assert err.strip().splitlines()[-1] == (
            f"fedevo: interrupted; every finished evaluation is saved in {stopped}. Continue with: fedevo resume "
            f"{stopped} --ray-address 127.0.0.1:{port} --cpus-per-task 0.5")
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_group(head)
            head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


# ------------------------------------------------------------------------------------------------ bad input
def cli_error(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("fedevo: error: ")
    return err


@pytest.mark.parametrize("args, expect", [
    (("--pop", 2), "--pop 2 is too small.*at least 3 .*use --pop 3 or more"),
    (("--pop", 10, "--partitions", 4), "--pop 10 is too small for --partitions 4.*15 Das–Dennis.*--pop >= 15"),
    (("--gen", 0), "--gen must be >= 1"),
    (("--workers", -1), "--workers must be >= 0"),
    (("--rounds", 0), "--rounds must be >= 1"),
    (("--cpus-per-task", 0), "--cpus-per-task must be > 0"),
    # options that contradict each other (each was accepted and one silently ignored: the 2026-11-27 audit)
    (("--optimizer", "random", "--partitions", 2), "--partitions sets NSGA-III's reference directions"),
    (("--workers", 0, "--ray-address", "127.0.0.1:1"), "--workers 0 evaluates in this process, --ray-address"),
    (("--batch-size-per-gpu", 2, "--no-batch-generation"), "--batch-size-per-gpu sizes the batches of"),
    (("--problem", "no_such_problem"), "unknown problem 'no_such_problem'"),
    (("--evaluator", "nowhere_module:fn"), "cannot load evaluator"),
])
def test_bad_search_arguments(tmp_path, capsys, args, expect):
    out = tmp_path / "run"
    err = cli_error(capsys, "search", "--out", out, "--quiet", *args)
    assert __import__("re").search(expect, err), err
    assert not out.exists()


@pytest.mark.parametrize("args, expect", [
    (("--cpus-per-task", 0), "--cpus-per-task must be > 0, got 0.0"),
    (("--cpus-per-task", -1), "--cpus-per-task must be > 0"),
    (("--gpus-per-task", -1), "--gpus-per-task must be >= 0, got -1.0"),
])
def test_resume_checks_the_resources_as_search_does(tmp_path, capsys, args, expect):
    """The 2026-11-27 audit: resume took --cpus-per-task 0 and finished the search with it."""
    from tests.searching.test_search_run import run_fake

    out = tmp_path / "run"
    run_fake(out, gen=2)
    before = sorted((p.name, p.read_bytes()) for p in out.iterdir() if p.is_file())
    err = cli_error(capsys, "resume", out, "--quiet", *args)  # the options first, then the run's state
    assert __import__("re").search(expect, err), err
    assert sorted((p.name, p.read_bytes()) for p in out.iterdir() if p.is_file()) == before


def test_unreachable_ray_address_fails_fast(tmp_path, capsys):
    out = tmp_path / "run"
    t0 = time.monotonic()
    err = cli_error(capsys, "search", "--out", out, "--ray-address", f"127.0.0.1:{_free_port()}", "--quiet")
    assert time.monotonic() - t0 < 10
    assert "cannot reach a Ray cluster at 127.0.0.1:" in err and "ray start --head" in err
    assert not out.exists()
    assert "HOST:PORT" in cli_error(capsys, "search", "--out", out, "--ray-address", "nonsense", "--quiet")
    from tests.searching.test_search_run import run_fake

    run_fake(out, gen=2)  # resume checks it too, before the run's files are touched (an empty ray.log was left)
    (out / "checkpoints" / "gen-0002.pkl").unlink()  # a search stopped after its first generation
    (out / "stop.json").unlink(missing_ok=True)
    before = sorted(p.name for p in out.iterdir())
    err = cli_error(capsys, "resume", out, "--ray-address", f"127.0.0.1:{_free_port()}", "--quiet")
    assert "cannot reach a Ray cluster" in err and sorted(p.name for p in out.iterdir()) == before


def test_out_with_another_run_and_corrupt_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    search(SearchSettings(problem="digits_mlp", pop=6, gen=2, seed=1), out, Runtime(workers=0),
           evaluator=search_fakes.fake_evaluate)
    before = digest(out)
    err = cli_error(capsys, "search", "--out", out, "--seed", 2, "--pop", 6, "--gen", 2, "--evaluator", FAKE, "--quiet")
    assert "holds a different run" in err
    assert digest(out) == before
    ck = out / "checkpoints" / "gen-0002.pkl"
    ck.write_bytes(ck.read_bytes()[:-20])
    err = cli_error(capsys, "resume", out, "--workers", 0, "--quiet")
    assert "corrupt checkpoint" in err and "gen-0002.pkl" in err
    assert "does not exist" in cli_error(capsys, "resume", tmp_path / "nothing", "--quiet")
    (tmp_path / "plain").mkdir()
    assert "not a fedevo search run" in cli_error(capsys, "resume", tmp_path / "plain", "--quiet")
