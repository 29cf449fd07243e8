"""simulate(SimConfig, seed) -> EvaluationResult: data → partition → model/SET → rounds → objectives."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Callable, Optional

import numpy as np
import torch

from ..config import SimConfig
from ..data.datasets import load_dataset
from ..data.partition import partition
from ..errors import DivergedError
from ..models import build_model
from ..privacy.noise import NoiseSource
from ..result import EvaluationResult
from .rounds import client_accuracies, run_rounds


def calibrated(cfg: SimConfig) -> SimConfig:
    """Target-ε mode: replace σ by the smallest noise whose accountant ε meets `target_eps` in the worst case
    (a client that joins every round it may: min(r, T) for `update`, T rounds for `step`)."""
    pc = cfg.privacy
    if pc.target_eps is None:
        return cfg
    from ..privacy import accounting as acc

    if pc.mechanism in ("update", "adaptive"):  # adaptive noise is σ/b_i ≥ σ: the worst case is b_i = 1
        target, m = pc.target_eps, pc.max_participations or cfg.rounds
        if pc.mechanism == "adaptive" and pc.adaptive_level_eps is not None:  # leave room for the level reports
            target -= pc.adaptive_level_eps * m
            if target <= 0:
                from ..errors import FedevoError
                raise FedevoError(f"target_eps={pc.target_eps} is used up by the level reports "
                                  f"(adaptive_level_eps × {m} participations); lower adaptive_level_eps")
        sigma = acc.calibrate_sigma_update(target_eps=target, delta=pc.delta, participations=m)
    else:
        sigma = acc.calibrate_sigma_step(target_eps=pc.target_eps, delta=pc.delta, lr=cfg.lr, clip=pc.clip,
                                         epochs=cfg.epochs, participation=1.0, rounds=cfg.rounds)
    return replace(cfg, privacy=replace(pc, sigma=sigma))


def _privacy_transforms(cfg: SimConfig, noise: NoiseSource, seed: int, controller=None):
    from ..privacy.mechanisms import StepLDP, UpdateLDP

    pc = cfg.privacy
    if pc.mechanism == "step":
        return StepLDP(sigma=pc.sigma, clip=pc.clip, seed=seed), None
    if pc.mechanism == "signds":
        from ..privacy.signds import SignDSUpload

        return None, lambda active: SignDSUpload(eps=pc.signds_eps, k_frac=pc.signds_k, h_frac=pc.signds_h,
                                                 lr=pc.signds_lr, clients=cfg.data.clients, active=active,
                                                 seed=seed + 2)
    if pc.mechanism in ("update", "adaptive"):
        def factory(active):
            store = ledger = None
            if pc.recall:
                from ..privacy.recall import RecallStore
                store = RecallStore(num_params=active.numel())
            if pc.eps_budget is not None:
                from ..privacy.budget import UserBudgetLedger
                ledger = UserBudgetLedger(total_eps=pc.eps_budget, max_participations=pc.max_participations or
                                          cfg.rounds, rounds=cfg.rounds, num_clients=cfg.data.clients, delta=pc.delta)
            kw = dict(sigma=pc.sigma, clip=pc.clip, beta=pc.beta, clients=cfg.data.clients, active=active,
                      noise=noise, recall=store, tau=pc.tau, similarity=pc.similarity, ledger=ledger,
                      sample_rate=cfg.sampled_per_round / cfg.data.clients)
            if controller is not None:
                from ..privacy.adaptive import AdaptiveUpdateLDP
                return AdaptiveUpdateLDP(controller=controller, **kw)
            return UpdateLDP(**kw)
        return controller, factory  # adaptive: the controller is the step hook (per-client learning rate)
    return None, None


def secagg_range(cfg: SimConfig) -> float:
    """The clamp R of secure aggregation's fixed point (public): `secagg_range`, or from the mechanism —
    update-like: C0·(1 + 8·z_max) (the clipped update plus 8 noise std); signds: η_g; otherwise 16."""
    pc = cfg.privacy
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


def _extensions(cfg: SimConfig, data, part, seed: int):
    """(adaptive controller, secure aggregator) for the seed-003 / seed-002 options; None when off."""
    pc = cfg.privacy
    controller = secagg = None
    if pc.mechanism == "adaptive":
        from ..privacy.adaptive import AdaptiveController

        g = torch.Generator().manual_seed(seed + 3)
        shared = torch.randperm(len(data.y_test), generator=g)[:512]  # the shared test data the server sends
        controller = AdaptiveController(
            sizes=part.sizes, epochs=cfg.epochs, sampled_per_round=cfg.sampled_per_round, levels=pc.adaptive_levels,
            gamma=pc.adaptive_gamma, kappa=pc.adaptive_kappa, keep=pc.adaptive_keep, threshold=pc.adaptive_threshold,
            level_eps=pc.adaptive_level_eps, shared_x=data.x_test[shared], shared_y=data.y_test[shared], seed=seed + 3)
    if pc.aggregation == "secagg":
        from ..secagg.aggregator import SecureAggregator

        secagg = SecureAggregator(sizes=part.sizes, bits=pc.secagg_bits, value_range=secagg_range(cfg),
                                  threshold=pc.secagg_threshold, seed=seed + 4, keep_uploads=controller is not None)
    return controller, secagg


def _diverged(cfg: SimConfig, t0: float, message: str, omega: int = 0) -> EvaluationResult:
    """NaN/inf during training: worst objectives, never a crash."""
    return EvaluationResult(error=1.0, comm=math.inf, eps=math.inf, eps_paper=math.inf, accuracy_global=0.0,
                            omega=omega, status="diverged", wall_s=time.perf_counter() - t0, rounds=cfg.rounds,
                            message=message)


def simulate(cfg: SimConfig, *, seed: int = 0, eval_every: int = 0,
             progress: Optional[Callable[[int], None]] = None) -> EvaluationResult:
    t0 = time.perf_counter()
    cfg = calibrated(cfg)
    data = load_dataset(cfg.data.dataset, cfg.data.data_dir, cfg.data.download)
    dc = cfg.data
    part = partition(data.y_train.numpy(), data.y_test.numpy(), scheme=dc.partition, clients=dc.clients,
                     num_classes=data.num_classes, seed=seed, shards_per_client=dc.shards_per_client,
                     shard_size=dc.shard_size, dirichlet_alpha=dc.dirichlet_alpha, test_fraction=dc.test_fraction)
    model = build_model(cfg.arch, data.input_shape, data.num_classes)
    gen = torch.Generator().manual_seed(seed)
    noise = NoiseSource(seed + 1)
    controller, secagg = _extensions(cfg, data, part, seed)
    step_hook, upload_factory = _privacy_transforms(cfg, noise, seed, controller)
    try:
        out = run_rounds(cfg, model, data, part, gen=gen, step_hook=step_hook, upload_factory=upload_factory,
                         eval_every=eval_every, on_round=progress, secagg=secagg, controller=controller)
    except DivergedError as e:
        return _diverged(cfg, t0, str(e))
    finally:
        noise.close()
    if not all(torch.isfinite(p).all() for p in out.params):  # finite updates can still overflow the sum
        return _diverged(cfg, t0, "non-finite parameters", out.omega)
    per_client, glob = client_accuracies(model, out.params, data, part)
    from ..privacy.report import privacy_report

    priv = privacy_report(cfg, out, part)
    return EvaluationResult(
        error=float(1.0 - np.nanmean(per_client)), comm=out.comm, eps=priv.pop("eps"), eps_paper=priv.pop("eps_paper"),
        accuracy_global=glob, omega=out.omega, status="ok", wall_s=time.perf_counter() - t0, rounds=cfg.rounds,
        accuracy_curve=tuple(tuple(c) for c in out.accuracy_curve), privacy=priv)
