"""The ideal functionality (`IdealSum`, FEDEVO_SECAGG unset) gives what the protocol gives, bit for bit: the same
aggregate, the same aborts, the same words, over dropouts, SecAgg+ graphs, selection after arrival and both
encodings; and a whole simulation with secure aggregation is the same either way."""

import math

import numpy as np
import pytest
import torch

from fedevo.errors import FedevoError
from fedevo.privacy.distributed import DDGEncoder
from fedevo.secagg.aggregator import SecureAggregator, simulation_from_env
from fedevo.secagg.ideal import IdealSum
from fedevo.secagg.protocol import RoundParams, SecAggAbort


def _ddg(seed):
    return DDGEncoder(gamma=1e-4, share_std=lambda k: 0.01 * math.sqrt(k), bits=32, seed=seed)


def _rounds(simulation, *, n, neighbours, loss, theta, encoder, select, floor, seed, rounds=4, P=257):
    """Run `rounds` rounds through one SecureAggregator; each round's (output, stats) and the final summary."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(30, 90, size=n)
    agg = SecureAggregator(sizes=sizes, bits=32, value_range=4.0, threshold=theta, seed=seed,
                           keep_uploads=select, encoder=_ddg(seed) if encoder else None, neighbours=neighbours,
                           survivor_floor=floor, simulation=simulation)
    outs = []
    for t in range(rounds):
        sampled = np.sort(rng.choice(n, size=n - 2, replace=False))
        arrived = sampled[rng.random(len(sampled)) >= loss]
        active = torch.as_tensor(rng.random(P) < 0.8, dtype=torch.float32)
        flat = torch.from_numpy(rng.normal(0.0, 1.0, (len(arrived), P))).float() * active
        agg.begin_round(t, sampled, arrived, active)
        for s in range(0, len(arrived), 5):
            agg.add(flat[s:s + 5], arrived[s:s + 5])
        chosen = arrived[rng.random(len(arrived)) < 0.8] if select else None
        out = agg.finish(chosen)
        outs.append((None if out is None else out.numpy().copy(), agg.last_words))
    summary = agg.summary()
    return outs, {k: summary[k] for k in ("rounds", "aborted", "clamped", "values", "dropped_recovered",
                                          "comm_words")}


CASES = [  # (n, neighbours, loss, theta, encoder, select, floor)
    (24, None, 0.0, 0.5, False, False, 0.0),
    (24, None, 0.3, 0.5, False, False, 0.0),
    (24, None, 0.55, 0.5, False, False, 0.0),  # some rounds abort: fewer than t survive
    (24, None, 0.3, 0.5, True, False, 0.5),  # the distributed discrete Gaussian, its survivor floor
    (24, None, 0.3, 0.5, False, True, 0.0),  # a subset chosen after arrival (adaptive budgets)
    (40, 8, 0.25, 0.5, False, False, 0.0),  # SecAgg+
    (40, 4, 0.2, 0.5, True, False, 0.5),  # SecAgg+: some rounds abort (a neighbourhood short of t), some recover
    (40, "auto", 0.15, 0.4, True, True, 0.0),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("seed", [0, 1])
def test_ideal_sum_equals_the_protocol(case, seed):
    n, neighbours, loss, theta, encoder, select, floor = case
    kw = dict(n=n, neighbours=neighbours, loss=loss, theta=theta, encoder=encoder, select=select, floor=floor,
              seed=seed)
    ideal, ideal_stats = _rounds("sum", **kw)
    proto, proto_stats = _rounds("protocol", **kw)
    assert ideal_stats == proto_stats
    for (a, wa), (b, wb) in zip(ideal, proto):
        assert wa == wb
        assert (a is None) == (b is None)
        if a is not None:
            assert np.array_equal(a, b)  # bit for bit


def test_the_cases_reach_aborts_and_recoveries():
    """The cases above are not vacuous: every case aggregates some rounds; most recover dropped clients' masks;
    some rounds abort, with the complete graph and with SecAgg+."""
    aborted = {}
    for i, case in enumerate(CASES):
        n, neighbours, loss, theta, encoder, select, floor = case
        outs, stats = _rounds("sum", n=n, neighbours=neighbours, loss=loss, theta=theta, encoder=encoder,
                              select=select, floor=floor, seed=1)
        assert any(out is not None for out, _ in outs), i
        assert (stats["dropped_recovered"] > 0) == (loss > 0), i
        aborted[i] = stats["aborted"]
    assert aborted[2] > 0 and aborted[6] > 0


def test_ideal_sum_applies_the_protocols_rules():
    p = RoundParams(round=0, clients=(0, 1, 2, 3), threshold=3, length=3, bits=32)
    s = IdealSum(p)
    s.receive(0, np.array([1, 2, 3], dtype=np.uint32))
    s.receive(2, np.array([2**32 - 1, 0, 1], dtype=np.uint32))
    with pytest.raises(ValueError, match="repeated"):
        s.receive(2, np.zeros(3, dtype=np.uint32))
    with pytest.raises(ValueError, match="unexpected"):
        s.receive(7, np.zeros(3, dtype=np.uint32))
    with pytest.raises(SecAggAbort, match="fewer than t=3"):
        s.unmask_request()
    s.receive(3, np.array([0, 0, 1], dtype=np.uint32))
    assert s.unmask_request() == ((0, 2, 3), (1,))
    assert s.finish().tolist() == [0, 2, 5]  # modulo 2^32
    with pytest.raises(ValueError, match="keep_uploads"):
        IdealSum(p).unmask_request(selected=[0])


def test_simulation_from_the_environment(monkeypatch):
    monkeypatch.delenv("FEDEVO_SECAGG", raising=False)
    assert simulation_from_env() == "sum"
    monkeypatch.setenv("FEDEVO_SECAGG", "Protocol")
    assert simulation_from_env() == "protocol"
    assert SecureAggregator(sizes=np.ones(3)).simulation == "protocol"
    monkeypatch.setenv("FEDEVO_SECAGG", "fast")
    with pytest.raises(FedevoError, match="FEDEVO_SECAGG must be one of sum, protocol, got 'fast'"):
        simulation_from_env()


@pytest.mark.parametrize("params", [{"trust": "secagg", "sigma": 2.0},
                                    {"trust": "local", "aggregation": "secagg", "mechanism": "update",
                                     "sigma": 0.5, "recall": False, "secagg_neighbours": 4}])
def test_a_simulation_is_the_same_with_either(monkeypatch, params):
    import fedevo

    results = {}
    for sim in ("sum", "protocol"):
        monkeypatch.setenv("FEDEVO_SECAGG", sim)
        r = fedevo.evaluate("digits_mlp", params, seed=3, rounds=2)
        assert r.status == "ok" and r.privacy["secagg"]["simulation"] == sim
        results[sim] = r
    a, b = results["sum"], results["protocol"]
    assert (a.error, a.comm, a.eps, a.omega) == (b.error, b.comm, b.eps, b.omega)
    assert "client_expansions" not in a.privacy["secagg"] and b.privacy["secagg"]["client_expansions"] > 0


def test_a_search_with_a_bad_fedevo_secagg_stops_with_one_line(capsys, tmp_path, monkeypatch):
    """A bad FEDEVO_SECAGG is the machine's setup (SetupError), not an individual's fault: the search stops at the
    first secagg evaluation, resumable, instead of recording every secagg individual as failed."""
    from tests.cli.test_bad_input import bad

    path = tmp_path / "sa.toml"
    path.write_text('dataset = "digits"\nmodel = "mlp"\n[train]\nrounds = 1\n[privacy]\ntrust = "secagg"\n'
                    'mechanism = "update"\nsigma = 1.0\nclip = 1.0\nrecall = false\n'
                    '[genes]\nlr = { type = "real", low = 0.01, high = 0.5, default = 0.2 }\n')
    monkeypatch.setenv("FEDEVO_SECAGG", "fast")
    err = bad(capsys, ["search", "--problem", path, "--workers", 0, "--pop", 4, "--gen", 1, "--quiet", "--out",
                       tmp_path / "run"], r"FEDEVO_SECAGG must be one of sum, protocol, got 'fast'.*the search stopped")
    assert "fedevo resume" not in err and "was removed" in err  # no evaluation reached the fresh run directory


def test_an_aggregator_pickled_before_the_ideal_sum_resumes(monkeypatch):
    """A training state saved by the code before the ideal sum has no `simulation` attribute: unpickled, it
    continues with FEDEVO_SECAGG's simulation instead of failing with AttributeError."""
    import pickle

    old = SecureAggregator(sizes=np.ones(6), seed=1, simulation="protocol")
    del old.__dict__["simulation"]  # as the earlier code pickled it
    monkeypatch.delenv("FEDEVO_SECAGG", raising=False)
    back = pickle.loads(pickle.dumps(old))
    assert back.simulation == "sum"
    back.begin_round(0, np.arange(6), np.arange(6), torch.ones(5))
    back.add(torch.zeros(6, 5), np.arange(6))
    assert back.finish() is not None


def test_the_ideal_sum_refuses_an_upload_that_did_not_arrive():
    p = RoundParams(round=0, clients=(0, 1, 2, 3), threshold=2, length=2, bits=32)
    s = IdealSum(p, arrived=[0, 2])
    s.receive(0, np.zeros(2, dtype=np.uint32))
    with pytest.raises(ValueError, match="unexpected"):  # sampled, but its upload was lost: the protocol's
        s.receive(1, np.zeros(2, dtype=np.uint32))  # Cohort has no mask prepared for it either
