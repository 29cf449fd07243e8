"""Local trust: every client noises its own contribution, and the observer is the server, which sees every
upload and knows whom it sampled (no amplification by sampling). The mechanisms are `step` (record level,
seed 004), `update` (user level, ULDP-FED), `signds` (pure ε-LDP, seed 002), `adaptive` (seed 003) and `none`.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from ..config import SimConfig
from ..errors import FedevoError
from . import accounting as acc
from .mechanism import Mechanism


class LocalMechanism(Mechanism):
    trust = "local"

    # ---------------------------------------------------------------- calibration
    def calibrate(self, cfg: SimConfig, *, dim: int) -> SimConfig:
        """Smallest σ whose ε meets `target_eps` in the worst case (a client that joins every round it may:
        min(r, T) for `update`, T rounds for `step`)."""
        pc = cfg.privacy
        if pc.target_eps is None:
            return cfg
        if pc.mechanism in ("update", "adaptive"):  # adaptive noise is σ/b_i ≥ σ: the worst case is b_i = 1
            target, m = pc.target_eps, pc.max_participations or cfg.rounds
            if pc.mechanism == "adaptive" and pc.adaptive_level_eps is not None:  # room for the level reports
                target -= pc.adaptive_level_eps * m
                if target <= 0:
                    raise FedevoError(f"target_eps={pc.target_eps} is used up by the level reports "
                                      f"(adaptive_level_eps × {m} participations); lower adaptive_level_eps")
            sigma = acc.calibrate_sigma_update(target_eps=target, delta=pc.delta, participations=m)
        else:
            sigma = acc.calibrate_sigma_step(target_eps=pc.target_eps, delta=pc.delta, lr=cfg.lr, clip=pc.clip,
                                             epochs=cfg.epochs, participation=1.0, rounds=cfg.rounds)
        self.cfg = replace(cfg, privacy=replace(pc, sigma=sigma))
        return self.cfg

    # ---------------------------------------------------------------- client side
    def controller(self, data, part, seed: int):
        cfg, pc = self.cfg, self.cfg.privacy
        if pc.mechanism != "adaptive":
            return None
        from .adaptive import AdaptiveController

        g = torch.Generator().manual_seed(seed + 3)
        shared = torch.randperm(len(data.y_test), generator=g)[:512]  # the shared test data the server sends
        return AdaptiveController(
            sizes=part.sizes, epochs=cfg.epochs, sampled_per_round=cfg.sampled_per_round, levels=pc.adaptive_levels,
            gamma=pc.adaptive_gamma, kappa=pc.adaptive_kappa, keep=pc.adaptive_keep, threshold=pc.adaptive_threshold,
            level_eps=pc.adaptive_level_eps, shared_x=data.x_test[shared], shared_y=data.y_test[shared],
            seed=seed + 3)

    def client_transforms(self, noise, seed: int, controller=None):
        from .mechanisms import StepLDP, UpdateLDP

        cfg, pc = self.cfg, self.cfg.privacy
        if pc.mechanism == "step":
            return StepLDP(sigma=pc.sigma, clip=pc.clip if pc.clip_rule == "fixed" else None, seed=seed), None
        if pc.mechanism == "signds":
            from .signds import SignDSUpload

            return None, lambda active: SignDSUpload(eps=pc.signds_eps, k_frac=pc.signds_k, h_frac=pc.signds_h,
                                                     lr=pc.signds_lr, clients=cfg.data.clients, active=active,
                                                     seed=seed + 2)
        if pc.mechanism in ("update", "adaptive"):
            def factory(active):
                store = ledger = None
                if pc.recall:
                    from .recall import RecallStore
                    store = RecallStore(num_params=active.numel())
                if pc.eps_budget is not None:
                    from .budget import UserBudgetLedger
                    ledger = UserBudgetLedger(total_eps=pc.eps_budget, max_participations=pc.max_participations
                                              or cfg.rounds, rounds=cfg.rounds, num_clients=cfg.data.clients,
                                              delta=pc.delta)
                kw = dict(sigma=pc.sigma, clip=pc.clip, beta=pc.beta, clients=cfg.data.clients, active=active,
                          noise=noise, recall=store, tau=pc.tau, similarity=pc.similarity, ledger=ledger,
                          sample_rate=cfg.sampled_per_round / cfg.data.clients)
                if controller is not None:
                    from .adaptive import AdaptiveUpdateLDP
                    return AdaptiveUpdateLDP(controller=controller, **kw)
                return UpdateLDP(**kw)
            return controller, factory  # adaptive: the controller is the step hook (per-client learning rate)
        return None, None

    # ---------------------------------------------------------------- secure aggregation (no DP by itself)
    def secagg_range(self) -> float:
        """The clamp R of secure aggregation's fixed point (public): `secagg_range`, or from the mechanism —
        update-like: C0·(1 + 8·z_max) (the clipped update plus 8 noise std); signds: η_g; otherwise 16."""
        pc = self.cfg.privacy
        if pc.secagg_range is not None:
            return pc.secagg_range
        if pc.mechanism in ("update", "adaptive"):
            if pc.eps_budget is not None:
                return 16.0 * pc.clip
            z = pc.sigma / (1.0 - pc.adaptive_kappa) if pc.mechanism == "adaptive" else pc.sigma
            return pc.clip * (1.0 + 8.0 * z)
        if pc.mechanism == "signds":
            return pc.signds_lr
        return 16.0

    def aggregator(self, part, seed: int, controller=None):
        pc = self.cfg.privacy
        if pc.aggregation != "secagg":
            return None
        from ..secagg.aggregator import SecureAggregator

        return SecureAggregator(sizes=part.sizes, bits=pc.secagg_bits, value_range=self.secagg_range(),
                                threshold=pc.secagg_threshold, seed=seed + 4, keep_uploads=controller is not None)

    # ---------------------------------------------------------------- accounting
    def report(self, out, part) -> dict:
        from .report import local_report

        return local_report(self.cfg, out, part)

    def deployment(self) -> dict:
        return {"trust": "local", "observer": "the server (sees every upload, knows the cohort)",
                "amplification": "none", "delta": self.cfg.privacy.delta}


__all__ = ["LocalMechanism"]
