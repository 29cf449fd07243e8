"""Genes <-> pymoo vectors: round trips, bounds, canonical X, and integer genes sampled without bias."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chisquare

from fedevo.errors import FedevoError
from fedevo.problem import Gene, load_problem
from fedevo.searching.algorithm import make_nsga3
from fedevo.searching.problem import SearchProblem
from fedevo.searching.space import SearchSpace

from .search_helpers import toy_problem_file


@pytest.fixture
def toy(tmp_path):
    return load_problem(str(toy_problem_file(tmp_path)))


def random_params(problem, rng):
    out = {}
    for g in problem.genes:
        if g.type == "choice":
            out[g.name] = g.choices[rng.integers(len(g.choices))]
        elif g.type == "int":
            out[g.name] = int(rng.integers(g.low, g.high + 1))
        else:
            out[g.name] = float(math.exp(rng.uniform(math.log(g.low), math.log(g.high))) if g.log
                                else rng.uniform(g.low, g.high))
    return out


def test_encode_decode_round_trip(toy):
    space = SearchSpace.from_problem(toy)
    rng = np.random.default_rng(0)
    for _ in range(300):
        p = random_params(toy, rng)
        x = space.encode(p)
        assert np.array_equal(space.repair(x), x)  # encoded genes are already canonical
        d = space.decode(x)
        assert set(d) == set(p)
        for g in toy.genes:
            if g.type == "real":
                assert d[g.name] == pytest.approx(p[g.name], rel=1e-12)
            else:
                assert d[g.name] == p[g.name] and type(d[g.name]) is type(p[g.name])
            g.check(d[g.name])  # within bounds, right type
        assert np.allclose(space.encode(d), x, rtol=0, atol=1e-12)


def test_log_genes_are_encoded_as_log10(toy):
    space = SearchSpace.from_problem(toy)
    x = space.encode({**toy.defaults(), "sigma": 0.1, "units": 100})
    names = space.names
    assert x[names.index("sigma")] == pytest.approx(-1.0)
    assert x[names.index("units")] == pytest.approx(2.0)
    assert space.xl[names.index("sigma")] == pytest.approx(math.log10(0.05))


def test_decode_of_any_vector_in_the_box_is_valid(toy):
    space = SearchSpace.from_problem(toy)
    rng = np.random.default_rng(1)
    X = np.vstack([space.xl, space.xu, space.xl + rng.random((500, space.n_var)) * (space.xu - space.xl)])
    for x in X:
        for g in toy.genes:
            g.check(space.decode(x)[g.name])
    # the corners decode to the bounds exactly
    lo, hi = space.decode(space.xl), space.decode(space.xu)
    assert (lo["layers"], hi["layers"]) == (1, 4)
    assert (lo["units"], hi["units"]) == (16, 256)
    assert (lo["partition"], hi["partition"]) == ("iid", "dirichlet")
    assert lo["sigma"] == pytest.approx(0.05) and hi["sigma"] == pytest.approx(2.0)


def test_repair_rounds_only_discrete_columns(toy):
    space = SearchSpace.from_problem(toy)
    rng = np.random.default_rng(2)
    X = space.xl + rng.random((200, space.n_var)) * (space.xu - space.xl)
    R = space.repair(X)
    for j, g in enumerate(toy.genes):
        col = 10 ** R[:, j] if g.type == "int" and g.log else R[:, j]
        if g.type in ("int", "choice"):
            assert np.allclose(col, np.rint(col))
        else:
            assert np.array_equal(R[:, j], X[:, j])  # reals untouched


def _chi2_uniform(values, support):
    counts = np.array([np.sum(values == v) for v in support])
    assert counts.sum() == len(values)
    return chisquare(counts).pvalue


def test_integer_and_choice_genes_are_sampled_without_bias(toy):
    """NSGA3's initial population (sampling + repair) puts equal mass on every integer and choice,
    end points included; plain rounding of [low, high] gives the end points half a cell and fails."""
    space = SearchSpace.from_problem(toy)
    problem = SearchProblem(space)
    pop = make_nsga3(space, problem, pop=4000, partitions=4, seed=3).ask()
    params = space.decode_batch(pop.get("X"))
    layers = np.array([p["layers"] for p in params])
    part = np.array([p["partition"] for p in params])
    assert _chi2_uniform(layers, [1, 2, 3, 4]) > 1e-3
    assert _chi2_uniform(part, ["iid", "shards", "dirichlet"]) > 1e-3
    assert abs(np.mean(layers == 1) - 0.25) < 0.03 and abs(np.mean(layers == 4) - 0.25) < 0.03
    # the biased scheme this guards against is detected by the same check
    naive = np.rint(np.random.default_rng(4).uniform(1, 4, 4000))
    assert _chi2_uniform(naive, [1, 2, 3, 4]) < 1e-6
    # log-scale integer gene: log-uniform over the integers (equal mass per decade), within bounds
    units = np.array([p["units"] for p in params])
    assert units.min() >= 16 and units.max() <= 256 and units.dtype.kind == "i"
    assert abs(np.mean(units < 64) - 0.5) < 0.04  # 64 is the geometric middle of [16, 256]


def test_offspring_stay_integral_and_in_bounds(toy):
    space = SearchSpace.from_problem(toy)
    problem = SearchProblem(space, batch_evaluate=lambda ps: [_R(p) for p in ps])
    algo = make_nsga3(space, problem, pop=40, partitions=4, seed=5)
    seen = set()
    for _ in range(5):
        pop = algo.ask()
        algo.evaluator.eval(problem, pop, algorithm=algo)
        algo.tell(infills=pop)
        for p in space.decode_batch(pop.get("X")):
            for g in toy.genes:
                g.check(p[g.name])
            seen.add(p["layers"])
        X = pop.get("X")
        assert np.array_equal(space.repair(X), X)  # pymoo holds canonical vectors only
    assert seen == {1, 2, 3, 4}  # crossover + mutation reach the end points


class _R:
    """A result as the problem reads it: each objective's read (error, comm, eps)."""

    def __init__(self, p):
        self.p = p
        self.error, self.comm, self.eps = p["layers"] / 4 + p["lr"], p["units"], 1 / p["sigma"]


def test_bad_genes():
    with pytest.raises(FedevoError, match="no integer"):
        SearchSpace([Gene("layers", "int", 1.2, 1.8)])
    with pytest.raises(FedevoError, match="no genes"):
        SearchSpace([])
