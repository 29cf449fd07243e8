"""One privacy mechanism × trust model as one object, chosen once per evaluation (`build_mechanism`).

Like TensorFlow Privacy's DPQuery or pfl-research's privacy mechanisms, an object owns everything about its
mechanism: its calibration (target ε → σ), the client-side transforms (a per-step hook and/or an upload
transform), the server-side transform, the secure aggregator it needs (with its encoding and range), and its
accounting (the ε it reports and the summary that says under which trust model, neighbouring relation and
accountant that ε holds). The simulator (fl/simulate.py, fl/rounds.py) calls these seams and never branches on
mechanism or trust names; a mechanism is registered once in `registry.py` (docs/privacy.md, "Adding a
mechanism").

- `local.LocalMechanism`: the client noises its own upload (`step`, `update`, `signds`, `adaptive`, `none`).
- `central.CentralGaussian`: DP-FedAvg, the server adds Gaussian noise to the sum of clipped updates.
- `distributed.DistributedDiscreteGaussian`: clients add discrete Gaussian shares under secure aggregation.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..config import SimConfig


# Where the audit's observer looks (fedevo/auditing/run.py), `Mechanism.audit_seam`:
UPLOAD = "upload"  # each upload, through the mechanism's upload transform (an `UpdateLDP`: clip0, sigma, thresholds)
STEP = "per-step"  # each local step, through the mechanism's per-step hook (a `StepLDP`): record level
AGGREGATE = "aggregate"  # the released aggregate (the server's noise, or the decoded secure sum): `arrived`, clip


class Mechanism:
    """The seams. Defaults: no transform anywhere, sample-count weights, plain aggregation, no privacy."""

    trust = "local"
    uniform_weights = False  # weight every arrived update 1 instead of by sample count (bounded sensitivity)
    audit_seam = None  # UPLOAD, STEP or AGGREGATE: where `fedevo audit` inserts canaries (None: not auditable)

    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        self.run = None  # the privatizer of the current run (`privatizer`)

    def calibrate(self, cfg: SimConfig, *, dim: int) -> SimConfig:
        """Target-ε mode: cfg (remembered as self.cfg) with σ replaced by `sigma_for_target`'s noise (dim = the
        model's parameter count); cfg unchanged without a target, or where the mechanism calibrates nothing."""
        pc = cfg.privacy
        sigma = None if pc.target_eps is None else self.sigma_for_target(cfg, dim=dim)
        if sigma is None:
            return cfg
        self.cfg = replace(cfg, privacy=replace(pc, sigma=sigma))
        return self.cfg

    def sigma_for_target(self, cfg: SimConfig, *, dim: int) -> Optional[float]:
        """The σ whose ε meets cfg.privacy.target_eps (None: this mechanism has no σ to calibrate)."""
        return None

    def controller(self, data, part, seed: int):
        """A server-side round controller (the adaptive mechanism's client filter), or None."""
        return None

    def client_transforms(self, noise, seed: int, controller=None):
        """(per-step hook, upload-transform factory taking the active mask), either None."""
        return None, None

    def aggregator(self, part, seed: int, controller=None):
        """A secure aggregator replacing FedAvg's mean, or None."""
        return None

    def server_transform(self, seed: int):
        """A function (aggregate (P,), active (P,)) -> aggregate applied by the server, or None."""
        return None

    def privatizer(self, data, part, noise, seed: int):
        """The round loop's privatizer for one run (privatizer.py), built from the seams above in this order:
        controller, aggregator, client transforms, server transform. The mechanism keeps it (`self.run`): its
        report reads the state the run left there."""
        from .privatizer import RoundPrivatizer

        controller = self.controller(data, part, seed)
        secagg = self.aggregator(part, seed, controller)
        step_hook, factory = self.client_transforms(noise, seed, controller)
        self.run = RoundPrivatizer(step_hook=step_hook, upload_factory=factory, secagg=secagg, controller=controller,
                                   server_transform=self.server_transform(seed), uniform_weights=self.uniform_weights)
        return self.run

    def report(self, out, part) -> dict:
        """The privacy summary of a finished run (`out`: the round loop's outcome, arrivals and Ω; the rest is in
        `self.run`), with `eps` and `eps_paper`."""
        raise NotImplementedError

    def planned_eps(self) -> Optional[dict]:
        """{"eps": ..., "eps_paper": ...} at the planned rounds, known from the settings alone (σ or the target,
        q, T, δ) before any training — the multi-fidelity search ranks low-fidelity individuals with it — or
        None where the accounting depends on what training does (arrivals, recalls, per-user budgets, Ω)."""
        return None

    def upload_words(self, omega: int) -> Optional[float]:
        """Words one upload costs (a lost one too), known from the settings and Ω before any training — with it
        the multi-fidelity search ranks low-fidelity individuals by their exact communication — or None where
        training decides it (recalled uploads, secure aggregation's protocol, the adaptive filter's metadata)."""
        return None

    def exposure(self, arrivals=None) -> tuple[str, float, int]:
        """What the observer sees of one user, for the audit: (neighbouring relation, rate at which a user joins a
        round, rounds). Default (local trust): replace-one, every round it joined (`arrivals`: per client, rounds
        whose upload reached the server; None: all rounds)."""
        return "replace", 1.0, int(arrivals.max(initial=0)) if arrivals is not None else self.cfg.rounds

    def deployment(self) -> dict:
        """The accounted deployment and trust model, for every summary and plot."""
        c = self.cfg
        return {"trust": self.trust, "population": c.population, "cohort": c.cohort, "delta": c.privacy.delta}


def build_mechanism(cfg: SimConfig) -> Mechanism:
    """The runtime object of a validated config: the registered mechanism's class for the config's trust model
    (registry.py; SimConfig refused every invalid mechanism × trust pair)."""
    from . import registry

    pc = cfg.privacy
    return registry.mechanism(pc.mechanism).runtime_class(pc.trust)(cfg)


__all__ = ["Mechanism", "build_mechanism"]
