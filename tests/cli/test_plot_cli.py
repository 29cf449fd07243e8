"""`fedevo plot` options checked before any work: --interval (issue #27: `--watch --interval nan` used to print a
line saying it watched, then an error)."""

from __future__ import annotations

import pytest

from tests.helpers import run_cli as cli
from tests.searching.search_fakes import fake_evaluate


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    import fedevo

    out = tmp_path_factory.mktemp("plotcli") / "run"
    fedevo.search("digits_mlp_local", pop=4, gen=1, workers=0, seed=0, out=out, evaluator=fake_evaluate, page=False)
    return out


@pytest.mark.parametrize("value, shown", [("nan", "nan"), ("0", "0"), ("-1", "-1"), ("inf", "inf"), ("-inf", "-inf")])
@pytest.mark.parametrize("watch", [True, False])
def test_interval_must_be_positive_and_finite(run, capsys, value, shown, watch):
    before = sorted(p.name for p in run.iterdir())
    code, out, err = cli(["plot", run, *(["--watch"] if watch else []), "--interval", value], capsys)
    assert code == 2 and out == ""
    assert err == f"fedevo: error: --interval must be a positive finite number of seconds, got {shown}\n"
    assert sorted(p.name for p in run.iterdir()) == before  # nothing written


def test_interval_without_watch_is_refused(run, capsys):
    """It was taken and ignored (the 2026-11-27 audit)."""
    code, out, err = cli(["plot", run, "--interval", "1"], capsys)
    assert code == 2 and "--interval is the seconds between --watch's checks" in err


def test_watch_on_a_missing_run_is_one_line(tmp_path, capsys):
    code, out, err = cli(["plot", tmp_path / "nope", "--watch"], capsys)
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err  # no "watching ..." line before it


def test_out_never_replaces_a_page_of_another_run(run, tmp_path, capsys):
    """`fedevo plot RUN --out OTHER_RUN/front.html` would put RUN's front where OTHER_RUN's own page is."""
    import shutil

    other = tmp_path / "other"
    shutil.copytree(run, other)
    page = other / "front.html"
    page.write_text("<title>fedevo — other</title>")
    code, out, err = cli(["plot", run, "--out", page], capsys)
    assert code == 2 and err.startswith(f"fedevo: error: --out {page} is in another run directory")
    assert page.read_text() == "<title>fedevo — other</title>"
    code, out, err = cli(["plot", run, "--out", tmp_path / "elsewhere.html"], capsys)
    assert code in (0, None), err


def test_retrain_without_quiet_leaves_no_empty_line_on_stderr(run, tmp_path, capsys):
    """Without --quiet, stderr a pipe or a log: the transient progress bar is never drawn there but left an empty
    line on stderr when it stopped; the table still goes to stdout."""
    code, out, err = cli(["retrain", run, "--pick", "knee", "--rounds", "1", "--workers", "0", "--out",
                          tmp_path / "R"], capsys)
    assert code in (0, None) and "digits_mlp_local: 1 rounds" in out
    # (the run was searched with a test evaluator: retraining says it trains with the problem's own, one line)
    lines = err.split("\n")
    assert lines[-1] == "" and len(lines) == 2, repr(err)  # one whole line, no empty one
    assert lines[0].startswith("fedevo: warning: the search evaluated with "), repr(err)
