"""Warm start (`--init-from RUN`, fedevo.searching.warmstart): the earlier run's front begins the initial
population, the rest is drawn with the seed; the run records the genes, resumes and repeats without the earlier
directory; other problems, other genes, no run, an empty front: one line, nothing written."""

from __future__ import annotations

import json
import shutil

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.problem import load_problem
from fedevo.searching import load_run
from fedevo.searching.space import SearchSpace
from fedevo.searching.warmstart import front_params, initial_population

from tests.helpers import run_cli

from . import search_fakes

FAKE = search_fakes.fake_evaluate
CALLS = {"n": 0, "limit": None}


def killing(problem, params, *, seed, rounds=None, data_dir=None):
    """fake_evaluate that stands for a kill -9 after CALLS['limit'] evaluations."""
    CALLS["n"] += 1
    if CALLS["limit"] is not None and CALLS["n"] > CALLS["limit"]:
        raise search_fakes.Killed("killed")
    return FAKE(problem, params, seed=seed, rounds=rounds, data_dir=data_dir)


def _search(out, **kw):
    kw = {"pop": 8, "gen": 2, "seed": 1, "workers": 0, "page": False, "evaluator": FAKE, **kw}
    return fedevo.search(kw.pop("problem", "digits_mlp_local"), out=out, **kw)


def _key(params: dict) -> tuple:
    return tuple(sorted((k, round(v, 9) if isinstance(v, float) else v) for k, v in params.items()))


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm") / "earlier"
    _search(out, gen=3, seed=7)
    return out


def test_the_front_begins_the_initial_population(earlier, tmp_path):
    data = load_run(earlier)
    front = {_key(data.params(r)) for r in data.front}
    assert front
    run = _search(tmp_path / "warm", init_from=earlier)
    new = load_run(run.path)
    first = {_key(new.params(r)) for r in new.rows if r["generation"] == 1}
    meta = json.loads((run.path / "run.json").read_text())
    assert meta["settings"]["init_from"] == str(earlier.resolve())
    chosen = {_key(p) for p in meta["settings"]["init"]}
    assert len(chosen) == min(len(front), 8) and chosen <= front
    assert chosen <= first  # every chosen front member was evaluated again in generation 1 (the initial population)
    # without the warm start, generation 1 holds none of them (random draws)
    cold = load_run(_search(tmp_path / "cold").path)
    assert not chosen & {_key(cold.params(r)) for r in cold.rows if r["generation"] == 1}


def test_same_seed_same_run_without_the_earlier_directory(earlier, tmp_path, monkeypatch):
    search_fakes.let_kills_through(monkeypatch)
    a = _search(tmp_path / "a", init_from=earlier)
    copy = tmp_path / "copy"
    shutil.copytree(earlier, copy)
    b = _search(tmp_path / "b", init_from=copy)
    rows = lambda run: [(r["id"], _key(load_run(run.path).params(r))) for r in load_run(run.path).rows]  # noqa: E731
    assert rows(a) == rows(b)
    # resume reads the recorded genes, not the earlier run (gone now)
    c = tmp_path / "c"
    CALLS.update(n=0, limit=11)  # in generation 1, after the warm-started generation 1 (8) was checkpointed
    with pytest.raises(search_fakes.Killed):
        _search(c, init_from=copy, evaluator=killing)
    CALLS.update(limit=None)
    shutil.rmtree(copy)
    fedevo.resume(c, workers=0, page=False, evaluator=FAKE)
    assert rows(fedevo.open_run(c)) == rows(a)


@pytest.mark.parametrize("optimizer", ["random", "tpe", "gp"])
def test_every_optimiser_begins_with_the_front_and_resumes_it_exactly(earlier, tmp_path, monkeypatch, optimizer):
    """gp, tpe and random: the earlier front's genes (up to 10, or a batch) are the first candidates, in order
    (they replace Optuna's random start-up); a kill in the middle of them resumes to the same run."""
    search_fakes.let_kills_through(monkeypatch)
    data = load_run(earlier)
    init, _ = front_params(earlier, data.problem, 10)
    kw = {"optimizer": optimizer, "pop": 2, "gen": None, "budget": len(init) + 3, "init_from": earlier}
    run = _search(tmp_path / "w", **kw)
    rows = lambda path: [_key(load_run(path).params(r)) for r in load_run(path).rows]  # noqa: E731
    assert rows(run.path)[:len(init)] == [_key(p) for p in init]
    assert len(rows(run.path)) == len(init) + 3
    CALLS.update(n=0, limit=len(init) // 2 + 1)  # killed within the warm start
    with pytest.raises(search_fakes.Killed):
        _search(tmp_path / "k", evaluator=killing, **kw)
    CALLS.update(limit=None)
    fedevo.resume(tmp_path / "k", workers=0, page=False, evaluator=FAKE)
    assert rows(tmp_path / "k") == rows(run.path)


def test_a_front_larger_than_pop_is_thinned_by_crowding(earlier):
    problem = load_run(earlier).problem
    params, ids = front_params(earlier, problem, 5)
    everything, all_ids = front_params(earlier, problem, 100)
    if len(everything) <= 5:
        pytest.skip(f"the earlier front has only {len(everything)} members")
    assert len(params) == 5 and set(ids) <= set(all_ids)


def test_initial_population_is_the_genes_then_seeded_draws():
    problem = load_problem("digits_mlp_local")
    space = SearchSpace.from_problem(problem)
    init = [{g.name: g.default for g in problem.genes}]
    X = initial_population(space, init, 6, seed=3)
    assert X.shape == (6, space.n_var)
    assert (X[0] == space.encode(init[0])).all()
    assert (X == initial_population(space, init, 6, seed=3)).all()
    assert not (X[1:] == initial_population(space, init, 6, seed=4)[1:]).all()
    assert ((X >= space.xl) & (X <= space.xu)).all()


def test_bad_warm_starts_are_one_line(earlier, tmp_path, capsys):
    cases = [
        (["--init-from", str(tmp_path / "nowhere")], "does not exist"),
        (["--problem", "digits_mlp", "--init-from", str(earlier)], "searched problem 'digits_mlp_local'"),
        (["--pop", "8", "--init-from", str(tmp_path)], "init-from"),  # a directory that is no run
    ]
    for args, words in cases:
        out = tmp_path / "new"
        code, stdout, err = run_cli(["search", "--gen", "1", "--workers", "0", "--quiet", "--out", str(out), *args],
                                    capsys)
        assert code == 2, (args, err)
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("fedevo: error:") and words in lines[0], (args, err)
        assert not out.exists()


def test_bad_warm_starts_from_python_name_the_keyword(earlier, tmp_path):
    """From Python the messages name `init_from=` as the call spells it, not the CLI's --init-from."""
    for init_from, says in [(tmp_path / "nowhere", "init_from=: "),
                            (earlier, f"init_from={earlier.resolve()}: that run searched problem 'digits_mlp_local'")]:
        out = tmp_path / "new"
        with pytest.raises(FedevoError) as e:
            _search(out, problem="digits_mlp", pop=8, gen=1, init_from=init_from)
        assert str(e.value).startswith(says) and "--init-from" not in str(e.value), str(e.value)
        assert not out.exists()


def test_other_genes_are_refused(earlier, tmp_path):
    text = load_run(earlier).problem.path
    src = open(text).read().replace("low = 16, high = 128", "low = 16, high = 64")
    assert src != open(text).read()
    other = tmp_path / "digits_mlp_local.toml"
    other.write_text(src)
    with pytest.raises(FedevoError, match="^init_from=.*units differs"):  # from Python: the keyword, not --init-from
        front_params(earlier, load_problem(str(other)), 8)
