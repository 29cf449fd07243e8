"""PrivacyConfig = the shared settings + the chosen mechanism's own parameters, built from flat keys (issue 25)."""

from dataclasses import replace

import pytest

from fedevo.config import PrivacyConfig
from fedevo.errors import FedevoError
from fedevo.privacy import registry
from fedevo.privacy.params import AdaptiveParams, NoParams, StepParams, UpdateParams


def test_flat_keys_go_to_the_mechanisms_parameters():
    pc = PrivacyConfig(mechanism="update", sigma=0.5, clip=1.0, tau=0.2, delta=1e-5)
    assert pc.params == UpdateParams(sigma=0.5, clip=1.0, tau=0.2) and pc.delta == 1e-5
    assert (pc.sigma, pc.tau) == (0.5, 0.2)  # read flat
    assert pc.signds_eps == 1.0 and pc.clip_rule == "fixed"  # another mechanism's key: its default
    assert PrivacyConfig().params == NoParams() and PrivacyConfig().mechanism == registry.default_mechanism()
    with pytest.raises(AttributeError):
        pc.no_such_key


def test_other_mechanisms_keys_are_checked_then_ignored():
    pc = PrivacyConfig(mechanism="step", sigma=0.1, clip=1.0, tau=0.3, signds_eps=5.0)
    assert pc.params == StepParams(sigma=0.1, clip=1.0) and pc.tau == 0.0
    with pytest.raises(FedevoError, match="signds_k"):
        PrivacyConfig(mechanism="update", sigma=0.5, clip=1.0, signds_k=2.0)
    with pytest.raises(TypeError, match="no_such_key"):
        PrivacyConfig(no_such_key=1)


def test_replace_keeps_working_across_mechanisms():
    a = PrivacyConfig(mechanism="adaptive", sigma=0.5, clip=1.0, adaptive_kappa=0.3)
    assert replace(a, sigma=2.0).params == AdaptiveParams(sigma=2.0, clip=1.0, adaptive_kappa=0.3)
    u = replace(a, mechanism="update")
    assert type(u.params) is UpdateParams and u.params == UpdateParams(sigma=0.5, clip=1.0)
    assert replace(u, mechanism=registry.default_mechanism()).params == NoParams()


def test_rules_come_from_the_mechanism_and_the_trust_model():
    with pytest.raises(FedevoError, match="trust 'central' needs mechanism 'update'"):
        PrivacyConfig(mechanism="step", sigma=0.1, clip=1.0, trust="central")
    with pytest.raises(FedevoError, match="eps_budget needs mechanism 'update'"):
        PrivacyConfig(mechanism="step", clip=1.0, eps_budget=3.0)
    with pytest.raises(FedevoError, match="need a privacy mechanism"):
        PrivacyConfig(target_eps=1.0)
    with pytest.raises(FedevoError, match="unknown trust 'server'"):
        PrivacyConfig(trust="server")
    assert registry.trust_implies("secagg") == {"aggregation": "secagg"}


def test_secure_aggregation_under_central_trust_is_refused_not_ignored():
    """`aggregation = "secagg"` under trust 'central' was accepted and ignored (the central mechanism has no
    secure aggregator: plain aggregation, comm without the protocol's words, nothing in the privacy summary);
    it is refused now, naming the trust model that does simulate it. Without privacy it is simulated, and kept."""
    with pytest.raises(FedevoError, match="aggregation 'secagg' is not simulated under trust 'central'.*"
                                          "use trust = \"secagg\""):
        PrivacyConfig(mechanism="update", sigma=1.0, clip=1.0, trust="central", aggregation="secagg")
    assert PrivacyConfig(mechanism="update", sigma=1.0, clip=1.0, trust="secagg", aggregation="secagg")
    assert PrivacyConfig(mechanism="none", trust="central", aggregation="secagg").aggregation == "secagg"


def test_problem_keys_come_from_the_registry():
    from fedevo.problem import PRIVACY_KEYS, privacy_keys

    assert PRIVACY_KEYS == privacy_keys()
    assert set(registry.SHARED_KEYS) <= set(PRIVACY_KEYS)
    for name in registry.mechanisms():
        assert set(registry.mechanism(name).keys) <= set(PRIVACY_KEYS)
