"""Issue 25: a mechanism registered in this file alone runs through `evaluate`, a two-generation search and the
audit. It follows docs/privacy.md, "Adding a mechanism": a parameter dataclass (its fields are the new
problem-file and --params keys), a runtime class (its transforms and its accounting), one `registry.register`.

The toy: a fixed-σ Gaussian on each client's update clipped to a fixed norm, no decay, recall or ledger;
user level under local trust, accounted as the composed Gaussians of the most exposed client.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass

import pytest

from fedevo.errors import FedevoError
from fedevo.privacy import accounting as acc
from fedevo.privacy import registry
from fedevo.privacy.local import LocalMechanism
from fedevo.privacy.mechanism import UPLOAD

NAME = "toy_gauss"


@dataclass(frozen=True)
class ToyParams:
    toy_sigma: float = 1.0  # noise multiplier
    toy_clip: float = 1.0  # L2 clip of each update

    def __post_init__(self):
        if not (self.toy_sigma > 0 and self.toy_clip > 0):
            raise FedevoError(f"toy_sigma and toy_clip must be > 0, got {self.toy_sigma}, {self.toy_clip}")


class ToyGauss(LocalMechanism):
    audit_seam = UPLOAD  # the audit's observer sees each upload, through the transform below

    def client_transforms(self, noise, seed: int, controller=None):
        from fedevo.privacy.mechanisms import UpdateLDP

        p, k = self.cfg.privacy.params, self.cfg.data.clients
        return None, lambda active: UpdateLDP(sigma=p.toy_sigma, clip=p.toy_clip, beta=0.0, clients=k,
                                              active=active, noise=noise)

    def default_range(self) -> float:
        p = self.cfg.privacy.params
        return p.toy_clip * (1.0 + 8.0 * p.toy_sigma)

    def account(self, out, part) -> dict:
        eps = acc.eps_update_effective(noise_multiplier=self.run.transform.effective_sigma(),
                                       delta=self.cfg.privacy.delta)
        return {"level": "user", "neighbouring": "replace one user", "sigma": self.cfg.privacy.params.toy_sigma,
                **self.run.transform.summary(), "eps": eps, "eps_paper": math.nan}


SPEC = registry.Spec(NAME, ToyParams, {"local": ToyGauss}, doc="toy: fixed-σ Gaussian on the clipped update")

PROBLEM = f"""
name = "toy_digits"
dataset = "digits"
model = "mlp"
[data]
clients = 10
[train]
rounds = 2
epochs = 1
batch_size = 16
upload_loss = 0.0
[privacy]
mechanism = "{NAME}"
toy_clip = 1.0
delta = 1e-4
[genes]
units = {{ type = "int", low = 16, high = 64, default = 32 }}
lr = {{ type = "real", low = 0.05, high = 0.3, default = 0.1 }}
participation = {{ type = "real", low = 0.5, high = 1.0, default = 0.5 }}
toy_sigma = {{ type = "real", low = 0.5, high = 4.0, default = 1.0, log = true }}
"""


@pytest.fixture(scope="module")
def problem_path(tmp_path_factory):
    registry.register(SPEC)
    path = tmp_path_factory.mktemp("toy") / "toy_digits.toml"
    path.write_text(PROBLEM)
    yield path
    registry.unregister(NAME)


def test_evaluate_with_the_toy(problem_path):
    from fedevo.evaluation import evaluate
    from fedevo.problem import load_problem, parse_params

    prob = load_problem(str(problem_path))
    lo = evaluate(prob, parse_params('{"toy_sigma": 0.5}'), seed=0)  # a --params key the toy brings
    hi = evaluate(prob, {"toy_sigma": 4.0}, seed=0)
    for r in (lo, hi):
        assert r.status == "ok" and r.privacy["mechanism"] == NAME and r.privacy["trust"] == "local"
        k = r.privacy["participations_max"]
        assert r.eps == acc.eps_update_varying(noise_multipliers=[r.privacy["sigma"] / math.sqrt(k)], delta=1e-4)
    assert math.isfinite(hi.eps) and hi.eps < lo.eps
    assert prob.sim_config().privacy.params == ToyParams(toy_sigma=1.0, toy_clip=1.0)
    with pytest.raises(FedevoError, match="toy_sigma"):
        prob.sim_config({"toy_sigma": 0.0})  # out of the gene's bounds
    with pytest.raises(FedevoError, match="trust 'central' needs mechanism"):
        prob.sim_config({"trust": "central"})  # the toy declared local trust only


def test_search_with_the_toy(problem_path, tmp_path):
    from fedevo.searching.run import Runtime, SearchSettings, search

    out = tmp_path / "run"
    search(SearchSettings(problem=str(problem_path), pop=8, gen=2, seed=0, rounds=1), out, Runtime(workers=0))
    with open(out / "evaluations.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 16 and sorted({r["generation"] for r in rows}) == ["1", "2"]
    assert all(r["status"] == "ok" and math.isfinite(float(r["eps"])) for r in rows)
    assert len({r["toy_sigma"] for r in rows}) > 1  # the toy's own key is a gene of the search


def test_audit_with_the_toy(problem_path):
    from fedevo.auditing import audit_config
    from fedevo.problem import load_problem

    cfg = load_problem(str(problem_path)).sim_config({"toy_sigma": 1.0, "participation": 1.0})
    res = audit_config(cfg, seed=0, canaries=300)
    assert res.mechanism == NAME and res.trust == "local" and res.canaries == 300
    assert res.exposure.relation == "replace" and res.exposure.rounds == cfg.rounds
    assert math.isfinite(res.eps_upper) and res.eps_lower <= res.eps_upper
    # 300 canaries can show at most res.attainable (< ε upper here): the audit cannot test the claim
    assert res.attainable < res.eps_upper and res.verdict == "inconclusive"


def test_unregistered_name_is_refused(problem_path):
    from fedevo.config import PrivacyConfig

    with pytest.raises(FedevoError, match="unknown mechanism 'toy_other'"):
        PrivacyConfig(mechanism="toy_other")
    with pytest.raises(FedevoError, match="already registered"):
        registry.register(SPEC)
