"""The multi-fidelity search loop with a fake evaluator that continues trainings exactly (search_fakes.CONTINUING):
rung rows in the log, promoted individuals continued never restarted, only full-fidelity rows in the front, the
hypervolume and the picks, resume after a kill mid-promotion giving the same final front, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from fedevo.errors import FedevoError
from fedevo.picking import pick
from fedevo.searching import Runtime, SearchSettings, load_run, resume, search
from fedevo.searching.front_math import front_rows, hypervolume_table

from tests.helpers import cli

from . import search_fakes
from .search_helpers import cli_cmd, env, read_csv, toy_problem_file, REPO

SERIAL = Runtime(workers=0)
FAKE = "tests.searching.search_fakes:CONTINUING"
LADDER = (1 / 9, 1 / 3, 1.0)


def settings(**kw):
    base = dict(problem="digits_mlp_local", pop=9, gen=3, seed=3, rounds=9, fidelity=LADDER, evaluator=FAKE)
    base.update(kw)
    return SearchSettings(**base)


def test_rungs_in_the_log_and_only_full_rows_in_the_front(tmp_path, monkeypatch):
    calls = tmp_path / "calls"
    monkeypatch.setenv("FAKE_RUNG_LOG", str(calls))
    out = tmp_path / "run"
    s = search(settings(), out, SERIAL)
    rows = read_csv(out / "evaluations.csv")
    assert s.evaluations == len(rows) == 3 * (9 + 3 + 1) and s.full_fidelity == 3
    for g in (1, 2, 3):  # per generation: 9 at 1 round, 3 continued to 3 rounds, 1 to the full 9
        gen = [r for r in rows if r["generation"] == str(g)]
        assert [sum(r["rung"] == str(k) for r in gen) for k in range(3)] == [9, 3, 1]
        for r in gen:
            k = int(r["rung"])
            assert int(r["rounds_trained"]) == (1, 3, 9)[k] and float(r["fidelity"]) == LADDER[k]
        ids = {k: {r["id"] for r in gen if r["rung"] == str(k)} for k in range(3)}
        assert ids[2] <= ids[1] <= ids[0]  # a rung's individuals come from the one below
    # promoted individuals continued: each call trains from where the lower rung stopped, never from round 0
    log = [tuple(map(int, line.split())) for line in calls.read_text().splitlines()]
    assert sorted((u, d) for _, u, d in log) == sorted([(1, 0)] * 27 + [(3, 1)] * 9 + [(9, 3)] * 3)
    # a low-fidelity row never carries the full-T eps: its eps is the one spent after its rounds
    planned = {r["id"]: search_fakes.CONTINUING.planned(load_run(out).problem, load_run(out).params(_typed(out, r)), 9)
               for r in rows if r["rung"] == "0"}
    for r in rows:
        if r["rung"] != "2":
            assert float(r["eps"]) < planned[r["id"]]["eps"]
    front = read_csv(out / "front.csv")
    assert front and all(r["rung"] == "2" and r["fidelity"] == "1.0" for r in front)
    data = load_run(out)
    assert all(r["fidelity"] == 1.0 for r in data.front) and len(data.full_rows) == 3
    hv = read_csv(out / "hypervolume.csv")
    assert [int(h["evaluations"]) for h in hv] == [1, 2, 3]  # full-fidelity evaluations only
    assert not list((out / "states").iterdir())  # every state removed once its individual is done
    meta = json.loads((out / "run.json").read_text())
    assert meta["settings"]["fidelity"] == list(LADDER) and meta["fidelity"]["promotion"]["eta"] == 3


def _typed(out, csv_row):
    return next(r for r in load_run(out).rows if r["id"] == int(csv_row["id"]))


def test_no_lower_rung_reaches_front_hypervolume_or_picks(tmp_path):
    out = tmp_path / "run"
    search(settings(gen=2), out, SERIAL)
    data = load_run(out)
    low = [r for r in data.rows if r["fidelity"] < 1]
    assert low and data.lower_rows == [r for r in low if r["status"] == "ok"]
    assert data.ok_rows and all(r["fidelity"] == 1.0 for r in data.ok_rows)  # what the pages plot as evaluations
    # make every lower rung look best: it must still stay out of the front and the hypervolume
    rows = [dict(r, error=0.0, comm=0.0, eps=0.001) if r["fidelity"] < 1 else r for r in data.rows]
    front = front_rows(rows, "eps", {})
    assert front and all(r["fidelity"] == 1.0 for r in front)
    assert hypervolume_table(rows, 2, "eps", {}) == hypervolume_table(data.full_rows, 2, "eps", {})
    only_low = next(r["id"] for r in low if r["id"] not in {f["id"] for f in data.full_rows})
    with pytest.raises(FedevoError, match=f"id {only_low} was trained for 1 round only"):
        pick(str(only_low), rows, front)
    assert all(p.row["fidelity"] == 1.0 for p in pick("lowest-error:3,knee", rows, front))
    promoted = next(r["id"] for r in data.full_rows)
    [p] = pick(str(promoted), rows, front)
    assert p.row["fidelity"] == 1.0  # its full row, not a lower rung of the same id


def test_resume_after_a_kill_mid_promotion_gives_the_same_front(tmp_path, monkeypatch):
    search_fakes.let_kills_through(monkeypatch)
    ref = tmp_path / "ref"
    search(settings(), ref, SERIAL)
    for n in (10, 11, 12, 20):  # 9 rung-0 rows, then rung 1 (10, 11), rung 2 (12); 20: generation 2's rung 1
        out = tmp_path / f"killed-{n}"
        search_fakes.ContinuingFake.calls = 0
        monkeypatch.setenv("FAKE_RAISE_AFTER", str(n))
        with pytest.raises(search_fakes.Killed):
            search(settings(), out, SERIAL)
        monkeypatch.delenv("FAKE_RAISE_AFTER")
        assert len(read_csv(out / "evaluations.csv")) == n
        assert n < 12 and any((out / "states").iterdir()) or n >= 12  # states of promoted individuals wait
        s = resume(out, SERIAL)
        assert s.complete and s.reused == n % 13  # the rows of the generation that was running
        assert read_csv(out / "front.csv") == read_csv(ref / "front.csv")
        strip = lambda rows: [{k: v for k, v in r.items() if k not in ("wall_s", "chain")} for r in rows]  # noqa: E731
        assert strip(read_csv(out / "evaluations.csv")) == strip(read_csv(ref / "evaluations.csv"))
        assert not list((out / "states").iterdir())


def test_kill_9_mid_promotion_then_fedevo_resume(tmp_path):
    out = tmp_path / "run"
    ref = tmp_path / "ref"
    args = ["search", "--problem", "digits_mlp_local", "--pop", "9", "--gen", "2", "--seed", "3", "--rounds", "9",
            "--fidelity", "1/9,1/3,1", "--workers", "0", "--quiet", "--evaluator", FAKE]
    p = subprocess.run(cli_cmd(*args, "--out", out), cwd=REPO, env=env(FAKE_SIGKILL_AFTER=10), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert len(read_csv(out / "evaluations.csv")) == 10
    # the kill -9 needs its own process; the resume and the reference search run here (tests.helpers.cli)
    r = cli("resume", out, "--workers", "0", "--quiet")
    assert r.returncode == 0, r.stderr
    r = cli(*args, "--out", ref)
    assert r.returncode == 0, r.stderr
    assert read_csv(out / "front.csv") == read_csv(ref / "front.csv")


@pytest.mark.parametrize("value, says", [
    ("0", "--fidelity: fidelity '0' is outside (0, 1]"), ("1.5", "outside (0, 1]"),
    ("0.5,0.2,1", "not strictly increasing"), ("0.2,0.5", "must end at 1"),
    ("0.01", "fewer than one"), ("0.1,0.12,1", "same rounds"),
])
def test_bad_fidelity_is_one_line_exit_2_nothing_written(tmp_path, value, says):
    out = tmp_path / "run"
    r = cli("search", "--problem", "digits_mlp_local", "--pop", "4", "--gen", "1", "--rounds", "10", "--workers",
            "0", "--quiet", "--evaluator", FAKE, "--fidelity", value, "--out", out)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert r.stderr.startswith("fedevo: error: ") and r.stderr.count("\n") == 1
    assert not out.exists()


def test_problem_file_setting_and_an_evaluator_that_cannot_continue(tmp_path):
    bad = toy_problem_file(tmp_path, "")
    bad.write_text("fidelity = [0.5, 0.25, 1]\n" + bad.read_text())
    r = cli("search", "--problem", bad, "--pop", "4", "--gen", "1", "--rounds", "8", "--workers", "0", "--quiet",
            "--evaluator", FAKE, "--out", tmp_path / "a")
    assert r.returncode == 2 and "problem 'toy': fidelity: the rung ladder 0.5,0.25,1 is not strictly increasing" \
        in r.stderr, r.stderr
    r = cli("search", "--problem", "digits_mlp_local", "--pop", "4", "--gen", "1", "--rounds", "9", "--workers",
            "0", "--quiet", "--evaluator", "tests.searching.search_fakes:fake_evaluate", "--fidelity", "1/3",
            "--out", tmp_path / "b")
    assert r.returncode == 2 and "cannot continue a training" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "b").exists()
    with pytest.raises(FedevoError, match=r"^fidelity=: the evaluator .* cannot continue .* or leave fidelity= out$"):
        search(SearchSettings(problem="digits_mlp_local", pop=4, gen=1, rounds=9, fidelity=(1 / 3, 1.0),
                              evaluator="tests.searching.search_fakes:fake_evaluate"), tmp_path / "b2", SERIAL)
    assert not (tmp_path / "b2").exists()
    from fedevo.problem import problems_dir

    fixed = tmp_path / "local.toml"  # the ladder from the problem file: the line names its key, not fidelity=
    fixed.write_text("fidelity = 0.34\n" + (problems_dir() / "digits_mlp_local.toml").read_text())
    with pytest.raises(FedevoError, match=r"^problem 'digits_mlp_local': fidelity: the evaluator .* cannot continue "
                                          r".* or remove the problem file's fidelity$"):
        search(SearchSettings(problem=str(fixed), pop=4, gen=1, rounds=9,
                              evaluator="tests.searching.search_fakes:fake_evaluate"), tmp_path / "b3", SERIAL)
    good = toy_problem_file(tmp_path, "")
    good.write_text("fidelity = 0.34\n" + good.read_text())
    out = tmp_path / "c"
    s = search(SearchSettings(problem=str(good), pop=4, gen=1, rounds=9, evaluator=FAKE), out, SERIAL)
    assert s.evaluations == 4 + 2
    assert json.loads((out / "run.json").read_text())["settings"]["fidelity"] == [0.34, 1.0]
    # --fidelity 1 overrides the file: the plain search, whose evaluations.csv has no rung columns
    s = search(SearchSettings(problem=str(good), pop=4, gen=1, rounds=9, evaluator=FAKE, fidelity=1), tmp_path / "d",
               SERIAL)
    assert s.evaluations == 4 and "rung" not in read_csv(tmp_path / "d" / "evaluations.csv")[0]


def test_plain_runs_keep_their_identity_and_columns(tmp_path):
    out = tmp_path / "plain"
    search(SearchSettings(problem="digits_mlp_local", pop=4, gen=1, seed=1), out, SERIAL,
           evaluator=search_fakes.fake_evaluate)
    meta = json.loads((out / "run.json").read_text())
    assert meta["settings"]["fidelity"] is None and "fidelity" not in meta
    from fedevo.searching.rundata import run_identity

    s = SearchSettings(**{k: v for k, v in meta["settings"].items() if k != "fidelity"})
    assert run_identity(meta["problem"]["text"], s.resolved()) == meta["run_id"]  # as before the setting existed
    assert "rung" not in read_csv(out / "evaluations.csv")[0]
    assert os.environ.get("FAKE_RAISE_AFTER") is None


def test_ray_workers_carry_the_states_and_give_the_serial_front(tmp_path):
    """Rung tasks on a local Ray: the state bytes go with the task and come back with the result (no shared
    filesystem needed); the rows equal the serial run's."""
    serial, ray = tmp_path / "serial", tmp_path / "ray"
    search(settings(gen=2), serial, SERIAL)
    search(settings(gen=2), ray, Runtime(workers=2))
    strip = lambda rows: sorted(({k: v for k, v in r.items() if k not in ("wall_s", "chain")}  # noqa: E731
                                 for r in rows),
                                key=lambda r: (int(r["id"]), int(r["rung"])))  # Ray logs in completion order
    assert strip(read_csv(ray / "evaluations.csv")) == strip(read_csv(serial / "evaluations.csv"))
    assert strip(read_csv(ray / "front.csv")) == strip(read_csv(serial / "front.csv"))


@pytest.mark.parametrize("damage", ["flipped", "truncated", "swapped", "headerless"])
def test_a_corrupted_state_is_refused_before_it_is_continued(tmp_path, monkeypatch, damage):
    """Issue 35: states under RUN/states/ are checked against the SHA-256 saved with them; a damaged one is
    refused with one line naming it (a swapped one: another individual's state under this one's name)."""
    search_fakes.let_kills_through(monkeypatch)
    out = tmp_path / "run"
    search_fakes.ContinuingFake.calls = 0
    monkeypatch.setenv("FAKE_RAISE_AFTER", "10")  # killed after rung 1's first row: promoted states wait
    with pytest.raises(search_fakes.Killed):
        search(settings(), out, SERIAL)
    monkeypatch.delenv("FAKE_RAISE_AFTER")
    rows = read_csv(out / "evaluations.csv")
    states = sorted((out / "states").iterdir())
    assert len(states) >= 2
    victim = next(p for p in states if not any(r["id"] == str(int(p.name.split("-")[1])) and r["rung"] == "1"
                                               for r in rows))  # one still to be continued
    data = victim.read_bytes()
    if damage == "flipped":
        data = data[:-5] + bytes([data[-5] ^ 1]) + data[-4:]
    elif damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "swapped":
        data = next(p for p in states if p != victim).read_bytes()
    else:
        data = data.split(b"\n", 1)[1]
    victim.write_bytes(data)
    before = (out / "evaluations.csv").read_bytes()
    r = cli("resume", out, "--workers", "0", "--quiet")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"fedevo: error: {victim} is corrupt ("), r.stderr
    assert (out / "evaluations.csv").read_bytes() == before  # nothing continued from it


def test_batches_of_one_under_fidelity_are_warned_of(tmp_path, capsys):
    """gp and tpe ask one candidate per parallel evaluation: on 2 cores, batches of one, and ⌈1/3⌉ = 1 promotes
    every individual: the rungs cost time and prune nothing, and nothing said so."""
    import fedevo

    fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "R", workers=0, seed=1, evaluator=FAKE, page=False,
                  optimizer="tpe", pop=1, budget=2, fidelity=0.5, rounds=4, progress=False)
    err = capsys.readouterr().err
    assert err.count("fidelity= with batches of 1 (pop=1) promotes every individual") == 1, err
    fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "R3", workers=0, seed=1, evaluator=FAKE, page=False,
                  optimizer="tpe", pop=3, budget=3, fidelity=0.5, rounds=4, progress=False)
    assert "promotes every individual" not in capsys.readouterr().err


def test_batches_of_two_under_fidelity_prune_and_are_not_warned_of(tmp_path, capsys):
    """A rung promotes ⌈n/3⌉ of its n individuals: one of a batch of two. `--pop 2 --fidelity 0.34` was warned of
    as `promotes every individual: its rungs cost time and prune nothing` while each batch pruned one of its two
    (6 rung evaluations of 4 individuals, 2 at full fidelity, on digits_mlp with gp)."""
    import fedevo

    run = fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "R2", workers=0, seed=1, evaluator=FAKE,
                        page=False, optimizer="tpe", pop=2, budget=4, fidelity=0.5, rounds=4, progress=False)
    assert "promotes every individual" not in capsys.readouterr().err
    s = run.summary
    assert (s.individuals, s.evaluations, s.full_fidelity) == (4, 6, 2), s


def test_a_ladder_makes_the_default_batch_one_that_a_rung_can_prune(tmp_path, capsys):
    """review16 F3: gp/tpe in-process default to batches of one, and fedevo then warned the user of the --pop 1
    it had chosen itself; a ladder from the problem file's `fidelity` key, with --pop 1, was not warned of."""
    import fedevo

    toy = toy_problem_file(tmp_path)
    run = fedevo.search(toy, out=tmp_path / "D", workers=0, seed=1, evaluator=FAKE, page=False,
                        optimizer="tpe", budget=3, fidelity=0.5, rounds=4, progress=False)
    err = capsys.readouterr().err
    assert run.data.settings.pop == 3 and "promotes every individual" not in err, err
    assert "batches of 3 under fidelity= (a rung promotes a third of its batch" in err, err
    with_ladder = tmp_path / "ladder.toml"
    with_ladder.write_text("fidelity = 0.5\n" + toy.read_text())
    run = fedevo.search(with_ladder, out=tmp_path / "F", workers=0, seed=1, evaluator=FAKE, page=False,
                        optimizer="tpe", budget=3, rounds=4, progress=False)
    assert run.data.settings.pop == 3 and run.data.settings.multi_fidelity, run.data.settings
    capsys.readouterr()
    fedevo.search(with_ladder, out=tmp_path / "F1", workers=0, seed=1, evaluator=FAKE, page=False,
                  optimizer="tpe", pop=1, budget=2, rounds=4, progress=False)
    assert "with batches of 1 (pop=1) promotes every individual" in capsys.readouterr().err


def test_the_closing_line_counts_individuals_as_budget_does(tmp_path):
    """F7: --budget counts individuals (a multi-fidelity individual once, whatever rungs it reached); the closing
    line said '--budget evaluations reached: ... 19 evaluations' for --budget 14, counting rung rows."""
    r = cli("search", "--problem", "digits_mlp_local", "--pop", "9", "--budget", "12", "--seed", "3", "--rounds", "9",
            "--fidelity", "1/9,1/3,1", "--workers", "0", "--quiet", "--evaluator", FAKE, "--out", tmp_path / "R")
    assert r.returncode == 0, r.stderr
    rows = read_csv(tmp_path / "R" / "evaluations.csv")
    assert len({row["id"] for row in rows}) == 12 < len(rows)
    full = sum(row["fidelity"] == "1.0" for row in rows)
    assert (f"search finished (--budget evaluations reached): 2/2 generations, 12 individuals ({len(rows)} rung "
            f"evaluations, {full} at full fidelity, 0 failed, ") in r.stdout, r.stdout
