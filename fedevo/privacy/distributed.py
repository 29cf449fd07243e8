"""Distributed trust: the distributed discrete Gaussian under secure aggregation (Kairouz, Liu & Steinke 2021;
TensorFlow Federated's distributed DP aggregator).

Each client clips its round update to C₀ (decayed C_k ≤ C₀ with β > 0), scales it by 1/γ, rounds it to integers
(unbiased randomised rounding), adds its share of discrete Gaussian noise and submits the result to pairwise-mask
secure aggregation modulo 2^b; the server sees only the modular sum of the surviving uploads. The protocol
completes only if at least t = ⌈secagg_threshold·M⌉ of the cohort's M clients survive, so at least
t_h = t − colluders honest shares are always in the sum: each client's share has std s = σ·C₀/√t_h, so that the
counted honest noise alone has std σ·C₀. ε is against an honest-but-curious server (zero-out one user: its update replaced by
zero, sensitivity C₀; no amplification: the server knows the cohort and how many survived, so adding or removing
a member is not hidden), accounted as the DDG paper does (ddg.py). Not covered: a malicious
server (one that lies about who dropped out, or tampers with the protocol), more colluding clients than
`colluders`, and the floating-point implementation of the sampler's acceptance test. With SecAgg+
(`secagg_neighbours`), the protocol hides individual uploads only while every neighbourhood holds fewer than its
threshold of colluders (a per-neighbourhood, high-probability assumption over the random graph); the server still
aborts below ⌈θ·M⌉ survivors (`survivor_floor`), so the counted honest noise is unchanged.

Deployment scale: the deployment averages n = max(M·(1 − upload_loss), t) arrived uploads, whose noise has std
s·√n on the sum, s/√n on the average. Each of the simulation's m arrived clients adds a share of std s·√(m/n), so
that its average carries the same noise std; the rounding granularity γ is the deployment's.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import native
from ..config import SimConfig
from . import accounting as acc
from . import ddg
from .central import ClipUpload, accounted_rounds
from .mechanism import AGGREGATE, Mechanism

ACCOUNTANT = ("RDP (dp-accounting zCDP events) of the distributed discrete Gaussian, Kairouz, Liu & Steinke 2021 "
              "Prop. 14 with Theorem 1's τ and rounding norm growth")


class DDGEncoder:
    """The client side of the DDG for `fedevo.secagg.aggregator.SecureAggregator`: x → round(x/γ) + N_Z(0,
    (share/γ)²) mod 2^bits, with a count word 1 appended; decodes the modular sum back to (Σx + noise, count)."""

    def __init__(self, *, gamma: float, share_std, bits: int, seed: int, use_native: bool = True):
        self.gamma, self.bits = gamma, bits
        self.use_native = use_native  # native/ddg.c where it builds, else numpy (ddg.discrete_gaussian)
        self.share_std = share_std  # arrived clients this round -> each one's share std (update units)
        self.rng = np.random.default_rng(seed)
        self._unsigned = np.uint32 if bits == 32 else np.uint64
        self._signed = np.int32 if bits == 32 else np.int64
        self.stats = {"wrapped": 0, "values": 0, "rounds": 0, "encode_s": 0.0}
        self._exact = None

    def begin_round(self, arrived: int) -> None:
        self._std = self.share_std(max(arrived, 1)) / self.gamma
        self._exact = None
        self.stats["rounds"] += 1

    def encode(self, row: np.ndarray, client: int) -> np.ndarray:
        return self.encode_rows(row.reshape(1, -1), [client])[0]

    def encode_rows(self, rows: np.ndarray, clients, threads: int = 1) -> list[np.ndarray]:
        """`encode` of each row (c, n), in order. With the native kernel the rows go in up to `threads` threads
        (each row's numbers depend only on its key, drawn in row order first: the same numbers in any number of
        threads); the numpy sampler draws from one stream, row after row."""
        t0 = time.perf_counter()
        c, n = rows.shape
        q = np.empty((c, n + 1), dtype=np.int64)
        q[:, -1] = 1
        kern = native.load() if self.use_native else None
        if kern is not None:  # the same algorithm in C (native/ddg.c), ~10x faster; different numbers
            x = np.ascontiguousarray(rows, dtype=np.float64)
            keys = [int(self.rng.integers(0, 2**63)) for _ in range(c)]

            def one(i):  # ctypes releases the GIL: rows in parallel
                if kern.ddg_encode(x[i].ctypes.data, n, 1.0 / self.gamma, self._std, keys[i],
                                   q[i].ctypes.data) != 0:
                    raise ValueError(f"discrete Gaussian std must be > 0, got {self._std}")
            threads = max(1, min(int(threads), c))
            if threads == 1:
                for i in range(c):
                    one(i)
            else:
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(one, range(c)))
        else:
            for i in range(c):
                y = rows[i] / self.gamma
                low = np.floor(y)
                q[i, :-1] = low.astype(np.int64) + (self.rng.random(y.shape) < (y - low))  # unbiased rounding
                q[i, :-1] += ddg.discrete_gaussian(sigma=self._std, size=n, rng=self.rng)
        total = q.sum(0)  # diagnostics: the unwrapped sum
        self._exact = total if self._exact is None else self._exact + total
        out = [r.astype(self._unsigned) for r in q]  # two's complement mod 2^bits
        self.stats["encode_s"] += time.perf_counter() - t0
        return out

    def decode(self, total: np.ndarray) -> tuple[np.ndarray, float]:
        signed = total.view(self._signed).astype(np.int64)
        if self._exact is not None:  # survivors only are in `total`, so compare where the count agrees
            if self._exact[-1] == signed[-1]:
                self.stats["wrapped"] += int(np.count_nonzero(self._exact != signed))
            self.stats["values"] += signed.size - 1
        return signed[:-1].astype(np.float64) * self.gamma, float(signed[-1])

    def summary(self) -> dict:
        return {"scheme": "distributed discrete Gaussian", "gamma": self.gamma, **self.stats}


class DistributedDiscreteGaussian(Mechanism):
    trust = "secagg"
    uniform_weights = True
    audit_seam = AGGREGATE

    def exposure(self, arrivals=None) -> tuple[str, float, int]:
        """An honest-but-curious server that knows the cohort: zero-out, no amplification, accounted rounds."""
        return "zero-out", 1.0, accounted_rounds(self.cfg)

    def __init__(self, cfg: SimConfig):
        super().__init__(cfg)
        M, ell = cfg.cohort, cfg.upload_loss
        self.threshold = ddg.secagg_threshold(fraction=cfg.privacy.secagg_threshold, cohort=M)
        self.honest = self.threshold - cfg.deployment.colluders
        self.arrived = max(M * (1.0 - ell), float(self.threshold))  # SimConfig checked M·(1 − ℓ) ≥ t

    # ---------------------------------------------------------------- noise and accounting
    def _shares(self, sigma: float) -> tuple[float, float]:
        c = self.cfg
        return ddg.shares(sigma=sigma, clip=c.privacy.params.clip, honest=self.honest,
                          cohort=max(c.cohort, c.sampled_per_round), bits=c.privacy.secagg_bits)

    def local_std(self, sigma: float) -> float:
        """Std s of one deployment client's share: the t_h counted honest shares sum to σ·C₀."""
        return self._shares(sigma)[0]

    def gamma(self, sigma: float) -> float:
        return self._shares(sigma)[1]

    def eps_for(self, sigma: float, dim: int) -> float:
        c = self.cfg
        return ddg.eps_ddg(clip=c.privacy.params.clip, gamma=self.gamma(sigma), local_std=self.local_std(sigma),
                           honest=self.honest, dim=dim, rounds=accounted_rounds(c), delta=c.privacy.delta)

    def sigma_for_target(self, cfg: SimConfig, *, dim: int) -> float:
        # dim: the full parameter count, ≥ any active count, so ε at the real Ω is ≤ the target; no ε is proven
        # where the shares' σ_ℓ = s/γ < 1/2 (ddg.py): there the solver reads ∞, so σ stays where it is
        def eps_of(z: float) -> float:
            s, g = self._shares(z)
            return self.eps_for(z, dim) if s / g >= ddg.SHARE_SIGMA_MIN else math.inf
        return acc.solve_noise(eps_of=eps_of, target_eps=cfg.privacy.target_eps)

    def noise_std(self) -> float:
        """Std of the noise on the deployment's averaged update: s/√n for n arrived shares."""
        return self.local_std(self.cfg.privacy.params.sigma) / math.sqrt(self.arrived)

    # ---------------------------------------------------------------- client and server sides
    def client_transforms(self, noise, seed: int, controller=None):
        c = self.cfg
        return None, lambda active: ClipUpload(clip=c.privacy.params.clip, beta=c.privacy.params.beta, clients=c.data.clients)

    def aggregator(self, part, seed: int, controller=None):
        from ..secagg.aggregator import SecureAggregator

        pc = self.cfg.privacy
        target = self.noise_std()  # each of m simulated arrivals adds share std target·√m: average std = target
        enc = DDGEncoder(gamma=self.gamma(pc.params.sigma), share_std=lambda m: target * math.sqrt(m),
                         bits=pc.secagg_bits, seed=seed + 6)
        return SecureAggregator(sizes=part.sizes, bits=pc.secagg_bits, value_range=pc.params.clip,
                                threshold=pc.secagg_threshold, seed=seed + 4, encoder=enc,
                                neighbours=pc.secagg_neighbours, survivor_floor=pc.secagg_threshold)

    def deployment(self) -> dict:
        c, pc = self.cfg, self.cfg.privacy
        return {"trust": "secagg", "population": c.population, "cohort": c.cohort, "sampling": "none (the server "
                "knows the cohort)", "delta": pc.delta, "observer": "an honest-but-curious server that sees only "
                "the masked sum", "neighbouring": "zero-out one user (its update replaced by zero: the server knows the cohort)", "amplification": "none",
                "accountant": ACCOUNTANT}

    def report(self, out, part) -> dict:
        c, pc = self.cfg, self.cfg.privacy
        dim = out.omega  # the uploaded vector: the active coordinates
        rep = {"mechanism": pc.mechanism, **self.deployment(), "level": "user", "sigma": pc.params.sigma,
               "clip": pc.params.clip, "secagg_threshold_clients": self.threshold, "honest_counted": self.honest,
               "colluders": c.deployment.colluders, "local_std": self.local_std(pc.params.sigma),
               "gamma": self.gamma(pc.params.sigma), "bits": pc.secagg_bits, "noise_std_on_average": self.noise_std(),
               "eps_conditional": False,
               "not_covered": "a malicious server; more than `colluders` clients colluding with the server"
                              + ("; with SecAgg+ (secagg_neighbours), a neighbourhood holding its threshold of "
                                 "colluders (the graph's failure probability is not added to δ)"
                                 if pc.secagg_neighbours else "")
                              + "; attacks on the floating-point parts of the samplers"}
        rep.update(self.run.transform.summary())
        if self.run.secagg is not None:  # what the protocol cost: rounds, aborts, words, seconds
            rep["secagg"] = self.run.secagg.summary()
        rep.update(eps=self.eps_for(pc.params.sigma, dim), eps_paper=math.nan)
        return rep


__all__ = ["DistributedDiscreteGaussian", "DDGEncoder"]
