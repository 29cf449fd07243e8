"""Secure aggregation as a drop-in for FedAvg's weighted mean inside the simulator.

Per round: the sampled clients run key advertisement and key sharing through a `SecAggServer`; each client
whose upload arrives encodes [w_u·x_u, w_u] (x_u = its upload on the active coordinates after any LDP
transform, w_u = n_u / n̄ its sample count over the mean count, clamped to ±R·w_max) into Z_{2^k} and masks it;
the server sums, reconstructs the masks of lost (or filtered-out) clients, and gets Σ w_u·x_u and Σ w_u, whose
ratio is FedAvg's weighted mean: only that sum is revealed, never an individual update, and the sample counts
stay hidden too. The result equals the plain weighted mean up to fixed-point rounding (≤ n·2^(−f−1) / Σ w_u).

`neighbours`: None masks over the complete graph (Bonawitz et al.); an even d ≥ 2 or "auto"
(d = 2·⌈log2 n⌉, `graph.auto_neighbours`) runs SecAgg+ (Bell et al. 2020) over a random d-regular graph drawn
per round from public randomness (seed, round): per-client cost O(d) instead of O(n). The Shamir threshold is
then taken over a neighbourhood: t = ⌈θ·(d + 1)⌉, at most d (θ·n for the complete graph, as before).

`encoder`: replaces the fixed-point encoding (e.g. `fedevo.privacy.distributed.DDGEncoder`: randomised rounding
plus a discrete Gaussian noise share, every client weighted 1); it has `begin_round(arrived: int)`,
`encode(row, client) -> uint vector` and `decode(total) -> (sum vector, count)`, and may have
`encode_rows(rows, clients, threads) -> [uint vector, ...]` (a chunk's rows at once, in up to `threads` threads:
`hardware.side_threads()`, torch's intra-op count, or inside a batched generation its cores over the runs whose
sides are running then).

`simulation`: "sum" (the default) computes what the round reveals directly (`ideal.IdealSum`: the survivors'
modular sum, or the protocol's abort); "protocol" runs the clients and the server with their keys, shares and
masks (`masking.Cohort`, `server.SecAggServer`). Both give the same aggregate bit for bit, the same aborts and the
same words (tests/secagg/test_ideal.py); the protocol costs ~n²/2 mask expansions a round. None reads
FEDEVO_SECAGG (default "sum").
"""

from __future__ import annotations

import math
import random
import time
from typing import Optional, Union

import numpy as np
import torch

from ..envvars import env_choice
from ..hardware import side_threads
from .graph import check_neighbours, degree, neighbourhood_threshold
from .ideal import IdealSum
from .protocol import RoundParams, SecAggAbort, client_words
from .quantize import dequantize, fixed_point, quantize


SIMULATIONS = ("sum", "protocol")


def simulation_from_env() -> str:
    """FEDEVO_SECAGG: "sum" (unset) or "protocol"; anything else is a one-line error."""
    return env_choice("FEDEVO_SECAGG", SIMULATIONS, "sum")


class SecureAggregator:
    def __init__(self, *, sizes: np.ndarray, bits: int = 32, value_range: float = 16.0, threshold: float = 0.5,
                 seed: int = 0, keep_uploads: bool = False, encoder=None,
                 neighbours: Optional[Union[int, str]] = None, survivor_floor: float = 0.0,
                 simulation: Optional[str] = None):
        """survivor_floor: the round aborts unless at least ⌈survivor_floor·n⌉ of the n sampled clients survive
        (distributed DP counts the noise of that many; with the complete graph the Shamir threshold already
        enforces ⌈θ·n⌉, with SecAgg+ only per neighbourhood)."""
        check_neighbours(neighbours)
        self.simulation = simulation_from_env() if simulation is None else simulation
        if self.simulation not in SIMULATIONS:
            raise ValueError(f"simulation must be one of {SIMULATIONS}, got {self.simulation!r}")
        self.survivor_floor = float(survivor_floor)
        self.neighbours = neighbours
        self.seed = seed
        self.sizes = np.asarray(sizes, dtype=np.float64)
        self.mean_size = float(self.sizes.mean())
        self.w_max = float(self.sizes.max() / self.mean_size)
        self.bits, self.R, self.theta = int(bits), float(value_range), float(threshold)
        self.keep_uploads = keep_uploads
        self.encoder = encoder
        self._rng = random.Random(seed)  # key material: seeded so a simulation is reproducible
        self.stats = {"rounds": 0, "aborted": 0, "clamped": 0, "values": 0, "dropped_recovered": 0,
                      "client_expansions": 0, "server_expansions": 0, "setup_s": 0.0, "mask_s": 0.0,
                      "unmask_s": 0.0, "comm_words": 0.0}
        self.steps: list[float] = []
        self._round = None

    def __getstate__(self) -> dict:
        """Saved without the active coordinates' copy on a GPU (a training state must load without one)."""
        state = dict(self.__dict__)
        state["_idx_on"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        """A training state saved before the ideal sum existed (multi-fidelity `states/`, `until=`/`resume_from=`)
        has no `simulation`: it continues with FEDEVO_SECAGG's (the same aggregates either way)."""
        self.__dict__.update(state)
        if "simulation" not in state:
            self.simulation = simulation_from_env()

    def degree_for(self, n: int) -> Optional[int]:
        """The graph degree d for a cohort of n, or None for the complete graph."""
        d = degree(self.neighbours, n)
        return d if d < n - 1 else None

    def threshold_for(self, n: int) -> int:
        """t = ⌈θ·n⌉ over the complete graph; ⌈θ·(d + 1)⌉ (at most d) over a neighbourhood with SecAgg+."""
        return neighbourhood_threshold(self.theta, n, self.degree_for(n))

    def graph_seed(self, t: int) -> int:
        """The public randomness the server announces for round t's graph (reproducible from the seed)."""
        return int(np.random.SeedSequence([self.seed, int(t)]).generate_state(1, np.uint64)[0])

    def begin_round(self, t: int, sampled: np.ndarray, arrived: np.ndarray, active: torch.Tensor) -> None:
        t0 = time.perf_counter()
        ids = tuple(sorted(int(c) for c in sampled))
        self.idx = torch.nonzero(active.reshape(-1) > 0).squeeze(1)
        self._idx_on = None  # self.idx on the updates' device (add)
        self.P = active.numel()
        length = int(self.idx.numel()) + 1
        d = self.degree_for(len(ids))
        params = RoundParams(round=t, clients=ids, threshold=self.threshold_for(len(ids)), length=length,
                             bits=self.bits, neighbours=d, graph_seed=0 if d is None else self.graph_seed(t))
        if self.encoder is None:
            self.fp = fixed_point(bits=self.bits, bound=max(self.R, 1.0) * self.w_max, clients=len(ids))
            self.steps.append(self.fp.step)
        else:
            self.encoder.begin_round(len(arrived))
        if self.simulation == "sum":
            self.server = IdealSum(params, keep_uploads=self.keep_uploads, arrived=(int(c) for c in arrived))
            self.cohort = None
        else:  # the protocol's modules (X25519, AES: `cryptography`) only when it runs
            from .masking import Cohort
            from .server import SecAggServer

            self.server = SecAggServer(params, keep_uploads=self.keep_uploads)
            self.cohort = Cohort(params, self._rng)
            self.cohort.setup(self.server)
            self.stats["setup_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            self.cohort.prepare(int(c) for c in arrived)
        self.stats["mask_s"] += time.perf_counter() - t0
        self._round = params
        self.stats["rounds"] += 1

    device_uploads = True  # `add` takes updates on a GPU too (fl/rounds.uploads_on_device)

    def add(self, flat: torch.Tensor, clients: np.ndarray) -> None:
        """Encode, mask and upload each client's row of `flat` (c, P), on any device: its active coordinates are
        gathered there, so only those come to the CPU (the encoding and the sum run there)."""
        t0 = time.perf_counter()
        idx = self.idx
        if flat.device != idx.device:  # the round's active coordinates on that device, copied once a round
            if getattr(self, "_idx_on", None) is None or self._idx_on.device != flat.device:
                self._idx_on = idx.to(flat.device)
            idx = self._idx_on
        x = flat.index_select(1, idx).cpu().to(torch.float64).numpy()
        if self.encoder is not None:
            rows = getattr(self.encoder, "encode_rows", None)  # the rows at once, in the threads it may take
            encoded = rows(x, [int(c) for c in clients], threads=side_threads()) if rows is not None \
                else [self.encoder.encode(row, int(cid)) for row, cid in zip(x, clients)]
            for enc, cid in zip(encoded, clients):
                self._upload(int(cid), enc)
            self.stats["values"] += x.size
            self.stats["mask_s"] += time.perf_counter() - t0
            return
        for row, cid in zip(x, clients):
            w = float(self.sizes[cid]) / self.mean_size
            over = int(np.count_nonzero(np.abs(row) > self.R))
            if over:
                np.clip(row, -self.R, self.R, out=row)
                self.stats["clamped"] += over
            enc, _ = quantize(np.append(row * w, w), self.fp)
            self._upload(int(cid), enc)
        self.stats["values"] += x.size
        self.stats["mask_s"] += time.perf_counter() - t0

    def _upload(self, client: int, encoded: np.ndarray) -> None:
        if self.cohort is None:  # the ideal functionality: the encoded vector, summed
            self.server.receive(client, encoded)
        else:
            self.server.receive(self.cohort.mask(client, encoded))

    def finish(self, selected: Optional[np.ndarray] = None) -> Optional[torch.Tensor]:
        """The weighted mean (P,) over the aggregated clients, or None when nothing can be recovered."""
        p = self._round
        t0 = time.perf_counter()
        n = len(p.clients)
        responders = 0
        try:
            if not self.server.received:
                raise SecAggAbort("no upload arrived")
            survivors, dropped = self.server.unmask_request(None if selected is None else
                                                            [int(c) for c in selected])
            responders = len(survivors)
            if responders < math.ceil(self.survivor_floor * n - 1e-9):
                raise SecAggAbort(f"{responders} of {n} survived, fewer than the floor the noise is counted for")
            total = self.server.finish() if self.cohort is None else \
                self.server.finish(self.cohort.unmask(survivors, dropped))
            self.stats["dropped_recovered"] += len(dropped)
            s = dequantize(total, self.fp) if self.encoder is None else np.append(*self.encoder.decode(total))
            out = None
            if s[-1] > 0:
                out = torch.zeros(self.P, dtype=torch.float32)
                out[self.idx] = torch.from_numpy(s[:-1] / s[-1]).to(torch.float32)
        except SecAggAbort:
            self.stats["aborted"] += 1
            out = None
        if self.cohort is not None:
            self.stats["client_expansions"] += self.cohort.stream.expansions
            self.stats["server_expansions"] += self.server.expansions
        # every sampled client advertised, shared and sent its masked vector (a lost upload still cost its
        # bytes); the survivors also answered the unmasking round
        cost = dict(n=n, length=p.length, bits=p.bits, neighbours=p.neighbours)
        words = (n - responders) * client_words(**cost, responded=False) \
            + responders * client_words(**cost, responded=True)
        self.last_words = words
        self.stats["comm_words"] += words
        self.stats["unmask_s"] += time.perf_counter() - t0
        self.cohort = self.server = None
        return out

    def summary(self) -> dict:
        s = dict(self.stats)
        if self.encoder is not None:
            s["encoding"] = self.encoder.summary()
        if self.simulation == "sum":  # no keys, shares or masks were made: no expansions to report
            for k in ("client_expansions", "server_expansions"):
                s.pop(k)
        s.update(simulation=self.simulation, bits=self.bits, range=self.R, threshold=self.theta,
                 neighbours=self.neighbours,
                 step_max=max(self.steps) if self.steps else None,
                 clamped_fraction=s["clamped"] / s["values"] if s["values"] else 0.0)
        s["overhead_s"] = s["setup_s"] + s["mask_s"] + s["unmask_s"]
        for k in ("setup_s", "mask_s", "unmask_s", "overhead_s"):
            s[k] = round(s[k], 4)
        return s


__all__ = ["SecureAggregator"]
