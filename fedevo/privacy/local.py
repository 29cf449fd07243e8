"""Local trust: every client noises its own contribution, and the observer is the server, which sees every
upload and knows whom it sampled (no amplification by sampling). One class per local mechanism: `NoPrivacy`,
`StepMechanism` (record level, seed 004), `UpdateMechanism` (user level, ULDP-FED) here; `SignDSMechanism`
(signds.py) and `AdaptiveMechanism` (adaptive.py) beside their transforms.
"""

from __future__ import annotations

import math
from typing import Optional

from ..config import SimConfig
from . import accounting as acc
from .mechanism import STEP, UPLOAD, Mechanism
from .mechanisms import clip_stats

EXACT = "analytic Gaussian (dp-accounting; exact for the composed Gaussians)"


class LocalMechanism(Mechanism):
    """What every local mechanism shares: plain FedAvg or fixed-point secure aggregation (no DP by itself, its
    clamp range from the mechanism), and the summary's trust fields."""

    trust = "local"

    def default_range(self) -> float:
        """The clamp R of secure aggregation's fixed point when `secagg_range` is unset."""
        return 16.0

    def secagg_range(self) -> float:
        pc = self.cfg.privacy
        return pc.secagg_range if pc.secagg_range is not None else self.default_range()

    def aggregator(self, part, seed: int, controller=None):
        pc = self.cfg.privacy
        if pc.aggregation != "secagg":
            return None
        from ..secagg.aggregator import SecureAggregator

        return SecureAggregator(sizes=part.sizes, bits=pc.secagg_bits, value_range=self.secagg_range(),
                                threshold=pc.secagg_threshold, seed=seed + 4, keep_uploads=controller is not None,
                                neighbours=pc.secagg_neighbours)

    def upload_words(self, omega: int) -> Optional[float]:
        """Ω parameters per upload under plain aggregation (the transforms clip and noise, they do not shrink);
        secure aggregation's protocol words depend on who arrives and drops out: None."""
        return None if self.cfg.privacy.aggregation == "secagg" else float(omega)

    def deployment(self) -> dict:
        return {"trust": "local", "observer": "the server (sees every upload, knows the cohort)",
                "amplification": "none", "delta": self.cfg.privacy.delta}

    def report(self, out, part) -> dict:
        rep = {"mechanism": self.cfg.privacy.mechanism, **self.deployment(), "eps_conditional": False}
        if self.cfg.privacy.mechanism != "none":
            rep["not_covered"] = NOT_COVERED
        if self.run.secagg is not None:  # secure aggregation: what the protocol cost (no DP by itself)
            rep.update(aggregation="secagg", secagg=self.run.secagg.summary())
        rep.update(self.account(out, part))
        return rep

    def account(self, out, part) -> dict:
        """The mechanism's own fields: eps, eps_paper, level, neighbouring, accountant, what it spent."""
        raise NotImplementedError


#: what a local mechanism's ε does not cover (each result's privacy summary)
NOT_COVERED = ("a deployed user who joins more rounds than the most exposed simulated client (the ε counts the "
               "simulation's own participations); attacks on the floating-point noise sampler")


class NoPrivacy(LocalMechanism):
    """No noise: ε = ∞ (no privacy), and no paper formula applies (eps_paper NaN, shown '–', as under central and
    distributed trust)."""

    def account(self, out, part) -> dict:
        return {"eps": math.inf, "eps_paper": math.nan, "level": "none"}

    def planned_eps(self) -> dict:
        return {"eps": math.inf, "eps_paper": math.nan}


class StepMechanism(LocalMechanism):
    """Seed 004 Alg. 3: every local step clips the batch gradient to S, steps, adds N(0, σ²) to every active
    parameter (`mechanisms.StepLDP`); record level, sensitivity 2·lr·S per step."""

    audit_seam = STEP

    def sigma_for_target(self, cfg: SimConfig, *, dim: int) -> float:
        pc = cfg.privacy
        return acc.calibrate_sigma_step(target_eps=pc.target_eps, delta=pc.delta, lr=cfg.lr, clip=pc.params.clip,
                                        epochs=cfg.epochs, participation=1.0, rounds=cfg.rounds)

    def client_transforms(self, noise, seed: int, controller=None):
        from .mechanisms import StepLDP

        pc = self.cfg.privacy
        return StepLDP(sigma=pc.params.sigma, clip=pc.params.clip if pc.params.clip_rule == "fixed" else None, seed=seed), None

    def account(self, out, part) -> dict:
        cfg, pc = self.cfg, self.cfg.privacy
        clips = self.run.step_hook.clips or [pc.params.clip or 1.0]
        rounds_max = int(out.arrivals.max(initial=0))  # rounds whose upload reached the server, worst client
        eps = acc.eps_step(sigma=pc.params.sigma, lr=cfg.lr, clip=clips, epochs=cfg.epochs, participation=1.0,
                           rounds=rounds_max, delta=pc.delta) if rounds_max else 0.0
        rep = {"level": "record (replace-one, per client's data)", "neighbouring": "replace one record",
               "accountant": EXACT, "sigma": pc.params.sigma, "rounds_max": rounds_max, "clip_rule": pc.params.clip_rule,
               **clip_stats(clips), "eps": eps,
               "eps_paper": acc.eps_paper_step(clip=max(clips), min_local_size=int(part.sizes.min()),
                                               participation=cfg.participation, rounds=cfg.rounds,
                                               sigma=pc.params.sigma, delta=pc.delta)}
        if pc.params.clip_rule == "median":
            rep.update(eps_conditional=True, eps_condition="given the unprivatised median clip S of each round "
                       "(clip_rule = 'median'); not a DP guarantee on its own")
        return rep


class UpdateMechanism(LocalMechanism):
    """ULDP-FED (seed 000): clip the round's update to C_k = C₀·e^(−β·k), add N(0, (σ·C_k)²), optional recall
    and per-user budget ledger (`mechanisms.UpdateLDP`); user level."""

    audit_seam = UPLOAD

    def participations(self) -> int:
        """Worst-case uploads of one user: min(r, T)."""
        cfg = self.cfg
        return cfg.privacy.max_participations or cfg.rounds

    def calibration_target(self, pc) -> float:
        return pc.target_eps

    def upload_words(self, omega: int) -> Optional[float]:
        """With recall, an upload replaced by a stored one costs an index: training decides how many (None)."""
        return None if self.cfg.privacy.params.recall else super().upload_words(omega)

    def sigma_for_target(self, cfg: SimConfig, *, dim: int) -> float:
        pc = cfg.privacy
        return acc.calibrate_sigma_update(target_eps=self.calibration_target(pc), delta=pc.delta,
                                          participations=self.participations())

    def upload(self, controller=None, **kw):
        from .mechanisms import UpdateLDP

        return UpdateLDP(**kw)

    def client_transforms(self, noise, seed: int, controller=None):
        cfg, pc = self.cfg, self.cfg.privacy

        def factory(active):
            store = ledger = None
            if pc.params.recall:
                from .recall import RecallStore
                store = RecallStore(num_params=active.numel())
            if pc.eps_budget is not None:
                from .budget import UserBudgetLedger
                ledger = UserBudgetLedger(total_eps=pc.eps_budget, max_participations=self.participations(),
                                          rounds=cfg.rounds, num_clients=cfg.data.clients, delta=pc.delta)
            return self.upload(controller, sigma=pc.params.sigma, clip=pc.params.clip, beta=pc.params.beta, clients=cfg.data.clients,
                               active=active, noise=noise, recall=store, tau=pc.params.tau, similarity=pc.params.similarity,
                               ledger=ledger, sample_rate=cfg.sampled_per_round / cfg.data.clients)
        return controller, factory  # adaptive: the controller is also the step hook (per-client learning rate)

    def noise_multiplier_max(self) -> float:
        return self.cfg.privacy.params.sigma

    def default_range(self) -> float:
        """C₀·(1 + 8·z_max): the clipped update plus 8 noise standard deviations (16·C₀ with the ledger)."""
        pc = self.cfg.privacy
        return 16.0 * pc.params.clip if pc.eps_budget is not None else pc.params.clip * (1.0 + 8.0 * self.noise_multiplier_max())

    def account(self, out, part) -> dict:
        cfg, pc = self.cfg, self.cfg.privacy
        up = self.run.transform
        # every participation counts, recalled ones too: the recall decision reads a fresh noisy update
        eps = acc.eps_update_effective(noise_multiplier=up.effective_sigma(), delta=pc.delta)
        if pc.eps_budget is not None:  # the paper's own accounting of the grants spent (the budget, or past it
            # for late joiners and after recalls); its amplification by sampling does not hold against the
            # server: `eps` above is the bound
            eps_paper = up.ledger.paper_eps()
        else:
            eps_paper = acc.eps_paper_update(sigma=pc.params.sigma, sample_rate=cfg.sampled_per_round / cfg.data.clients,
                                             max_participations=self.participations(), delta=pc.delta)
        joined = up.joined
        return {"level": "user (replace-one user)", "neighbouring": "replace one user", "accountant": EXACT,
                "sigma": pc.params.sigma, "participations_mean": float(joined[joined > 0].mean()) if joined.any() else 0.0,
                **up.summary(), "eps": eps, "eps_paper": eps_paper}


__all__ = ["LocalMechanism", "NoPrivacy", "StepMechanism", "UpdateMechanism", "EXACT"]
