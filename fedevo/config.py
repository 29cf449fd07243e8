"""Typed, frozen, validated configurations.

Built once at the edge (CLI, problem file + genes) and passed down; nothing below reads argparse/typer state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Optional, Union

from .arch import USER_INITS, Arch, CNNArch, MLPArch, UserArch  # re-exported (__all__): configs are named from here
from .data.catalog import DATASETS, DIRICHLET_MIN_SAMPLES, N_TRAIN, check_data_dir
from .configcheck import check as _check, typed as _typed
from .errors import FedevoError
from .privacy import registry  # torch-free: names, parameter dataclasses and rules of mechanisms and trust models

AGGREGATIONS = ("plain", "secagg")
PARTITIONS = ("iid", "shards", "dirichlet", "natural")  # natural: the data's own client ids
SAMPLINGS = ("poisson", "fixed", "none")  # how a deployment draws its cohort (central trust)
DEVICES = ("auto", "cpu", "cuda")  # where local training runs (fedevo/hardware.py `device`)
# target_eps the accountant calibrates σ to: below 1e-3 the search counts ε as 1e-3; above 1e4 the noise needed is
# below what dp-accounting's grids resolve (and no privacy is left to claim)
TARGET_EPS_RANGE = (1e-3, 1e4)
# dirichlet_alpha below this gives each class to one client: with more clients than classes, clients stay empty
DIRICHLET_ALPHA_MIN = 1e-2


# shared by every mechanism: PrivacyConfig's fields but `params`, each mechanism's own (privacy/registry.py)
SHARED_KEYS = registry.SHARED_KEYS


@dataclass(frozen=True, init=False)
class PrivacyConfig:
    """The privacy settings of a run: what every mechanism shares, plus the chosen mechanism's own parameters.

    mechanism, trust: names registered in fedevo/privacy/registry.py (built-in: fedevo/privacy/builtin.py;
    default: the no-privacy mechanism under local trust). Trust models: 'local' (each client noises its own
    upload), 'central' (DP-FedAvg: the server noises the sum of clipped updates) or 'secagg' (distributed
    discrete Gaussian under secure aggregation); central/secagg are user level and use the `update` mechanism.
    params: the mechanism's own frozen parameter dataclass (`registry.mechanism(name).params`, e.g.
    `privacy/params.py`'s `UpdateParams`: sigma, clip, beta, tau, recall, similarity).

    Built from flat keys, as problem files and --params give them: `PrivacyConfig(mechanism="update", sigma=0.5,
    clip=1.0)` puts sigma and clip into `params`. A key of another registered mechanism is checked by that
    mechanism's dataclass and then ignored (a problem may fix keys of every mechanism its genes choose from);
    reading one (`pc.sigma`) gives the chosen mechanism's value, else that key's default.
    aggregation: 'plain' (FedAvg weighted mean) or 'secagg' (pairwise-mask secure aggregation, `secagg_*`).
    docs/secagg_signds_adaptive.md describes the secure aggregation options.
    """

    mechanism: str
    trust: str
    delta: float = 1e-4
    target_eps: Optional[float] = None  # calibrate the noise so that the accountant's ε meets this (None: as given)
    eps_budget: Optional[float] = None  # per-user budget for the ULDP-FED ledger (None: no ledger)
    max_participations: Optional[int] = None  # r of ULDP-FED: a client joins at most r rounds (None: unlimited)
    sampling: Literal["poisson", "fixed", "none"] = "poisson"  # central: how the deployment's cohort is drawn
    # secure aggregation (seed 002, Bonawitz et al.)
    aggregation: Literal["plain", "secagg"] = "plain"
    secagg_bits: int = 32  # k: masked arithmetic in Z_{2^k}; a masked word costs k/32 parameter-equivalents
    secagg_range: Optional[float] = None  # clamp |x| <= R before fixed-point encoding (None: from the mechanism)
    secagg_threshold: float = 0.5  # Shamir threshold t = ceil(theta * n) of the n sampled clients
    secagg_neighbours: Optional[Union[int, str]] = None  # SecAgg+ graph degree d (even), "auto", None: complete
    params: Any = None

    def __init__(self, mechanism: Optional[str] = None, trust: Optional[str] = None, delta: float = 1e-4,
                 target_eps: Optional[float] = None, eps_budget: Optional[float] = None,
                 max_participations: Optional[int] = None, sampling: str = "poisson", aggregation: str = "plain",
                 secagg_bits: int = 32, secagg_range: Optional[float] = None, secagg_threshold: float = 0.5,
                 secagg_neighbours: Optional[Union[int, str]] = None, params: Any = None, **own: Any):
        shared = dict(mechanism=registry.default_mechanism() if mechanism is None else mechanism,
                      trust=registry.default_trust() if trust is None else trust, delta=delta, target_eps=target_eps,
                      eps_budget=eps_budget, max_participations=max_participations, sampling=sampling,
                      aggregation=aggregation, secagg_bits=secagg_bits, secagg_range=secagg_range,
                      secagg_threshold=secagg_threshold, secagg_neighbours=secagg_neighbours)
        for k, v in shared.items():
            object.__setattr__(self, k, v)
        unknown = sorted(k for k in own if not registry.owners(k))
        if unknown:
            raise TypeError(f"PrivacyConfig got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        spec = registry.mechanism(self.mechanism)
        if params is not None and type(params) is not spec.params:  # another mechanism's: carry the keys both have
            own = {**{k: getattr(params, k) for k in spec.keys if hasattr(params, k)}, **own}
            params = None
        mine = {k: v for k, v in own.items() if k in spec.keys}
        for other in registry.mechanisms():  # other mechanisms' keys: their own checks, then ignored
            o = registry.mechanism(other)
            theirs = {k: v for k, v in own.items() if k in o.keys and k not in mine}
            if theirs and o is not spec:
                o.params(**theirs)
        object.__setattr__(self, "params", replace(params, **mine) if params is not None else spec.params(**mine))
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        """A mechanism key read flat: the chosen mechanism's value, else the key's default (no other mechanism's
        value is kept)."""
        if name.startswith("_"):
            raise AttributeError(name)
        params = self.__dict__.get("params")
        if params is not None and hasattr(params, name):
            return getattr(params, name)
        from dataclasses import fields

        for spec in registry.owners(name):
            return next(f.default for f in fields(spec.params) if f.name == name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def spec(self):
        """The registered mechanism (`fedevo.privacy.registry.Spec`)."""
        return registry.mechanism(self.mechanism)

    @property
    def private(self) -> bool:
        return self.spec.private

    def __post_init__(self):
        _typed(self)
        spec, trust = registry.mechanism(self.mechanism), registry.trust(self.trust)
        _check(self.sampling in SAMPLINGS,
               f"unknown sampling {self.sampling!r}; choose one of {', '.join(SAMPLINGS)}")
        _check(0.0 < self.delta < 1.0, f"delta must be in (0, 1), got {self.delta}")
        lo, hi = TARGET_EPS_RANGE
        _check(self.target_eps is None or (isinstance(self.target_eps, (int, float)) and lo <= self.target_eps <= hi),
               f"target_eps must be in [{lo:g}, {hi:g}] (the range the accountant calibrates), got {self.target_eps}")
        _check(self.target_eps is None or self.eps_budget is None, "give target_eps or eps_budget, not both")
        _check(self.max_participations is None or self.max_participations >= 1,
               f"max_participations (r) must be >= 1, got {self.max_participations}")
        _check(self.eps_budget is None or (math.isfinite(self.eps_budget) and self.eps_budget > 0),
               f"eps_budget must be a finite number > 0, got {self.eps_budget}")
        self._check_aggregation()
        if not spec.private:  # no mechanism: no privacy under any trust
            names = [n for n in registry.mechanisms() if registry.mechanism(n).budgets]
            _check(self.target_eps is None and self.eps_budget is None,
                   f"target_eps / eps_budget need a privacy mechanism ({' or '.join(map(repr, names))}), "
                   f"not {self.mechanism!r}")
            return
        if trust.name not in spec.trusts:
            names = [n for n in registry.mechanisms()
                     if registry.mechanism(n).private and trust.name in registry.mechanism(n).trusts]
            raise FedevoError(f"trust {trust.name!r} needs mechanism {' or '.join(map(repr, names))} ({trust.doc}), "
                              f"got {self.mechanism!r}")
        spec.rules(self)
        for budget in ("target_eps", "eps_budget"):
            if getattr(self, budget) is not None and budget not in spec.budgets:
                names = [n for n in registry.mechanisms() if budget in registry.mechanism(n).budgets]
                raise FedevoError(f"{budget} needs mechanism {' or '.join(map(repr, names))}, not "
                                  f"{self.mechanism!r}")

    def _check_aggregation(self) -> None:
        _check(self.aggregation in AGGREGATIONS,
               f"unknown aggregation {self.aggregation!r}; choose one of {', '.join(AGGREGATIONS)}")
        _check(self.secagg_bits in (32, 64), f"secagg_bits must be 32 or 64, got {self.secagg_bits}")
        _check(self.secagg_range is None or (math.isfinite(self.secagg_range) and self.secagg_range > 0),
               f"secagg_range must be > 0, got {self.secagg_range}")
        _check(0 < self.secagg_threshold <= 1, f"secagg_threshold must be in (0, 1], got {self.secagg_threshold}")
        n = self.secagg_neighbours
        _check(n is None or n == "auto" or (isinstance(n, int) and not isinstance(n, bool) and n >= 2 and n % 2 == 0),
               f"secagg_neighbours must be an even integer >= 2 or \"auto\" (SecAgg+), got {n!r}")


@dataclass(frozen=True)
class DataConfig:
    dataset: str = "digits"
    partition: Literal["iid", "shards", "dirichlet", "natural"] = "iid"
    clients: int = 20
    shards_per_client: int = 2
    shard_size: Optional[int] = None  # None: n_train // (clients * shards_per_client)
    dirichlet_alpha: float = 0.5
    test_fraction: float = 1.0  # fraction of the test set spread over the clients' test splits
    data_dir: Optional[str] = None
    download: bool = False
    source: Optional[object] = None  # the user's data (fedevo.data.sources.UserData); None: `dataset` by name

    def __post_init__(self):
        _typed(self)
        _check(self.partition in PARTITIONS,
               f"unknown partition {self.partition!r}; choose one of {', '.join(PARTITIONS)}")
        if self.partition == "natural":
            k = getattr(self.source, "clients", None)
            _check(k is not None, "partition = \"natural\" needs data with client ids ([data] source and client_id)")
        _check(self.clients >= 1, f"clients must be >= 1, got {self.clients}")
        _check(self.shards_per_client >= 1, f"shards_per_client must be >= 1, got {self.shards_per_client}")
        _check(self.shard_size is None or self.shard_size >= 1, f"shard_size must be >= 1, got {self.shard_size}")
        _check(math.isfinite(self.dirichlet_alpha) and self.dirichlet_alpha >= DIRICHLET_ALPHA_MIN,
               f"dirichlet_alpha must be a finite number >= {DIRICHLET_ALPHA_MIN:g} (smaller puts each class on one "
               f"client, leaving clients empty), got {self.dirichlet_alpha}")
        _check(0 < self.test_fraction <= 1, f"test_fraction must be in (0, 1], got {self.test_fraction}")
        if self.source is None:
            _check(self.dataset in DATASETS, f"unknown dataset {self.dataset!r}; choose one of {', '.join(DATASETS)}")
        check_data_dir(self.data_dir, self.download)

    def check_partition(self) -> None:
        """The clients the partition can give from the training samples (data/partition.py's own checks, made
        before any data is read). A problem's configuration is checked so (an audit adds canary clients of its
        own beyond the data: not checked here)."""
        n = self.n_train
        _check(n is None or self.partition != "iid" or self.clients <= n,
               f"clients = {self.clients} is more than the {n} training samples of {self.dataset!r} (partition iid)")
        _check(n is None or self.partition != "dirichlet" or self.clients * DIRICHLET_MIN_SAMPLES <= n,
               f"partition = \"dirichlet\": clients = {self.clients} need at least {DIRICHLET_MIN_SAMPLES} training "
               f"samples each, more than the {n} training samples of {self.dataset!r} (more than "
               f"{(n or 0) // DIRICHLET_MIN_SAMPLES} clients can never be met)")
        if self.partition == "shards" and n is not None:
            size = self.shard_size or n // (self.clients * self.shards_per_client)
            _check(size >= 1, f"partition = \"shards\": clients × shards_per_client = {self.clients} × "
                              f"{self.shards_per_client} shards is more than the {n} training samples of "
                              f"{self.dataset!r}")
            _check(n // size >= self.shards_per_client,
                   f"partition = \"shards\": shard_size = {size} gives {n // size} shards of the {n} training samples "
                   f"of {self.dataset!r}; each client needs shards_per_client = {self.shards_per_client}")

    @property
    def n_train(self) -> Optional[int]:
        """Training samples of the data (None: unknown until the user's data is read)."""
        if self.source is not None:
            return getattr(self.source, "n_train", None)
        return N_TRAIN.get(self.dataset)


@dataclass(frozen=True)
class DeploymentConfig:
    """The deployment whose privacy is accounted: `population` N users, `cohort` M per round, of whom up to
    `colluders` may collude with the server (secagg: their noise is not counted). None: the simulation's own K
    and clients per round. The simulation still trains its own clients (docs/privacy.md, 'Deployment scale')."""

    population: Optional[int] = None
    cohort: Optional[int] = None
    colluders: int = 0

    def __post_init__(self):
        _typed(self)
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
    # the stacked trainer's opt-ins for speed on a GPU (fl/stacked_settings.py, docs/engine.md; the environment
    # variables FEDEVO_SCHEDULE, FEDEVO_CUDA_TF32 and FEDEVO_CUDA_COMPILE override them): 'device' draws the batch
    # schedule on the device instead of the CPU engine's draws (other batches: results equal statistically); tf32:
    # TF32 matmuls on CUDA; torch_compile: the step loop's pointwise work fused by torch.compile on CUDA (equal up to
    # rounding)
    batch_schedule: Literal["engine", "device"] = "engine"
    tf32: bool = False
    torch_compile: bool = False

    def __post_init__(self):
        _typed(self)
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
        _check(self.batch_schedule in ("engine", "device"),
               f"batch_schedule must be 'engine' or 'device', got {self.batch_schedule!r}")
        _check(isinstance(self.tf32, bool), f"tf32 must be true or false, got {self.tf32!r}")
        _check(isinstance(self.torch_compile, bool), f"torch_compile must be true or false, got {self.torch_compile!r}")
        r = self.privacy.max_participations
        _check(r is None or r <= self.rounds, f"max_participations r={r} exceeds rounds T={self.rounds}")
        n, m = self.population, self.cohort
        _check(m <= n, f"cohort ({m}) must not exceed population ({n}; default: the simulation's clients)")
        if self.privacy.private:  # the trust model's rules on the accounted deployment
                registry.trust(self.privacy.trust).rules(self)

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


__all__ = ["AGGREGATIONS", "Arch", "CNNArch", "DEVICES", "DIRICHLET_ALPHA_MIN", "DataConfig", "DeploymentConfig",
           "MLPArch", "PARTITIONS", "PrivacyConfig", "SAMPLINGS", "SHARED_KEYS", "SimConfig", "TARGET_EPS_RANGE",
           "USER_INITS", "UserArch"]
