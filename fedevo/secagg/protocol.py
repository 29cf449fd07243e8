"""What crosses the wire in one round of secure aggregation (Bonawitz et al., CCS 2017), and its cost.

The server (`server.py`) only ever handles these types: public keys, ciphertexts it cannot open, masked
uploads (unsigned integers over Z_{2^k}) and Shamir shares that the protocol is designed to release.
`MaskedUpload` refuses anything but a 1-D uint32/uint64 numpy array, so a float update cannot reach it.

Cost of one round for a client, with n sampled clients, a masked vector of L words of k bits, counted in
parameter-equivalents (1 = one 32-bit float, as in the `comm` objective; uploads only, broadcasts are free):

    keys      2 X25519 public keys                          64 B
    shares    n−1 AES-GCM ciphertexts of 2 Shamir shares    (n−1)·(2·33 + 8 + 12 + 16) = 102·(n−1) B
    masked    the masked vector                              L·k/8 B    (a lost upload still cost its bytes)
    unmask    one share per other client (survivors only)    (n−1)·(33 + 4) = 37·(n−1) B

    words(n, L, k) = [64 + 102·(n−1) + L·k/8 + 37·(n−1)] / 4 = 16 + 34.75·(n−1) + L·k/32

SecAgg+ (Bell et al. 2020; `RoundParams.neighbours` = d < n − 1): a client shares with, masks with and
answers for only its d neighbours in the round's graph (`graph.py`), so n − 1 becomes d above:
words = 16 + 34.75·d + L·k/32, independent of n for fixed d.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Optional

import numpy as np

from .graph import connected, harary, shortfalls
from .shamir import FIELD_BYTES

KEY_BYTES = 32
ID_BYTES = 4
GCM_NONCE_BYTES, GCM_TAG_BYTES = 12, 16
ADVERTISE_BYTES = 2 * KEY_BYTES
ENC_SHARE_BYTES = 2 * FIELD_BYTES + 2 * ID_BYTES + GCM_NONCE_BYTES + GCM_TAG_BYTES
UNMASK_SHARE_BYTES = FIELD_BYTES + ID_BYTES
WORD_BYTES = 4  # one parameter-equivalent


class SecAggAbort(RuntimeError):
    """Fewer than t clients survived (or answered): the round's aggregate cannot be recovered."""


@dataclass(frozen=True)
class RoundParams:
    """Public parameters of one round, announced by the server: who was sampled, the Shamir threshold t, the
    vector length and k; for SecAgg+, the graph degree d (`neighbours`) and the seed of the random graph.

    neighbours=None (or ≥ n − 1): the complete graph, Bonawitz et al.'s protocol; t ≤ n. Otherwise an even
    d ≥ 2: a random d-regular Harary graph (`graph.harary`) from `graph_seed`; each client's secrets are
    shared among its closed neighbourhood (itself and its d neighbours) with threshold t ≤ d."""

    round: int
    clients: tuple[int, ...]  # the sampled clients, sorted; share x-coordinate of clients[i] is i + 1
    threshold: int
    length: int
    bits: int
    neighbours: Optional[int] = None
    graph_seed: int = 0

    def __post_init__(self):
        if list(self.clients) != sorted(set(self.clients)):
            raise ValueError("clients must be sorted and distinct")
        n = len(self.clients)
        if self.neighbours is not None and self.neighbours < n - 1:
            if isinstance(self.neighbours, bool) or self.neighbours < 2 or self.neighbours % 2:
                raise ValueError(f"neighbours must be an even integer >= 2 (or >= n - 1 = {n - 1} for the "
                                 f"complete graph), got {self.neighbours!r}")
            if not 1 <= self.threshold <= self.neighbours:
                raise ValueError(f"threshold must be in [1, {self.neighbours}] (the neighbours a dropped client's "
                                 f"mask key is recovered from), got {self.threshold}")
        elif not 1 <= self.threshold <= n:
            raise ValueError(f"threshold must be in [1, {n}], got {self.threshold}")
        if self.bits not in (32, 64):
            raise ValueError(f"bits must be 32 or 64, got {self.bits}")
        if self.length < 1:
            raise ValueError("length must be >= 1")

    def x_of(self, client: int) -> int:
        return self._x[client]

    @cached_property
    def _x(self) -> dict[int, int]:
        return {c: i + 1 for i, c in enumerate(self.clients)}

    @property
    def complete(self) -> bool:
        return self.neighbours is None or self.neighbours >= len(self.clients) - 1

    @property
    def degree(self) -> int:
        return len(self.clients) - 1 if self.complete else self.neighbours

    @cached_property
    def graph(self) -> dict[int, frozenset[int]]:
        """client -> its neighbours (never itself)."""
        return harary(self.clients, self.degree, self.graph_seed)

    def neighbours_of(self, client: int) -> frozenset[int]:
        return self.graph[client]

    @property
    def dtype(self):
        return np.uint32 if self.bits == 32 else np.uint64


@dataclass(frozen=True)
class AdvertisedKeys:
    client: int
    enc_pk: bytes  # X25519 key for encrypting shares (c_u^PK)
    mask_pk: bytes  # X25519 key for pairwise masks (s_u^PK)


@dataclass(frozen=True)
class EncryptedShare:
    sender: int
    recipient: int
    ciphertext: bytes  # nonce ‖ AES-GCM(shares of sender's b_u and s_u^SK for recipient)


@dataclass(frozen=True)
class MaskedUpload:
    """y_u = x_u + PRG(b_u) + Σ_v p_uv  (mod 2^k): the only form in which an update reaches the server."""

    client: int
    data: np.ndarray = field(repr=False)

    def __post_init__(self):
        d = self.data
        if not isinstance(d, np.ndarray) or d.dtype not in (np.uint32, np.uint64) or d.ndim != 1:
            raise TypeError("MaskedUpload holds a 1-D uint32/uint64 numpy array (a masked vector over Z_2^k), "
                            f"got {type(d).__name__} {getattr(d, 'dtype', '')}")
        d.setflags(write=False)


@dataclass(frozen=True)
class UnmaskShares:
    """A survivor's answer in the unmasking round: its shares of b_v for surviving v, of s_v^SK for dropped v."""

    client: int
    self_mask: dict = field(default_factory=dict)  # owner id -> share y (x = the responder's x)
    mask_key: dict = field(default_factory=dict)


def unmask_sets(params: RoundParams, arrived, roster, *, selected=None,
                kept: bool = False) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(survivors, dropped) of a round whose uploads from `arrived` (∩ `selected`, a subset chosen after arrival,
    which needs the uploads `kept` apart) are to be aggregated: dropped = the rest of `roster`. Raises SecAggAbort
    when the protocol cannot unmask their sum: fewer than t survivors; with SecAgg+, a neighbourhood left with
    fewer than t survivors (a secret that cannot be recovered) or a survivors' masking graph that is disconnected
    (unmasking would reveal each component's sum). The one rule the server (`server.py`) and the ideal
    functionality (`ideal.py`) both apply."""
    got = set(arrived)
    if selected is not None:
        sel = set(selected)
        if not kept and sel != got:
            raise ValueError("choosing a subset after arrival needs keep_uploads=True")
        got &= sel
    survivors = tuple(sorted(got))
    dropped = tuple(sorted(set(roster) - got))
    t = params.threshold
    if len(survivors) < t:
        raise SecAggAbort(f"{len(survivors)} survivors, fewer than t={t}")
    if not params.complete:
        short = [f"client {u} ({'survived: self-mask seed' if u in got else 'dropped: mask key'}, {near} left)"
                 for u, near in shortfalls(params.graph, survivors, dropped, t)]
        if short:
            raise SecAggAbort(f"{len(short)} neighbourhood(s) kept fewer than t={t} survivors, so these "
                              f"secrets cannot be recovered: the neighbourhood of " + "; ".join(short))
        if not connected(survivors, params.graph):
            raise SecAggAbort("the survivors' masking graph is disconnected: unmasking would reveal the sum "
                              "of each component separately")
    return survivors, dropped


def client_words(*, n: int, length: int, bits: int, responded: bool, neighbours: Optional[int] = None) -> float:
    """Upload cost of one sampled client in a round, in parameter-equivalents (formula in the module doc).
    `neighbours`: the SecAgg+ graph degree d (None or ≥ n − 1: the complete graph, d = n − 1)."""
    d = n - 1 if neighbours is None else min(int(neighbours), n - 1)
    b = ADVERTISE_BYTES + d * ENC_SHARE_BYTES + length * bits // 8
    if responded:
        b += d * UNMASK_SHARE_BYTES
    return b / WORD_BYTES


__all__ = ["SecAggAbort", "RoundParams", "AdvertisedKeys", "EncryptedShare", "MaskedUpload", "UnmaskShares",
           "client_words", "unmask_sets", "ADVERTISE_BYTES", "ENC_SHARE_BYTES", "UNMASK_SHARE_BYTES", "WORD_BYTES"]
