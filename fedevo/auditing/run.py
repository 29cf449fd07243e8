"""Run one configuration as the search does (same mechanism, trust model, rounds, data, seed) with canaries.

What each trust model's observer sees, and where the canaries go (docs/privacy.md, "Auditing"):

- central (DP-FedAvg): anyone who sees the released models, i.e. each round's released update
  A_t = mean(clipped) + N(0, s²), s = σ·C₀/n, n = M·(1 − upload_loss) (the deployment's arrived count). A canary
  user of the deployment adds its clipped update C_k·ũ to the *sum* of the cohort, so C_k·ũ/n to A_t: that is
  what is added, before the server's noise, through the mechanism's own server transform.
- secagg (distributed discrete Gaussian): the server sees only the decoded sum of the survivors, as an average
  whose noise std is the mechanism's `noise_std()`; a canary adds C_k·ũ/n with n = the deployment's arrivals.
  The canary is added to the decoded average (its own rounding and noise share are left out: both only add
  noise, so the audit is, if anything, stronger than the real protocol's observer).
- local: the server sees every upload. A canary user's upload is its update ±C₀·ũ passed through the
  mechanism's own upload transform (clip to C_k, add N(0, (σ·C_k)²) on the active coordinates), built by the
  mechanism for m canary clients (recall off: every canary upload is a fresh noisy one, the case the accountant
  counts), once per round of the most exposed real client's participations.

The observer is credited with everything but the noise and the canaries: the other users' clipped updates
(the accountant's worst case: DP holds against an adversary who knows every other user's data), so the audited
residual is (observed − known), projected on each canary direction. The canaries' effect on training is real
(central, secagg) but no objective of the audit run is reported or written anywhere.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import numpy as np
import torch

from ..config import SimConfig
from ..errors import FedevoError, arg
from . import estimate
from ..privacy.mechanism import AGGREGATE, STEP  # the seams an observer looks at (`Mechanism.audit_seam`)
from .canaries import CanarySet, Exposure

DEFAULT_CANARIES = 2000  # capped at the model's active parameter count Ω
DEFAULT_CONFIDENCE = 0.95
METHOD = ("one-run audit (Steinke, Nasr & Jagielski, NeurIPS 2023): ε lower bound from the guesses of a "
          "likelihood-ratio attack on canary users, each inserted with probability 1/2; ε estimate: one-shot "
          "Gaussian fit of inserted vs held-out canary statistics (Andrew et al., ICLR 2024)")

METHOD_STEP = METHOD.replace("on canary users", "on canary records (gradient canaries, each dominating the one "
                             "batch of its canary client: record level)")


@dataclass
class AuditResult:
    label: str
    trust: str
    mechanism: str
    level: str
    observer: str
    eps_upper: float
    eps_estimate: float
    eps_lower: float
    confidence: float
    delta: float
    canaries: int
    included: int
    exposure: Exposure
    bound: estimate.OneRunBound
    fit: estimate.GaussianFit
    eps_reported: float  # the audit run's own accountant (same configuration and seed as the search)
    eps_search: Optional[float] = None  # the evaluation row's ε (audits of a run's picks)
    seed: int = 0
    params: dict = field(default_factory=dict)
    statistic: np.ndarray = None  # per canary (plots)
    scores: np.ndarray = None
    included_mask: np.ndarray = None
    joined: np.ndarray = None
    observed_rounds: int = 0
    wall_s: float = 0.0
    method: str = METHOD

    estimate_interval: tuple = (math.nan, math.nan)  # bootstrap interval of eps_estimate at `confidence`
    attainable: float = math.inf  # the largest lower bound these canaries could show (a perfect attack)
    # what the ε is under, as the audit run was configured: trust, delta, population N, cohort M, sampling, rounds
    deployment: dict = field(default_factory=dict)
    accountant: str = ""  # the accountant of eps_upper, as the audit run's privacy summary names it

    @property
    def verdict(self) -> str:
        """`VIOLATION`: the lower bound (at `confidence`) exceeds the accountant's ε. `inconclusive`: the audit
        could not test the claim — no guess rule beat chance (0 guesses: no evidence either way), or even a
        perfect attack on these canaries could not show the accountant's ε (`attainable` < ε upper).
        `consistent`: it could have refuted the claim, found evidence of leakage, and stayed within it."""
        return verdict(eps_lower=self.eps_lower, eps_upper=self.eps_upper, guesses=self.bound.guesses,
                       attainable=self.attainable)

    @property
    def why(self) -> str:
        """The verdict's reason, in words."""
        if self.verdict == "VIOLATION":
            return f"lower bound {self.eps_lower:.3g} > accountant's ε {self.eps_upper:.3g}"
        if self.bound.guesses == 0:
            return "no guess rule beat chance (0 guesses): the attack found no evidence, which tests nothing"
        if self.attainable < self.eps_upper:
            return (f"{self.canaries} canaries can show at most ε {self.attainable:.3g} < the accountant's "
                    f"{self.eps_upper:.3g}: the audit cannot test this claim")
        return f"{self.bound.correct} of {self.bound.guesses} guesses right; lower bound ≤ accountant's ε"

    @property
    def estimate_above_bound(self) -> bool:
        """The whole interval of the estimate lies above the accountant's ε (a hint of a violation, not a proof:
        the estimate is not a bound)."""
        return math.isfinite(self.estimate_interval[0]) and self.estimate_interval[0] > self.eps_upper

    def summary(self) -> dict[str, Any]:
        """The JSON object of `fedevo audit --json` (inf: null)."""
        b, f, e = self.bound, self.fit, self.exposure
        return {"label": self.label, "eps_upper": self.eps_upper, "eps_estimate": self.eps_estimate,
                "eps_lower": self.eps_lower, "verdict": self.verdict, "verdict_reason": self.why,
                "eps_estimate_interval": list(self.estimate_interval),
                "estimate_above_bound": self.estimate_above_bound, "eps_attainable": self.attainable,
                "canaries": self.canaries,
                "confidence": self.confidence, "method": self.method, "trust": self.trust,
                "mechanism": self.mechanism, "level": self.level, "observer": self.observer,
                "accountant": self.accountant, "delta": self.delta,
                "eps_reported": self.eps_reported, "eps_search": self.eps_search, "seed": self.seed,
                "included": self.included, "observed_rounds": self.observed_rounds,
                "exposure": {"relation": e.relation, "rate": e.rate, "rounds": e.rounds},
                "guesses": {"guesses": b.guesses, "correct": b.correct, "in": b.k_in, "out": b.k_out,
                            "strategy": b.strategy, "tests": b.tests, "level_per_test": b.level},
                "gaussian_fit": {"mean_in": f.mean_in, "std_in": f.std_in, "mean_out": f.mean_out,
                                 "std_out": f.std_out, "separation": f.separation},
                "canaries_joined_mean": float(self.joined.mean()) if self.joined is not None else None,
                "wall_s": self.wall_s, "params": self.params, "deployment": dict(self.deployment)}


VERDICTS = ("consistent", "inconclusive", "VIOLATION")


def verdict(*, eps_lower: float, eps_upper: float, guesses: int, attainable: float) -> str:
    """The audit's verdict from its numbers (AuditResult.verdict says when each applies)."""
    if eps_lower > eps_upper:
        return "VIOLATION"
    if guesses == 0 or attainable < eps_upper:
        return "inconclusive"
    return "consistent"


def check_supported(cfg: SimConfig) -> None:
    """A mechanism is auditable when its runtime class names the seam where its observer looks (`audit_seam`)."""
    from ..privacy import registry

    pc = cfg.privacy
    if not pc.private:
        raise FedevoError(f"mechanism {pc.mechanism!r} has no privacy claim (ε = ∞): nothing to audit")
    if registry.mechanism(pc.mechanism).runtime_class(pc.trust).audit_seam is None:
        able = []
        for name in registry.mechanisms():
            spec = registry.mechanism(name)
            trusts = [t for t in spec.trusts if spec.runtime_class(t).audit_seam is not None]
            if trusts:
                able.append(f"{name!r} ({', '.join(trusts)} trust)")
        raise FedevoError(f"auditing mechanism {pc.mechanism!r} is not implemented; `fedevo audit` audits "
                          f"mechanism = {' and '.join(able)}")


def check_canaries(count: Optional[int], *, confidence: float, delta: float, cfg: Optional[SimConfig] = None) -> None:
    """Bad input before any training: a confidence outside (0, 1), too few canaries for it, or (with `cfg`) far
    more than the model has active parameters (each canary needs its own coordinate; the exact Ω is checked once
    the model is built). The last first: the bound's cost grows with the count (minutes for 10⁸)."""
    if not 0 < confidence < 1:
        raise FedevoError(f"{arg('confidence')} must be in (0, 1), got {confidence}")
    if count is None:
        return
    if count < 2:
        raise FedevoError(f"{arg('canaries')} must be >= 2, got {count}")
    if cfg is not None:
        from ..fl.cost import macs_and_params

        active = macs_and_params(cfg)[1]  # the expected active parameters (SET's Erdős–Rényi density)
        if count > 1.5 * active + 16:
            raise FedevoError(f"{arg('canaries', count)} exceeds the model's ~{active:,.0f} active parameters (each "
                              f"canary needs its own coordinates)")
    best = estimate.max_attainable(m=count, delta=delta, confidence=confidence)
    if best < 1.0:
        need = count
        while estimate.max_attainable(m=need, delta=delta, confidence=confidence) < 1.0:
            need = max(need + 1, int(need * 1.25))
        raise FedevoError(f"{count} canaries are too few for {confidence:g} confidence: even if every guess "
                          f"were right the lower bound would be {best:.2f} < 1; use {arg('canaries', need)} or more")


def exposure_of(mech, cfg: SimConfig, arrivals: Optional[np.ndarray] = None) -> Exposure:
    """What the mechanism's observer sees of one user: its neighbouring relation, the rate at which a user joins
    a round, and for how many rounds (the mechanism's own `exposure`)."""
    return Exposure(*mech.exposure(arrivals))


class ObservedPrivatizer:
    """Wraps a run's privatizer (fedevo/privacy/privatizer.py) for the audit: keeps the sum and count of this
    round's processed uploads (the part of the aggregate an observer who knows every other user's data can
    compute) and hands the aggregate to `observe(aggregate, active, server)` in place of the server transform.
    Everything else is the mechanism's own."""

    def __init__(self, inner, observe: Callable, *, keep_known: bool):
        self.inner, self.observe, self.keep_known = inner, observe, keep_known
        self.sum: Optional[torch.Tensor] = None
        self.count = 0
        self.round = 0

    def begin_round(self, t: int, **kw) -> None:
        self.sum, self.count, self.round = None, 0, t
        self.inner.begin_round(t, **kw)

    def upload(self, flat, clients, omega):
        out, cost = self.inner.upload(flat, clients, omega)
        if self.keep_known:
            s = out.sum(0, dtype=torch.float64)
            self.sum = s if self.sum is None else self.sum + s
            self.count += len(clients)
        return out, cost

    def mean(self) -> torch.Tensor:
        return (self.sum / max(self.count, 1)).to(torch.float32)

    def server(self, aggregate, active):
        return self.observe(aggregate, active, self.inner.server)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def audit_config(cfg: SimConfig, *, seed: int = 0, canaries: Optional[int] = None,
                 confidence: float = DEFAULT_CONFIDENCE, label: str = "", params: Optional[dict] = None,
                 eps_search: Optional[float] = None, on_round: Optional[Callable[[int], None]] = None) -> AuditResult:
    """Train `cfg` once with seed `seed` and canaries inserted where its trust model's observer looks."""
    from ..errors import DivergedError
    from ..fl.rounds import run_rounds
    from ..fl.simulate import prepare

    t0 = time.perf_counter()
    check_supported(cfg)
    check_canaries(canaries, confidence=confidence, delta=cfg.privacy.delta, cfg=cfg)
    su = prepare(cfg, seed=seed)  # the same data, partition, model, calibration and streams as the evaluation
    cfg, mech, data, part, model, noise = su.cfg, su.mech, su.data, su.part, su.model, su.noise
    pc = cfg.privacy
    seam = mech.audit_seam
    local = seam != AGGREGATE  # the observer sees each upload (local trust), not only the aggregate
    state: dict[str, Any] = {"actives": []}
    exposure = None if local else exposure_of(mech, cfg)
    if not local:
        n_dep = mech.arrived  # the deployment's arrivals
        s_claim = pc.sigma * pc.clip / n_dep  # the accounted noise std on the average (honest shares for secagg)
    cs: dict[str, CanarySet] = {}

    def canary_set(omega: int, exp: Exposure) -> CanarySet:
        if "set" not in cs:
            m = canaries if canaries is not None else min(DEFAULT_CANARIES, omega)
            if m > omega:
                raise FedevoError(f"{arg('canaries', m)} exceeds the model's {omega} active parameters (each canary "
                                  f"needs its own coordinates); use at most {omega}")
            check_canaries(m, confidence=confidence, delta=pc.delta)
            cs["set"] = CanarySet(count=m, exposure=exp, seed=seed + 17)
        return cs["set"]

    def observe(agg: torch.Tensor, active: torch.Tensor, server: Callable) -> torch.Tensor:
        if local:  # the local observer looks at uploads: only the active coordinates are needed here
            state["actives"].append(active.clone())
            return server(agg, active)
        t = pv.round  # this round (1-based); a round that aggregates nothing releases nothing
        c = canary_set(int((active > 0).sum()), exposure)
        joins = c.join(t)
        d = c.directions(active)
        ck = pc.clip * np.exp(-pc.beta * c.joined)  # each canary's clip at its next participation
        agg = server(agg + c.embed(d, c.signs(joins) * ck / n_dep), active)
        if t <= exposure.rounds:
            resid = agg - pv.mean()
            c.record(z=c.project(d, resid) / s_claim, mu=ck / n_dep / s_claim, joins=joins)
        return agg

    pv = ObservedPrivatizer(su.privatizer, observe, keep_known=not local)
    try:
        out = run_rounds(cfg, model, data, part, gen=su.gen, privatizer=pv, engine=su.engine, on_round=on_round)
    except DivergedError as e:
        raise FedevoError(f"{label or 'the configuration'} diverged during the audit run ({e}); nothing to "
                          "audit") from None
    finally:
        noise.close()
    rep = mech.report(out, part)
    eps_reported = float(rep["eps"])
    if local:
        if not state["actives"]:
            raise FedevoError("no round of the audit run aggregated anything: nothing to audit")
        transform = su.privatizer.transform
        exposure = exposure_of(mech, cfg, out.arrivals if transform is None else transform.joined)
        run_local = _step_canaries if seam == STEP else _local_canaries
        c, eps_upper = run_local(mech, cfg, out, state["actives"], exposure, canary_set, seed)
        eps_upper = eps_reported if eps_upper is None else eps_upper
    else:
        c, eps_upper = canary_set(out.omega, exposure), eps_reported
    scores, stat = c.scores(), c.statistic()
    bound = estimate.eps_lower_one_run(scores=scores, included=c.included, delta=pc.delta, confidence=confidence)
    fit = estimate.eps_estimate_gaussian(stat_in=stat[c.included], stat_out=stat[~c.included], delta=pc.delta)
    interval = estimate.estimate_interval(stat_in=stat[c.included], stat_out=stat[~c.included], delta=pc.delta,
                                          confidence=confidence, seed=seed)
    attainable = estimate.max_attainable(m=c.m, delta=pc.delta, confidence=confidence)
    return AuditResult(label=label, trust=mech.trust, mechanism=pc.mechanism, level=str(rep.get("level", "user")),
                       observer=str(rep.get("observer", "")), accountant=str(rep.get("accountant", "")),
                       eps_upper=eps_upper, eps_estimate=fit.eps_estimate,
                       eps_lower=bound.eps_lower, confidence=confidence, delta=pc.delta, canaries=c.m,
                       included=int(c.included.sum()), exposure=exposure, bound=bound, fit=fit,
                       eps_reported=eps_reported, eps_search=eps_search, seed=seed, params=dict(params or {}),
                       statistic=stat, scores=scores, included_mask=c.included.copy(), joined=c.joined.copy(),
                       observed_rounds=c.observed_rounds, wall_s=time.perf_counter() - t0,
                       estimate_interval=interval, attainable=attainable,
                       method=METHOD_STEP if seam == STEP else METHOD,
                       deployment={"trust": mech.trust, "delta": pc.delta, "population": int(cfg.population),
                                   "cohort": int(cfg.cohort), "sampling": mech.deployment().get("sampling"),
                                   "rounds": int(cfg.rounds)})  # sampling: where the trust model draws cohorts


BLOCK_VALUES = 1 << 24  # canary uploads privatised per call: as many rows of P floats as fit in 64 MB


def block_rows(m: int, size: int) -> int:
    """Canary rows per call for m canaries over a flat parameter vector of `size` floats."""
    return max(1, min(m, BLOCK_VALUES // max(size, 1)))


def _local_canaries(mech, cfg: SimConfig, out, actives: list, exposure: Exposure, canary_set, seed: int):
    """Canary users' uploads through the mechanism's own upload transform, for as many rounds as the most
    exposed real client took part in; returns the canaries and the accountant's ε for their exposure."""
    from ..privacy import accounting as acc
    from ..privacy.mechanism import build_mechanism
    from ..privacy.noise import NoiseSource

    pc = cfg.privacy
    c = canary_set(out.omega, exposure)
    ccfg = replace(cfg, data=replace(cfg.data, clients=c.m), privacy=replace(pc, recall=False))
    cmech = build_mechanism(ccfg)
    cnoise = NoiseSource(seed + 19)
    try:
        _, cfactory = cmech.client_transforms(cnoise, seed + 19)
        trans = None
        ids = np.arange(c.m)
        for k in range(exposure.rounds):
            active = actives[min(k, len(actives) - 1)]
            if trans is None:
                trans = cfactory(active)
            else:
                trans.set_active(active)
            trans.begin_round(k + 1)
            joins = c.join(k + 1)
            d = c.directions(active)
            ck = trans.thresholds(ids)  # C_k of this participation (before the transform counts it)
            weights = c.signs(joins) * trans.clip0  # ±C₀·ũ: the transform clips to C_k
            proj = np.empty(c.m)
            rows_per = block_rows(c.m, active.numel())
            for s in range(0, c.m, rows_per):
                blk = slice(s, min(s + rows_per, c.m))
                rows = c.rows(d, weights, blk)
                up, _ = trans(rows, ids[blk], out.omega)
                proj[blk] = c.project_rows(d, up, blk)
            c.record(z=proj / (trans.sigma * ck), mu=np.full(c.m, 1.0 / trans.sigma), joins=joins)
    finally:
        cnoise.close()
    eps = acc.eps_update_effective(noise_multiplier=trans.effective_sigma() if trans is not None else None,
                                   delta=pc.delta)
    return c, float(eps)


GRADIENT_SCALE = 1e3  # a canary record's gradient norm, in units of the clip S: clipping leaves exactly S·ũ


def _step_canaries(mech, cfg: SimConfig, out, actives: list, exposure: Exposure, canary_set, seed: int):
    """Record-level canaries of the step mechanism: m canary clients, each holding one batch (one local step per
    epoch, every step sees the canary record) whose batch gradient the canary record dominates: ±G·ũ with
    G ≫ S, so the clipped step is ∓lr·S·ũ (replace one record: included +, replaced by its mirror −). The
    steps go through the mechanism's own hook (`StepLDP`: clip to S, add N(0, σ²) on the active weights after
    every step), for as many rounds as the most exposed real client's uploads and at each round's clip S;
    the observer (the server) sees each canary client's upload, the sum of its E steps."""
    from ..privacy.mechanisms import StepLDP

    pc = cfg.privacy
    c = canary_set(out.omega, exposure)
    clips = list(mech.run.step_hook.clips) or [pc.clip or 1.0]
    E, lr = cfg.epochs, cfg.lr
    for k in range(exposure.rounds):
        active = actives[min(k, len(actives) - 1)]
        S = float(clips[min(k, len(clips) - 1)])
        joins = c.join(k + 1)
        d = c.directions(active)
        weights = c.signs(joins) * GRADIENT_SCALE * S
        proj = np.empty(c.m)
        rows_per = block_rows(c.m, active.numel())
        for s in range(0, c.m, rows_per):
            blk = slice(s, min(s + rows_per, c.m))
            grad = c.rows(d, weights, blk)
            hook = StepLDP(sigma=pc.sigma, clip=S, seed=seed + 23).for_chunk(seed + 1000 * (k + 1) + s)
            try:
                delta = torch.zeros_like(grad)
                live = torch.ones(len(grad), dtype=torch.bool)  # every canary client steps
                for _ in range(E):  # the hook reads the gradient (norms), never writes it
                    coef = hook.coefficients([grad], live, lr)
                    delta.addcmul_(grad, coef.unsqueeze(1), value=-1.0)
                    hook.after_step([delta], [active], live)
            finally:
                hook.noise.close()
            proj[blk] = c.project_rows(d, delta, blk)
        # the upload moves by −lr·S·E·sign along ũ, the noise by N(0, σ²·E): z = −proj/(σ·√E), μ = lr·S·√E/σ
        c.record(z=-proj / (pc.sigma * math.sqrt(E)), mu=np.full(c.m, lr * S * math.sqrt(E) / pc.sigma),
                 joins=joins)
    return c, None  # the accountant's ε is the run's own: the canaries meet the most exposed client's rounds


__all__ = ["AuditResult", "DEFAULT_CANARIES", "DEFAULT_CONFIDENCE", "ObservedPrivatizer", "METHOD", "audit_config",
           "check_canaries", "check_supported", "exposure_of"]
