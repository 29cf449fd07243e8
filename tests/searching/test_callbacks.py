"""What a running search reports to (fedevo.searching.callbacks) and what it evaluates with (fedevo.searching.evaluator)."""

from __future__ import annotations

import pytest

from fedevo.errors import FedevoError
from fedevo.searching import Runtime, SearchCallback, SearchSettings, load_run, resume, search
from fedevo.searching import evaluator as evaluators
from fedevo.searching.runner import SerialRunner

from . import search_fakes
from .search_helpers import read_csv

SERIAL = Runtime(workers=0)


class Recorder(SearchCallback):
    """Every hook call, in order; at each generation, the in-memory run against the run directory read back."""

    def __init__(self):
        self.calls = []
        self.checked = 0

    def on_start(self, **kw):
        self.calls.append(("start", kw["n_gen"], kw["generation"], kw["total"], kw["done"], len(kw["rows"])))

    def on_generation_start(self, generation):
        self.calls.append(("generation_start", generation))

    def on_evaluation(self, row):
        self.calls.append(("evaluation", row["generation"]))

    def on_generation(self, generation, run):
        self.calls.append(("generation", generation, len(run.rows), len(run.front)))
        disk = load_run(run.run_dir)  # what `fedevo plot` would read right now
        assert run.rows == disk.rows and run.front == disk.front and run.hypervolume() == disk.hypervolume()
        assert run.meta == disk.meta and run.gene_names == disk.gene_names and run.eps_key == disk.eps_key
        assert run.settings == disk.settings and run.problem.name == disk.problem.name
        assert run.generations == generation and len(run.hypervolume()) == generation
        last = read_csv(run.run_dir / "hypervolume.csv")[-1]
        assert (int(last["front_size"]), float(last["hypervolume"])) == \
            (run.hypervolume()[-1]["front_size"], run.hypervolume()[-1]["hypervolume"])
        self.checked += 1

    def on_finish(self, summary):
        self.calls.append(("finish", None if summary is None else summary.evaluations))


def settings(**kw):
    return SearchSettings(**{"problem": "digits_mlp_local", "pop": 6, "gen": 3, "seed": 1, **kw})


def test_callbacks_see_every_evaluation_generation_and_the_end(tmp_path):
    rec = Recorder()
    s = search(settings(), tmp_path / "run", SERIAL, evaluator=search_fakes.fake_evaluate, callbacks=[rec])
    assert s.evaluations == 18 and rec.checked == 3
    expect = [("start", 3, 1, 18, 0, 0)]
    for g in (1, 2, 3):
        expect += [("generation_start", g)] + [("evaluation", g)] * 6 + [("generation", g, 6 * g, None)]
    expect.append(("finish", 18))
    got = [c[:3] + (None,) if c[0] == "generation" else c for c in rec.calls]
    assert got == expect
    assert [c[3] for c in rec.calls if c[0] == "generation"][-1] == s.front_size


def test_a_callback_that_changes_the_front_it_is_given_changes_nothing_else(tmp_path):
    """RunData.front is a list; the search's front of a generation once was the list the next generation's front
    grows from (the review of the scale work): a callback that cut it cut front.csv and the hypervolume table."""
    class Cuts(SearchCallback):
        def on_generation(self, generation, run):
            run.front.sort(key=lambda r: r["error"])
            del run.front[1:]

    a = search(settings(gen=4), tmp_path / "a", SERIAL, evaluator=search_fakes.fake_evaluate, callbacks=[Cuts()])
    b = search(settings(gen=4), tmp_path / "b", SERIAL, evaluator=search_fakes.fake_evaluate)
    assert a.front_size == b.front_size > 1
    for name in ("front.csv", "hypervolume.csv"):
        assert read_csv(tmp_path / "a" / name) == read_csv(tmp_path / "b" / name), name


def test_callbacks_in_order_and_on_finish_after_an_error(tmp_path):
    order = []

    class A(SearchCallback):
        def on_evaluation(self, row):
            order.append("a")

        def on_finish(self, summary):
            order.append(("a-finish", summary))

    class B(SearchCallback):
        def on_evaluation(self, row):
            order.append("b")

        def on_finish(self, summary):
            order.append(("b-finish", summary))

    with pytest.raises(FedevoError, match="not found"):
        search(settings(), tmp_path / "run", SERIAL, evaluator=search_fakes.fake_data_missing, callbacks=[A(), B()])
    assert order == [("a-finish", None), ("b-finish", None)]
    rec = Recorder()
    s = resume(tmp_path / "run", SERIAL, evaluator=search_fakes.fake_evaluate, callbacks=[A(), rec, B()])
    assert order[2:8] == ["a", "b"] * 3 and order[-2:] == [("a-finish", s), ("b-finish", s)]
    assert rec.calls[0] == ("start", 3, 1, 18, 0, 0) and rec.calls[-1] == ("finish", 18)


def test_resumed_search_starts_where_it_stopped(tmp_path):
    out = tmp_path / "run"
    search(settings(), out, SERIAL, evaluator=search_fakes.fake_evaluate)
    (out / "checkpoints" / "gen-0003.pkl").unlink()
    rec = Recorder()
    s = resume(out, SERIAL, evaluator=search_fakes.fake_evaluate, callbacks=[rec])
    assert s.reused == 6 and rec.calls[0] == ("start", 3, 3, 18, 18, 18)
    assert [c for c in rec.calls if c[0] != "evaluation"][1:] == [("generation_start", 3),
                                                                  ("generation", 3, 18, s.front_size),
                                                                  ("finish", 18)]
    assert not [c for c in rec.calls if c[0] == "evaluation"]  # every row of generation 3 was on disk


def test_the_simulator_spec_resolves_to_an_evaluator_with_check_and_cost(tiny_problem):
    from fedevo.evaluation import evaluate
    from fedevo.fl.cost import relative_cost

    sim = evaluators.load_evaluator(evaluators.DEFAULT_EVALUATOR)
    assert sim is evaluators.SIMULATOR and evaluators.resolve(evaluate) is sim
    assert evaluators.evaluator_spec(sim) == evaluators.DEFAULT_EVALUATOR == evaluators.evaluator_spec(evaluate)
    params = {g.name: g.default for g in tiny_problem.genes}
    assert evaluators.cost(sim, tiny_problem, params, 7) == relative_cost(tiny_problem.sim_config(params, rounds=7))
    assert evaluators.cost(sim, tiny_problem, {"no_such_gene": 1}, 7) == 0.0  # fails fast: scheduled last
    assert evaluators.cost(search_fakes.fake_evaluate, tiny_problem, params, 7) == 1.0
    assert evaluators.resolve(search_fakes.fake_evaluate) is search_fakes.fake_evaluate
    r, ref = sim(tiny_problem, params, seed=0, rounds=1), evaluate(tiny_problem, params, seed=0, rounds=1)
    assert (r.status, r.error, r.comm, r.eps) == (ref.status, ref.error, ref.comm, ref.eps)


def _costs_seen(monkeypatch):
    seen = []
    run = SerialRunner.run

    def spy(self, tasks, on_done, tick=None):
        seen.extend(t.cost for t in tasks)
        return run(self, tasks, on_done, tick)

    monkeypatch.setattr(SerialRunner, "run", spy)
    return seen


def test_a_plain_function_gets_no_memory_check_and_uniform_cost(tmp_path, monkeypatch):
    import fedevo.fl.cost
    import fedevo.guards

    def boom(*a, **k):
        raise AssertionError("simulator-specific work for a custom evaluator")

    monkeypatch.setattr(fedevo.guards, "check_problem_memory", boom)
    monkeypatch.setattr(fedevo.fl.cost, "relative_cost", boom)
    seen = _costs_seen(monkeypatch)
    s = search(settings(gen=2), tmp_path / "run", SERIAL, evaluator=search_fakes.fake_evaluate)
    assert s.evaluations == 12 and seen == [1.0] * 12
    # the simulator, by its spec, does run the memory check (before the run directory is made)
    with pytest.raises(AssertionError, match="simulator-specific"):
        search(settings(gen=2), tmp_path / "sim", SERIAL)
    assert not (tmp_path / "sim").exists()


def test_an_evaluator_object_offers_its_own_check_and_cost(tmp_path, monkeypatch):
    seen = _costs_seen(monkeypatch)
    search_fakes.CostedFake.checked.clear()
    out = tmp_path / "run"
    s = search(settings(gen=2, evaluator="tests.searching.search_fakes:COSTED", rounds=3), out, SERIAL)
    assert s.evaluations == 12 and search_fakes.CostedFake.checked == [("digits_mlp_local", 3)]
    units = [float(r["units"]) for r in read_csv(out / "evaluations.csv")]
    assert seen == units  # each task carries the evaluator's cost of its genes
    with pytest.raises(FedevoError, match="no 'module:name'"):
        search(settings(), tmp_path / "other", SERIAL, evaluator=search_fakes.COSTED)
