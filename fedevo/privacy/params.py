"""The built-in mechanisms' own parameters: one frozen dataclass per mechanism (torch-free).

Each field is a flat key of the problem file's `[privacy]` table and of `--params` (`sigma`, `tau`, `signds_eps`,
...); `PrivacyConfig` (fedevo/config.py) routes each flat key to the chosen mechanism's dataclass. A dataclass
checks its own fields here; rules between fields and with the shared settings (trust, target ε, budget) are the
mechanism's (builtin.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

from ..errors import FedevoError

SIMILARITIES = ("sign", "cosine")
CLIP_RULES = ("fixed", "median")


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise FedevoError(msg)


@dataclass(frozen=True)
class NoParams:
    """A mechanism without parameters (no privacy)."""


@dataclass(frozen=True)
class StepParams:
    """Seed 004's per-step mechanism: clip each local step's batch gradient to S = `clip` (None: running median of
    the unclipped norms, `clip_rule = "median"`), add N(0, sigma²) to every active parameter."""

    sigma: float = 0.0
    clip: Optional[float] = None
    clip_rule: Literal["fixed", "median"] = "fixed"  # fixed S, or the unprivatised median (ε conditional)

    def __post_init__(self):
        check(self.clip_rule in CLIP_RULES, f"unknown clip_rule {self.clip_rule!r}; choose 'fixed' or 'median'")
        check(self.clip is None or (math.isfinite(self.clip) and self.clip > 0), f"clip must be > 0, got {self.clip}")


@dataclass(frozen=True)
class UpdateParams:
    """ULDP-FED: clip the round's update to C_k = clip·exp(−beta·k), add N(0, (sigma·C_k)²), optional recall below
    `tau` (`similarity`)."""

    sigma: float = 0.0
    clip: Optional[float] = None
    beta: float = 0.0
    tau: float = 0.0
    recall: bool = False
    similarity: Literal["sign", "cosine"] = "sign"

    def __post_init__(self):
        check(self.similarity in SIMILARITIES,
              f"unknown similarity {self.similarity!r}; choose one of {', '.join(SIMILARITIES)}")
        check(self.clip is None or (math.isfinite(self.clip) and self.clip > 0), f"clip must be > 0, got {self.clip}")
        check(self.beta >= 0, f"beta must be >= 0, got {self.beta}")
        lo, hi = (0.0, 1.0) if self.similarity == "sign" else (-1.0, 1.0)
        check(lo <= self.tau <= hi, f"tau must be in [{lo:g}, {hi:g}] for similarity {self.similarity!r}, got {self.tau}")


@dataclass(frozen=True)
class SignDSParams:
    """Seed 002: ε-LDP sign + EM-MDS dimension selection."""

    signds_eps: float = 1.0  # ε of one upload (pure ε-LDP, EM-MDS)
    signds_k: float = 0.01  # top-k size as a fraction of the active parameters
    signds_h: float = 0.01  # number of selected dimensions h as a fraction of the active parameters
    signds_lr: float = 0.01  # the server's global learning rate η_g (aggregate = η_g · weighted mean of s·1_J)

    def __post_init__(self):
        check(math.isfinite(self.signds_eps) and self.signds_eps > 0, f"signds_eps must be > 0, got {self.signds_eps}")
        check(0 < self.signds_k < 1, f"signds_k (top-k fraction) must be in (0, 1), got {self.signds_k}")
        check(0 < self.signds_h <= 1, f"signds_h (selected-dimension fraction) must be in (0, 1], got {self.signds_h}")
        check(math.isfinite(self.signds_lr) and self.signds_lr > 0, f"signds_lr must be > 0, got {self.signds_lr}")


@dataclass(frozen=True)
class AdaptiveParams(UpdateParams):
    """Seed 003: the update mechanism's parameters plus the adaptive budget and client filter."""

    adaptive_levels: int = 4  # Q quantisation levels of the non-IID degree
    adaptive_gamma: float = 1.0  # lr_i = lr · (1 + gamma · d_i)
    adaptive_kappa: float = 0.5  # budget share 1 − kappa · d_i (noise multiplier sigma / share)
    adaptive_keep: float = 0.8  # filtering buffer capacity as a fraction of the sampled clients
    adaptive_threshold: float = 0.5  # quality threshold that completes the buffer early
    adaptive_level_eps: Optional[float] = 1.0  # ε of the randomized-response level report (None: in the clear)

    def __post_init__(self):
        super().__post_init__()
        check(isinstance(self.adaptive_levels, int) and not isinstance(self.adaptive_levels, bool)
              and self.adaptive_levels >= 2, f"adaptive_levels must be an integer >= 2, got {self.adaptive_levels}")
        check(self.adaptive_gamma >= 0, f"adaptive_gamma must be >= 0, got {self.adaptive_gamma}")
        check(0 <= self.adaptive_kappa < 1, f"adaptive_kappa must be in [0, 1), got {self.adaptive_kappa}")
        check(0 < self.adaptive_keep <= 1, f"adaptive_keep must be in (0, 1], got {self.adaptive_keep}")
        check(0 <= self.adaptive_threshold <= 1, f"adaptive_threshold must be in [0, 1], got {self.adaptive_threshold}")
        check(self.adaptive_level_eps is None
              or (math.isfinite(self.adaptive_level_eps) and self.adaptive_level_eps > 0),
              f"adaptive_level_eps must be > 0 (or absent: level sent in the clear), got {self.adaptive_level_eps}")


__all__ = ["NoParams", "StepParams", "UpdateParams", "SignDSParams", "AdaptiveParams", "check", "SIMILARITIES"]
