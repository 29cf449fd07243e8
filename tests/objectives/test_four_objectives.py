"""Issue #34's acceptance: an objective added in this file alone (registered here) is searched, is on the front,
picks and retrain follow it — and a run is read without it (run.json records it; the log holds its values)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from typer.testing import CliRunner

import fedevo
from fedevo.errors import FedevoError
from fedevo.objectives import Objective, register, unregister
from fedevo.problem import problems_dir

OBJECTIVES = ["error", "comm", "eps", "global_error"]


@pytest.fixture
def global_error():
    """The test's own objective: the global model's error on the whole test set."""
    obj = register(Objective(name="global_error", label="global error", unit="", worst=1.0, lower=0.0, upper=1.0,
                             read=lambda r: 1.0 - r.accuracy_global))
    yield obj
    unregister("global_error")


def _problem(tmp_path, objectives=OBJECTIVES, extra=""):
    text = (problems_dir() / "digits_mlp.toml").read_text()
    path = tmp_path / "digits4.toml"
    path.write_text(f"objectives = {json.dumps(objectives)}\n{extra}" + text)
    return path


def _dominates(a, b):
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


@pytest.fixture
def run4(tmp_path, global_error):
    out = tmp_path / "run"
    run = fedevo.search(str(_problem(tmp_path)), pop=6, gen=2, rounds=2, seed=3, workers=0, out=out, page=False)
    return run


def test_search_front_pick_retrain_with_a_fourth_objective(run4, tmp_path, global_error):
    out = run4.path
    meta = json.loads((out / "run.json").read_text())
    assert meta["objectives"] == OBJECTIVES
    assert [o["name"] for o in meta["objective_specs"]] == OBJECTIVES
    assert "4 objectives" in meta["algorithm"]["ref_dirs"]
    # the log: a column per objective, the raw value the test's function gives
    header = (out / "evaluations.csv").read_text().splitlines()[0].split(",")
    assert header.count("global_error") == 1
    rows = run4.evaluations
    assert len(rows) == 12
    for r in rows:
        if r["status"] == "ok":
            assert r["global_error"] == pytest.approx(1.0 - r["accuracy_global"], abs=1e-12)
    # the front is non-dominated in all four (ε on its log scale), and every ok row nothing dominates is on it
    data = run4.data
    F = {r["id"]: data.objectives.search_vector(r) for r in data.ok_rows}
    front = {r["id"] for r in run4.front}
    for i, f in F.items():
        dominated = any(_dominates(g, f) for j, g in F.items() if j != i)
        assert (i in front) == (not dominated), i
    assert len(data.hypervolume()[0]) and "lo_global_error" in data.hypervolume()[0]
    assert "scale_global_error" in (out / "hypervolume.csv").read_text().splitlines()[0]

    # picks: lowest-NAME and a knee cap on it
    best = min(run4.front, key=lambda r: (r["global_error"], r["id"]))
    assert [p["id"] for p in run4.pick("lowest-global_error")] == [best["id"]]
    cap = sorted(r["global_error"] for r in run4.front)[len(run4.front) // 2]
    (k,) = run4.pick(f"knee:global_error<={cap}")
    assert k["global_error"] <= cap
    assert all(p["global_error"] <= cap for p in run4.pick(f"front,global_error<={cap}"))
    with pytest.raises(FedevoError, match="not an objective of this run"):
        run4.pick("lowest-latency")

    # fedevo front: the table has its column, the JSON its value
    from fedevo.cli import app

    res = CliRunner().invoke(app, ["front", str(out), "--sort", "global_error", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)
    assert [x["id"] for x in listed][0] == best["id"]
    assert listed[0]["objectives"]["global_error"] == pytest.approx(best["global_error"])
    res = CliRunner().invoke(app, ["front", str(out)])
    assert res.exit_code == 0 and "global error" in res.output, res.output  # its label heads its column

    # retrain the pick: the report carries the objective, retrained and as searched
    rep = fedevo.retrain(run4, "lowest-global_error", rounds=2, workers=0, out=tmp_path / "retrain")
    report = (tmp_path / "retrain" / "report.csv").read_text().splitlines()
    head = report[0].split(",")
    assert "global_error" in head and "search_global_error" in head
    (line,) = [x for x in (dict(zip(head, r.split(","))) for r in report[1:]) if x["id"] == str(best["id"])]
    assert float(line["search_global_error"]) == pytest.approx(best["global_error"])
    assert 0.0 <= float(line["global_error"]) <= 1.0
    assert rep is not None


def test_a_run_reads_without_the_objective_registered(run4, global_error):
    """Readers need no user code: unregistered, the run still loads, fronts and picks (values from the log)."""
    before = [r["id"] for r in run4.front]
    unregister("global_error")
    try:
        data = fedevo.open_run(run4.path).data
        assert data.objectives.names == tuple(OBJECTIVES)
        assert [r["id"] for r in data.front] == before
        assert run4.pick("lowest-global_error")
        # evaluating needs it: one line, nothing evaluated
        from fedevo.searching import Runtime, SearchRun

        with pytest.raises(FedevoError, match="global_error.*not registered"):
            SearchRun.open(run4.path).run(Runtime(workers=0))
    finally:
        register(global_error)


def test_hypervolume_of_several_runs_under_one_normalisation(tmp_path, global_error):
    """fedevo.hypervolume: one normalisation over both runs (each run's own hypervolume.csv has its own)."""
    p = _problem(tmp_path)
    a = fedevo.search(str(p), pop=6, gen=2, rounds=1, seed=1, workers=0, out=tmp_path / "a", page=False)
    b = fedevo.search(str(p), pop=6, gen=2, rounds=1, seed=2, workers=0, out=tmp_path / "b", page=False)
    hv = fedevo.hypervolume([a, b], at=[6, 12])
    assert [(h["run"], h["evaluations"]) for h in hv] == [(str(a.path), 6), (str(a.path), 12), (str(b.path), 6),
                                                        (str(b.path), 12)]
    assert len({h["lo_global_error"] for h in hv}) == 1 and len({h["scale_eps"] for h in hv}) == 1
    assert hv[1]["hypervolume"] >= hv[0]["hypervolume"] > 0  # fronts only grow
    # the normalisation: min and range of both runs' ok rows, on the search scale
    ok = [r for run in (a, b) for r in run.data.ok_rows if all(math.isfinite(r[n] or math.inf) for n in OBJECTIVES)]
    F = a.data.objectives.search_matrix(ok)
    assert hv[0]["lo_eps"] == pytest.approx(F[:, 2].min())
    assert hv[0]["scale_global_error"] == pytest.approx(np.ptp(F[:, 3]))
    with pytest.raises(FedevoError, match="at must be"):
        fedevo.hypervolume([a], at=[0])
    # the pages do not yet show a fourth objective (fedevo.viz follows RunData.objectives: helper h-pages), but they
    # are written for such runs
    assert fedevo.plot(a, importance=False).exists()
    # compare.html's shared hypervolume is fedevo.hypervolume's, on all four objectives (it measured error, comm
    # and ε alone: a run's fourth objective changed nothing of it)
    page = fedevo.plot([a, b], out=tmp_path / "compare.html").read_text()
    blob = json.loads(re.search(r"window.FEDEVO_COMPARE = (\{.*?\});</script>", page).group(1))
    per_gen = fedevo.hypervolume([a, b])
    assert [blob["hypervolume"][n] for n in ("a", "b")] == [
        [h["hypervolume"] for h in per_gen if h["run"] == str(run.path)] for run in (a, b)]
    assert blob["normalisation"]["objectives"] == list(OBJECTIVES) and blob["normalisation"]["ref"] == [1.1] * 4
    assert blob["normalisation"]["lo"] == [per_gen[0][f"lo_{k}"] for k in OBJECTIVES]


def test_hypervolume_is_compare_pages_number(tmp_path):
    """With the default objectives, fedevo.hypervolume per generation is what compare.html shows."""
    from fedevo.viz.compare import shared_hypervolume

    runs = [fedevo.search("digits_mlp", pop=4, gen=2, rounds=1, seed=s, workers=0, out=tmp_path / str(s), page=False)
            for s in (4, 5)]
    hv = fedevo.hypervolume(runs)
    tables, lo, scale = shared_hypervolume([r.data for r in runs])
    want = [h for t in tables for h in t]
    assert [(h["generation"], h["evaluations"], h["front_size"]) for h in hv] == \
        [(w["generation"], w["evaluations"], w["front_size"]) for w in want]
    assert [h["hypervolume"] for h in hv] == pytest.approx([w["hypervolume"] for w in want], rel=1e-12)
    assert hv[0]["lo_eps"] == pytest.approx(lo[2]) and hv[0]["scale_comm"] == pytest.approx(scale[1])


def test_objectives_in_a_problem_file(tmp_path):
    """[objective.NAME] read = "python:file.py:fn": searched without registering anything; bad entries: one line."""
    (tmp_path / "objs.py").write_text("def gap(r):\n    return abs((1.0 - r.error) - r.accuracy_global)\n")
    spec = '[objective.gap]\nread = "python:objs.py:gap"\nworst = 1.0\nlabel = "accuracy gap"\n'
    # TOML: a table must follow the top-level keys, so put the objective table at the end
    path = tmp_path / "gap.toml"
    path.write_text('objectives = ["error", "comm", "gap"]\n' + (problems_dir() / "digits_mlp.toml").read_text()
                    + "\n" + spec)
    run = fedevo.search(str(path), pop=4, gen=1, rounds=1, workers=0, out=tmp_path / "run", page=False)
    rows = [r for r in run.evaluations if r["status"] == "ok"]
    assert rows and all(r["gap"] == pytest.approx(abs((1 - r["error"]) - r["accuracy_global"])) for r in rows)
    assert run.data.objectives.names == ("error", "comm", "gap")

    def bad(objs, body):
        p = tmp_path / "bad.toml"
        p.write_text(f"objectives = {json.dumps(objs)}\n" + (problems_dir() / "digits_mlp.toml").read_text()
                     + "\n" + body)
        with pytest.raises(FedevoError) as e:
            fedevo.Problem.from_file(p)
        return str(e.value)

    assert "unknown key" in bad(["error", "latency"], "")
    assert "2 to 5" in bad(["error"], "")
    assert "listed twice" in bad(["error", "comm", "error"], "")
    assert "missing required key 'worst'" in bad(["error", "gap"], '[objective.gap]\nread = "python:objs.py:gap"\n')
    assert "built-in" in bad(["error", "comm"], '[objective.comm]\nread = "python:objs.py:gap"\nworst = 1.0\n')
    assert "not in the objectives list" in bad(["error", "comm"], spec)
    assert "[constraints] latency" in bad(["error", "comm"], "[constraints]\nlatency = 3\n")


def test_builtin_objectives_are_measured(tmp_path):
    """worst_client_error, model_size and train_macs: read from what the simulator measures."""
    r = fedevo.evaluate("digits_mlp", rounds=2, seed=0)
    from fedevo.objectives import get

    assert r.worst_client_error is not None and r.error <= r.worst_client_error <= 1.0
    assert get("model_size").value(r) == r.omega > 0
    assert get("train_macs").value(r) > 0
    assert get("worst_client_error").search_value(None) == 1.0


def test_a_users_objective_is_read_once_contained_and_range_checked(tmp_path, capfd):
    """The 2026-11-27 audit: an objective's function ran three times an evaluation (the log's row, front.csv's
    rows re-read from reconstructed results, the worker's range check), printed to fedevo's stdout, and a value
    outside its declared range was taken as it came. Now: once per evaluation that succeeded, its output in
    user.log, an out-of-range value the objective's worst with a note; failed evaluations are not read."""
    from tests.searching import search_fakes

    calls = []

    def read(r):
        calls.append(r.error)
        print(f"reading {r.error:.3f}")
        return 2.0 if r.error < 0.5 else r.error  # 2.0: outside [0, 1]

    register(Objective(name="chatty", label="chatty", worst=1.0, lower=0.0, upper=1.0, read=read))
    try:
        run = fedevo.search(str(_problem(tmp_path, ["error", "comm", "chatty"])), pop=6, gen=2, seed=1, workers=0,
                            out=tmp_path / "run", page=False, evaluator=search_fakes.fake_flaky)
    finally:
        unregister("chatty")
    out = capfd.readouterr().out
    assert "reading" not in out, out
    rows = run.evaluations
    ok = [r for r in rows if r["status"] == "ok"]
    assert 0 < len(ok) < len(rows) and len(calls) == len(ok)  # once each; failed and diverged ones not at all
    user_log = (run.path / "user.log").read_text()
    assert user_log.count("reading ") == len(ok) and "--- evaluation 0 (generation 1" in user_log
    for r in ok:
        if r["error"] < 0.5:
            assert r["chatty"] is None or math.isnan(r["chatty"])
            assert "objective chatty: ValueError: 2.0 is outside its range [0, 1]" in r["message"]
        else:
            assert r["chatty"] == pytest.approx(r["error"]) and "chatty" not in (r["message"] or "")
    assert any(r["error"] < 0.5 for r in ok) and any(r["error"] >= 0.5 for r in ok)


@pytest.mark.parametrize("name", ["status", "accuracy_global", "omega", "message"])
def test_an_objective_named_as_a_column_of_the_log_is_refused_before_anything_is_written(tmp_path, name):
    """`status` crashed the search after writing run.json (float('ok')); `accuracy_global` was silently read from
    the column, not the user's function (the 2026-11-27 audit)."""
    register(Objective(name=name, label=name, worst=1.0, lower=0.0, upper=1.0, read=lambda r: 0.5))
    out = tmp_path / "run"
    try:
        with pytest.raises(FedevoError, match=f"objective '{name}' has the name of a gene or a column"):
            fedevo.search(str(_problem(tmp_path, ["error", "comm", name])), pop=6, gen=1, workers=0, out=out,
                          page=False)
    finally:
        unregister(name)
    assert not out.exists()


def test_retrain_shows_and_keeps_every_objective(run4, tmp_path, global_error):
    """A retrain of a run with its own objective: the terminal's table has the objective's column (it showed error,
    comm and ε only: the objective searched for was in report.md alone), and results.json, "every retrained
    solution's numbers for your own analysis", holds its value retrained and searched, every digit (it held the
    EvaluationResult alone, which has no field for a user's objective)."""
    from fedevo.cli import app

    out = tmp_path / "retrain"
    res = CliRunner().invoke(app, ["retrain", str(run4.path), "--pick", "lowest-global_error", "--rounds", "2",
                                   "--workers", "0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    head = next(line for line in res.output.splitlines() if "picked by" in line or "sol." in line)
    assert "global error" in head, res.output
    # report.md's genes table names the searched objective as its main table does (it wrote the key: global_error)
    md = (out / "report.md").read_text()
    genes_head = next(line for line in md.splitlines() if line.startswith("| Solution |") and "search seed" in line)
    assert "| search global error |" in genes_head and "global_error" not in genes_head, genes_head
    best = min(run4.front, key=lambda r: (r["global_error"], r["id"]))
    sols = json.loads((out / "results.json").read_text())["solutions"]
    (pick,) = [s for s in sols if s["id"] == best["id"]]
    assert pick["search_objectives"]["global_error"] == best["global_error"]
    assert pick["objectives"]["global_error"] == 1.0 - pick["result"]["accuracy_global"]
    std = [s for s in sols if s["id"] is None]
    assert std and set(std[0]["objectives"]) == {"global_error"}
