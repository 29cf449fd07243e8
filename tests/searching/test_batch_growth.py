"""A search of many small batches (batches of one: `gp`/`tpe` in-process, `--pop 1`): what a batch costs the search
and what a checkpoint holds must not grow with the batches before it. Each checkpoint carried every batch's seconds
and hypervolume (and Optuna's state every evaluation told), and every batch sorted, filtered and hashed every row
so far and rewrote batches.csv and hypervolume.csv whole (benchmarks/results-2026-11-28-search-scale-batches-of-one.txt;
benchmarks/results-2026-11-28-batch-growth-amd-epyc.txt). Resume stays exact."""

from __future__ import annotations

import csv
import os
import random

import pytest

import fedevo
from fedevo.searching.checkpoint import load_checkpoint

from .search_helpers import FAKE, toy_problem_file


def _search(tmp_path, out="R", budget=40, **kw):
    args = dict(optimizer="random", pop=1, seed=0, workers=0, evaluator=FAKE, page=False)
    return fedevo.search(str(toy_problem_file(tmp_path)), budget=budget, out=tmp_path / out, **{**args, **kw})


def test_a_checkpoint_of_batches_of_one_does_not_grow_with_the_batches(tmp_path):
    from fedevo.searching.budgets import hv_steps

    _search(tmp_path)
    folder = tmp_path / "R" / "checkpoints"
    sizes = {g: (folder / f"gen-{g:04d}.pkl").stat().st_size for g in (10, 40)}
    assert abs(sizes[40] - sizes[10]) < 300, sizes  # every batch's lists: ~66 B a batch, 2 kB more at batch 40
    state = load_checkpoint(folder / "gen-0040.pkl")
    assert "batches" not in state and "hypervolumes" not in state
    table = list(csv.DictReader((tmp_path / "R" / "hypervolume.csv").open()))
    assert hv_steps([float(t["hypervolume"]) for t in table]) == state["hypervolume_steps"]
    assert [int(b["batch"]) for b in csv.DictReader((tmp_path / "R" / "batches.csv").open())] == list(range(1, 41))


def test_the_hypervolume_steps_tell_stagnation_as_every_batchs_hypervolume_did():
    from fedevo.searching.budgets import hv_steps, stagnant, stagnant_steps

    rng = random.Random(1)
    for _ in range(3000):
        hv = [rng.choice([0.1, 0.2, 0.25, 0.3]) for _ in range(rng.randint(0, 12))]
        if rng.random() < 0.5:
            hv.sort()
        k = rng.randint(0, len(hv))
        steps = hv_steps(hv[k:], hv_steps(hv[:k]), since=k)
        assert steps == hv_steps(hv) and len(steps) <= len(set(hv)) + sum(a != b for a, b in zip(hv, hv[1:]))
        for p in (None, 1, 2, 3, 5, 13):
            assert stagnant_steps(steps, len(hv), p) == stagnant(hv, p), (hv, p)


def test_batches_csv_and_hypervolume_csv_are_appended_not_rewritten(tmp_path, monkeypatch):
    import importlib

    from fedevo.searching import log

    written = []
    real = log.atomic_write
    for name in ("fedevo.searching.run", "fedevo.searching.appended"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        monkeypatch.setattr(module, "atomic_write", lambda p, d: written.append(os.path.basename(p)) or real(p, d))
    _search(tmp_path, budget=30)
    assert written.count("batches.csv") == 1, written  # once, then a line a batch
    # hypervolume.csv: rewritten while its normalisation is not settled (the first objectives + 1 evaluations), then
    # appended
    assert written.count("hypervolume.csv") <= 5, written
    run = fedevo.open_run(tmp_path / "R")
    assert [float(r["hypervolume"]) for r in csv.DictReader((tmp_path / "R" / "hypervolume.csv").open())] == \
        [t["hypervolume"] for t in run.hypervolume()]


def test_a_resume_keeps_batches_csv_to_its_checkpoint_and_equals_the_whole_run(tmp_path):
    whole = _search(tmp_path, out="W", budget=24, patience=50)
    _search(tmp_path, budget=12, patience=50)
    with (tmp_path / "R" / "batches.csv").open("a") as f:  # a batch logged after its checkpoint (killed before it)
        f.write("13,1,0.1,0.1,0.2,0.3\n13,1,0.1,")  # and a torn line
    fedevo.resume(tmp_path / "R", budget=24, workers=0, page=False)
    got = [int(b["batch"]) for b in csv.DictReader((tmp_path / "R" / "batches.csv").open())]
    assert got == list(range(1, 25))
    for name in ("front.csv", "hypervolume.csv", "evaluations.csv"):
        assert _same_csv(tmp_path / "R" / name, whole.path / name), name
    assert load_checkpoint(tmp_path / "R" / "checkpoints" / "gen-0024.pkl")["hypervolume_steps"] == \
        load_checkpoint(whole.path / "checkpoints" / "gen-0024.pkl")["hypervolume_steps"]


def _same_csv(a, b):
    drop = ("wall_s", "chain")
    return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(open(a))] == \
        [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(open(b))]


def test_a_checkpoint_of_the_version_before_resumes(tmp_path):
    """A checkpoint holding every batch's hypervolume and seconds (and no batches.csv beside it) resumes: the steps
    are taken from its list, batches.csv written from its seconds."""
    import pickle

    from fedevo.searching.checkpoint import CKPT_MAGIC, dumps

    whole = _search(tmp_path, out="W", budget=16)
    _search(tmp_path, budget=8)
    ck = tmp_path / "R" / "checkpoints" / "gen-0008.pkl"
    state = load_checkpoint(ck)
    hv = [float(t["hypervolume"]) for t in csv.DictReader((tmp_path / "R" / "hypervolume.csv").open())]
    batches = [{k: (int(v) if k in ("batch", "asked") else float(v)) for k, v in b.items()}
               for b in csv.DictReader((tmp_path / "R" / "batches.csv").open())]
    del state["hypervolume_steps"]
    state.update(hypervolumes=hv, batches=batches)
    payload = dumps(state)
    import hashlib

    ck.write_bytes(CKPT_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
    (tmp_path / "R" / "batches.csv").unlink()
    assert pickle.loads(payload)["hypervolumes"] == hv
    fedevo.resume(tmp_path / "R", budget=16, workers=0, page=False)
    assert [int(b["batch"]) for b in csv.DictReader((tmp_path / "R" / "batches.csv").open())] == list(range(1, 17))
    assert _same_csv(tmp_path / "R" / "evaluations.csv", whole.path / "evaluations.csv")
    assert load_checkpoint(tmp_path / "R" / "checkpoints" / "gen-0016.pkl")["hypervolume_steps"] == \
        load_checkpoint(whole.path / "checkpoints" / "gen-0016.pkl")["hypervolume_steps"]


def test_the_rows_so_far_are_extended_by_a_batchs_not_sorted_and_looked_up_again():
    from fedevo.searching.run import SearchRun

    class Counting(dict):
        reads = 0

        def __getitem__(self, k):
            Counting.reads += 1
            return super().__getitem__(k)

    by_id = Counting()
    run = SearchRun.__new__(SearchRun)  # (only its rows so far)
    run._upto = None
    for i in range(5):  # a resumed log: rows of ids beyond the checkpoint's (3) already logged
        by_id[(i, 0)] = {"id": i}
    assert [r["id"] for r in run._rows_upto(by_id, 3)] == [0, 1, 2]
    for i in range(5, 300):
        for rung in (0, 1):
            by_id[(i, rung)] = {"id": i, "rung": rung}
        Counting.reads = 0
        got = run._rows_upto(by_id, i + 1)
        assert Counting.reads <= 4, (i, Counting.reads)  # every row looked up again: 2 i
        assert len(got) == len(by_id)
    assert got == [dict.__getitem__(by_id, k) for k in sorted(by_id)]
    by_id[(1, 1)] = {"id": 1, "rung": 1}  # a key among those kept (no search makes one): all sorted afresh
    assert run._rows_upto(by_id, 300) == [dict.__getitem__(by_id, k) for k in sorted(by_id)]


def test_the_last_batch_is_read_from_the_end_of_batches_csv(tmp_path, monkeypatch):
    """The progress display asks for the last batch after every batch; it read and parsed all of batches.csv (at
    10,000 batches of one, part of ~28 ms a batch). RunData.last_batch reads the header and the file's end, and
    answers as batches()[-1] does: a run whose batches.csv is beyond its window, one within it, a torn or
    unparsable last line, none yet."""
    from fedevo.searching import rundata

    monkeypatch.setattr(rundata, "LAST_BATCH_BYTES", 300)
    run = _search(tmp_path, budget=60)
    data = rundata.load_run(run.path)
    path = run.path / "batches.csv"
    assert path.stat().st_size > 1000  # the window is the file's end, not all of it
    assert data.last_batch() == data.batches()[-1] and data.last_batch()["batch"] == 60
    text = path.read_text()
    path.write_text(text + "61,1,oops\n")  # a line this reader cannot parse: left out, as batches() does
    assert data.last_batch() == data.batches()[-1] and data.last_batch()["batch"] == 60
    path.write_text(text + "61,1,oops\n" * 20)  # none parsable within the window: read whole
    assert data.last_batch() == data.batches()[-1] and data.last_batch()["batch"] == 60
    last = text.splitlines()[-1].split(",")
    torn = ",".join(["61"] + last[1:])[:-1]  # a line being written, cut inside its last number: still a number
    path.write_text(text + torn)
    assert data.last_batch() == data.batches()[-1] and data.last_batch()["batch"] == 60
    lines = text.splitlines()
    path.write_text("\n".join(lines[:4]) + "\n")  # a small file: read whole
    assert data.last_batch() == data.batches()[-1] and data.last_batch()["batch"] == 3
    path.write_text(lines[0] + "\n")
    assert data.last_batch() is None and data.batches() == []
    path.unlink()
    assert data.last_batch() is None


def test_a_front_csv_deleted_during_the_run_is_written_again_after_the_next_batch(tmp_path):
    """front.csv is rewritten only when the front changed; one deleted meanwhile (by hand, a sync tool) stayed missing
    until the front next changed (the review's finding). Each batch's on_generation sees it present, then deletes it."""
    from fedevo.searching.callbacks import SearchCallback

    present = []

    class Deleter(SearchCallback):
        def on_generation(self, generation, run):
            path = tmp_path / "R" / "front.csv"
            present.append(path.exists())
            path.unlink(missing_ok=True)

    _search(tmp_path, budget=30, callbacks=[Deleter()])
    assert len(present) == 30 and all(present), present


def test_an_append_that_fills_the_disk_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    """The line a failed write left in the file object's buffer must not reach the file when it is closed, after
    the file was cut back."""
    import errno

    from fedevo.errors import DiskFullError
    from fedevo.searching import appended

    path = tmp_path / "batches.csv"
    g = appended.GrowingCsv(path, ["batch", "x"])
    g.write([{"batch": 1, "x": 0.5}])
    before = path.read_bytes()

    def full(f, data):
        f.write(data)  # buffered, as a flush that hits ENOSPC leaves it
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(appended, "_write", full)
    with pytest.raises(DiskFullError):
        g.write([{"batch": 1, "x": 0.5}, {"batch": 2, "x": 0.25}], 1)
    assert path.read_bytes() == before


def _lines(path):
    return path.read_text().splitlines()


def _warnings(err):
    return [line for line in err.splitlines() if "batches.csv" in line]


def test_batch_records_lost_before_a_resume_are_said_once(tmp_path, capsys):
    """Lines of batches.csv at or below the checkpoint that went missing or became unreadable were dropped without a
    word: a resume says how many, in one line naming the file, and the resume after it no more."""
    _search(tmp_path, budget=12)
    path = tmp_path / "R" / "batches.csv"
    lines = _lines(path)  # the header, then batches 1..12
    lines[3] = "3,1,0.1,oops,0.2,0.3"  # unreadable
    del lines[5]  # batch 5 gone
    path.write_text("\n".join(lines) + "\n13,1,0.1,0.1,0.2,0.3\n")  # (a batch after the checkpoint: not lost)
    capsys.readouterr()
    fedevo.resume(tmp_path / "R", budget=16, workers=0, page=False)
    said = _warnings(capsys.readouterr().err)
    assert len(said) == 1 and str(path) in said[0] and "2 of its 12 batches" in said[0], said
    assert [int(b["batch"]) for b in csv.DictReader(path.open())] == [1, 2, 4, *range(6, 17)]
    fedevo.resume(tmp_path / "R", budget=20, workers=0, page=False)
    assert _warnings(capsys.readouterr().err) == []
    path.unlink()  # all of them gone
    fedevo.resume(tmp_path / "R", budget=21, workers=0, page=False)
    said = _warnings(capsys.readouterr().err)
    assert len(said) == 1 and "18 of its 20 batches" in said[0], said


def test_a_run_begun_before_batches_csv_resumes_without_a_warning(tmp_path, capsys):
    """A checkpoint that does not count batches.csv's records (made before it did): a run begun before batches.csv
    existed, whose file starts at its first resume, is no loss; a gap after the file's first record is."""
    from fedevo.searching.checkpoint import save_checkpoint

    _search(tmp_path, budget=8)
    run, path = tmp_path / "R", tmp_path / "R" / "batches.csv"
    ck = run / "checkpoints" / "gen-0008.pkl"
    state = load_checkpoint(ck)
    assert state["batches_recorded"] == 8
    del state["batches_recorded"]
    save_checkpoint(run, state)
    lines = _lines(path)
    for kept, budget, lost in ((lines[:1], 9, 0),  # no record: the run began before batches.csv
                               ([lines[0], *lines[5:]], 10, 0),  # records from batch 5 on: begun at a resume
                               ([lines[0], *lines[5:7], *lines[8:]], 11, 1)):  # batch 7 lost after them
        for later in run.glob("checkpoints/gen-*.pkl"):  # the checkpoint of batch 8 the newest again
            if int(later.stem[4:]) > 8:
                later.unlink()
        save_checkpoint(run, state)
        path.write_text("\n".join(kept) + "\n")
        capsys.readouterr()
        fedevo.resume(run, budget=budget, workers=0, page=False)
        said = _warnings(capsys.readouterr().err)
        assert len(said) == lost and (not lost or "1 of its 8 batches" in said[0]), (kept, said)
