"""Central trust (DP-FedAvg, McMahan et al. 2018): clients clip their round update to C (ULDP-FED's decayed
C_k = C₀·e^(−β·k) ≤ C₀ when β > 0), the server sums the cohort's clipped updates, adds N(0, (σ·C₀)²) once per
round and releases the model. User level; the observer is anyone who sees the released models, not the server.

Deployment scale (pfl-research's `noise_cohort_size`): the deployment averages M·(1 − upload_loss) arrived updates
per round, so its noise std on the averaged update is σ·C₀ / (M·(1 − upload_loss)). The simulation averages its
own (fewer) arrived clients and adds exactly that std: the same noise, a noisier signal — a slightly pessimistic
estimate of the deployment's utility.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..config import SimConfig
from . import accounting as acc
from .mechanism import AGGREGATE, Mechanism
from .privatizer import UploadTransform

NEIGHBOURING = {"poisson": "add/remove one user", "fixed": "replace one user",
                "none": "zero-out one user (its update replaced by zero: the cohort is public)"}
ACCOUNTANT = {"poisson": "PLD (dp-accounting), Poisson-subsampled Gaussian",
              "fixed": "RDP (dp-accounting), Gaussian sampled without replacement (Wang, Balle & Kasiviswanathan), or "
                      "the analytic Gaussian of the accounted rounds unamplified where smaller (a cohort near the "
                      "population, a participation cap)",
              "none": "analytic Gaussian (dp-accounting; exact), no amplification"}


class ClipUpload(UploadTransform):
    """Upload transform of central and distributed trust: clip each update to C_k = C₀·e^(−β·k), no noise."""

    def __init__(self, *, clip: float, beta: float, clients: int):
        self.clip0, self.beta = clip, beta
        self.joined = np.zeros(clients, dtype=np.int64)
        self.clips_used: list[float] = []

    def __call__(self, deltas: torch.Tensor, clients: np.ndarray, omega: int):
        ck = self.clip0 * np.exp(-self.beta * self.joined[clients])
        norms = torch.linalg.vector_norm(deltas, dim=1)
        deltas.mul_((torch.as_tensor(ck, dtype=deltas.dtype, device=deltas.device) / norms.clamp_min(1e-12)).clamp_(max=1.0).unsqueeze(1))
        self.joined[clients] += 1
        self.clips_used.extend(ck.tolist())
        return deltas, np.full(len(clients), float(omega))

    def summary(self) -> dict:
        from .mechanisms import clip_stats

        return {"uploads": int(self.joined.sum()), "participations_max": int(self.joined.max(initial=0)),
                **clip_stats(self.clips_used)}


def accounted_rounds(cfg: SimConfig) -> int:
    """Rounds a user may join: T, or r when the problem caps participations."""
    return min(cfg.privacy.max_participations or cfg.rounds, cfg.rounds)


class CentralGaussian(Mechanism):
    trust = "central"
    uniform_weights = True  # each user's clipped update counts once: sensitivity C₀ on the sum
    audit_seam = AGGREGATE

    @property
    def arrived(self) -> float:
        """The deployment's arrived updates per round, M·(1 − upload_loss)."""
        return self.cfg.cohort * (1.0 - self.cfg.upload_loss)

    def exposure(self, arrivals=None) -> tuple[str, float, int]:
        """Anyone who sees the released models: Poisson add/remove at q = M/N over T rounds, a fixed cohort
        replace-one over the accounted rounds, no sampling add/remove at rate 1."""
        c, pc = self.cfg, self.cfg.privacy
        if pc.sampling == "poisson":
            return "add/remove", c.cohort / c.population, c.rounds
        if pc.sampling == "fixed":  # a secret cohort: a user may join any of the T rounds, cap or not
            return "replace", c.cohort / c.population, c.rounds
        return "zero-out", 1.0, accounted_rounds(c)

    def eps_for(self, sigma: float) -> float:
        """Poisson: amplified over all T rounds (a user may join any; a cap r does not lower it). A fixed cohort:
        amplified over all T rounds too, or, with a cap r < T, its r participations as replace-one Gaussians
        without amplification, whichever is smaller: both hold. (The cap's r amplified rounds, as before
        2026-11-27, did not: a capped user may still be in any of the T cohorts, so its chance of joining at all
        is ~1 − (1 − q)^T, not 1 − (1 − q)^r — 0.163 reported where a post-processing attack shows ≥ 0.351 at
        q = 0.1, T = 10, z = 8, r = 1.) No sampling: every user in every round, r of them counted."""
        c, pc = self.cfg, self.cfg.privacy
        if pc.sampling == "none":
            return acc.eps_central(noise_multiplier=sigma, population=c.population, cohort=c.cohort,
                                   rounds=accounted_rounds(c), delta=pc.delta, sampling="none")
        eps = acc.eps_central(noise_multiplier=sigma, population=c.population, cohort=c.cohort, rounds=c.rounds,
                              delta=pc.delta, sampling=pc.sampling)
        if pc.sampling == "fixed" and accounted_rounds(c) < c.rounds:  # replace-one: sensitivity 2C, z/2
            capped = acc.eps_gaussian(noise_multiplier=sigma / 2.0, sample_rate=1.0, steps=accounted_rounds(c),
                                      delta=pc.delta)
            eps = min(eps, capped)
        return eps

    def sigma_for_target(self, cfg: SimConfig, *, dim: int) -> float:
        return acc.solve_noise(eps_of=self.eps_for, target_eps=cfg.privacy.target_eps)

    def upload_words(self, omega: int) -> float:
        """Every sampled client uploads its clipped Ω parameters (the noise is the server's)."""
        return float(omega)

    def planned_eps(self) -> dict:
        """The accountant's ε at the planned T from σ (or the σ calibrated for the target), q = M/N and δ: the
        same call `report` makes."""
        pc = self.cfg.privacy
        sigma = pc.params.sigma if pc.target_eps is None else self.sigma_for_target(self.cfg, dim=0)
        return {"eps": self.eps_for(sigma), "eps_paper": math.nan}

    def noise_std(self) -> float:
        """Std of the server's noise on the deployment's averaged update."""
        c = self.cfg
        return c.privacy.params.sigma * c.privacy.params.clip / self.arrived

    def client_transforms(self, noise, seed: int, controller=None):
        c = self.cfg
        return None, lambda active: ClipUpload(clip=c.privacy.params.clip, beta=c.privacy.params.beta, clients=c.data.clients)

    def server_transform(self, seed: int):
        g = torch.Generator().manual_seed((seed + 5) % (1 << 63))
        std = self.noise_std()

        def add_noise(agg: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
            return agg.add_(torch.randn(agg.shape, generator=g).mul_(std).mul_(active))
        return add_noise

    def deployment(self) -> dict:
        c, pc = self.cfg, self.cfg.privacy
        q = c.cohort / c.population
        amp = {"poisson": f"Poisson sampling, q = M/N = {q:.3g} (the cohort must be secret)",
               "fixed": f"fixed-size cohort of M out of N (q = {q:.3g}, secret)",
               "none": "none (the cohort is known)"}[pc.sampling]
        return {"trust": "central", "population": c.population, "cohort": c.cohort, "sampling": pc.sampling,
                "delta": pc.delta, "observer": "anyone who sees the released models (the server is trusted)",
                "neighbouring": NEIGHBOURING[pc.sampling], "amplification": amp,
                "accountant": ACCOUNTANT[pc.sampling]}

    def report(self, out, part) -> dict:
        pc = self.cfg.privacy
        rep = {"mechanism": pc.mechanism, **self.deployment(), "level": "user", "sigma": pc.params.sigma,
               "clip": pc.params.clip, "noise_std_on_average": self.noise_std(), "eps_conditional": False,
               "not_covered": "a server that leaks the individual clipped updates (it is trusted here); attacks on "
                              "the floating-point noise sampler"}
        rep.update(self.run.transform.summary())
        rep.update(eps=self.eps_for(pc.params.sigma), eps_paper=math.nan)
        return rep


__all__ = ["CentralGaussian", "ClipUpload", "accounted_rounds"]
