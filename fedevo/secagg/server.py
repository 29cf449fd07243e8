"""Server side of secure aggregation: routes keys and ciphertexts, sums masked uploads modulo 2^k, and in
the unmasking round reconstructs (Shamir) the self-mask seeds b_u of survivors and the mask keys s_u^SK of
clients whose upload was lost (or filtered out), then removes their masks from the sum.

SecAgg+ (`RoundParams.neighbours` = d < n − 1): each secret was shared only among its owner's neighbourhood
in the round's public graph, so the server reconstructs b_u from t of u's surviving neighbours (u itself
included) and s_u^SK of a dropped u from t of u's surviving neighbours, and removes only the d pairwise masks
u had; it aborts (SecAggAbort) as soon as some neighbourhood keeps fewer than t survivors, or when the
survivors' subgraph is disconnected (unmasking would reveal each component's sum; the clients refuse too).

By construction the server never handles an unmasked update: `receive` takes only `MaskedUpload` (a uint
vector over Z_{2^k}), and this module imports neither torch nor the client side (`masking`, `quantize`);
tests/secagg checks both. What it learns is the sum over survivors, as the protocol intends.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from . import shamir
from .prg import MASK_INFO, MaskStream, agree, pair_sign
from .protocol import (AdvertisedKeys, EncryptedShare, MaskedUpload, RoundParams, SecAggAbort, UnmaskShares,
                       unmask_sets)


class SecAggServer:
    """One round. keep_uploads=True stores each masked upload until `finish` (needed when the set to
    aggregate is chosen after the uploads arrive, e.g. client filtering); otherwise they are summed on arrival."""

    def __init__(self, params: RoundParams, *, keep_uploads: bool = False):
        self.params = params
        self.keep_uploads = keep_uploads
        self.roster: dict[int, AdvertisedKeys] = {}
        self._sum = np.zeros(params.length, dtype=params.dtype)
        self._uploads: dict[int, np.ndarray] = {}
        self.received: list[int] = []
        self._request: tuple | None = None
        self.expansions = 0  # PRG expansions done while unmasking
        self.reconstructed = {"self_mask": 0, "mask_key": 0}

    def collect_keys(self, adverts: Iterable[AdvertisedKeys]) -> dict[int, AdvertisedKeys]:
        roster = {}
        for a in adverts:
            if not isinstance(a, AdvertisedKeys) or a.client not in self.params.clients or a.client in roster:
                raise ValueError(f"unexpected key advertisement {a!r}")
            roster[a.client] = a
        if len(roster) < self.params.threshold:
            raise SecAggAbort(f"{len(roster)} clients advertised keys, fewer than t={self.params.threshold}")
        self.roster = roster
        return dict(roster)

    def route_shares(self, messages: Iterable[EncryptedShare]) -> dict[int, list[EncryptedShare]]:
        out: dict[int, list[EncryptedShare]] = {}
        for m in messages:
            if not isinstance(m, EncryptedShare) or m.sender not in self.roster or m.recipient not in self.roster:
                raise ValueError("shares travel between clients of the roster only")
            out.setdefault(m.recipient, []).append(m)
        return out

    def receive(self, upload: MaskedUpload) -> None:
        if not isinstance(upload, MaskedUpload):
            raise TypeError(f"the server accepts only MaskedUpload, got {type(upload).__name__}")
        p = self.params
        if upload.client not in self.roster or upload.client in self.received:
            raise ValueError(f"unexpected or repeated upload from client {upload.client}")
        if upload.data.dtype != p.dtype or upload.data.shape != (p.length,):
            raise ValueError(f"masked upload must be a ({p.length},) {np.dtype(p.dtype).name} vector")
        self.received.append(upload.client)
        if self.keep_uploads:
            self._uploads[upload.client] = upload.data
        else:
            np.add(self._sum, upload.data, out=self._sum)

    def unmask_request(self, selected: Iterable[int] | None = None) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(survivors, dropped): survivors = uploads received (∩ `selected`); everyone else in the roster is
        dropped. Raises SecAggAbort when they cannot be unmasked (`protocol.unmask_sets`)."""
        survivors, dropped = unmask_sets(self.params, self.received, self.roster, selected=selected,
                                         kept=self.keep_uploads)
        self._request = (survivors, dropped)
        return survivors, dropped

    def finish(self, responses: Iterable[UnmaskShares]) -> np.ndarray:
        """The exact modular sum Σ_{u∈survivors} x_u (uint vector), masks removed."""
        if self._request is None:
            raise RuntimeError("call unmask_request first")
        survivors, dropped = self._request
        p = self.params
        nb = p.neighbours_of
        surv_set, drop_set = set(survivors), set(dropped)
        usable, seen = [], set()
        holders: dict[int, list[UnmaskShares]] = {}  # owner -> usable answers of its neighbourhood, in order
        for r in responses:
            if not isinstance(r, UnmaskShares) or r.client not in surv_set or r.client in seen:
                continue
            near = nb(r.client) | {r.client}
            if all(u in r.self_mask for u in near if u in surv_set) and \
                    all(u in r.mask_key for u in near if u in drop_set):
                usable.append(r)
                seen.add(r.client)
                for u in near:
                    holders.setdefault(u, []).append(r)
        if len(usable) < p.threshold:
            raise SecAggAbort(f"{len(usable)} complete unmasking answers, fewer than t={p.threshold}")
        lagrange: dict[tuple, list[int]] = {}

        def recover(owner: int, table: str) -> bytes:
            """The secret of `owner` from the first t usable answers of its neighbourhood."""
            got = holders.get(owner, [])[:p.threshold]
            if len(got) < p.threshold:
                raise SecAggAbort(f"{len(got)} answers from the neighbourhood of client {owner}, "
                                  f"fewer than t={p.threshold}")
            xs = tuple(p.x_of(r.client) for r in got)
            if xs not in lagrange:
                lagrange[xs] = shamir.lagrange_at_zero(xs)
            return shamir.to_bytes(shamir.combine(xs, [getattr(r, table)[owner] for r in got], lagrange[xs]))

        if self.keep_uploads:
            total = np.zeros(p.length, dtype=p.dtype)
            for u in survivors:
                np.add(total, self._uploads[u], out=total)
        else:
            total = self._sum.copy()
        stream = MaskStream(p.length, p.bits)
        for u in survivors:  # remove self masks
            stream.add_into(total, recover(u, "self_mask"), -1)
            self.reconstructed["self_mask"] += 1
        for u in dropped:  # remove the pairwise masks survivors shared with u
            if not nb(u) & surv_set:
                continue  # (SecAgg+ only) no survivor masked with u
            sk = X25519PrivateKey.from_private_bytes(recover(u, "mask_key"))
            if sk.public_key().public_bytes_raw() != self.roster[u].mask_pk:
                raise SecAggAbort(f"reconstructed mask key of client {u} does not match its public key")
            self.reconstructed["mask_key"] += 1
            for v in sorted(nb(u) & surv_set):
                stream.add_into(total, agree(sk, self.roster[v].mask_pk, MASK_INFO, p.round), -pair_sign(v, u))
        self.expansions += stream.expansions
        self._uploads.clear()
        return total


__all__ = ["SecAggServer"]
