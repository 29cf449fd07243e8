"""simulate(SimConfig, seed) -> EvaluationResult: data → partition → model/SET → rounds → objectives."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np
import torch

from .. import hardware
from ..config import SimConfig
from ..data import load_and_partition
from ..errors import DivergedError, FedevoError
from ..models import build_model
from ..privacy.mechanism import build_mechanism
from ..privacy.noise import NoiseSource
from ..privacy.privatizer import Privatizer
from ..result import EvaluationResult
from . import continuation, stacked, stacked_settings
from .cost import train_macs
from .finite import all_finite
from .rounds import client_accuracies, run_rounds

WORST_CLIENT_SHARE = 0.10  # worst_client_error: the mean error of this share of the clients (at least one)


def _diverged(cfg: SimConfig, t0: float, message: str, omega: int = 0, engine: Optional[dict] = None,
              rounds: Optional[int] = None) -> EvaluationResult:
    """NaN/inf during training: worst objectives, never a crash."""
    return EvaluationResult(error=1.0, comm=math.inf, eps=math.inf, eps_paper=math.inf, accuracy_global=0.0,
                            omega=omega, status="diverged", wall_s=time.perf_counter() - t0,
                            rounds=cfg.rounds if rounds is None else rounds,
                            message=message, engine=engine or {})


@dataclass
class Setup:
    """One evaluation's pieces before training: the device and precision (resolved once), the mechanism
    (calibrated), data, partition, model, the seeded generator and noise stream, and the mechanism's privatizer."""
    cfg: SimConfig  # with the calibrated σ
    engine: hardware.Engine
    mech: object
    data: object
    part: object
    model: object
    gen: torch.Generator
    noise: NoiseSource  # the caller closes it
    privatizer: Privatizer


def prepare(cfg: SimConfig, *, seed: int) -> Setup:
    """Build what `simulate` trains, from `cfg` and `seed` alone (the audit reuses it to train the same run)."""
    engine = hardware.resolve(cfg.precision, cfg.device)  # 'cuda' without a GPU: one line, before any data is read
    mech = build_mechanism(cfg)  # the mechanism × trust model: calibration, transforms, aggregation, accounting
    data, part = load_and_partition(cfg.data, seed=seed)
    model = build_model(cfg.arch, data.input_shape, data.num_classes)
    cfg = mech.calibrate(cfg, dim=sum(math.prod(s) for s in model.shapes))
    gen = torch.Generator().manual_seed(seed)
    noise = NoiseSource(seed + 1)
    privatizer = mech.privatizer(data, part, noise, seed)
    return Setup(cfg=cfg, engine=engine, mech=mech, data=data, part=part, model=model, gen=gen, noise=noise,
                 privatizer=privatizer)


def rounds_run(cfg: SimConfig, rounds: int) -> SimConfig:
    """cfg as the accountant sees a run stopped after `rounds` of its planned rounds: a participation cap r above
    them is min(r, rounds) (no client can have joined more rounds than were run; SimConfig refuses r > T)."""
    pc = cfg.privacy
    if pc.max_participations is not None and pc.max_participations > rounds:
        pc = replace(pc, max_participations=rounds)
    return replace(cfg, rounds=rounds, privacy=pc)


def simulate(cfg: SimConfig, *, seed: int = 0, eval_every: int = 0,
             progress: Optional[Callable[[int], None]] = None, until: Optional[int] = None,
             resume_from: Optional[bytes] = None) -> EvaluationResult:
    """Train and measure one configuration; `engine` of the result: the device and precision it trained with.

    until: train only the first `until` of the planned cfg.rounds and measure there (ε: what those rounds spent;
    comm: per round run); the result then carries `state`, which `resume_from` continues exactly
    (fl/continuation.py)."""
    t0 = time.perf_counter()
    su = prepare(cfg, seed=seed)
    cfg = su.cfg
    if until is not None and not (isinstance(until, int) and 1 <= until <= cfg.rounds):
        raise FedevoError(f"until: expected a whole number of rounds in 1..{cfg.rounds}, got {until!r}")
    loop = None
    if resume_from is not None:
        loop = continuation.load_state(resume_from, cfg=cfg, seed=seed, setup=su)
        if until is not None and until < loop.done:
            raise FedevoError(f"until: the state is after round {loop.done}; cannot stop at round {until}")
    data, part, model, noise = su.data, su.part, su.model, su.noise
    engine = su.engine.info()
    pv = su.privatizer
    on_stacked = (su.engine.device.type != "cpu" and stacked_settings.enabled()
                  and stacked.applies(model, pv, model.compute_dtype))
    mlp = on_stacked and stacked.applies_mlp(model, pv, model.compute_dtype)  # the MLP buckets: their kernels
    if on_stacked:  # the stacked trainer's opt-ins it trained with (rounds.local_round; a CNN's: TF32 alone)
        engine.update(stacked_settings.opt_ins(cfg, su.engine.device, hooked=stacked.hooked(pv), cnn=not mlp,
                                                model=model))
    stop = cfg.rounds if until is None else until
    try:
        out = run_rounds(cfg, model, data, part, gen=su.gen, privatizer=su.privatizer, engine=su.engine,
                         eval_every=eval_every, on_round=progress, until=stop, resume=loop)
    except DivergedError as e:
        return _diverged(cfg, t0, str(e), engine=engine, rounds=stop)
    finally:
        noise.close()
    return measure(cfg, seed, su, out, t0=t0, stop=stop, engine=stacked_settings.engine_label(engine, mlp))


def measure(cfg: SimConfig, seed: int, su: Setup, out, *, t0: float, stop: int, engine: dict,
            accuracies: Optional[Callable] = None) -> EvaluationResult:
    """The EvaluationResult of a trained run (`out`: the RoundsOutcome after `stop` rounds): diverged if its
    parameters are not finite, else the error on the clients' test splits, the mechanism's report, the state
    when it stopped early. accuracies(model, params, data, part): `client_accuracies` elsewhere (the population
    path measures on its device)."""
    if not all(all_finite(p) for p in out.params):  # finite updates can still overflow the sum
        return _diverged(cfg, t0, "non-finite parameters", out.omega, engine=engine, rounds=stop)
    mech, data, part, model = su.mech, su.data, su.part, su.model
    state = None
    if stop < cfg.rounds:  # saved before measuring: the measurement only reads
        state = continuation.save_state(cfg=cfg, seed=seed, setup=su, loop=out.loop)
        mech.cfg = rounds_run(mech.cfg, stop)  # the report accounts for the rounds run, not the planned ones
    try:
        per_client, glob = (accuracies or client_accuracies)(model, out.params, data, part)
    except DivergedError as e:  # e.g. every upload lost, the initial model's output NaN: no result, never "ok"
        return _diverged(cfg, t0, str(e), out.omega, engine=engine, rounds=stop)
    priv = mech.report(out, part)
    return EvaluationResult(
        error=float(1.0 - np.nanmean(per_client)), comm=out.comm, eps=priv.pop("eps"), eps_paper=priv.pop("eps_paper"),
        accuracy_global=glob, omega=out.omega, status="ok", wall_s=time.perf_counter() - t0, rounds=stop,
        accuracy_curve=tuple(tuple(c) for c in out.accuracy_curve), privacy=priv, engine=engine, state=state,
        worst_client_error=worst_client_error(per_client), train_macs=train_macs(cfg, float(part.sizes.mean())))


def worst_client_error(per_client: np.ndarray, share: float = WORST_CLIENT_SHARE) -> Optional[float]:
    """The mean test error of the worst-served `share` of the clients (⌈share·K⌉, at least one) among those
    with a test split; None when no client has one."""
    err = np.sort(1.0 - per_client[~np.isnan(per_client)])[::-1]
    if not len(err):
        return None
    return float(err[: max(1, math.ceil(share * len(err)))].mean())
