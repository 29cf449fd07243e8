"""A resume whose own set-up crosses --time-budget: its checkpoint's seconds of search fell just short of the
budget (a batch ended there, the next was interrupted), and the seconds the resume spent opening the run took it
past. The search then evaluated nothing and recorded nothing: no stop, no stop.json, 'search stopped: 1/1000
generations', and every later `fedevo resume` did the same, for ever (found on the expensive-evaluation journey,
2026-11-27: a Ctrl-C during a batch of evaluations of a minute, the budget a second after the last one ended)."""

import json

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.searching.callbacks import SearchCallback
from fedevo.searching.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint

from .search_helpers import FAKE, toy_problem_file


class CtrlC(SearchCallback):
    def on_generation(self, generation, run):
        raise KeyboardInterrupt


def test_a_resume_past_the_time_budget_records_the_stop(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=2, time_budget=60.0, seed=0,
                      workers=0, out=tmp_path / "R", evaluator=FAKE, page=False, callbacks=[CtrlC()])
    ck = latest_checkpoint(tmp_path / "R")
    state = load_checkpoint(ck)
    assert state["generation"] == 1 and not state.get("stop")
    save_checkpoint(tmp_path / "R", {**state, "search_s": 60.0 - 1e-6})  # its batch ended a hair short of 60 s
    run = fedevo.resume(tmp_path / "R", workers=0, page=False)
    assert run.summary.stop == "time_budget" and run.summary.generations == 1 and len(run.evaluations) == 2
    assert json.loads((tmp_path / "R" / "stop.json").read_text())["reason"] == "time_budget"
    with pytest.raises(FedevoError, match=r"finished search \(--time-budget seconds reached\)"):
        fedevo.resume(tmp_path / "R", workers=0, page=False)
