"""Checkpoints are ordered by their generation, not their names: past generation 9999 the files are gen-10000.pkl
and on, which sort before gen-9999.pkl by name (a resume would have gone on from generation 9999, and a damaged
log been checked against it)."""

from fedevo.searching.checkpoint import earlier_checkpoints, latest_checkpoint, save_checkpoint


def test_the_latest_checkpoint_past_generation_9999_is_the_newest(tmp_path):
    for g in (9998, 9999, 10000, 10001):
        save_checkpoint(tmp_path, {"algorithm": None, "generation": g, "next_id": g})
    assert (tmp_path / "checkpoints" / "gen-10001.pkl").exists()
    assert latest_checkpoint(tmp_path).name == "gen-10001.pkl"
    assert [s["generation"] for s in earlier_checkpoints(latest_checkpoint(tmp_path))] == [10000, 9999, 9998]
    assert [s["generation"] for s in earlier_checkpoints(tmp_path / "checkpoints" / "gen-10000.pkl")] == [9999, 9998]


def test_the_oldest_checkpoints_go_beyond_the_limit_and_the_newest_three_stay(tmp_path, monkeypatch):
    """Each checkpoint carries every batch's seconds and hypervolume: with batches of one the checkpoints took disk
    with the square of the batches (2,000 batches of one random evaluation: 133 MB). Beyond KEEP_BYTES the oldest
    go; the newest KEEP_NEWEST always stay."""
    from fedevo.searching import checkpoint

    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 50_000)
    for g in range(12):
        save_checkpoint(tmp_path, {"algorithm": None, "generation": g, "blob": bytes(10_000 + 100 * g)})
    names = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert names == [f"gen-{g:04d}.pkl" for g in range(8, 12)], names  # 4 × ~11 kB within 50 kB; 5 are not
    assert sum(p.stat().st_size for p in (tmp_path / "checkpoints").iterdir()) <= 50_000
    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 1)  # the newest three stay, whatever the limit
    save_checkpoint(tmp_path, {"algorithm": None, "generation": 12, "blob": b""})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["gen-0010.pkl", "gen-0011.pkl",
                                                                            "gen-0012.pkl"]


def test_a_search_of_batches_of_one_keeps_its_checkpoints_within_the_limit_and_resumes(tmp_path, monkeypatch):
    import fedevo
    from fedevo.errors import FedevoError
    from fedevo.searching import checkpoint
    from fedevo.searching.rundata import load_run

    from .search_helpers import FAKE, toy_problem_file

    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 20_000)
    kw = dict(optimizer="random", pop=1, seed=0, workers=0, out=tmp_path / "R", evaluator=FAKE, page=False)
    fedevo.search(str(toy_problem_file(tmp_path)), budget=40, **kw)
    folder = tmp_path / "R" / "checkpoints"
    kept = sorted(folder.iterdir())
    assert 3 <= len(kept) < 41 and latest_checkpoint(tmp_path / "R").name == "gen-0040.pkl"
    assert sum(p.stat().st_size for p in kept) <= 20_000 or len(kept) == 3
    whole = fedevo.search(str(toy_problem_file(tmp_path)), budget=60, **{**kw, "out": tmp_path / "W"})
    run = fedevo.resume(tmp_path / "R", budget=60, workers=0, page=False)  # from the newest checkpoint alone
    assert [r["error"] for r in load_run(run.path).rows] == [r["error"] for r in load_run(whole.path).rows]
    import csv

    lines = (tmp_path / "R" / "evaluations.csv").read_text().splitlines(keepends=True)
    row = next(csv.DictReader(lines[:2]))
    lines[1] = lines[1].replace(row["error"], repr(float(row["error"]) / 2), 1)
    (tmp_path / "R" / "evaluations.csv").write_text("".join(lines))
    try:  # a damaged log is still refused (by its chain here; without ids where the checkpoints naming them are gone)
        load_run(tmp_path / "R")
    except FedevoError as e:
        assert "damaged" in str(e)
    else:
        raise AssertionError("an edited log was read")


def test_checkpoints_within_the_limit_are_not_listed_after_every_batch(tmp_path, monkeypatch):
    import os

    listed = []
    real = os.listdir
    monkeypatch.setattr(os, "listdir", lambda p=".": listed.append(p) or real(p))
    for g in range(50):
        save_checkpoint(tmp_path, {"algorithm": None, "generation": g, "blob": bytes(100)})
    assert listed == []  # 50 × ~200 B: far within KEEP_BYTES


def test_a_search_looks_at_its_checkpoints_once_not_after_every_batch(tmp_path, monkeypatch):
    """Beyond the limit, every checkpoint written listed and stat'ed the whole folder (800 files a batch in a run
    of 2,000 batches of one whose checkpoints hold a growing front); the process that writes them lists them once
    and keeps the same ones."""
    from fedevo.searching import checkpoint

    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 5_000)
    looked = []
    real = checkpoint._in_order
    monkeypatch.setattr(checkpoint, "_in_order", lambda folder: looked.append(folder) or real(folder))
    kept = getattr(checkpoint, "Kept", lambda: None)()
    for d in "AB":
        (tmp_path / d).mkdir()
    save = (lambda d, st: save_checkpoint(d, st, kept)) if kept is not None else save_checkpoint
    for g in range(30):
        state = {"algorithm": None, "generation": g, "blob": bytes(300 + 20 * g)}
        save(tmp_path / "A", state)
        save_checkpoint(tmp_path / "B", state)
        if g == 29:  # the same generation again (a stop found after its batch)
            save(tmp_path / "A", {**state, "stop": "gen"})
    assert len([f for f in looked if f.parent.name == "A"]) <= 1, len(looked)
    names = {d: sorted(p.name for p in (tmp_path / d / "checkpoints").iterdir()) for d in "AB"}
    assert names["A"] == names["B"] and 3 <= len(names["A"]) < 30


def test_a_search_beyond_the_limit_lists_its_checkpoints_once(tmp_path, monkeypatch):
    import fedevo
    from fedevo.searching import checkpoint

    from .search_helpers import FAKE, toy_problem_file

    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 8_000)
    looked = []
    real = checkpoint._in_order
    monkeypatch.setattr(checkpoint, "_in_order", lambda folder: looked.append(folder) or real(folder))
    fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=1, budget=30, seed=0, workers=0,
                  out=tmp_path / "R", evaluator=FAKE, page=False)
    files = list((tmp_path / "R" / "checkpoints").iterdir())
    assert 3 <= len(files) < 31 and sum(p.stat().st_size for p in files) <= 8_000
    assert len(looked) <= 4, len(looked)  # the newest at the start, the earlier ones, then once to keep them: 30+ before


def test_earlier_checkpoints_larger_than_the_newest_are_kept_within_the_limit(tmp_path, monkeypatch):
    """The search's process took the newest checkpoint's size for every one's ((generation + 1) × newest within the
    limit: not looked at); checkpoints written before an upgrade (each with every batch's records), or a front's
    state that shrank, are larger than the newest: the folder went past the limit (the review's repro: 239 kB of a
    200 kB limit, nothing deleted)."""
    from fedevo.searching import checkpoint

    monkeypatch.setattr(checkpoint, "KEEP_BYTES", 200_000)
    for g in range(19):
        save_checkpoint(tmp_path, {"algorithm": None, "generation": g, "blob": bytes(10_000)})
    with checkpoint.keeping(tmp_path):
        for g in range(19, 60):
            save_checkpoint(tmp_path, {"algorithm": None, "generation": g, "blob": bytes(1_000)})
            files = list((tmp_path / "checkpoints").iterdir())
            assert sum(p.stat().st_size for p in files) <= 200_000, g
    assert {f"gen-{g:04d}.pkl" for g in (57, 58, 59)} <= {p.name for p in files}
