"""A full disk ends a search like Ctrl-C does (issue #27): one line, no temporary file, a whole log, and resume
gives the run an uninterrupted search gives. ENOSPC is injected into the one write seam (searching/log._write)."""

from __future__ import annotations

import errno

import pytest

import fedevo
from fedevo.cli import main
from fedevo.searching import log as log_mod

from .search_helpers import FAKE, read_csv, toy_problem_file, without


def _full_after(monkeypatch, n_ok: int, match: str):
    """Writes whose target name contains `match` fail with ENOSPC after `n_ok` of them succeed, half written."""
    real = log_mod._write
    seen = {"n": 0}

    def write(f, data):
        if match in str(getattr(f, "name", "")):
            seen["n"] += 1
            if seen["n"] > n_ok:
                real(f, data[: len(data) // 2])  # a torn write, as a full disk leaves it
                raise OSError(errno.ENOSPC, "No space left on device")
        real(f, data)
    monkeypatch.setattr(log_mod, "_write", write)


def _cli(capsys, *args):
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _search_args(tmp_path, out):
    return ["search", "--problem", toy_problem_file(tmp_path), "--pop", 4, "--gen", 3, "--seed", 2, "--workers", 0,
            "--quiet", "--evaluator", FAKE, "--out", out]


@pytest.fixture(scope="module")
def lone(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lone")
    return fedevo.search(str(toy_problem_file(tmp)), pop=4, gen=3, seed=2, workers=0, out=tmp / "L",
                         evaluator=FAKE, page=False).path


@pytest.mark.parametrize("match,n_ok", [("evaluations.csv", 6), (".gen-", 2), ("front.csv", 1)])
def test_disk_full_mid_search_is_one_line_and_resumable(tmp_path, monkeypatch, capsys, lone, match, n_ok):
    out = tmp_path / "R"
    _full_after(monkeypatch, n_ok, match)
    code, stdout, stderr = _cli(capsys, *_search_args(tmp_path, out))
    assert code == 2
    assert stderr.count("\n") == 1 and stderr.startswith("fedevo: error: disk full while writing ")
    assert f"fedevo resume {out}" in stderr and "Traceback" not in stderr
    assert not list(out.rglob(".*.tmp"))  # no temporary file left
    text = (out / "evaluations.csv").read_text()
    assert text.endswith("\n")  # no torn row
    monkeypatch.undo()
    code, _, stderr = _cli(capsys, "resume", out, "--workers", 0, "--quiet")
    assert code in (0, None), stderr
    assert without(read_csv(out / "evaluations.csv"), "wall_s", "chain") == \
        without(read_csv(lone / "evaluations.csv"), "wall_s", "chain")
    assert (out / "front.csv").read_text() == (lone / "front.csv").read_text()


def test_disk_full_at_start_leaves_nothing_that_blocks(tmp_path, monkeypatch, capsys, lone):
    out = tmp_path / "S"
    _full_after(monkeypatch, 0, "run.json")
    code, _, stderr = _cli(capsys, *_search_args(tmp_path, out))
    assert code == 2 and stderr.startswith("fedevo: error: disk full while writing ") and stderr.count("\n") == 1
    assert not out.exists()
    monkeypatch.undo()
    code, _, stderr = _cli(capsys, *_search_args(tmp_path, out))  # the same command, with space again
    assert code in (0, None), stderr
    assert (out / "front.csv").read_text() == (lone / "front.csv").read_text()
