"""The privatizer: the one object the round loop (fl/rounds.py) calls for everything private in a round.

`Privatizer` is the interface the loop relies on; `RoundPrivatizer` is the implementation every mechanism's
`Mechanism.privatizer` builds from its pieces (a per-step hook, an upload transform, a secure aggregator, a
server-side round controller, a server transform). The mechanism keeps the object, so its report reads its own
state (clips used, participations, protocol cost) without the loop handing anything back. The audit
(fedevo/auditing/run.py) wraps the same object to observe what its trust model's observer sees.

Calls per round, in order: `begin_round` (after the cohort and the chunks' seeds are drawn), `for_chunk` /
`for_group` (local training's per-step hooks), `upload` once per trained chunk (then `add_secure` when `secure`),
`select` + `metadata_words`, `finish_secure` (secure) or the loop's weighted mean, `server`, `end_round`.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class Privatizer(Protocol):
    uniform_weights: bool  # weight every arrived update 1 instead of by sample count (bounded sensitivity)
    secure: bool  # uploads go to a secure aggregator (add_secure/finish_secure) instead of the plain mean
    for_chunk: Optional[Callable]  # seed -> the CPU engine's per-step hook of a chunk (None: plain SGD)
    for_group: Optional[Callable]  # (seeds, counts, device) -> the device path's hook (None: no device path)

    def start(self, active: torch.Tensor) -> None:
        """Before round 1: the initial active coordinates (flat, 1.0 where a parameter exists)."""

    def begin_round(self, t: int, *, sampled: np.ndarray, arrived: np.ndarray, active: torch.Tensor, model,
                    params: list, chunk_of_seed: dict) -> None: ...

    def lost_cost(self, omega: int) -> float:
        """What a lost upload had cost (plain aggregation)."""

    def upload(self, flat: torch.Tensor, clients: np.ndarray, omega: int) -> tuple[torch.Tensor, np.ndarray]:
        """A chunk's flat updates as the server gets them, and each upload's cost."""

    def add_secure(self, flat: torch.Tensor, clients: np.ndarray) -> None: ...

    def select(self, arrived: np.ndarray) -> Optional[np.ndarray]:
        """A boolean mask over `arrived`: the uploads to aggregate (None: all)."""

    def metadata_words(self, arrived: np.ndarray) -> float: ...

    def finish_secure(self, keep: Optional[np.ndarray]) -> tuple[Optional[torch.Tensor], float]:
        """(the securely aggregated mean or None, the protocol's words this round)."""

    def server(self, aggregate: torch.Tensor, active: torch.Tensor) -> torch.Tensor: ...

    def end_round(self, aggregate: Optional[torch.Tensor], params: list) -> None: ...


class UploadTransform:
    """Base of the client-side upload transforms (`mechanisms.UpdateLDP`, `central.ClipUpload`,
    `signds.SignDSUpload`): `__call__(flat, clients, omega) -> (uploads, cost per upload)`; the hooks default to
    nothing."""

    def begin_round(self, t: int) -> None:
        pass

    def set_active(self, active: torch.Tensor) -> None:
        """SET prune/regrow moved the active coordinates."""

    def lost_cost(self, omega: int) -> float:
        """What a lost upload had cost: Ω parameters unless the upload is smaller."""
        return omega

    def end_round(self, aggregate: Optional[torch.Tensor]) -> None:
        pass


class RoundPrivatizer:
    """The pieces of one mechanism × trust model for one run. All None: plain FedAvg, no privacy."""

    def __init__(self, *, step_hook=None, upload_factory: Optional[Callable] = None, secagg=None, controller=None,
                 server_transform: Optional[Callable] = None, uniform_weights: bool = False):
        self.step_hook = step_hook  # StepLDP, the adaptive controller (per-client learning rate), or None
        self.upload_factory = upload_factory  # active mask -> the upload transform
        self.transform = None  # the upload transform, made by `start`
        self.secagg = secagg  # a SecureAggregator
        self.controller = controller  # a server-side round controller (the adaptive client filter)
        self.server_transform = server_transform  # (aggregate, active) -> aggregate (central DP's noise)
        self.uniform_weights = uniform_weights
        self.for_chunk = step_hook.for_chunk if step_hook is not None else None
        self.for_group = getattr(step_hook, "for_group", None) if step_hook is not None else None

    @property
    def secure(self) -> bool:
        return self.secagg is not None

    def start(self, active: torch.Tensor) -> None:
        if self.upload_factory is not None:
            self.transform = self.upload_factory(active)

    def begin_round(self, t: int, *, sampled, arrived, active, model, params, chunk_of_seed) -> None:
        if self.transform is not None:
            self.transform.begin_round(t)
            self.transform.set_active(active)  # SET regrowth moves the active coordinates
        if self.secagg is not None:  # key agreement and sharing among all sampled clients, lost ones included
            self.secagg.begin_round(t, sampled, arrived, active)
        if self.controller is not None:
            self.controller.begin_round(t, model, params, arrived, chunk_of_seed)

    def lost_cost(self, omega: int) -> float:
        return self.transform.lost_cost(omega) if self.transform is not None else omega  # SignDS: h indices + sign

    def upload(self, flat, clients, omega):
        if self.transform is None:
            return flat, np.full(len(clients), float(omega))
        return self.transform(flat, clients, omega)

    def add_secure(self, flat, clients) -> None:
        self.secagg.add(flat, clients)

    def select(self, arrived):
        return self.controller.select(arrived) if self.controller is not None else None

    def metadata_words(self, arrived) -> float:
        return self.controller.metadata_words(arrived) if self.controller is not None else 0.0

    def finish_secure(self, keep):
        agg = self.secagg.finish(keep)
        return agg, self.secagg.last_words

    def server(self, aggregate, active):
        return self.server_transform(aggregate, active) if self.server_transform is not None else aggregate

    def end_round(self, aggregate, params) -> None:
        if self.step_hook is not None:
            self.step_hook.end_round()
        if self.transform is not None:
            self.transform.end_round(aggregate)
        if self.controller is not None:
            self.controller.after_aggregate(params)


__all__ = ["Privatizer", "RoundPrivatizer", "UploadTransform"]
