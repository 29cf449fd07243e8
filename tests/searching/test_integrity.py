"""Damaged runs are detected (issue #27): a log that lost or altered rows its checkpoints count is refused with
one line by every reader (front, plot, retrain, audit via load_run; resume), never drawn as a different front."""

from __future__ import annotations

import pickle

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.searching.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from fedevo.searching.rundata import load_run

from tests.helpers import cli

from .search_helpers import FAKE, read_csv, toy_problem_file, unchain, without


def _searched(tmp_path_factory, name: str, *, gen: int, seed: int):
    """The run directory of a finished search of the toy problem, 4 candidates a batch for `gen` batches (the module
    fixtures': a short run and a long one)."""
    tmp = tmp_path_factory.mktemp(name)
    run = fedevo.search(str(toy_problem_file(tmp)), pop=4, gen=gen, seed=seed, workers=0, out=tmp / "R",
                        evaluator=FAKE, page=False)
    return run.path


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    return _searched(tmp_path_factory, "run", gen=3, seed=1)


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _lines(path):
    return path.read_text().splitlines(keepends=True)


def test_an_intact_run_opens(finished):
    assert len(load_run(finished).rows) == 12
    assert load_checkpoint(latest_checkpoint(finished))["log"]["count"] == 12


def test_rows_cut_off_are_refused_everywhere(finished, tmp_path):
    d = _copy(finished, tmp_path / "cut")
    lines = _lines(d / "evaluations.csv")
    (d / "evaluations.csv").write_text("".join(lines[:1 + 7]))  # header + 7 of 12
    with pytest.raises(FedevoError, match=r"lacks 5 of the 12 evaluations that checkpoint gen-0003 counts"):
        load_run(d)
    with pytest.raises(FedevoError, match="lacks 5 of the 12"):  # not "nothing to resume"
        fedevo.resume(d, workers=0, page=False)
    for cmd in (["front", d], ["plot", d], ["retrain", d, "--rounds", "1"], ["audit", d, "--pick", "knee"]):
        r = cli(*cmd)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("fedevo: error:") and "lacks 5 of the 12" in r.stderr
        assert "Traceback" not in r.stderr
    assert not (d / "front.html").exists()


def test_an_altered_row_is_named(finished, tmp_path):
    d = _copy(finished, tmp_path / "edit")
    lines = _lines(d / "evaluations.csv")
    rows = read_csv(d / "evaluations.csv")
    k = next(i for i, r in enumerate(rows) if r["status"] == "ok")
    old = rows[k]["error"]
    lines[1 + k] = lines[1 + k].replace(old, repr(float(old) / 2), 1)
    (d / "evaluations.csv").write_text("".join(lines))
    with pytest.raises(FedevoError, match=rf"evaluations.csv: line {2 + k} \(id \d+\) breaks the log's hash chain"):
        load_run(d)
    unchain(d)  # a log written before the chain: the checkpoint's record names the id
    with pytest.raises(FedevoError, match=rf"differ from what was logged \(id {rows[k]['id']}: checksum mismatch\)"):
        load_run(d)


def test_rows_after_the_checkpoint_and_a_torn_row_are_not_damage(finished, tmp_path):
    """A killed generation: rows past the newest checkpoint and a half-written last line (resume repairs it)."""
    d = _copy(finished, tmp_path / "torn")
    (d / "checkpoints" / "gen-0003.pkl").unlink()  # the run was killed during generation 3
    text = (d / "evaluations.csv").read_text()
    (d / "evaluations.csv").write_text(text[:-20])  # and in the middle of writing its last row
    assert len(load_run(d).rows) == 11
    fedevo.resume(d, workers=0, page=False)
    assert without(read_csv(d / "evaluations.csv"), "wall_s", "chain") == \
        without(read_csv(finished / "evaluations.csv"), "wall_s", "chain")
    assert (d / "front.csv").read_text() == (finished / "front.csv").read_text()


def test_checkpoints_of_an_earlier_version_still_open(finished, tmp_path):
    d = _copy(finished, tmp_path / "old")
    ck = latest_checkpoint(d)
    state = load_checkpoint(ck)
    state.pop("log")
    save_checkpoint(d, state)
    assert "log" not in pickle.loads(ck.read_bytes().split(b"\n", 2)[2])
    assert len(load_run(d).rows) == 12


def test_a_generation_ending_while_the_run_is_read_is_not_damage(finished, tmp_path):
    """A reader of a running search (front, plot --watch) reads the checkpoint before the rows: a checkpoint
    written while the rows are read counts rows the reader has not seen, and must not be taken for lost rows."""
    from fedevo.searching.integrity import checked_rows
    from fedevo.searching.log import EvalLog
    from fedevo.searching.rundata import read_rows
    from fedevo.searching.space import SearchSpace

    d = _copy(finished, tmp_path / "live")
    ck3 = d / "checkpoints" / "gen-0003.pkl"
    saved = ck3.read_bytes()
    ck3.unlink()  # generation 3 under way: its rows are being appended
    lines = _lines(d / "evaluations.csv")
    (d / "evaluations.csv").write_text("".join(lines[:1 + 8]))
    log = EvalLog(d / "evaluations.csv", SearchSpace.from_problem(load_run(d).problem).genes)

    def read_while_generation_3_ends():
        rows = read_rows(log, log.path)  # the reader sees 8 rows ...
        ck3.write_bytes(saved)  # ... and meanwhile the search logs the rest and writes checkpoint gen-0003
        (d / "evaluations.csv").write_text("".join(lines))
        return rows

    assert len(checked_rows(d, read_while_generation_3_ends)) == 8
    assert len(load_run(d).rows) == 12  # the next read sees it all


# ---------------------------------------------------------------- the hash chain (issue #35): every row, to the last
def _refused_everywhere(d, match):
    """One `fedevo: error:` line from every reader and from resume."""
    with pytest.raises(FedevoError, match=match):
        load_run(d)
    with pytest.raises(FedevoError, match=match):
        fedevo.resume(d, workers=0, page=False)
    for cmd in (["front", d], ["plot", d], ["retrain", d, "--rounds", "1"], ["audit", d, "--pick", "knee"]):
        r = cli(*cmd)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("fedevo: error:"), (cmd, r.stderr)
        assert "Traceback" not in r.stderr and __import__("re").search(match, r.stderr), (cmd, r.stderr)
    assert not (d / "front.html").exists()


def test_a_row_appended_by_hand_is_refused(finished, tmp_path):
    """A forged row (error 0.0001, the next id) appended to a finished run would be the whole front."""
    d = _copy(finished, tmp_path / "forged")
    lines = _lines(d / "evaluations.csv")
    rows = read_csv(d / "evaluations.csv")
    forged = lines[-1].replace(f"{rows[-1]['id']},", f"{len(rows)},", 1).replace(rows[-1]["error"], "0.0001", 1)
    (d / "evaluations.csv").write_text("".join(lines) + forged)
    _refused_everywhere(d, rf"evaluations.csv: line {len(lines) + 1} \(id \d+\) breaks the log's hash chain")


def test_the_last_row_edited_after_a_kill_between_checkpoints_is_refused(finished, tmp_path):
    """Rows after the newest checkpoint are covered too: an edited last row would steer the resumed search."""
    d = _copy(finished, tmp_path / "last")
    (d / "checkpoints" / "gen-0003.pkl").unlink()  # killed during generation 3, after its last row
    lines = _lines(d / "evaluations.csv")
    rows = read_csv(d / "evaluations.csv")
    lines[-1] = lines[-1].replace(rows[-1]["error"], repr(float(rows[-1]["error"]) / 3), 1)
    (d / "evaluations.csv").write_text("".join(lines))
    _refused_everywhere(d, rf"evaluations.csv: line {len(lines)} \(id \d+\) breaks the log's hash chain")


@pytest.mark.parametrize("where", ["first", "middle", "removed"])
def test_a_row_edited_or_removed_anywhere_is_named(finished, tmp_path, where):
    d = _copy(finished, tmp_path / where)
    for ck in (d / "checkpoints").glob("gen-000[123].pkl"):
        ck.unlink()  # no checkpoint counts the rows: the chain alone tells
    lines = _lines(d / "evaluations.csv")
    k = 1 if where == "first" else next(i for i in range(len(lines) // 2, len(lines)) if ",ok," in lines[i])
    if where == "removed":
        del lines[k]
    else:
        edited = lines[k].replace(",ok,", ",diverged,", 1)
        assert edited != lines[k]
        lines[k] = edited
    (d / "evaluations.csv").write_text("".join(lines))
    with pytest.raises(FedevoError, match=rf"line {k + 1} \(id \d+\) breaks the log's hash chain"):
        load_run(d)


def test_an_edited_run_json_is_refused(finished, tmp_path):
    d = _copy(finished, tmp_path / "json")
    meta = (d / "run.json").read_text()
    (d / "run.json").write_text(meta.replace('"created": "', '"created": "1', 1))
    with pytest.raises(FedevoError, match=r"line 2 \(id 0\) breaks the log's hash chain \(run.json was changed, or"):
        load_run(d)


def test_a_run_made_before_the_chain_still_reads_and_resumes(finished, tmp_path):
    d = _copy(finished, tmp_path / "old")
    (d / "checkpoints" / "gen-0003.pkl").unlink()
    unchain(d)
    lines = _lines(d / "evaluations.csv")
    (d / "evaluations.csv").write_text("".join(lines[:-2]))  # killed during generation 3
    assert len(load_run(d).rows) == 10
    fedevo.resume(d, workers=0, page=False)
    assert not _lines(d / "evaluations.csv")[0].rstrip().endswith(",chain")  # appended to as it was: unchained
    assert without(read_csv(d / "evaluations.csv"), "wall_s") == \
        without(read_csv(finished / "evaluations.csv"), "wall_s", "chain")


def test_a_checkpoint_per_generation_hashes_each_row_once(monkeypatch):
    """The search records the log's digests in each generation's checkpoint: with its cache each row is hashed
    once, not once per later generation (quadratic in the generations), and the record is the same."""
    from fedevo.searching import integrity

    rows = [{"id": i, "generation": 1 + i // 10, "status": "ok", "error": i / 100, "wall_s": 0.1} for i in range(60)]
    calls = []
    real = integrity.row_digest
    monkeypatch.setattr(integrity, "row_digest", lambda r: calls.append(r["id"]) or real(r))
    cache: dict = {}
    for g in range(1, 7):
        upto = [r for r in rows if r["generation"] <= g]
        assert integrity.log_record(upto, cache) == integrity.log_record(upto)
    calls.clear()
    for g in range(1, 7):
        integrity.log_record([r for r in rows if r["generation"] <= g], cache)
    assert calls == []
    other = dict(rows[3])  # an equal key in another row object is hashed afresh, not taken from the cache
    other["error"] = 0.5
    assert integrity.log_record([other], cache)["new"] == [[3, 0, real(other)]] != [[3, 0, real(rows[3])]]


# ---------------------------------------------------------------- a checkpoint's record grows with its batch, not the run
def _v1_record(rows):
    """The record a checkpoint of the previous version held: every counted row's key and digest."""
    from fedevo.searching.integrity import row_digest
    from fedevo.searching.log import row_key

    rows = sorted(rows, key=row_key)
    return {"count": len(rows), "keys": [list(row_key(r)) for r in rows], "digests": [row_digest(r) for r in rows]}


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    return _searched(tmp_path_factory, "long", gen=12, seed=2)


def test_a_checkpoint_records_its_generations_rows_not_every_row(long_run):
    """Each checkpoint listed a digest of every row so far: 24 MB of checkpoints at 10,000 evaluations in 100
    generations, growing with the square of the run. Now its record is one SHA-256 of them all and the rows of its
    own generation: the same size at generation 12 as at generation 1."""
    sizes = []
    for g in range(1, 13):
        record = load_checkpoint(long_run / "checkpoints" / f"gen-{g:04d}.pkl")["log"]
        assert record["count"] == 4 * g and record["since"] == 4 * (g - 1)
        assert [(i, k) for i, k, _ in record["new"]] == [(i, 0) for i in range(4 * (g - 1), 4 * g)]
        sizes.append(len(pickle.dumps(record)))
    assert max(sizes) < 1.2 * min(sizes), sizes


def _alter(d, k, *, chain=False):
    """Halve the error of the k-th row (0-based) of d's log; unchain it first unless `chain`."""
    if not chain:
        unchain(d)
    lines = _lines(d / "evaluations.csv")
    row = read_csv(d / "evaluations.csv")[k]
    lines[1 + k] = lines[1 + k].replace(row["error"], repr(float(row["error"]) / 2), 1)
    (d / "evaluations.csv").write_text("".join(lines))
    return int(row["id"])


@pytest.mark.parametrize("k", [0, 17, 47])
def test_an_altered_row_of_any_generation_is_named(long_run, tmp_path, k):
    """The newest checkpoint's SHA-256 tells that the log differs; the rows recorded by the checkpoints up to it
    name the id, whichever generation logged it."""
    d = _copy(long_run, tmp_path / "edit")
    i = _alter(d, k)
    with pytest.raises(FedevoError, match=rf"1 of the 48 evaluations that checkpoint gen-0012 counts differ from "
                                          rf"what was logged \(id {i}: checksum mismatch\)"):
        load_run(d)


def test_an_altered_row_is_refused_without_the_checkpoints_that_name_it(long_run, tmp_path):
    d = _copy(long_run, tmp_path / "gone")
    for g in range(3, 8):
        (d / "checkpoints" / f"gen-{g:04d}.pkl").unlink()  # deleted to save space, say
    assert len(load_run(d).rows) == 48  # an intact log needs only the newest
    _alter(d, 2)
    with pytest.raises(FedevoError, match=r"the 48 evaluations that checkpoint gen-0012 counts differ from what was "
                                          r"logged \(checksum mismatch; the earlier checkpoints that would name the "
                                          r"rows are gone or damaged\)"):
        load_run(d)
    with pytest.raises(FedevoError, match="checksum mismatch"):
        fedevo.resume(d, workers=0, page=False)


def test_a_row_altered_and_its_chain_recomputed_is_refused(long_run, tmp_path):
    """The chain is a checksum: recomputed with fedevo's code it hides an edit; the checkpoints still tell."""
    from fedevo.searching.log import chain_next, chain_start

    d = _copy(long_run, tmp_path / "forged")
    i = _alter(d, 30, chain=True)
    lines = [ln.encode() for ln in _lines(d / "evaluations.csv")]
    head = chain_start((d / "run.json").read_bytes(), lines[0].rstrip(b"\n"))
    out = [lines[0]]
    for ln in lines[1:]:
        body = ln.rstrip(b"\n").rpartition(b",")[0]
        head = chain_next(head, body)
        out.append(body + b"," + head.encode() + b"\n")
    (d / "evaluations.csv").write_bytes(b"".join(out))
    with pytest.raises(FedevoError, match=rf"\(id {i}: checksum mismatch\)"):
        load_run(d)


def test_checkpoints_of_the_previous_version_still_check(long_run, tmp_path):
    """Checkpoints that list every row (the version before) load and check; a resume from one goes on with the
    new record, and an altered row is still named through both."""
    d = _copy(long_run, tmp_path / "v1")
    rows = load_run(d).rows
    for g in range(0, 13):
        ck = d / "checkpoints" / f"gen-{g:04d}.pkl"
        state = load_checkpoint(ck)
        state["log"] = _v1_record([r for r in rows if r["id"] < state["next_id"]])
        save_checkpoint(d, state)
    assert len(load_run(d).rows) == 48
    d2 = _copy(d, tmp_path / "v1-changed")
    i = _alter(d2, 45)
    with pytest.raises(FedevoError, match=rf"1 of the 48 evaluations that checkpoint gen-0012 counts differ from "
                                          rf"what was logged \(id {i}: checksum mismatch\)"):
        load_run(d2)
    for g in (11, 12):  # killed during generation 11: resumed by this version
        (d / "checkpoints" / f"gen-{g:04d}.pkl").unlink()
    fedevo.resume(d, workers=0, page=False)
    assert "sha256" in load_checkpoint(d / "checkpoints" / "gen-0012.pkl")["log"]
    assert "keys" in load_checkpoint(d / "checkpoints" / "gen-0010.pkl")["log"]
    i = _alter(d, 5)
    with pytest.raises(FedevoError, match=rf"1 of the 48 evaluations that checkpoint gen-0012 counts differ from "
                                          rf"what was logged \(id {i}: checksum mismatch\)"):
        load_run(d)


def test_a_rung_row_removed_or_inserted_is_named(tmp_path):
    """A multi-fidelity log holds a row per rung an individual reached: a rung's row gone, or one added that no
    checkpoint counts, is named by id (an unchained log: the chain would refuse the line first)."""
    from fedevo.searching import Runtime, SearchSettings, search

    out = tmp_path / "mf"
    search(SearchSettings(problem="digits_mlp_local", pop=9, gen=2, seed=3, rounds=9, fidelity=(1 / 9, 1 / 3, 1.0),
                          evaluator="tests.searching.search_fakes:CONTINUING"), out, Runtime(workers=0))
    unchain(out)
    lines, rows = _lines(out / "evaluations.csv"), read_csv(out / "evaluations.csv")
    parsed = load_run(out).rows
    up = next(k for k, r in enumerate(rows) if r["rung"] == "1")
    gone = _copy(out, tmp_path / "gone")
    (gone / "evaluations.csv").write_text("".join(lines[:1 + up] + lines[2 + up:]))
    with pytest.raises(FedevoError, match=rf"lacks rows of 1 of the 18 evaluations that checkpoint gen-0002 counts "
                                          rf"\(id {rows[up]['id']}: a rung's row is gone\)"):
        load_run(gone)
    low = next(r for r in rows if r["rung"] == "0" and not any(s["id"] == r["id"] and s["rung"] == "1" for s in rows))
    k = rows.index(low)
    extra = lines[1 + k].replace(",0,0.1111111111111111\n", ",1,0.3333333333333333\n")
    assert extra != lines[1 + k]
    (out / "evaluations.csv").write_text("".join(lines + [extra]))
    with pytest.raises(FedevoError, match=rf"holds rows that checkpoint gen-0002 does not count among its 18 "
                                          rf"evaluations \(id {low['id']}: rows inserted\)"):
        load_run(out)
    # the same under a checkpoint of the previous version (every row listed): it let the inserted row through
    ck = out / "checkpoints" / "gen-0002.pkl"
    state = load_checkpoint(ck)
    state["log"] = _v1_record(parsed)
    save_checkpoint(out, state)
    with pytest.raises(FedevoError, match=rf"holds rows that checkpoint gen-0002 does not count among its 18 "
                                          rf"evaluations \(id {low['id']}: rows inserted\)"):
        load_run(out)
    (out / "evaluations.csv").write_text("".join(lines))  # without it: the run reads
    assert len(load_run(out).rows) == len(rows)


def test_the_log_record_of_one_more_batch_hashes_only_its_rows(monkeypatch):
    from fedevo.searching import integrity
    from fedevo.searching.integrity import log_record

    keys = []
    real = integrity.row_key
    monkeypatch.setattr(integrity, "row_key", lambda r: keys.append(1) or real(r))
    rows = [{"id": i, "x": float(i) / 7, "error": 0.5, "wall_s": 0.1} for i in range(500)]
    cache: dict = {}
    for n in range(1, len(rows) + 1):
        keys.clear()
        got = log_record(rows[:n], cache, since=n - 1)
        assert len(keys) <= 4, (n, len(keys))  # every row's key again: n
        if n % 100 == 0:
            assert got == log_record(rows[:n], since=n - 1)
    # a row inserted before the last (a rung of an earlier id): computed afresh, the same as without the cache
    mixed = sorted(rows[:50] + [{"id": 10, "rung": 1, "x": 1.0, "error": 0.5, "wall_s": 0.1}], key=real)
    assert log_record(mixed, cache, since=0) == log_record(mixed, since=0)
