"""fedevo/problems/fashion_mlp_mech.toml (bundled): mechanism and aggregation as categorical genes, evaluated end to end."""

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import run_cli
from fedevo.errors import FedevoError
from fedevo.evaluation import evaluate
from fedevo.problem import load_problem

MECHS, AGGS = ("update", "signds", "adaptive"), ("plain", "secagg")


def test_bundled_problem_has_the_categorical_genes():
    prob = load_problem("fashion_mlp_mech")
    assert prob.gene("mechanism").type == "choice" and tuple(prob.gene("mechanism").choices) == MECHS
    assert prob.gene("aggregation").type == "choice" and tuple(prob.gene("aggregation").choices) == AGGS
    for m, a in itertools.product(MECHS, AGGS):  # every combination decodes to a valid SimConfig
        c = prob.sim_config({"mechanism": m, "aggregation": a})
        assert (c.privacy.mechanism, c.privacy.aggregation) == (m, a)
    with pytest.raises(FedevoError, match="not one of"):
        prob.sim_config({"mechanism": "laplace"})


def test_search_space_round_trips_the_choices():
    from fedevo.searching.space import SearchSpace

    prob = load_problem("fashion_mlp_mech")
    space = SearchSpace.from_problem(prob)
    for m, a in itertools.product(MECHS, AGGS):
        params = {**prob.defaults(), "mechanism": m, "aggregation": a}
        x = space.encode(params)
        back = space.decode(x)
        assert back["mechanism"] == m and back["aggregation"] == a
    X = space.repair(np.tile(space.encode(prob.defaults()), (4, 1)) + np.array([0.0] * space.n_var))
    assert all(d["mechanism"] == "update" and d["aggregation"] == "plain" for d in space.decode_batch(X))


@pytest.fixture
def mech_problem(tmp_path):
    """fashion_mlp_mech on synthetic data and 6 clients, so it trains in a fraction of a second."""
    src = (Path(load_problem("fashion_mlp_mech").path)).read_text()
    src = src.replace('dataset = "fashion"', 'dataset = "synthetic"').replace("clients = 100", "clients = 6")
    src = src.replace("epochs = 5", "epochs = 1").replace("batch_size = 64", "batch_size = 32")
    path = tmp_path / "mech.toml"
    path.write_text(src)
    return load_problem(str(path))


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize("agg", AGGS)
def test_each_option_evaluates(mech_problem, mech, agg):
    r = evaluate(mech_problem, {"mechanism": mech, "aggregation": agg, "participation": 1.0, "units": 16,
                                "layers": 1}, seed=0, rounds=2)
    assert r.status == "ok" and math.isfinite(r.eps) and r.comm > 0
    assert r.privacy["mechanism"] == mech
    assert ("secagg" in r.privacy) == (agg == "secagg")
    if mech == "adaptive":
        assert "adaptive" in r.privacy


def test_cli_evaluate_json_reports_costs(mech_problem, capsys):
    code, out, err = run_cli(["evaluate", "--problem", mech_problem.path, "--params",
                              '{"mechanism": "signds", "aggregation": "secagg", "units": 16, "layers": 1}',
                              "--rounds", "1", "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["status"] == "ok" and d["privacy"]["mechanism"] == "signds"
    assert d["privacy"]["secagg"]["comm_words"] > 0 and d["privacy"]["h"] >= 1
    assert d["params"]["mechanism"] == "signds" and d["params"]["aggregation"] == "secagg"


def test_cli_bad_choice_is_one_line(mech_problem, capsys):
    code, _, err = run_cli(["evaluate", "--problem", mech_problem.path, "--params", '{"aggregation": "mpc"}',
                            "--quiet"], capsys)
    assert code == 2 and "not one of" in err and err.count("\n") == 1
