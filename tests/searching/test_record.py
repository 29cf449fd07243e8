"""One evaluation record (fedevo.searching.record.EvaluationRecord): the log writes it, the search's callbacks get
it, every reader reads it; frozen; its mapping view is exactly evaluations.csv's columns."""

from __future__ import annotations

import csv
import dataclasses
import math
import pickle

import pytest

import fedevo
from fedevo.result import EvaluationResult
from fedevo.searching import Runtime, SearchCallback, SearchSettings, load_run, search
from fedevo.searching.integrity import row_digest
from fedevo.searching.log import EvalLog, row_result
from fedevo.searching.record import EvaluationRecord
from fedevo.searching.runner import Task

from . import search_fakes

SERIAL = Runtime(workers=0)


class Collect(SearchCallback):
    def __init__(self):
        self.records = []

    def on_evaluation(self, row):
        self.records.append(row)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("record") / "run"
    cb = Collect()
    search(SearchSettings(problem="digits_mlp_local", pop=5, gen=2, seed=4), out, SERIAL,
           evaluator=search_fakes.fake_evaluate, callbacks=[cb])
    return out, cb.records


def test_every_reader_reads_the_same_frozen_record(run):
    out, told = run
    data = load_run(out)
    assert len(told) == len(data.rows) == 10
    assert all(type(r) is EvaluationRecord for r in (*told, *data.rows, *data.front))
    assert sorted(told, key=lambda r: r.id) == data.rows  # what the callback got = what a reader reads back
    api = fedevo.open_run(out)
    assert api.evaluations == data.rows and all(isinstance(r, EvaluationRecord) for r in api.evaluations)
    assert [r.id for r in api.front] == [r.id for r in data.front]
    r = data.rows[3]
    assert (r.id, r.generation, r.index) == (3, 1, 3)
    assert r.params == {g: r[g] for g in data.gene_names} and r.result.error == r["error"] == r.value("error")
    assert r.status == r["status"] == "ok" and r.ok and r.full and r.rung is None and "rung" not in r
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.seed = 0
    with pytest.raises(TypeError):
        r["error"] = 0.0  # noqa: the mapping is read-only
    with pytest.raises(TypeError):
        r.params["lr"] = 1.0  # noqa: so are its genes


def test_the_mapping_view_is_the_logs_columns(run):
    out, _ = run
    data = load_run(out)
    with open(out / "evaluations.csv", newline="") as f:
        header = next(csv.reader(f))
    for r in data.rows:
        assert list(r) == header[:-1]  # every column but the chain, in the file's order
    # a record's fingerprint (what checkpoints record of the log) is the plain row's: checkpoints written before
    # the record still check
    assert all(row_digest(r) == row_digest(dict(r)) for r in data.rows)
    # a plain dict of the columns reads as the record does (callers holding dicts keep working)
    r = data.rows[0]
    assert row_result(dict(r)) == r.result and dict(r) == r and r == dict(r)


def test_the_log_returns_what_it_reads_back(tmp_path):
    problem = fedevo.Problem.from_file("digits_mlp_local")
    from fedevo.searching.space import SearchSpace

    space = SearchSpace.from_problem(problem)
    params = space.decode_batch(((space.xl + space.xu) / 2)[None, :])[0]
    log = EvalLog(tmp_path / "evaluations.csv", space.genes, rungs=True, run_json=b"{}")
    log.open()
    res = EvaluationResult(error=0.25, comm=1e3, eps=math.inf, eps_paper=None, accuracy_global=0.7, omega=12,
                           status="diverged", wall_s=1.5, rounds=3, privacy={"trust": "local"},
                           message="line one\nline two")
    written = log.append(Task(7, 2, 1, params, 99, rung=1, fidelity=0.5), res)
    log.close()
    again = EvalLog(tmp_path / "evaluations.csv", space.genes, rungs=True, run_json=b"{}").open()
    assert again == [written]  # NaN cells too: the same record read twice is equal to itself
    w = again[0]
    assert (w.id, w.generation, w.index, w.seed, w.rung, w.fidelity, w.full) == (7, 2, 1, 99, 1, 0.5, False)
    assert w.result.message == "line one\nline two" and w.status == "diverged" and not w.ok
    # a diverged evaluation's numbers are not results (its ε = ∞ read as 'no privacy'): logged NaN, as a failure's
    assert all(math.isnan(w[k]) for k in ("error", "comm", "eps", "eps_paper", "accuracy_global"))
    assert w.value("eps") is None and w["omega"] == 12 and w["rounds_trained"] == 3
    assert pickle.loads(pickle.dumps(w)) == w  # travels to Ray workers and into checkpoints
    assert w != {**dict(w), "eps": 1.0} and w == {**dict(w), "eps": float("nan")}


def test_a_record_refuses_what_no_log_holds():
    res = EvaluationResult(error=0.1, comm=1.0, eps=1.0, eps_paper=1.0, accuracy_global=0.9, omega=1)
    with pytest.raises(ValueError, match="rung and fidelity"):
        EvaluationRecord(id=0, generation=1, index=0, seed=0, params={}, result=res, rung=1)
    with pytest.raises(ValueError, match="both a gene and an objective"):
        EvaluationRecord(id=0, generation=1, index=0, seed=0, params={"x": 1}, result=res,
                         objective_values={"x": 2.0})
    with pytest.raises(TypeError, match="EvaluationResult"):
        EvaluationRecord(id=0, generation=1, index=0, seed=0, params={}, result={"error": 0.1})
    with pytest.raises(ValueError, match="status 'odd'"):
        EvaluationResult(error=0.1, comm=1.0, eps=1.0, eps_paper=1.0, accuracy_global=0.9, omega=1, status="odd")


def test_a_diverged_or_failed_evaluation_reports_no_numbers(tmp_path, capsys):
    """evaluations.csv holds no objective value of an evaluation that is not ok: a diverged one's stand-ins (the
    simulator's error 1, comm and ε = ∞; here an evaluator's ε = ∞) were written and `fedevo front --pick ID` showed
    them as its result, ε '∞' under the caption 'ε = ∞: no privacy'. Every reader now reads NaN: '–', JSON null."""
    import json

    from tests.helpers import run_cli

    out = tmp_path / "run"
    search(SearchSettings(problem="digits_mlp_local", pop=10, gen=1, seed=4), out, SERIAL,
           evaluator=search_fakes.fake_flaky)
    data = load_run(out)
    bad = [r for r in data.rows if not r.ok]
    assert {r.status for r in bad} == {"failed", "diverged"}
    with open(out / "evaluations.csv", newline="") as f:
        cells = {int(r["id"]): r for r in csv.DictReader(f)}
    for r in bad:
        assert [cells[r.id][k] for k in ("error", "comm", "eps", "eps_paper", "accuracy_global")] == ["nan"] * 5
        assert all(math.isnan(r[k]) for k in ("error", "comm", "eps", "eps_paper", "accuracy_global"))
    div = next(r for r in bad if r.status == "diverged")
    code, text, err = run_cli(["front", str(out), "--pick", str(div.id), "--json"], capsys)
    assert code in (0, None), err
    shown = json.loads(text)[0]
    assert shown["status"] == "diverged" and set(shown["objectives"].values()) == {None}
    code, text, err = run_cli(["front", str(out), "--pick", str(div.id)], capsys)
    row = next(line for line in text.splitlines() if "diverged" in line)
    assert "∞" not in row and row.count("–") >= 5, row
