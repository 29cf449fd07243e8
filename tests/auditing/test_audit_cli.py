"""`fedevo audit` on the command line: JSON, files, exit codes, run directories left as they were."""

import json
import math

import pytest

import fedevo.privacy.central as central
from fedevo.searching.rundata import load_run
from tests.helpers import run_cli as cli
from tests.viz.fedevo_runs import digits_run

KEYS = {"eps_upper", "eps_estimate", "eps_lower", "verdict", "canaries", "confidence", "method"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return digits_run(tmp_path_factory)


def _snapshot(d):
    return {p.relative_to(d): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()
            and not p.relative_to(d).parts[0].startswith("audit")}


def test_problem_json_one_object(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--params", '{"sigma": 0.5}', "--json"], capsys)
    assert code in (0, None), err
    lines = out.strip().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    assert KEYS <= set(obj) and obj["verdict"] == "consistent" and obj["confidence"] == 0.95
    assert obj["eps_lower"] <= obj["eps_upper"] and obj["params"]["sigma"] == 0.5
    (audit_dir,) = list((tmp_path / "runs").iterdir())
    assert {p.name for p in audit_dir.iterdir()} == {"audit.json", "audit.html"}
    html = (audit_dir / "audit.html").read_text()
    assert "inserted (included)" in html and "held out" in html and "<script src=" not in html  # offline


def test_run_pick_writes_audit_dirs_never_overwrites(run_dir, capsys):
    before = _snapshot(run_dir)
    code, out, err = cli(["audit", str(run_dir), "--pick", "knee", "--quiet"], capsys)
    assert code in (0, None), err
    code, out, err = cli(["audit", str(run_dir), "--pick", "knee,lowest-error:1", "--quiet"], capsys)
    assert code in (0, None), err
    first = json.loads((run_dir / "audit" / "audit.json").read_text())
    second = json.loads((run_dir / "audit-2" / "audit.json").read_text())
    assert len(first["audits"]) == 1 and len(second["audits"]) >= 1
    a = first["audits"][0]
    assert a["eps_search"] == pytest.approx(a["eps_upper"])  # what the search reported, re-accounted
    assert _snapshot(run_dir) == before  # nothing else in the run directory changed


def test_violation_exits_3(tmp_path, capsys, monkeypatch):
    std = central.CentralGaussian.noise_std
    monkeypatch.setattr(central.CentralGaussian, "noise_std", lambda self: std(self) / 10)
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--json", "--out", tmp_path / "a"], capsys)
    assert code == 3
    assert json.loads(out)["verdict"] == "VIOLATION"


@pytest.mark.parametrize("argv,msg", [
    (["--pick", "id:99999"], "no evaluation with id"),
    (["--pick", "bogus"], "cannot understand pick"),
    (["--pick", ""], "empty pick"),  # as front and retrain say it (it said "needs --pick")
    ([], "auditing a run needs --pick"),
    (["--pick", "knee", "--canaries", "8"], "too few"),
    (["--pick", "knee", "--confidence", "1.2"], "confidence"),
    (["--pick", "knee", "--seed", "5"], "--params and --seed go with --problem"),  # was ignored
])
def test_bad_input_one_line_exit_2(run_dir, capsys, argv, msg):
    code, out, err = cli(["audit", str(run_dir), *argv], capsys)
    assert code == 2 and msg in err and err.count("\n") == 1 and err.startswith("fedevo: error:")


def test_run_without_evaluations_and_signds(run_dir, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "run.json").write_bytes((run_dir / "run.json").read_bytes())
    code, out, err = cli(["audit", str(empty), "--pick", "knee"], capsys)
    assert code == 2 and "no evaluations" in err and err.count("\n") == 1
    assert not (empty / "audit").exists()
    code, out, err = cli(["audit", "--problem", "digits_mlp_local", "--params",
                          '{"mechanism": "signds"}'], capsys)
    assert code == 2 and "'signds' is not implemented" in err and err.count("\n") == 1


def test_unwritable_out_and_bad_seed_before_training(tmp_path, capsys, monkeypatch):
    import fedevo.auditing.run

    calls = []
    monkeypatch.setattr(fedevo.auditing.run, "audit_config", lambda *a, **k: calls.append(a))
    a_file = tmp_path / "a_file.txt"
    a_file.write_text("x")
    for argv, msg in ((["--out", a_file / "a"], "--out .*cannot write there"), (["--seed", "-1"], "seed")):
        code, out, err = cli(["audit", "--problem", "digits_mlp", *argv], capsys)
        assert code == 2 and err.count("\n") == 1 and __import__("re").search(msg, err), err
    assert calls == [] and sorted(p.name for p in tmp_path.iterdir()) == ["a_file.txt"]


def test_out_is_new_or_empty_and_data_dir_is_taken(tmp_path, capsys, monkeypatch):
    """The 2026-11-27 audit: --out went to OUT-2 beside an existing (even empty) folder, and a problem whose data
    need --data-dir could not be audited at all (no such option)."""
    from fedevo.auditing import targets

    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--rounds", "1", "--canaries", "200", "--json",
                          "--out", empty], capsys)
    assert code == 0 and (empty / "audit.json").exists() and not (tmp_path / "empty-2").exists()
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--out", empty], capsys)
    assert code == 2 and "already exists and is not an empty directory" in err
    seen = []
    real = targets.from_problem
    monkeypatch.setattr(targets, "from_problem", lambda *a, **kw: seen.append(kw["data_dir"]) or real(*a, **kw))
    code, out, err = cli(["audit", "--problem", "mnist_mlp", "--rounds", "1", "--data-dir", tmp_path], capsys)
    assert code == 2 and seen == [str(tmp_path)] and "mnist not found in" in err, err
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--data-dir", tmp_path / "nowhere"], capsys)
    assert code == 2 and "does not exist" in err
    code, out, err = cli(["audit"], capsys)
    assert code == 2 and "give RUN_DIR --pick SPEC (a run's evaluations) or --problem NAME" in err


@pytest.mark.parametrize("sig,code,how", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "stopped by SIGTERM")])
def test_audit_stopped_says_so_and_leaves_nothing(run_dir, capsys, monkeypatch, sig, code, how):
    # Ctrl-C / SIGTERM during the second canary run: one line saying that nothing was written and how to go on,
    # exit 130 / 143 as `fedevo search`; the run directory as it was (it used to exit 130 for both, silently)
    import os
    import signal

    from fedevo.errors import Terminated
    import fedevo.auditing.run as audit_run

    calls, real = [], audit_run.audit_config

    def audit_config(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), getattr(signal, sig))
        return real(*a, **kw)

    monkeypatch.setattr(audit_run, "audit_config", audit_config)
    monkeypatch.setattr(Terminated, "received", False)  # a SIGTERM marks the process; this test is one process
    before = sorted(p.name for p in run_dir.iterdir())
    got, out, err = cli(["audit", str(run_dir), "--pick", "lowest-error:2", "--canaries", "200"], capsys)
    assert got == code and len(calls) == 2 and out == ""
    assert err.strip().splitlines()[-1] == (f"fedevo: {how}; nothing was written (audit.json and audit.html are "
                                            "written once every configuration is audited); run the same command "
                                            "again to audit")
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_terminal_and_json_say_the_accountant_the_neighbouring_relation_and_where(tmp_path, capsys):
    # what eps_upper holds under, in full: the neighbouring relation and the accountant beside trust, δ, N, M (the
    # terminal said neither, --json and audit.html no accountant); each line whole in a file or pipe (rich broke
    # them at 200 columns: "... (a hint, not a \nproof)")
    argv = ["audit", "--problem", "digits_mlp", "--rounds", "1", "--canaries", "200"]
    code, out, err = cli([*argv, "--json", "--out", tmp_path / "j"], capsys)
    assert code in (0, None), err
    obj = json.loads(out)  # stdout: the JSON alone; where the files went on stderr (--json said it nowhere)
    assert obj["accountant"].startswith("PLD") and obj["exposure"]["relation"] == "add/remove"
    assert f"wrote {tmp_path / 'j'}/ (audit.json, audit.html)" in err
    code, out, err = cli([*argv, "--out", tmp_path / "t"], capsys)
    assert code in (0, None), err
    line = next(ln for ln in out.splitlines() if ln.startswith("digits_mlp: trust central"))
    assert f"neighbouring add/remove · accountant {obj['accountant']}" in line
    assert any(ln.startswith("lower bound at 0.95") and ln.endswith("(Andrew et al., ICLR 2024)")
               for ln in out.splitlines())
    assert f"accountant <b>{obj['accountant']}</b>" in (tmp_path / "t" / "audit.html").read_text()
    # an estimate whose interval reaches 0 says it is not told apart from no leakage (0.74 [0, 2.1] beside the
    # accountant's 0.004 read as alarming); one above 0 does not
    reaches = not obj["eps_estimate_interval"][0] > 0
    verdict = next(ln for ln in out.splitlines() if ln.startswith(f"digits_mlp: {obj['verdict']} — "))
    assert ("the ε estimate's interval reaches 0: not told apart from no leakage" in verdict) == reaches
    assert ("its interval reaches 0: not told apart from no leakage" in
            (tmp_path / "t" / "audit.html").read_text()) == reaches
    assert reaches  # 1 round of digits_mlp at σ 1 with 200 canaries: no separation shown (0.259 [0, 1.47])


def test_a_runs_pick_is_audited_at_the_rounds_it_was_retrained_for(run_dir, tmp_path, capsys):
    """The ε published after `fedevo retrain --rounds R` is the pick's at R rounds: `audit RUN --pick ID --rounds R`
    audits that (it was refused), its accountant's ε equal to the retraining's, and the search's ε (at its own
    rounds) not set beside it."""
    from fedevo.retraining import retrain

    rows = [r for r in load_run(run_dir).rows if r["status"] == "ok" and math.isfinite(r["eps"])]
    pick = str(rows[0]["id"])
    searched = load_run(run_dir).settings.rounds or rows[0]["rounds_trained"]
    rounds = int(rows[0]["rounds_trained"]) + 2
    code, out, err = cli(["audit", str(run_dir), "--pick", pick, "--rounds", str(rounds), "--json", "--canaries",
                          "64", "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    got = json.loads(out)
    again = retrain(run_dir, pick, rounds=rounds, workers=0, write=False).results["1"]
    assert got["eps_upper"] == pytest.approx(again.eps) and got["eps_search"] is None and searched != rounds


def test_an_audit_of_uploads_without_noise_has_an_infinite_upper_bound(tmp_path):
    """The audit's local accountant read a zero effective multiplier (noise std ~0 against the clip) as ε = 0,
    as the update mechanism's own account did before 2026-11-27: one rule now (accounting.eps_update_effective).
    Its canaries' statistics (~1e200) overflowed too (3 numpy RuntimeWarnings on stderr), which made every score
    NaN (lower bound 0, no guess) and the fitted separation 0 (estimate 0): now nothing warns, every canary is
    guessed right and the fit separates them completely."""
    import warnings

    import fedevo

    prob = tmp_path / "p.toml"
    prob.write_text('name = "edges"\ndataset = "digits"\nmodel = "mlp"\n[data]\npartition = "iid"\nclients = 6\n'
                    '[train]\nrounds = 2\nepochs = 1\nbatch_size = 16\nupload_loss = 0.0\nprecision = "fp32"\n'
                    '[privacy]\nmechanism = "update"\nclip = 2.0\nsigma = 1e-200\nrecall = false\ndelta = 1e-4\n'
                    '[genes]\nlr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }\n')
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        (r,) = fedevo.audit(problem=str(prob), canaries=64, write=False)
    assert r.eps_upper == math.inf and r.verdict != "VIOLATION"
    assert r.bound.guesses == r.bound.correct == 64 and r.eps_lower > 0 and r.eps_estimate == math.inf


def test_a_problem_of_ones_own_evaluator_is_refused_saying_why(tmp_path, capsys):
    """fedevo audit of a problem (or a run) that a user's evaluator trains said 'it has no simulator
    configuration'; it says that the audit needs fedevo's own simulator."""
    from pathlib import Path

    import fedevo

    toml = Path(fedevo.__file__).parent / "examples" / "own_training.toml"
    run = fedevo.search(str(toml), pop=4, gen=1, workers=0, seed=0, out=tmp_path / "R", page=False)
    for argv in (["--problem", str(toml)], [str(run.path), "--pick", "knee"]):
        code, out, err = cli(["audit", *argv], capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith("fedevo: error: fedevo audit needs fedevo's own simulator") and "own evaluator" in err
    assert not (tmp_path / "R" / "audit").exists()


def test_without_quiet_stderr_holds_no_empty_line(tmp_path, capsys):
    """Without --quiet, stderr a pipe or a log: the transient progress bar is never drawn there but left an empty
    line on stderr when it stopped."""
    code, out, err = cli(["audit", "--problem", "digits_mlp", "--rounds", "1", "--out", tmp_path / "A"], capsys)
    assert code in (0, 3) and err == "" and "privacy audit" in out
