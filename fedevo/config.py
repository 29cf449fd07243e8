"""Typed, frozen, validated configurations.

Built once at the edge (CLI, problem file + genes) and passed down; nothing below reads argparse/typer state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal, Optional, Union

from .errors import FedevoError

MECHANISMS = ("none", "step", "update", "signds", "adaptive")
AGGREGATIONS = ("plain", "secagg")
UPDATE_LIKE = ("update", "adaptive")  # mechanisms built on the ULDP-FED update transform
SIMILARITIES = ("sign", "cosine")
PARTITIONS = ("iid", "shards", "dirichlet")
TRUSTS = ("local", "secagg", "central")  # who must be trusted; docs/privacy.md's threat-model table
SAMPLINGS = ("poisson", "fixed", "none")  # how a deployment draws its cohort (central trust)
DEVICES = ("auto", "cpu", "cuda")  # where local training runs (fedevo/hardware.py `device`)


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


USER_INITS = ("module", "fedevo")  # UserArch.init


@dataclass(frozen=True)
class UserArch:
    """The user's model (issue 26): `spec` names a factory, "python:/abs/path/file.py:function" (the problem
    file's relative path already resolved) or "package.module:function", called as
    `function(input_shape=..., num_classes=..., **kwargs)`; `kwargs`: the keyword arguments ((name, value) pairs,
    sorted by name: hashable and picklable for Ray). `init`: "module" (the module's own initialisation, torch's
    global generator seeded from the evaluation's seed) or "fedevo" (Linear and Conv2d weights and biases drawn
    as the built-in models draw theirs: a user MLP then equals the built-in MLP bit for bit). `sparse_conv`: SET
    masks Conv2d weights too (Linear weights always, when alpha is set). docs/models.md."""

    spec: str
    kwargs: tuple = ()
    init: str = "module"
    sparse_conv: bool = False

    def __post_init__(self):
        _check(isinstance(self.spec, str) and ":" in self.spec,
               f"model must be 'mlp', 'cnn', 'python:path/to/file.py:function' or 'package.module:function', "
               f"got {self.spec!r}")
        _check(self.init in USER_INITS, f"model_init must be 'module' or 'fedevo', got {self.init!r}")
        _check(isinstance(self.sparse_conv, bool), f"sparse_conv must be true or false, got {self.sparse_conv!r}")

    @property
    def kwargs_dict(self) -> dict:
        return dict(self.kwargs)


Arch = Union[MLPArch, CNNArch, UserArch]


@dataclass(frozen=True)
class PrivacyConfig:
    """Local DP settings.

    mechanism: 'none' (plain FedAvg), 'step' (seed 004: clip each local step's batch gradient to S, add
    N(0, sigma^2) to every active parameter) or 'update' (ULDP-FED: clip the round's update to
    C_k = clip * exp(-beta * k), add N(0, (sigma * C_k)^2), optional recall below tau), 'signds' (seed 002:
    ε-LDP sign + EM-MDS dimension selection, `signds_*`) or 'adaptive' (seed 003: 'update' with per-client
    learning rate and budget share from a quantised non-IID degree, and a client-filtering buffer, `adaptive_*`).
    clip: S for 'step' (None = running median of unclipped gradient norms), C0 for 'update' / 'adaptive'.
    aggregation: 'plain' (FedAvg weighted mean) or 'secagg' (pairwise-mask secure aggregation, `secagg_*`).
    docs/secagg_signds_adaptive.md describes the new options.
    """

    mechanism: Literal["none", "step", "update", "signds", "adaptive"] = "none"
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
    # secure aggregation (seed 002, Bonawitz et al.)
    aggregation: Literal["plain", "secagg"] = "plain"
    secagg_bits: int = 32  # k: masked arithmetic in Z_{2^k}; a masked word costs k/32 parameter-equivalents
    secagg_range: Optional[float] = None  # clamp |x| <= R before fixed-point encoding (None: from the mechanism)
    secagg_threshold: float = 0.5  # Shamir threshold t = ceil(theta * n) of the n sampled clients
    secagg_neighbours: Optional[Union[int, str]] = None  # SecAgg+ graph degree d (even), "auto", None: complete
    # SignDS (seed 002)
    signds_eps: float = 1.0  # ε of one upload (pure ε-LDP, EM-MDS)
    signds_k: float = 0.01  # top-k size as a fraction of the active parameters
    signds_h: float = 0.01  # number of selected dimensions h as a fraction of the active parameters
    signds_lr: float = 0.01  # the server's global learning rate η_g (aggregate = η_g · weighted mean of s·1_J)
    # adaptive budget + client filtering (seed 003)
    adaptive_levels: int = 4  # Q quantisation levels of the non-IID degree
    adaptive_gamma: float = 1.0  # lr_i = lr · (1 + gamma · d_i)
    adaptive_kappa: float = 0.5  # budget share 1 − kappa · d_i (noise multiplier sigma / share)
    adaptive_keep: float = 0.8  # filtering buffer capacity as a fraction of the sampled clients
    adaptive_threshold: float = 0.5  # quality threshold that completes the buffer early
    adaptive_level_eps: Optional[float] = 1.0  # ε of the randomized-response level report (None: in the clear)
    # trust model (fedevo/privacy/trust.py): 'local' (each client noises its own upload: the mechanisms above),
    # 'central' (DP-FedAvg: the server noises the sum of clipped updates) or 'secagg' (distributed discrete
    # Gaussian under secure aggregation). central/secagg are user-level and use the `update` mechanism's clip.
    trust: Literal["local", "secagg", "central"] = "local"
    sampling: Literal["poisson", "fixed", "none"] = "poisson"  # central: how the deployment's cohort is drawn
    clip_rule: Literal["fixed", "median"] = "fixed"  # step: fixed S, or the unprivatised median (ε conditional)

    def __post_init__(self):
        _check(self.trust in TRUSTS, f"unknown trust {self.trust!r}; choose one of {', '.join(TRUSTS)}")
        _check(self.sampling in SAMPLINGS,
               f"unknown sampling {self.sampling!r}; choose one of {', '.join(SAMPLINGS)}")
        _check(self.clip_rule in ("fixed", "median"),
               f"unknown clip_rule {self.clip_rule!r}; choose 'fixed' or 'median'")
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
        _check(not (self.mechanism == "step" and self.clip_rule == "fixed" and self.clip is None),
               "mechanism 'step' needs a fixed clip S (or clip_rule = \"median\": the unprivatised median of the "
               "gradient norms, which makes ε conditional on it)")
        _check(not (self.mechanism == "step" and self.target_eps is not None and self.clip_rule == "median"),
               "target_eps with the step mechanism needs a fixed clip S (the median clip is data-dependent)")
        _check(self.mechanism != "signds" or self.target_eps is None,
               "target_eps is not supported with mechanism 'signds'; set signds_eps (the ε of one upload)")
        if self.mechanism not in ("none", "signds") and self.target_eps is None and self.eps_budget is None:
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
        if self.mechanism in UPDATE_LIKE:
            _check(self.clip is not None, f"mechanism {self.mechanism!r} needs a clip (C0)")
        self._check_extensions()
        if self.trust != "local" and self.mechanism != "none":  # no mechanism: no privacy under any trust
            self._check_trust()

    def _check_trust(self) -> None:
        t = self.trust
        _check(self.mechanism == "update",
               f"trust {t!r} needs mechanism 'update' (clip each user's round update; the noise is added "
               f"{'by the server' if t == 'central' else 'in shares under secure aggregation'}), "
               f"got {self.mechanism!r}")
        _check(not self.recall, f"recall resends an earlier locally-noised upload; set recall = false with trust {t!r}")
        _check(self.eps_budget is None, f"eps_budget (the ULDP-FED per-user ledger) is a local-trust feature, not "
                                        f"for trust {t!r}")
        if t == "secagg":
            _check(self.aggregation == "secagg",
                   "trust 'secagg' needs aggregation = \"secagg\" (the server may only see the masked sum)")

    def _check_extensions(self) -> None:
        _check(self.aggregation in AGGREGATIONS,
               f"unknown aggregation {self.aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
        _check(self.secagg_bits in (32, 64), f"secagg_bits must be 32 or 64, got {self.secagg_bits}")
        _check(self.secagg_range is None or (math.isfinite(self.secagg_range) and self.secagg_range > 0),
               f"secagg_range must be > 0, got {self.secagg_range}")
        _check(0 < self.secagg_threshold <= 1, f"secagg_threshold must be in (0, 1], got {self.secagg_threshold}")
        n = self.secagg_neighbours
        _check(n is None or n == "auto" or (isinstance(n, int) and not isinstance(n, bool) and n >= 2 and n % 2 == 0),
               f"secagg_neighbours must be an even integer >= 2 or \"auto\" (SecAgg+), got {n!r}")
        _check(not (self.aggregation == "secagg" and self.recall and self.mechanism in UPDATE_LIKE),
               "recall needs the server to store individual noisy updates, which secure aggregation hides; "
               "set recall = false with aggregation 'secagg'")
        _check(math.isfinite(self.signds_eps) and self.signds_eps > 0,
               f"signds_eps must be > 0, got {self.signds_eps}")
        _check(0 < self.signds_k < 1, f"signds_k (top-k fraction) must be in (0, 1), got {self.signds_k}")
        _check(0 < self.signds_h <= 1, f"signds_h (selected-dimension fraction) must be in (0, 1], got {self.signds_h}")
        _check(math.isfinite(self.signds_lr) and self.signds_lr > 0, f"signds_lr must be > 0, got {self.signds_lr}")
        _check(isinstance(self.adaptive_levels, int) and not isinstance(self.adaptive_levels, bool)
               and self.adaptive_levels >= 2, f"adaptive_levels must be an integer >= 2, got {self.adaptive_levels}")
        _check(self.adaptive_gamma >= 0, f"adaptive_gamma must be >= 0, got {self.adaptive_gamma}")
        _check(0 <= self.adaptive_kappa < 1, f"adaptive_kappa must be in [0, 1), got {self.adaptive_kappa}")
        _check(0 < self.adaptive_keep <= 1, f"adaptive_keep must be in (0, 1], got {self.adaptive_keep}")
        _check(0 <= self.adaptive_threshold <= 1, f"adaptive_threshold must be in [0, 1], got {self.adaptive_threshold}")
        _check(self.adaptive_level_eps is None or (math.isfinite(self.adaptive_level_eps) and self.adaptive_level_eps > 0),
               f"adaptive_level_eps must be > 0 (or absent: level sent in the clear), got {self.adaptive_level_eps}")


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
class DeploymentConfig:
    """The deployment whose privacy is accounted: `population` N users, `cohort` M per round, of whom up to
    `colluders` may collude with the server (secagg: their noise is not counted). None: the simulation's own K
    and clients per round. The simulation still trains its own clients (docs/privacy.md, 'Deployment scale')."""

    population: Optional[int] = None
    cohort: Optional[int] = None
    colluders: int = 0

    def __post_init__(self):
        for name in ("population", "cohort"):
            v = getattr(self, name)
            _check(v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
                   f"{name} must be an integer >= 1, got {v!r}")
        _check(self.population is None or self.cohort is None or self.cohort <= self.population,
               f"cohort ({self.cohort}) must not exceed population ({self.population})")
        _check(isinstance(self.colluders, int) and not isinstance(self.colluders, bool) and self.colluders >= 0,
               f"colluders must be an integer >= 0, got {self.colluders!r}")


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
    deployment: DeploymentConfig = field(default_factory=DeploymentConfig)
    chunk_clients: int = 5  # clients trained together (one chunk per core at a time)
    # matmul precision of MLP local training; master weights, updates, clipping and noise stay fp32.
    # auto: bf16 where the CPU has native bf16 matmuls (AVX512-BF16/AMX: ~4× fp32 throughput), else fp32.
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    # where local training runs: 'cpu' (the batched CPU engine), 'cuda' (the device path, fl/device.py: stacked
    # clients on the GPU, torch ops, fp32 without TF32 unless precision = 'bf16') or 'auto' (cuda when torch sees
    # a GPU, else cpu). Whether a GPU is there is checked where training starts, not here: a driver without one
    # may still load a problem that its Ray workers train on GPUs.
    device: Literal["auto", "cpu", "cuda"] = "auto"

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
        _check(self.precision in ("auto", "fp32", "bf16"),
               f"precision must be 'auto', 'fp32' or 'bf16', got {self.precision!r}")
        _check(self.device in DEVICES, f"device must be 'auto', 'cpu' or 'cuda', got {self.device!r}")
        r = self.privacy.max_participations
        _check(r is None or r <= self.rounds, f"max_participations r={r} exceeds rounds T={self.rounds}")
        n, m = self.population, self.cohort
        _check(m <= n, f"cohort ({m}) must not exceed population ({n}; default: the simulation's clients)")
        private = self.privacy.mechanism != "none"
        if self.privacy.trust != "local" and private:
            _check(self.privacy.delta < 1.0 / n,
                   f"delta={self.privacy.delta:g} must be below 1/population = {1.0 / n:.3g} "
                   "(a δ of 1/N lets the mechanism expose one user outright)")
        if self.privacy.trust == "secagg" and private:
            from math import ceil
            t = max(1, ceil(self.privacy.secagg_threshold * m - 1e-9))
            _check(self.deployment.colluders < t,
                   f"colluders ({self.deployment.colluders}) must be fewer than the secure-aggregation threshold "
                   f"t = ceil(secagg_threshold·cohort) = {t}: no honest noise would be counted")
            _check(m * (1.0 - self.upload_loss) >= t,
                   f"secagg_threshold={self.privacy.secagg_threshold:g} needs {t} of the cohort's {m} clients to "
                   f"survive, but only {m * (1.0 - self.upload_loss):.0f} are expected to (upload_loss="
                   f"{self.upload_loss:g}): most rounds would abort; lower secagg_threshold")

    @property
    def population(self) -> int:
        """N of the accounted deployment (default: the simulation's K clients)."""
        return self.deployment.population or self.data.clients

    @property
    def cohort(self) -> int:
        """M of the accounted deployment (default: the simulation's clients per round)."""
        return self.deployment.cohort or self.sampled_per_round

    @property
    def sampled_per_round(self) -> int:
        return max(math.ceil(self.participation * self.data.clients - 1e-9), 1)

    def with_(self, **kw) -> "SimConfig":
        return replace(self, **kw)
