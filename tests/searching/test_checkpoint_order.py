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
