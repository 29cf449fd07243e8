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

    if pc.mechanism == "update":
        sigma = acc.calibrate_sigma_update(target_eps=pc.target_eps, delta=pc.delta,
                                           participations=pc.max_participations or cfg.rounds)
    else:
        sigma = acc.calibrate_sigma_step(target_eps=pc.target_eps, delta=pc.delta, lr=cfg.lr, clip=pc.clip,
                                         epochs=cfg.epochs, participation=1.0, rounds=cfg.rounds)
    return replace(cfg, privacy=replace(pc, sigma=sigma))


def _privacy_transforms(cfg: SimConfig, noise: NoiseSource):
    from ..privacy.mechanisms import StepLDP, UpdateLDP

    pc = cfg.privacy
    if pc.mechanism == "step":
        return StepLDP(sigma=pc.sigma, clip=pc.clip, noise=noise), None
    if pc.mechanism == "update":
        def factory(active):
            store = ledger = None
            if pc.recall:
                from ..privacy.recall import RecallStore
                store = RecallStore(num_params=active.numel())
            if pc.eps_budget is not None:
                from ..privacy.budget import UserBudgetLedger
                ledger = UserBudgetLedger(total_eps=pc.eps_budget, max_participations=pc.max_participations or
                                          cfg.rounds, rounds=cfg.rounds, num_clients=cfg.data.clients, delta=pc.delta)
            return UpdateLDP(sigma=pc.sigma, clip=pc.clip, beta=pc.beta, clients=cfg.data.clients, active=active,
                             noise=noise, recall=store, tau=pc.tau, similarity=pc.similarity, ledger=ledger,
                             sample_rate=cfg.sampled_per_round / cfg.data.clients)
        return None, factory
    return None, None


def simulate(cfg: SimConfig, *, seed: int = 0, eps_objective: str = "eps", eval_every: int = 0,
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
    step_hook, upload_factory = _privacy_transforms(cfg, noise)
    try:
        out = run_rounds(cfg, model, data, part, gen=gen, step_hook=step_hook, upload_factory=upload_factory,
                         eval_every=eval_every, on_round=progress)
    except DivergedError as e:
        return EvaluationResult(error=1.0, comm=math.inf, eps=math.inf, eps_paper=math.inf, accuracy_global=0.0,
                                omega=0, status="diverged", wall_s=time.perf_counter() - t0, rounds=cfg.rounds,
                                message=str(e))
    finally:
        noise.close()
    per_client, glob = client_accuracies(model, out.params, data, part)
    if not all(torch.isfinite(p).all() for p in out.params):
        return EvaluationResult(error=1.0, comm=math.inf, eps=math.inf, eps_paper=math.inf, accuracy_global=0.0,
                                omega=out.omega, status="diverged", wall_s=time.perf_counter() - t0,
                                rounds=cfg.rounds, message="non-finite parameters")
    from ..privacy.report import privacy_report

    priv = privacy_report(cfg, out, part)
    return EvaluationResult(
        error=float(1.0 - np.nanmean(per_client)), comm=out.comm, eps=priv.pop("eps"), eps_paper=priv.pop("eps_paper"),
        accuracy_global=glob, omega=out.omega, status="ok", wall_s=time.perf_counter() - t0, rounds=cfg.rounds,
        accuracy_curve=tuple(tuple(c) for c in out.accuracy_curve), privacy=priv)
