"""SIGTERM ends a search like Ctrl-C (one fedevo line, exit 143, resumable, identical after resume), and Ray's
messages about a dead worker never reach fedevo's stdout (issue #27)."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

import fedevo

from .search_helpers import FAKE, REPO, cli_cmd, env, read_csv, run_cli, toy_problem_file, without

KILLER = "tests.searching.search_fakes:fake_killer"


def _rows(path):
    try:
        return max(0, len(path.read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


@pytest.mark.parametrize("workers", [0, 2])
def test_sigterm_stops_a_search_resumable(tmp_path, workers):
    prob = toy_problem_file(tmp_path)
    out = tmp_path / "R"
    p = subprocess.Popen(cli_cmd("search", "--problem", prob, "--pop", 4, "--gen", 3, "--seed", 4,
                                 "--workers", workers, "--quiet", "--evaluator", FAKE, "--out", out),
                         cwd=REPO, env=env(FAKE_SLEEP=0.4), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _rows(out / "evaluations.csv") < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 143, (stdout, stderr)
    assert stderr.strip().splitlines() == [
        f"fedevo: stopped by SIGTERM; every finished evaluation is saved in {out}. Continue with: fedevo resume {out}"]
    assert stdout == "" and not list(out.rglob(".*.tmp"))
    r = run_cli("resume", out, "--workers", 0, "--quiet")
    assert r.returncode == 0, r.stderr
    lone = fedevo.search(str(prob), pop=4, gen=3, seed=4, workers=0, out=tmp_path / "L", evaluator=FAKE, page=False)
    # Ray: any order (and so another hash chain)
    by_id = lambda rows: sorted(without(rows, "wall_s", "chain"), key=lambda r: int(r["id"]))  # noqa: E731
    assert by_id(read_csv(out / "evaluations.csv")) == by_id(read_csv(lone.path / "evaluations.csv"))
    assert (out / "front.csv").read_text() == (lone.path / "front.csv").read_text()


def test_a_dead_worker_leaves_only_fedevo_lines_on_stdout(tmp_path):
    marker = tmp_path / "killed"
    out = tmp_path / "R"
    r = run_cli("search", "--problem", toy_problem_file(tmp_path), "--pop", 4, "--gen", 2, "--seed", 1,
                "--workers", 2, "--quiet", "--evaluator", KILLER, "--out", out, FAKE_KILL_MARKER=marker)
    assert r.returncode == 0, r.stderr
    assert marker.exists()  # a worker did die
    lines = r.stdout.splitlines()
    assert lines and lines[0].startswith("search finished: 2/2 generations") and lines[-1].startswith("results in ")
    assert len(lines) == 3 and lines[1].startswith("seconds: "), r.stdout  # nothing of Ray's: no "(raylet) A
    # worker died", no "will be retried"; the closing line, where the time went, the results
    assert "worker died" in (out / "ray.log").read_text().lower() or "died" in (out / "ray.log").read_text().lower()


@pytest.mark.parametrize("where", ["create", "final_page"])
def test_sigterm_outside_the_search_loop_says_what_is_left(tmp_path, monkeypatch, capsys, where):
    """SIGTERM before the run directory exists said 'every finished evaluation is saved in the run directory.
    Continue with: fedevo resume the run directory' (no such directory); after the search, during its last page,
    it said to resume a finished run: it says where the results are."""
    from fedevo import api
    from fedevo.cli import main
    from fedevo.errors import Terminated
    from fedevo.searching.run import SearchRun

    def term(*a, **k):
        raise Terminated()

    monkeypatch.setattr(Terminated, "received", False)
    if where == "create":
        monkeypatch.setattr(SearchRun, "create", classmethod(term))
    else:
        monkeypatch.setattr(api, "_final_page", term)
    out = tmp_path / "R"
    with pytest.raises(SystemExit) as e:
        main(["search", "--problem", str(toy_problem_file(tmp_path)), "--pop", "4", "--gen", "1", "--workers", "0",
              "--quiet", "--evaluator", FAKE, "--out", str(out)])
    assert e.value.code == 143
    said = capsys.readouterr().err.strip().splitlines()
    assert said == (["fedevo: stopped by SIGTERM before the search began: nothing was evaluated; run the command "
                     "again"] if where == "create" else
                    [f"fedevo: stopped by SIGTERM after the search finished, writing its pages; its results are in "
                     f"{out} (pages: fedevo plot {out})"])
    if where == "final_page":  # and indeed nothing is left to resume
        assert (out / "stop.json").is_file()
        with pytest.raises(fedevo.FedevoError, match="holds a finished search"):
            fedevo.resume(out, workers=0, page=False)
