"""One answer everywhere (issue #35): the knee of a run whose front holds chance-level solutions is the same id in
`fedevo front --pick knee`, retrain, `fedevo audit --pick knee`, the page `fedevo plot` writes and the Python API
— all of them resolve picks through RunData.pick, with its chance bar."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import fedevo
from fedevo.picking import pick as unbarred_pick
from fedevo.searching.rundata import load_run

from tests.helpers import cli
from tests.searching.search_helpers import FAKE, toy_problem_file

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A toy run (digits: chance error 0.9) whose front holds solutions at or above chance; seed 1 is one where
    the knee without the chance bar is a different solution (checked below, so the test can fail)."""
    tmp = tmp_path_factory.mktemp("agree")
    return fedevo.search(str(toy_problem_file(tmp)), pop=8, gen=3, seed=1, workers=0, out=tmp / "R",
                         evaluator=FAKE, page=False).path


class _Stop(Exception):
    pass


def test_the_knee_is_one_id_everywhere(run, tmp_path):
    data = load_run(run)
    knee = data.pick("knee")[0].id
    assert any(r["error"] >= data.knee_bar for r in data.front)  # chance-level solutions on the front
    assert unbarred_pick("knee", data.rows, data.front, eps_key=data.eps_key)[0].id != knee  # the bar matters here

    r = cli("front", run, "--pick", "knee", "--json")  # fedevo front
    assert r.returncode == 0, r.stderr
    assert [p["id"] for p in json.loads(r.stdout)] == [knee]

    from fedevo.retraining import plan  # what `fedevo retrain` trains

    assert plan(data, "knee")[0].id == knee

    def on_start(n, total, target):  # what `fedevo audit` (api.audit) would train: stop before any training
        raise _Stop(target.label)

    with pytest.raises(_Stop, match=rf"^id {knee} \(knee\)$"):
        fedevo.audit(run, "knee", on_start=on_start, write=False)

    page = tmp_path / "page.html"  # the page's marked knee (and the knee its caps start from)
    r = cli("plot", run, "--out", page)
    assert r.returncode == 0, r.stderr
    html = page.read_text()
    assert re.search(r'"knee_bar": [0-9.e-]+, "knee": (\d+)', html).group(1) == str(knee)

    assert [p["id"] for p in fedevo.pick(run, "knee")] == [knee]  # the Python API


def test_no_module_resolves_picks_on_its_own():
    """picking.pick is called by RunData.pick alone: every command and page goes through it."""
    callers = [p.relative_to(REPO).as_posix() for p in (REPO / "fedevo").rglob("*.py")
               if re.search(r"picking import [^\n]*\bpick\b|picking\.pick\(", p.read_text())
               and p.name not in ("picking.py",)]
    assert callers == ["fedevo/searching/rundata.py"], callers
