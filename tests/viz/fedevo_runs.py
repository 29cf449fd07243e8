"""Small search runs for the tests of plots, picking and retraining (shared by tests/viz, tests/browser,
tests/test_picking.py and tests/test_retraining.py; each run is made once per test session).

* `digits_run`: a real search of the bundled digits_mlp_local problem (pop 8, 2 generations, 1 round per
  evaluation, in-process): what `fedevo search --problem digits_mlp_local --pop 8 --gen 2 --workers 0 --seed 1
  --rounds 1` writes.
* `central_run`: a real search of the bundled digits_mlp problem (central trust, N = 100k, M = 1k: ε (paper) is
  undefined for every evaluation) with --rounds 2 overriding the problem file's 10 rounds (pop 8, 2 generations).
* `four_objective_run`: a real search of a copy of digits_mlp_local whose top-level `objectives` adds the
  worst-served clients' error (`error, comm, eps, worst_client_error`), pop 8, 2 generations, 1 round.
* `five_objective_run`: a copy of digits_mlp with five objectives, a user's latency (ms) among them, searched with
  a fake evaluator (no training), pop 8, 3 generations.
* `one_run`: a search of one evaluation (digits_mlp, random, pop 1, 1 generation, evaluated by
  tests.searching.search_fakes.fake_evaluate: no training): a page of one point.
* `synthetic_run`: the same problem searched with `fake_evaluate` (no training): every third individual has
  ε = inf (no privacy), about one in six fails and
  one in six diverges (by evaluation seed) — the cases a plot must handle.
"""

from __future__ import annotations

import math
from pathlib import Path

from fedevo.result import EvaluationResult


def fake_evaluate(problem, params, *, seed, rounds=None, data_dir=None, **_):
    """Deterministic objectives from the genes; ε = inf when units % 3 == 0; some failed/diverged."""
    u = [(params[g.name] - g.low) / (g.high - g.low) for g in problem.genes if g.type != "choice"]
    part, alpha = params["participation"], params["alpha"]
    error = 0.05 + 0.9 * abs(math.sin(7 * sum(u))) * (1 - 0.5 * part)
    comm = 100 + 5000 * part * alpha / 32
    eps = math.inf if int(params["units"]) % 3 == 0 else 0.5 + 200 * (1 - error) ** 3 / max(params["sigma"], 0.05)
    if seed % 6 == 0:
        return EvaluationResult(error=math.nan, comm=math.nan, eps=math.nan, eps_paper=math.nan,
                                accuracy_global=math.nan, omega=0, status="failed", message="RuntimeError: boom\nline 2")
    if seed % 6 == 1:
        return EvaluationResult(error=1.0, comm=math.inf, eps=math.inf, eps_paper=math.inf, accuracy_global=0.0,
                                omega=0, status="diverged", message="loss is NaN")
    return EvaluationResult(error=error, comm=comm, eps=eps, eps_paper=eps / 3 if math.isfinite(eps) else math.inf,
                            accuracy_global=1 - error, omega=int(comm / part), status="ok", rounds=rounds or 1,
                            wall_s=0.01)


def _make(base: Path, name: str, **kw) -> Path:
    from fedevo.searching.run import Runtime, SearchSettings, search

    out = base / name
    if not (out / "front.csv").exists():
        settings = SearchSettings(problem=kw.pop("problem", "digits_mlp_local"), pop=kw.pop("pop", 8), gen=kw.pop("gen", 2),
                                  seed=kw.pop("seed", 1), rounds=kw.pop("rounds", 1),
                                  optimizer=kw.pop("optimizer", "nsga3"))
        search(settings, out, Runtime(workers=0), **kw)
    return out


def digits_run(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.getbasetemp(), "digits_run")


def four_objective_run(tmp_path_factory) -> Path:
    from fedevo.problem import problems_dir

    base = tmp_path_factory.getbasetemp()
    problem = base / "digits_four.toml"
    if not problem.exists():
        text = (problems_dir() / "digits_mlp_local.toml").read_text()
        text = text.replace('name = "digits_mlp_local"', 'name = "digits_four"', 1)
        problem.write_text('objectives = ["error", "comm", "eps", "worst_client_error"]\n' + text)
    return _make(base, "four_objective_run", problem=str(problem))


FIVE_OBJECTIVES = ["error", "comm", "eps", "model_size", "latency"]


def five_objective_run(tmp_path_factory) -> Path:
    """A search of a copy of digits_mlp whose objectives are five, a user's own with its unit among them: error,
    comm, ε, model size Ω (parameters) and latency (ms; 2 + Ω/500, read by the problem file's own function),
    evaluated by tests.searching.search_fakes.fake_evaluate (no training; every evaluation ok), pop 8, 3
    generations."""
    from fedevo.problem import problems_dir
    from tests.searching.search_fakes import fake_evaluate

    base = tmp_path_factory.getbasetemp()
    problem = base / "digits_five.toml"
    if not problem.exists():
        (base / "five_objectives.py").write_text(
            "def latency(result):\n    return 2.0 + result.omega / 500.0 if result.omega else None\n")
        text = (problems_dir() / "digits_mlp.toml").read_text().replace('name = "digits_mlp"', 'name = "digits_five"', 1)
        problem.write_text(f"objectives = {FIVE_OBJECTIVES!r}\n".replace("'", '"') + text
                           + '\n[objective.latency]\nread = "python:five_objectives.py:latency"\nworst = 1e6\n'
                             'label = "latency"\nunit = "ms"\nlower = 0.0\n')
    return _make(base, "five_objective_run", problem=str(problem), evaluator=fake_evaluate, gen=3)


def central_run(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.getbasetemp(), "central_run", problem="digits_mlp", rounds=2)


def one_run(tmp_path_factory) -> Path:
    from tests.searching.search_fakes import fake_evaluate

    return _make(tmp_path_factory.getbasetemp(), "one_run", problem="digits_mlp", evaluator=fake_evaluate, pop=1,
                 gen=1, optimizer="random")


def synthetic_run(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.getbasetemp(), "synthetic_run", evaluator=fake_evaluate, pop=10, gen=3, seed=2)


def chance_evaluate(problem, params, *, seed, rounds=None, data_dir=None, **_):
    """A front whose most private end is no better than chance (error ≥ 0.9 on 10 classes), ε over four decades,
    a per-evaluation privacy summary with trust/deployment keys; every seventh evaluation diverges."""
    g = {x.name: x for x in problem.genes}

    def unit(name):
        x = g[name]
        v, lo, hi = params[name], x.low, x.high
        if x.log:
            v, lo, hi = math.log(v), math.log(lo), math.log(hi)
        return (v - lo) / (hi - lo)

    s, units, lr = unit("sigma"), unit("units"), unit("lr")
    eps = 10 ** (4.0 - 4.5 * s)
    error = min(0.06 + 0.12 * (1 - units) + 0.05 * abs(lr - 0.5) + 0.9 * max(0.0, s - 0.55) / 0.45, 0.97)
    comm = (100 + 4000 * params["participation"] * params["alpha"] / 32) * (1 - 0.95 * max(0.0, s - 0.55) / 0.45)
    privacy = {"mechanism": "update", "trust": "central", "population": 10000, "cohort": 100, "sampling": "poisson",
               "accountant": "pld"}
    if seed % 7 == 0:
        return EvaluationResult(error=1.0, comm=comm, eps=eps, eps_paper=eps, accuracy_global=0.1, omega=int(comm),
                                status="diverged", message="loss is NaN", privacy=privacy)
    return EvaluationResult(error=error, comm=comm, eps=eps, eps_paper=eps * 2, accuracy_global=1 - error,
                            omega=int(comm / params["participation"]), status="ok", rounds=rounds or 1, wall_s=0.01,
                            privacy=privacy)


def chance_run(tmp_path_factory) -> Path:
    return _make(tmp_path_factory.getbasetemp(), "chance_run", evaluator=chance_evaluate, pop=15, gen=4, seed=3)


def resumed_by_another_fedevo(tmp_path: Path, monkeypatch, *, other: bool = True) -> Path:
    """A toy search (random, pop 2, 2 generations: rows 0–3) resumed to 4 generations (rows 4–7) by another
    fedevo source ('0123456789abcdef', monkeypatched where the run asks for it: resumed_by.json records it), or
    with `other` False by the same program (nothing recorded). Evaluated by tests.searching's FAKE (no training)."""
    import fedevo
    import fedevo.searching.run as run_mod
    from tests.searching.search_helpers import FAKE, toy_problem_file

    run = fedevo.search(str(toy_problem_file(tmp_path)), optimizer="random", pop=2, gen=2, seed=0, workers=0,
                        out=tmp_path / "R", evaluator=FAKE, page=False, progress=False)
    if other:
        here = run_mod.program()
        monkeypatch.setattr(run_mod, "program", lambda: {**here, "fedevo_source": "0123456789abcdef"})
    fedevo.resume(run.path, gen=4, workers=0, page=False, progress=False)  # (with the run's evaluator)
    monkeypatch.undo()
    return run.path
