"""The built-in trust models and mechanisms, registered in `registry` (torch-free: the runtime classes are named
by "module:Class" and imported when an evaluation builds one).

Trust models (docs/privacy.md's threat-model table):
- local: each client noises its own upload; the observer is the server.
- secagg: distributed discrete Gaussian under secure aggregation (privacy/distributed.py).
- central: DP-FedAvg, the server noises the sum of clipped updates (privacy/central.py).

Mechanisms: none, step (seed 004), update (ULDP-FED, seed 000; also the user-level clip of central and secagg
trust), signds (seed 002), adaptive (seed 003).
"""

from __future__ import annotations

import math

from .params import AdaptiveParams, NoParams, SignDSParams, StepParams, UpdateParams, check
from .registry import Spec, Trust, register, register_trust


# ---------------------------------------------------------------- trust models
def _accounted_delta(cfg) -> None:
    n = cfg.population
    check(cfg.privacy.delta < 1.0 / n,
          f"delta={cfg.privacy.delta:g} must be below 1/population = {1.0 / n:.3g} "
          "(a δ of 1/N lets the mechanism expose one user outright)")


def _secagg_deployment(cfg) -> None:
    from . import ddg

    _accounted_delta(cfg)
    pc, m = cfg.privacy, cfg.cohort
    t = ddg.secagg_threshold(fraction=pc.secagg_threshold, cohort=m)
    check(cfg.deployment.colluders < t,
          f"colluders ({cfg.deployment.colluders}) must be fewer than the secure-aggregation threshold "
          f"t = ceil(secagg_threshold·cohort) = {t}: no honest noise would be counted")
    check(m * (1.0 - cfg.upload_loss) >= t,
          f"secagg_threshold={pc.secagg_threshold:g} needs {t} of the cohort's {m} clients to "
          f"survive, but only {m * (1.0 - cfg.upload_loss):.0f} are expected to (upload_loss="
          f"{cfg.upload_loss:g}): most rounds would abort; lower secagg_threshold")
    if pc.target_eps is None and isinstance(pc.params, UpdateParams):  # σ given: shares the DDG accounting covers
        p, honest, cohort, bits = pc.params, t - cfg.deployment.colluders, max(m, cfg.sampled_per_round), pc.secagg_bits
        s, g = ddg.shares(sigma=p.sigma, clip=p.clip, honest=honest, cohort=cohort, bits=bits)
        low = ddg.min_noise_multiplier(honest=honest, cohort=cohort, bits=bits)
        check(s / g >= ddg.SHARE_SIGMA_MIN,
              f"sigma={p.sigma:g} is below {low:.3g}, the smallest noise multiplier whose secure-aggregation shares "
              "fedevo's DDG accounting covers (each share's discrete Gaussian σ_ℓ ≥ 1/2 grid units: fedevo/privacy/"
              "ddg.py); raise sigma" + (" or use secagg_bits = 64" if bits == 32 else ""))


LOCAL = register_trust(Trust("local", "each client noises its own upload"))
SECAGG = register_trust(Trust("secagg", "the noise is added in shares under secure aggregation",
                              implies={"aggregation": "secagg"}, rules=_secagg_deployment))
CENTRAL = register_trust(Trust("central", "the noise is added by the server", rules=_accounted_delta))


# ---------------------------------------------------------------- mechanisms
def _needs_sigma(pc) -> None:
    if pc.target_eps is None and pc.eps_budget is None:
        s = pc.params.sigma
        check(math.isfinite(s) and s > 0, f"sigma must be > 0 for mechanism {pc.mechanism!r}, got {s} "
                                          "(use mechanism 'none' for no noise)")


def _step_rules(pc) -> None:
    p = pc.params
    check(not (p.clip_rule == "fixed" and p.clip is None),
          "mechanism 'step' needs a fixed clip S (or clip_rule = \"median\": the unprivatised median of the "
          "gradient norms, which makes ε conditional on it)")
    check(not (pc.target_eps is not None and p.clip_rule == "median"),
          "target_eps with the step mechanism needs a fixed clip S (the median clip is data-dependent)")
    _needs_sigma(pc)


def _update_rules(pc) -> None:
    p = pc.params
    _needs_sigma(pc)
    check(not (pc.aggregation == SECAGG.name and p.recall),
          "recall needs the server to store individual noisy updates, which secure aggregation hides; "
          "set recall = false with aggregation 'secagg'")
    check(p.clip is not None, f"mechanism {pc.mechanism!r} needs a clip C0, the bound each update is clipped to: "
                              "set [privacy] clip (e.g. 1.0), or make clip a gene")
    t = pc.trust
    if t != LOCAL.name:  # user level under a trusted server or secure aggregation: no local-only features
        check(not p.recall, f"recall resends an earlier locally-noised upload; set recall = false with trust {t!r}")
        check(pc.eps_budget is None, f"eps_budget (the ULDP-FED per-user ledger) is a local-trust feature, not "
                                     f"for trust {t!r}")
    if t == SECAGG.name:
        check(pc.aggregation == SECAGG.name,
              "trust 'secagg' needs aggregation = \"secagg\" (the server may only see the masked sum)")
    check(not (t == CENTRAL.name and pc.aggregation == SECAGG.name),
          "aggregation 'secagg' is not simulated under trust 'central' (the trusted server sees the clipped updates "
          "and adds the noise; neither the masking nor its communication would be counted): use trust = \"secagg\" "
          "(the noise in shares under secure aggregation) or aggregation = \"plain\"")


def _signds_rules(pc) -> None:
    check(pc.target_eps is None,
          "target_eps is not supported with mechanism 'signds'; set signds_eps (the ε of one upload)")


register(Spec("none", NoParams, {t: "local:NoPrivacy" for t in ("local", "secagg", "central")},
              doc="plain FedAvg, no privacy", private=False))
register(Spec("step", StepParams, {"local": "local:StepMechanism"}, budgets=("target_eps",), rules=_step_rules,
              doc="seed 004: clip each local step's batch gradient to S, add N(0, sigma²) to every active parameter",
              step_noise=lambda cfg, params: params))  # one draw per active parameter per step
register(Spec("update", UpdateParams, {"local": "local:UpdateMechanism", "secagg": "distributed:DistributedDiscreteGaussian",
                                       "central": "central:CentralGaussian"},
              budgets=("target_eps", "eps_budget"), rules=_update_rules,
              doc="ULDP-FED: clip the round's update to C_k = clip·exp(−beta·k), add N(0, (sigma·C_k)²)"))
register(Spec("signds", SignDSParams, {"local": "signds:SignDSMechanism"}, rules=_signds_rules,
              doc="seed 002: ε-LDP sign + EM-MDS dimension selection"))
register(Spec("adaptive", AdaptiveParams, {"local": "adaptive:AdaptiveMechanism"}, budgets=("target_eps",),
              rules=_update_rules,
              doc="seed 003: 'update' with per-client learning rate and budget share, and a client filter"))
