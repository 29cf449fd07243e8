"""The search loop through the Python API, with cheap fake evaluators (serial unless stated)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from fedevo.errors import FedevoError
from fedevo.searching import Runtime, SearchSettings, resume, search
from fedevo.searching.log import EvalLog
from fedevo.searching.settings import eval_seed
from fedevo.searching.runner import Task, failed_result

from . import search_fakes
from .search_helpers import by_id, dominates, objectives, read_csv, toy_problem_file, unchain, without

SERIAL = Runtime(workers=0)


def run_fake(out, *, seed=1, pop=8, gen=3, evaluator=search_fakes.fake_evaluate, runtime=SERIAL, **kw):
    return search(SearchSettings(problem=kw.pop("problem", "digits_mlp_local"), pop=pop, gen=gen, seed=seed, **kw),
                  out, runtime, evaluator=evaluator)


def digest(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def check_front(run_dir: Path, eps_key="eps"):
    rows = read_csv(run_dir / "evaluations.csv")
    front = read_csv(run_dir / "front.csv")
    assert front, "empty front"
    assert all(r["status"] == "ok" for r in front)
    fo = [objectives(r, eps_key) for r in front]
    for i, a in enumerate(fo):
        assert not any(dominates(b, a) for j, b in enumerate(fo) if j != i), "front not mutually non-dominated"
        assert not any(dominates(objectives(r, eps_key), a) for r in rows if r["status"] == "ok"), \
            "a front row is dominated by an evaluated row"
    # every ok row that nothing dominates is in the front
    ids = {r["id"] for r in front}
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok:
        if not any(dominates(objectives(s, eps_key), objectives(r, eps_key)) for s in ok):
            assert r["id"] in ids
    return rows, front


def test_run_directory_holds_everything(tmp_path):
    out = tmp_path / "run"
    s = run_fake(out, seed=1, pop=8, gen=3)
    assert s.complete and s.generations == 3 and s.evaluations == 24 and s.failed == 0
    for f in ("run.json", "evaluations.csv", "front.csv", "hypervolume.csv"):
        assert (out / f).is_file(), f
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"gen-000{g}.pkl" for g in range(4)]
    meta = json.loads((out / "run.json").read_text())
    from fedevo.problem import load_problem
    assert meta["problem"]["text"] == Path(load_problem("digits_mlp_local").path).read_text()
    assert meta["settings"]["seed"] == 1 and meta["settings"]["pop"] == 8 and meta["settings"]["partitions"] == 2
    assert meta["n_ref_dirs"] == 6 and {"pymoo", "numpy", "python", "ray", "fedevo_kernels"} <= set(meta["versions"])
    rows, front = check_front(out)
    assert len(rows) == 8 + (3 - 1) * 8
    assert sorted(int(r["id"]) for r in rows) == list(range(24))
    assert [sum(r["generation"] == str(g) for r in rows) for g in (1, 2, 3)] == [8, 8, 8]
    assert all(int(r["seed"]) == eval_seed(1, int(r["id"])) for r in rows)
    assert set(read_csv(out / "evaluations.csv")[0]) >= {"layers", "units", "lr", "sigma", "error", "comm", "eps",
                                                          "eps_paper", "accuracy_global", "omega", "status",
                                                          "wall_s", "message"}
    hv = read_csv(out / "hypervolume.csv")
    assert [int(h["generation"]) for h in hv] == [1, 2, 3]
    vals = [float(h["hypervolume"]) for h in hv]
    assert vals[0] > 0 and all(b >= a for a, b in zip(vals, vals[1:]))  # the archive's front only grows


def test_same_seed_same_front_other_seed_other_population(tmp_path):
    a, b, c = (run_fake(tmp_path / n, seed=s) for n, s in (("a", 7), ("b", 7), ("c", 8)))
    ra, rb, rc = (read_csv(tmp_path / n / "evaluations.csv") for n in "abc")
    assert without(ra, "wall_s", "chain") == without(rb, "wall_s", "chain")
    assert (tmp_path / "a" / "front.csv").read_text() == (tmp_path / "b" / "front.csv").read_text()
    genes = lambda rows: [tuple(r[g] for g in ("layers", "units", "lr", "sigma")) for r in rows if r["generation"] == "1"]  # noqa: E731
    assert genes(ra) == genes(rb)
    assert not set(genes(ra)) & set(genes(rc))  # a different seed gives a different population


def test_failed_evaluations_are_recorded_and_the_search_goes_on(tmp_path):
    out = tmp_path / "run"
    s = run_fake(out, evaluator=search_fakes.fake_flaky)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 24 and s.evaluations == 24
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and s.failed == len(failed)
    assert all("ValueError: fake failure" in r["message"] and "Traceback" in r["message"] for r in failed)
    assert any(r["status"] == "diverged" for r in rows)
    check_front(out)
    # the traceback's newlines survive the one-line-per-row CSV
    log = EvalLog(out / "evaluations.csv", __import__("fedevo.problem").problem.load_problem("digits_mlp_local").genes)
    parsed = log.open()
    log.close()
    assert any("\nsecond line" in r["message"] for r in parsed)


def test_csv_cells_round_trip(tmp_path):
    from fedevo.problem import load_problem

    genes = load_problem("digits_mlp").genes
    log = EvalLog(tmp_path / "e.csv", genes)
    log.open()
    params = {g.name: g.default for g in genes}
    params["lr"] = 0.1 + 1e-17 * 3  # full precision kept
    r = failed_result('bad "thing", with \\ backslash\nand, newline\r\n', 1.5)
    row = log.append(Task(3, 1, 3, params, 42), r)
    log.close()
    back = EvalLog(tmp_path / "e.csv", genes)
    rows = back.open()
    back.close()
    assert repr(rows) == repr([row]) and row["message"] == r.message and row["lr"] == params["lr"]
    assert np.isnan(row["error"]) and back.matches(row, Task(3, 1, 3, params, 42))
    assert not back.matches(row, Task(3, 1, 3, {**params, "lr": 0.2}, 42))
    assert len((tmp_path / "e.csv").read_text().splitlines()) == 2  # one physical line per row


def test_resume_after_a_crash_reuses_logged_evaluations(tmp_path, monkeypatch):
    """Simulated kill after the checkpoint of generation 1 with 3 of generation 3's rows on disk and a torn
    line: resume re-asks generations 2 and 3, reuses the 11 logged rows, runs only the 5 missing ones."""
    a = tmp_path / "a"
    run_fake(a, seed=3)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    for g in (2, 3):
        (b / "checkpoints" / f"gen-000{g}.pkl").unlink()
    (b / "front.csv").unlink()
    lines = (b / "evaluations.csv").read_text().splitlines(keepends=True)
    rows = read_csv(a / "evaluations.csv")
    missing = [r for r in rows if int(r["id"]) >= 19]
    kept = [ln for ln, r in zip(lines[1:], rows) if int(r["id"]) < 19]
    assert len(kept) == 19
    (b / "evaluations.csv").write_text(lines[0] + "".join(kept) + lines[-1][: len(lines[-1]) // 2])  # torn
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_CALL_LOG", str(calls))
    s = resume(b, SERIAL)
    assert s.complete and s.evaluations == 24 and s.reused == 11
    assert sorted(calls.read_text().split()) == sorted(r["seed"] for r in missing)
    assert by_id(without(read_csv(b / "evaluations.csv"), "wall_s", "chain")) == by_id(without(rows, "wall_s", "chain"))
    for f in ("front.csv", "hypervolume.csv"):
        assert (a / f).read_text() == (b / f).read_text(), f


def test_resume_of_a_finished_run_evaluates_nothing(tmp_path, monkeypatch):
    out = tmp_path / "run"
    run_fake(out)
    before = digest(out)
    monkeypatch.setenv("FAKE_CALL_LOG", str(tmp_path / "calls.log"))
    s = resume(out, SERIAL)
    assert s.complete and s.evaluations == 24 and not (tmp_path / "calls.log").exists()
    after = digest(out)
    assert {k: v for k, v in after.items() if k != ".lock"} == {k: v for k, v in before.items() if k != ".lock"}


def test_out_holding_another_run_is_refused_and_untouched(tmp_path):
    out = tmp_path / "run"
    run_fake(out, seed=1)
    before = digest(out)
    with pytest.raises(FedevoError, match="different run"):
        run_fake(out, seed=2)
    # the same command again on a finished run: `fedevo resume OUT` alone would refuse it ("nothing to resume"),
    # so the line says it is finished and how to go on; a run stopped before its end is sent to resume
    # (from Python, as its caller calls fedevo: gen=, fedevo.resume(..., budget=N); it said --gen, `fedevo resume`)
    with pytest.raises(FedevoError, match=r"already holds this run, finished \(gen= batches done\); nothing was changed "
                                          r"\(see `fedevo front .*`; to search on, raise the budget that ended it: "
                                          r"`fedevo\.resume\('.*', budget=N\)` \(N above its 24 evaluations\)\)"):
        run_fake(out, seed=1)
    assert digest(out) == before
    (out / "stop.json").unlink()
    with pytest.raises(FedevoError, match=r"already holds this run; continue it with `fedevo\.resume\('"):
        run_fake(out, seed=1)
    from fedevo.dirlock import hold

    held = hold(out, FedevoError("busy"))  # as a search or resume of it running now: a resume would be refused
    try:
        with pytest.raises(FedevoError, match="holds this run, and another fedevo process is running it now"):
            run_fake(out, seed=1)
    finally:
        held.close()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(FedevoError, match="not empty"):
        run_fake(other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_corrupt_checkpoint_is_a_clear_error(tmp_path, damage):
    out = tmp_path / "run"
    run_fake(out, gen=2)
    ck = out / "checkpoints" / "gen-0002.pkl"
    data = bytearray(ck.read_bytes())
    if damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray(b"not a checkpoint at all")
    ck.write_bytes(bytes(data))
    with pytest.raises(FedevoError, match="corrupt checkpoint .*gen-0002.pkl"):
        resume(out, SERIAL)


def test_inconsistent_log_is_detected(tmp_path):
    out = tmp_path / "run"
    run_fake(out, gen=2)
    (out / "checkpoints" / "gen-0002.pkl").unlink()
    text = (out / "evaluations.csv").read_text().splitlines(keepends=True)
    rows = read_csv(out / "evaluations.csv")
    i = next(k for k, r in enumerate(rows) if r["generation"] == "2")
    text[1 + i] = text[1 + i].replace(f",{rows[i]['units']},", f",{int(rows[i]['units']) % 100 + 17},", 1)
    (out / "evaluations.csv").write_text("".join(text))
    with pytest.raises(FedevoError, match=rf"line {2 + i} \(id \d+\) breaks the log's hash chain"):  # issue 35
        resume(out, SERIAL)
    unchain(out)  # a log written before the chain: the resumed search tells the row from what it asks
    with pytest.raises(FedevoError, match="does not match"):
        resume(out, SERIAL)


def test_a_run_in_use_is_not_run_twice(tmp_path):
    import fcntl

    out = tmp_path / "run"
    run_fake(out, gen=2)
    with open(out / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running `fedevo search` holds it
        with pytest.raises(FedevoError, match="in use by another fedevo process"):
            resume(out, SERIAL)
    assert resume(out, SERIAL).complete


def test_lost_rows_are_detected(tmp_path):
    out = tmp_path / "run"
    run_fake(out, gen=2)
    lines = (out / "evaluations.csv").read_text().splitlines(keepends=True)
    (out / "evaluations.csv").write_text("".join(lines[:3] + lines[4:]))  # one row of generation 1 gone
    with pytest.raises(FedevoError, match=r"line 4 \(id 3\) breaks the log's hash chain"):  # issue 35: the chain first
        resume(out, SERIAL)
    unchain(out)  # a log written before the chain: the checkpoint's record names the lost id
    with pytest.raises(FedevoError, match=r"lacks 1 of the 16 evaluations that checkpoint gen-0002 counts \(id 2\)"):
        resume(out, SERIAL)


def test_missing_data_stops_the_search_resumably(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(FedevoError, match="not found.*fedevo resume"):
        run_fake(out, evaluator=search_fakes.fake_data_missing)
    assert len(read_csv(out / "evaluations.csv")) == 0
    s = resume(out, SERIAL, evaluator=search_fakes.fake_evaluate)
    assert s.complete and s.evaluations == 24


def test_constraints_and_choice_genes(tmp_path):
    """A problem with choice/log-int genes and a constraint eps <= 8: infeasible rows stay out of the front."""
    path = toy_problem_file(tmp_path, "[constraints]\neps = 8.0\n")
    out = tmp_path / "run"
    s = run_fake(out, problem=str(path), pop=10, gen=3)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 30 and {r["similarity"] for r in rows} <= {"sign", "cosine"}
    front = read_csv(out / "front.csv")
    assert front and all(float(r["eps"]) <= 8.0 for r in front)
    assert any(float(r["eps"]) > 8.0 for r in rows)  # the constraint did bite
    assert s.front_size == len(front)


# ------------------------------------------------------------------------------------------------- Ray
def test_ray_workers_give_the_same_front_as_serial(tmp_path, monkeypatch):
    """Completion order scrambled by seed-dependent sleeps; 2 Ray workers vs in-process."""
    monkeypatch.setenv("FAKE_SLEEP", "0.15")
    run_fake(tmp_path / "serial", seed=5, gen=2, evaluator=search_fakes.fake_flaky)
    run_fake(tmp_path / "ray", seed=5, gen=2, evaluator=search_fakes.fake_flaky, runtime=Runtime(workers=2))
    rs, rr = (read_csv(tmp_path / n / "evaluations.csv") for n in ("serial", "ray"))
    assert [r["id"] for r in rr] != sorted((r["id"] for r in rr), key=int)  # really recorded as they finished
    strip = lambda rows: by_id(without(rows, "wall_s", "chain", "message"))  # noqa: E731 (tracebacks name other frames)
    assert strip(rs) == strip(rr)
    assert (tmp_path / "serial" / "front.csv").read_text() == (tmp_path / "ray" / "front.csv").read_text()


def test_a_killed_ray_worker_is_retried(tmp_path, monkeypatch):
    marker = tmp_path / "killed"
    monkeypatch.setenv("FAKE_KILL_MARKER", str(marker))
    out = tmp_path / "run"
    s = run_fake(out, gen=2, evaluator=search_fakes.fake_killer, runtime=Runtime(workers=2))
    assert marker.exists()  # a worker did die (SIGKILL) during an evaluation
    rows = read_csv(out / "evaluations.csv")
    assert s.complete and len(rows) == 16 and all(r["status"] == "ok" for r in rows)
    assert sorted(int(r["id"]) for r in rows) == list(range(16))


def test_torch_threads_per_worker(tmp_path):
    from fedevo.problem import load_problem
    from fedevo.searching.runner import RayRunner, cores

    problem = load_problem("digits_mlp")
    runner = RayRunner(search_fakes.fake_threads, problem, {}, workers=2)
    got = []
    try:
        runner.run([Task(i, 1, i, problem.defaults(), i) for i in range(4)], lambda t, r: got.append(r.privacy))
    finally:
        runner.close()
    assert len(got) == 4
    assert {g["torch_threads"] for g in got} == {max(1, cores() // 2)}
