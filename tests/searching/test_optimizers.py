"""The optimiser seam (issue #34): every optimiser runs a search behind ask/tell, seeded, and resumes exactly after a
kill -9; NSGA-III through the seam gives the fronts it gave before; random sampling is unbiased; genes map to
Optuna's distributions; bad --optimizer values are one line."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import fedevo
from fedevo.errors import FedevoError, command_line
from fedevo.problem import load_problem
from fedevo.searching import optimizers
from fedevo.searching.run import _search_problem
from fedevo.searching.space import SearchSpace

from tests.helpers import cli

from .search_helpers import FAKE, REPO, cli_cmd, env, read_csv, toy_problem_file, without

HERE = Path(__file__).parent
KILLER = "tests.searching.search_fakes:fake_kill_after"
# per optimiser: --pop, --gen and the call at which the kill comes (mid-batch, after at least one told batch)
SIZES = {"nsga3": (4, 3, 6), "random": (3, 3, 5), "tpe": (3, 3, 5), "gp": (3, 2, 5)}  # GP: seconds a proposal


def _rows(path):
    return sorted(without(read_csv(path), "wall_s", "chain"), key=lambda r: int(r["id"]))  # chain: hashes wall_s


def test_registry_names_every_optimiser_once():
    assert set(optimizers.names()) >= {"nsga3", "random", "gp", "tpe"}
    assert optimizers.DEFAULT == "nsga3"
    with pytest.raises(FedevoError, match="^optimizer=: unknown optimiser 'cmaes'; choose one of nsga3"):
        optimizers.get("cmaes")  # from Python: the keyword argument; from the CLI: the option
    with command_line(), pytest.raises(FedevoError, match="^--optimizer: unknown optimiser 'cmaes'; choose one of"):
        optimizers.get("cmaes")


def test_nsga3_through_the_seam_gives_the_committed_front(tmp_path):
    """A toy search made with the pre-seam code (fake evaluator: no compute-engine dependence), rerun."""
    ref = HERE / "reference_runs" / "toy_fake"
    prob = tmp_path / "toy.toml"
    prob.write_text((ref / "toy.toml").read_text())
    run = fedevo.search(str(prob), pop=6, gen=4, seed=5, workers=0, out=tmp_path / "R", evaluator=FAKE, page=False,
                        optimizer="nsga3")
    for name in ("evaluations.csv", "front.csv", "hypervolume.csv"):
        assert _rows(run.path / name) == _rows(ref / name) if name != "hypervolume.csv" else \
            read_csv(run.path / name) == read_csv(ref / name), name
    assert (run.path / "stop.json").exists() and run.summary.stop == "gen"


@pytest.mark.parametrize("name", ["nsga3", "random", "tpe", "gp"])
def test_kill_9_mid_search_then_resume_gives_the_uninterrupted_evaluations(tmp_path, name):
    pop, gen, kill_at = SIZES[name]
    prob = toy_problem_file(tmp_path)
    args = ["search", "--problem", prob, "--pop", pop, "--gen", gen, "--seed", 11, "--workers", 0, "--quiet",
            "--optimizer", name, "--evaluator", KILLER]
    killed, whole = tmp_path / "K", tmp_path / "W"
    p = subprocess.run(cli_cmd(*args, "--out", killed), cwd=REPO, env=env(FAKE_SIGKILL_AFTER=kill_at),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert len(read_csv(killed / "evaluations.csv")) == kill_at  # killed mid-batch, after a told batch
    # the kill -9 needs its own process; the resume and the uninterrupted search run here (tests.helpers.cli)
    r = cli("resume", killed, "--workers", 0, "--quiet")
    assert r.returncode == 0, r.stderr
    r = cli(*args, "--out", whole)
    assert r.returncode == 0, r.stderr
    assert _rows(killed / "evaluations.csv") == _rows(whole / "evaluations.csv")
    assert len(_rows(whole / "evaluations.csv")) == pop * gen
    assert (killed / "front.csv").read_text() == (whole / "front.csv").read_text()
    batches = read_csv(whole / "batches.csv")
    assert [int(b["asked"]) for b in batches] == [pop] * gen and all(float(b["sampler_s"]) >= 0 for b in batches)


@pytest.mark.parametrize("name", ["random", "tpe"])
def test_every_optimiser_with_a_fidelity_ladder(tmp_path, name):
    run = fedevo.search("digits_mlp_local", pop=6, gen=2, seed=3, rounds=9, fidelity=(1 / 3, 1.0), workers=0,
                        evaluator="tests.searching.search_fakes:CONTINUING", out=tmp_path / "R", page=False,
                        optimizer=name)
    rows = read_csv(run.path / "evaluations.csv")
    assert {r["rung"] for r in rows} == {"0", "1"} and len({r["id"] for r in rows}) == 12
    assert run.summary.full_fidelity == len([r for r in rows if r["rung"] == "1"]) >= 2


def test_random_sampling_is_uniform_over_ints_and_choices():
    prob = load_problem(str(HERE / "reference_runs" / "toy_fake" / "toy.toml"))
    space = SearchSpace.from_problem(prob)
    opt = optimizers.make("random", space, _search_problem(prob, space), pop=4000, seed=0)
    draws = opt.ask(4000)
    n = len(draws)
    layers = Counter(d["layers"] for d in draws)  # int 1..4
    assert set(layers) == {1, 2, 3, 4} and all(abs(c / n - 0.25) < 0.03 for c in layers.values()), layers
    part = Counter(d["partition"] for d in draws)  # choice of 3
    assert all(abs(c / n - 1 / 3) < 0.03 for c in part.values()), part
    lr = np.array([d["lr"] for d in draws])
    assert lr.min() >= 0.01 and lr.max() <= 0.3 and abs(np.mean(lr < 0.155) - 0.5) < 0.03
    sigma = np.log10([d["sigma"] for d in draws])  # log gene: log-uniform
    assert abs(np.mean(sigma < (np.log10(0.05) + np.log10(2.0)) / 2) - 0.5) < 0.03
    # seeded per batch: the same batch again gives the same draws, the next batch others
    again = optimizers.make("random", space, _search_problem(prob, space), pop=4000, seed=0)
    assert again.ask(5) == draws[:5]
    opt.tell(draws, np.zeros((n, 3)))
    assert opt.ask(5) != draws[:5]


def test_genes_map_to_optuna_distributions():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from fedevo.searching.optimizers.optuna_samplers import distributions

    prob = load_problem(str(HERE / "reference_runs" / "toy_fake" / "toy.toml"))
    d = distributions(SearchSpace.from_problem(prob))
    assert d["layers"] == IntDistribution(1, 4)
    assert d["units"] == IntDistribution(16, 256, log=True)
    assert d["partition"] == CategoricalDistribution(["iid", "shards", "dirichlet"])
    assert d["lr"] == FloatDistribution(0.01, 0.3)
    assert d["sigma"] == FloatDistribution(0.05, 2.0, log=True)


def test_optuna_state_resumes_the_same_asks():
    prob = load_problem(str(HERE / "reference_runs" / "toy_fake" / "toy.toml"))
    space = SearchSpace.from_problem(prob)
    sp = _search_problem(prob, space)
    a = optimizers.make("tpe", space, sp, pop=4, seed=2)
    rng = np.random.default_rng(0)
    for _ in range(3):
        p = a.ask(4)
        a.tell(p, rng.random((4, sp.n_obj)), None)
    b = optimizers.from_state("tpe", a.state(), space, sp, pop=4, seed=2)
    assert a.ask(4) == b.ask(4)
    c = optimizers.from_state("tpe", a.state(), space, sp, pop=4, seed=3)  # another run seed: other candidates
    assert c.ask(4) != b.ask(4)


@pytest.mark.parametrize("value", ["cmaes", "NSGA3"])
def test_bad_optimizer_is_one_line_nothing_written(tmp_path, value):
    out = tmp_path / "R"
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--optimizer", value, "--out", out, "--quiet",
            "--evaluator", FAKE)
    assert r.returncode != 0
    assert r.stderr.startswith(f"fedevo: error: --optimizer: unknown optimiser {value!r}; choose one of "), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not out.exists()


def test_bad_optimizer_from_python_names_the_keyword(tmp_path):
    out = tmp_path / "R"
    with pytest.raises(FedevoError, match="^optimizer=: unknown optimiser 'cmaes'; choose one of ") as e:
        fedevo.search(str(toy_problem_file(tmp_path)), optimizer="cmaes", out=out, page=False, evaluator=FAKE)
    assert "--" not in str(e.value) and not out.exists()




def test_optuna_sees_the_problem_files_constraints(tmp_path):
    """[constraints] reach Optuna as each told trial's constraints (<= 0 feasible), which its samplers read."""
    prob = load_problem(str(toy_problem_file(tmp_path, "\n[constraints]\neps = 12\n")))
    space = SearchSpace.from_problem(prob)
    sp = _search_problem(prob, space)
    assert sp.n_ieq_constr == 1
    opt = optimizers.make("tpe", space, sp, pop=2, seed=0)
    params = opt.ask(2)
    F = np.array([[0.5, 100.0, np.log10(5.0)], [0.4, 200.0, np.log10(50.0)]])
    G = np.array([sp.constraints_of(f) for f in F])
    opt.tell(params, F, G)
    trials = opt._study().trials
    assert [t.constraints["c0"] <= 0 for t in trials] == [True, False]
    assert [list(t.values) for t in trials] == F.tolist()


def test_default_batch_is_one_per_parallel_evaluation_for_model_based_optimisers():
    """gp/tpe without --pop: as many candidates as run at once (in-process: 1), so the model learns from every
    result; nsga3/random keep 12; a Ray cluster (size unknown before joining it) gets 12 and a hint."""
    from fedevo.searching.optimizers.registry import DEFAULT_POP, default_pop

    assert default_pop("nsga3", workers="auto", cores=16) == (DEFAULT_POP, "")
    assert default_pop("random", workers=0, cores=2) == (DEFAULT_POP, "")
    for name in ("gp", "tpe"):
        assert default_pop(name, workers="auto", cores=2)[0] == 1  # auto: in-process on 2 cores
        assert default_pop(name, workers=0, cores=64)[0] == 1
        assert default_pop(name, workers="auto", cores=8)[0] == 8  # a local Ray, one worker per core
        assert default_pop(name, workers=3, cores=8)[0] == 3
        n, why = default_pop(name, workers="auto", cores=8, address="10.0.0.1:6379")
        assert n == DEFAULT_POP and "(pop=N to match" in why and why.startswith(f"optimizer={name}: ")


def test_gp_without_pop_runs_batches_of_one_to_the_default_evaluations(tmp_path, capsys):
    prob = toy_problem_file(tmp_path)
    run = fedevo.search(prob, workers=0, seed=3, out=tmp_path / "R", evaluator=FAKE, page=False, optimizer="tpe")
    assert (run.data.settings.pop, run.data.settings.gen) == (1, 48)
    assert len(read_csv(run.path / "evaluations.csv")) == 48
    assert "batches of 1" in capsys.readouterr().err
    run = fedevo.search(prob, workers=0, seed=3, out=tmp_path / "B", evaluator=FAKE, page=False, optimizer="tpe",
                        budget=5)
    assert (run.data.settings.pop, run.data.settings.gen, len(read_csv(run.path / "evaluations.csv"))) == (1, 5, 5)


def test_nsga3_with_constraints_gives_the_same_candidates_for_the_same_seed(tmp_path):
    """Two infeasible parents equally far outside the constraints (here: many evaluations with ε = ∞ against eps <=
    60) met in a tournament whose coin pymoo 0.6.2 tossed with a fresh unseeded generator: the same seed asked other
    candidates from generation 2 on (the review of 2026-11-27 found it)."""
    from fedevo.problem import problems_dir
    from fedevo.searching import Runtime, SearchSettings, search
    from tests.viz.fedevo_runs import fake_evaluate

    prob = tmp_path / "pc.toml"
    text = (problems_dir() / "digits_mlp_local.toml").read_text().replace('name = "digits_mlp_local"', 'name = "pc"', 1)
    prob.write_text(text + "\n[constraints]\neps = 60\n")
    genes = []
    for k in range(3):
        out = tmp_path / f"R{k}"
        search(SearchSettings(problem=str(prob), pop=10, gen=4, seed=2, rounds=1), out, Runtime(workers=0),
               evaluator=fake_evaluate)
        genes.append([without([r], "wall_s", "chain") for r in read_csv(out / "evaluations.csv")])
    assert len(genes[0]) == 40 and genes[0] == genes[1] == genes[2]


@pytest.mark.parametrize("name", ["gp", "tpe"])
def test_an_optuna_optimisers_state_keeps_what_its_model_may_see_not_every_evaluation(name, monkeypatch, tmp_path):
    from fedevo.searching.optimizers import optuna_samplers
    from fedevo.searching.optimizers.optuna_samplers import _history

    monkeypatch.setattr(optuna_samplers, "HISTORY_CAP", 8)
    space = SearchSpace.from_problem(load_problem(str(toy_problem_file(tmp_path))))
    problem = _search_problem(load_problem(str(toy_problem_file(tmp_path))), space)
    opt = optimizers.make(name, space, problem, pop=1, seed=0)
    rng = np.random.default_rng(0)
    every = []
    for b in range(60):
        p = space.decode_batch(space.repair(rng.uniform(space.xl, space.xu, size=(1, space.n_var))))
        F = rng.random((1, problem.n_obj))
        opt.tell(p, F)
        every.append((optuna_samplers._typed(space, p[0]), [float(v) for v in F[0]], []))
        assert _history(opt.told, 8) == _history(every, 8) == _history(opt.told, 8, opt._front.on)
    state = opt.state()
    assert len(state["told"]) < 40 and state["told_count"] == 60  # all 60 before
    old = optimizers.make(name, space, problem, pop=1, seed=0)
    old.restore({"optimizer": name, "batch": 60, "told": every})  # a checkpoint of the version before
    # (which told failures as their worst values: it keeps that rule, optuna_samplers.FAILURE_RULES)
    assert old.state() == {**state, "failures": "worst"}


@pytest.mark.parametrize("cap", [8, 512])
def test_a_checkpoint_of_another_history_cap_is_warned_of_on_restore(cap, monkeypatch, tmp_path, capsys):
    """What an Optuna optimiser forgot is gone from its checkpoint: resumed by a fedevo whose model sees another
    number of trials, it may ask other candidates than an uninterrupted search would; that is said once, not
    silent. The same cap (and a checkpoint from before the cap, which kept every trial) restores without a word."""
    from fedevo.searching.optimizers import optuna_samplers

    space = SearchSpace.from_problem(load_problem(str(toy_problem_file(tmp_path))))
    problem = _search_problem(load_problem(str(toy_problem_file(tmp_path))), space)
    opt = optimizers.make("tpe", space, problem, pop=1, seed=0)
    opt.tell(space.decode_batch(space.repair(np.array([space.xl]))), np.zeros((1, problem.n_obj)))
    state = opt.state()
    assert state["history_cap"] == optuna_samplers.HISTORY_CAP
    for s in (state, {k: v for k, v in state.items() if k != "history_cap"}):
        optimizers.make("tpe", space, problem, pop=1, seed=0).restore(s)
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setattr(optuna_samplers, "HISTORY_CAP", cap)
    optimizers.make("tpe", space, problem, pop=1, seed=0).restore(state)
    err = capsys.readouterr().err
    assert err.count("fedevo: warning: optimizer 'tpe'") == 1 and f"sees {cap}" in err, err


def test_the_first_ask_of_gp_and_tpe_imports_nothing_of_the_optimisers_own(tmp_path):
    """The run loop times ask() (batches.csv's ask_s and sampler_s, the display's `gp … s/proposal`): its first batch
    in a process counted importing torch and Optuna, where a problem's own evaluator had imported neither: `gp 1.31
    s/proposal` for a random start-up proposal of 1 ms, on the first line of a search and of every resume, and in the
    closing mean (0.13 s per proposal over 8 proposals of 1-2 ms). They are imported when the optimiser is made."""
    (tmp_path / "ev.py").write_text("def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
                                    "    return {'error': params['a'], 'comm': 1 + params['b'], 'eps': 1.0}\n")
    (tmp_path / "own.toml").write_text('name = "own"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                                       'a = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n'
                                       'b = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    script = f"""
import sys
from fedevo.problem import load_problem
from fedevo.searching import optimizers
from fedevo.searching.run import _search_problem
from fedevo.searching.space import SearchSpace

prob = load_problem({str(tmp_path / 'own.toml')!r})
space = SearchSpace(prob.genes)
assert "torch" not in sys.modules, "the test's premise: nothing imported torch before the optimiser"
for name in ("gp", "tpe"):
    opt = optimizers.make(name, space, _search_problem(prob, space), pop=1, seed=0)
    before = set(sys.modules)
    opt.ask(1)
    print(name, sorted((set(sys.modules) - before) & {{"torch", "optuna"}}))  # (optuna._gp: a millisecond)
"""
    p = subprocess.run([__import__("sys").executable, "-c", script], cwd=REPO, env=env(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["gp []", "tpe []"], p.stdout
