"""Typed, frozen, validated configurations.

Built once at the edge (CLI, problem file + genes) and passed down; nothing below reads argparse/typer state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, Optional, Union

from .errors import FedevoError

MECHANISMS = ("none", "step", "update")
SIMILARITIES = ("sign", "cosine")
PARTITIONS = ("iid", "shards", "dirichlet")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise FedevoError(msg)


@dataclass(frozen=True)
class MLPArch:
    """Fully-connected net: `layers` hidden layers of `units` ReLU units."""

    layers: int = 2
    units: int = 200

    def __post_init__(self):
        _check(self.layers >= 0, f"layers must be >= 0, got {self.layers}")
        _check(self.units >= 1, f"units must be >= 1, got {self.units}")


@dataclass(frozen=True)
class CNNArch:
    """`conv_layers` conv blocks (conv k×k, ReLU, 2×2 max-pool while the map is ≥ 4 px; `channels` doubling per
    block) then an MLP head of `layers` × `units`."""

    conv_layers: int = 2
    channels: int = 32
    kernel: int = 5
    layers: int = 1
    units: int = 128

    def __post_init__(self):
        _check(1 <= self.conv_layers <= 4, f"conv_layers must be in [1, 4], got {self.conv_layers}")
        _check(self.channels >= 1, f"channels must be >= 1, got {self.channels}")
        _check(self.kernel in (1, 3, 5, 7) or (self.kernel >= 1 and self.kernel % 2 == 1),
               f"kernel must be a positive odd integer, got {self.kernel}")
        _check(self.layers >= 0, f"layers must be >= 0, got {self.layers}")
        _check(self.units >= 1, f"units must be >= 1, got {self.units}")


Arch = Union[MLPArch, CNNArch]


@dataclass(frozen=True)
class PrivacyConfig:
    """Local DP settings.

    mechanism: 'none' (plain FedAvg), 'step' (seed 004: clip each local step's batch gradient to S, add
    N(0, sigma^2) to every active parameter) or 'update' (ULDP-FED: clip the round's update to
    C_k = clip * exp(-beta * k), add N(0, (sigma * C_k)^2), optional recall below tau).
    clip: S for 'step' (None = running median of unclipped gradient norms), C0 for 'update'.
    """

    mechanism: Literal["none", "step", "update"] = "none"
    sigma: float = 0.0
    clip: Optional[float] = None
    beta: float = 0.0
    tau: float = 0.0
    recall: bool = False
    similarity: Literal["sign", "cosine"] = "sign"
    max_participations: Optional[int] = None  # r of ULDP-FED (None: unlimited)
    delta: float = 1e-4
    eps_budget: Optional[float] = None  # per-user budget for the ULDP-FED ledger (None: no ledger)
    target_eps: Optional[float] = None  # calibrate sigma so that the accountant's ε meets this (None: use sigma)

    def __post_init__(self):
        _check(self.mechanism in MECHANISMS,
               f"unknown mechanism {self.mechanism!r}; choose one of {', '.join(MECHANISMS)}")
        _check(0.0 < self.delta < 1.0, f"delta must be in (0, 1), got {self.delta}")
        _check(self.similarity in SIMILARITIES,
               f"unknown similarity {self.similarity!r}; choose one of {', '.join(SIMILARITIES)}")
        _check(self.target_eps is None or (math.isfinite(self.target_eps) and self.target_eps > 0),
               f"target_eps must be > 0, got {self.target_eps}")
        _check(self.target_eps is None or self.eps_budget is None, "give target_eps or eps_budget, not both")
        _check(self.mechanism != "none" or (self.target_eps is None and self.eps_budget is None),
               "target_eps / eps_budget need a privacy mechanism ('step' or 'update'), not 'none'")
        _check(self.eps_budget is None or self.mechanism == "update",
               "eps_budget (the ULDP-FED per-user ledger) needs mechanism 'update'")
        _check(not (self.mechanism == "step" and self.target_eps is not None and self.clip is None),
               "target_eps with the step mechanism needs a fixed clip S (the median clip is data-dependent)")
        if self.mechanism != "none" and self.target_eps is None and self.eps_budget is None:
            _check(math.isfinite(self.sigma) and self.sigma > 0,
                   f"sigma must be > 0 for mechanism {self.mechanism!r}, got {self.sigma} "
                   "(use mechanism 'none' for no noise)")
        _check(self.clip is None or (math.isfinite(self.clip) and self.clip > 0),
               f"clip must be > 0, got {self.clip}")
        _check(self.beta >= 0, f"beta must be >= 0, got {self.beta}")
        lo, hi = (0.0, 1.0) if self.similarity == "sign" else (-1.0, 1.0)
        _check(lo <= self.tau <= hi,
               f"tau must be in [{lo:g}, {hi:g}] for similarity {self.similarity!r}, got {self.tau}")
        _check(self.max_participations is None or self.max_participations >= 1,
               f"max_participations (r) must be >= 1, got {self.max_participations}")
        _check(self.eps_budget is None or self.eps_budget > 0, f"eps_budget must be > 0, got {self.eps_budget}")
        if self.mechanism == "update":
            _check(self.clip is not None, "mechanism 'update' needs a clip (C0)")


@dataclass(frozen=True)
class DataConfig:
    dataset: str = "digits"
    partition: Literal["iid", "shards", "dirichlet"] = "iid"
    clients: int = 20
    shards_per_client: int = 2
    shard_size: Optional[int] = None  # None: n_train // (clients * shards_per_client)
    dirichlet_alpha: float = 0.5
    test_fraction: float = 1.0  # fraction of the test set spread over the clients' test splits
    data_dir: Optional[str] = None
    download: bool = False

    def __post_init__(self):
        _check(self.partition in PARTITIONS,
               f"unknown partition {self.partition!r}; choose one of {', '.join(PARTITIONS)}")
        _check(self.clients >= 1, f"clients must be >= 1, got {self.clients}")
        _check(self.shards_per_client >= 1, f"shards_per_client must be >= 1, got {self.shards_per_client}")
        _check(self.shard_size is None or self.shard_size >= 1, f"shard_size must be >= 1, got {self.shard_size}")
        _check(self.dirichlet_alpha > 0, f"dirichlet_alpha must be > 0, got {self.dirichlet_alpha}")
        _check(0 < self.test_fraction <= 1, f"test_fraction must be in (0, 1], got {self.test_fraction}")


@dataclass(frozen=True)
class SimConfig:
    """One federated training run: what an individual of the search decodes to."""

    data: DataConfig = field(default_factory=DataConfig)
    arch: Arch = field(default_factory=MLPArch)
    rounds: int = 5
    epochs: int = 5
    batch_size: int = 32
    lr: float = 0.05
    participation: float = 0.1
    alpha: Optional[float] = None  # SET density parameter; None = dense
    xi: float = 0.0  # SET prune/regrow fraction per round
    upload_loss: float = 0.3
    privacy: PrivacyConfig = field(default_factory=PrivacyConfig)
    chunk_clients: int = 10  # clients trained together (cache-sized chunks)
    precision: Literal["fp32", "bf16"] = "fp32"  # matmul precision of local training (master weights stay fp32)

    def __post_init__(self):
        _check(self.rounds >= 1, f"rounds must be >= 1, got {self.rounds}")
        _check(self.epochs >= 1, f"epochs must be >= 1, got {self.epochs}")
        _check(self.batch_size >= 1, f"batch_size must be >= 1, got {self.batch_size}")
        _check(math.isfinite(self.lr) and self.lr > 0, f"lr must be > 0, got {self.lr}")
        _check(0 < self.participation <= 1, f"participation must be in (0, 1], got {self.participation}")
        _check(self.alpha is None or self.alpha > 0, f"alpha must be > 0, got {self.alpha}")
        _check(0 <= self.xi < 1, f"xi must be in [0, 1), got {self.xi}")
        _check(0 <= self.upload_loss < 1, f"upload_loss must be in [0, 1), got {self.upload_loss}")
        _check(self.chunk_clients >= 1, f"chunk_clients must be >= 1, got {self.chunk_clients}")
        _check(self.precision in ("fp32", "bf16"), f"precision must be 'fp32' or 'bf16', got {self.precision!r}")
        r = self.privacy.max_participations
        _check(r is None or r <= self.rounds, f"max_participations r={r} exceeds rounds T={self.rounds}")

    @property
    def sampled_per_round(self) -> int:
        return max(math.ceil(self.participation * self.data.clients - 1e-9), 1)

    def with_(self, **kw) -> "SimConfig":
        return replace(self, **kw)
