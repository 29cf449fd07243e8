"""The ideal functionality of secure aggregation: what one round of the protocol reveals, computed directly.

With honest clients (the simulator's setting) a round of `masking.Cohort` + `server.SecAggServer` ends in one of
two ways: the modular sum Σ_{u ∈ survivors} x_u over Z_{2^k} of the survivors' encoded uploads, or a SecAggAbort
when `protocol.unmask_sets` says that sum cannot be unmasked. The masks cancel by construction, so `IdealSum`
computes that sum without drawing keys, sharing secrets or expanding masks: the same numbers at a fraction of the
cost (one addition per upload instead of about n²/2 AES-CTR mask expansions of the whole vector per round, n the
round's sampled clients). tests/secagg/test_ideal.py checks it against the protocol bit for bit: dropouts, SecAgg+
graphs, a subset chosen after arrival, aborts, the fixed-point and the discrete-Gaussian encodings.

What it does not run: the protocol's messages, its cryptography and their CPU time. `SecureAggregator` uses it
unless FEDEVO_SECAGG=protocol (docs/secagg_signds_adaptive.md); the words a client uploads
(`protocol.client_words`) are counted the same either way. Like the server, it never sees a float update: it
takes encoded uint vectors.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

import numpy as np

from .protocol import RoundParams, unmask_sets


class IdealSum:
    """One round. keep_uploads=True keeps each encoded upload until `finish` (the set to aggregate is chosen
    after arrival); otherwise they are summed on arrival."""

    def __init__(self, params: RoundParams, *, keep_uploads: bool = False, arrived: Optional[Iterable[int]] = None):
        """arrived: the clients whose uploads will come (the protocol masks only theirs; None: any sampled one)."""
        self.params = params
        self.keep_uploads = keep_uploads
        self._expected = frozenset(params.clients if arrived is None else arrived)
        self.received: set[int] = set()
        self._sum = np.zeros(params.length, dtype=params.dtype)
        self._uploads: dict[int, np.ndarray] = {}
        self._survivors: tuple[int, ...] | None = None

    def receive(self, client: int, encoded: np.ndarray) -> None:
        p = self.params
        if client not in self._expected or client in self.received:
            raise ValueError(f"unexpected or repeated upload from client {client}")
        x = np.asarray(encoded).astype(p.dtype, copy=False)
        if x.shape != (p.length,):
            raise ValueError(f"an encoded upload must be a ({p.length},) vector, got shape {x.shape}")
        self.received.add(client)
        if self.keep_uploads:
            self._uploads[client] = x.copy()
        else:
            np.add(self._sum, x, out=self._sum)

    def unmask_request(self, selected: Iterable[int] | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(survivors, dropped) as the server would announce them; SecAggAbort where the protocol aborts."""
        survivors, dropped = unmask_sets(self.params, self.received, self.params.clients, selected=selected,
                                         kept=self.keep_uploads)
        self._survivors = survivors
        return survivors, dropped

    def finish(self) -> np.ndarray:
        """Σ_{u ∈ survivors} x_u (mod 2^k): what the protocol's server obtains after unmasking."""
        if self._survivors is None:
            raise RuntimeError("call unmask_request first")
        if not self.keep_uploads:
            return self._sum.copy()
        total = np.zeros(self.params.length, dtype=self.params.dtype)
        for u in self._survivors:
            np.add(total, self._uploads[u], out=total)
        self._uploads.clear()
        return total


__all__ = ["IdealSum"]
