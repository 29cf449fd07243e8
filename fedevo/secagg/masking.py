"""Client side of secure aggregation (Bonawitz et al., CCS 2017, "practical secure aggregation").

Per round, each sampled client u
  0. AdvertiseKeys: draws two X25519 key pairs, (c_u) to encrypt shares and (s_u) for pairwise masks, and
     a self-mask seed b_u; sends c_u^PK, s_u^PK.
  1. ShareKeys: Shamir-shares b_u and s_u^SK (threshold t) among the n sampled clients; the share for v goes
     AES-GCM-encrypted under HKDF(X25519(c_u^SK, c_v^PK)), so the relaying server cannot read it.
  2. MaskedInputCollection: uploads y_u = x_u + PRG(b_u) + Σ_{v≠u} p_uv  (mod 2^k), where
     p_uv = ±PRG(HKDF(X25519(s_u^SK, s_v^PK))), + for u < v and − for u > v, so p_uv = −p_vu.
  3. Unmasking: told who survived, sends its shares of b_v for surviving v and of s_v^SK for dropped v —
     never both for the same v (that would unmask v's individual upload).

SecAgg+ (Bell, Bogdanov, Ghosh, Kairouz & Raykova, CCS 2020), when `RoundParams.neighbours` = d < n − 1: the
same four steps restricted to u's d neighbours in the round's public random d-regular graph (`graph.py`):
u shares b_u and s_u^SK only among itself and its neighbours (Shamir points at their usual x-coordinates,
threshold t ≤ d), masks only with its neighbours, and answers only for them. Per client: d + 1 shares, d
encryptions, d + 1 mask expansions — O(d), not O(n).

`SecAggClient` is one client, written as a deployment would run it. `Cohort` simulates all clients of a
round together for speed, with identical outputs (tested): each pairwise key is agreed once per pair instead
of once per side, and each pairwise mask is expanded once and applied to both ends, so a round costs
n(n−1)/2 expansions instead of n(n−1) (n·d/2 with SecAgg+).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterable, Mapping

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from . import shamir
from .graph import connected
from .prg import ENC_INFO, MASK_INFO, MaskStream, agree, pair_sign
from .protocol import AdvertisedKeys, EncryptedShare, MaskedUpload, RoundParams, UnmaskShares

_PLAIN = struct.Struct(">II33s33s")  # owner, recipient, share of b_owner, share of s_owner^SK


def _aad(round_id: int, sender: int, recipient: int) -> bytes:
    return f"fedevo-secagg:{round_id}:{sender}->{recipient}".encode()


class SecAggClient:
    """One client's side of one round. `rng`: source of key material (a seeded `random.Random` makes a
    simulation reproducible; `secrets.SystemRandom()` for real use). `key_cache`: shared by the clients of a
    simulated cohort so each symmetric X25519 agreement is computed once per pair."""

    def __init__(self, client: int, params: RoundParams, rng: random.Random, key_cache: dict | None = None):
        if client not in params.clients:
            raise ValueError(f"client {client} was not sampled this round")
        self.client, self.params = client, params
        self._rng = rng
        self._enc_sk = X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        self._mask_sk = X25519PrivateKey.from_private_bytes(rng.randbytes(32))
        self._self_seed = rng.randbytes(32)
        self._cache = key_cache if key_cache is not None else {}
        self._roster: dict[int, AdvertisedKeys] = {}
        self._held: dict[int, tuple[int, int]] = {}  # owner -> (share of b_owner, share of s_owner^SK)
        self._answered: tuple | None = None
        self.neighbours = params.neighbours_of(client)  # all other sampled clients unless SecAgg+
        self.encryptions = self.decryptions = 0

    # ---------------------------------------------------------------- round 0
    def advertise(self) -> AdvertisedKeys:
        return AdvertisedKeys(self.client, self._enc_sk.public_key().public_bytes_raw(),
                              self._mask_sk.public_key().public_bytes_raw())

    def _shared(self, peer: int, which: str) -> bytes:
        key = (min(self.client, peer), max(self.client, peer), which)
        k = self._cache.get(key)
        if k is None:
            if which == "mask":
                k = agree(self._mask_sk, self._roster[peer].mask_pk, MASK_INFO, self.params.round)
            else:
                k = agree(self._enc_sk, self._roster[peer].enc_pk, ENC_INFO, self.params.round)
            self._cache[key] = k
        return k

    # ---------------------------------------------------------------- round 1
    def share_keys(self, roster: Mapping[int, AdvertisedKeys]) -> list[EncryptedShare]:
        p = self.params
        if self.client not in roster or len(roster) < p.threshold or not set(roster) <= set(p.clients):
            raise ValueError("roster must hold this client, at least t clients, and only sampled clients")
        self._roster = dict(roster)
        t = p.threshold
        holders = sorted(self.neighbours | {self.client})  # every sampled client for the complete graph
        xs = [p.x_of(v) for v in holders]
        b_sh = dict(zip(holders, shamir.split_at(shamir.to_int(self._self_seed), xs=xs, t=t, rng=self._rng)))
        s_sh = dict(zip(holders, shamir.split_at(shamir.to_int(self._mask_sk.private_bytes_raw()), xs=xs, t=t,
                                                 rng=self._rng)))
        out = []
        for v in sorted(self._roster):
            if v not in b_sh:
                continue
            if v == self.client:
                self._held[v] = (b_sh[v], s_sh[v])
                continue
            plain = _PLAIN.pack(self.client, v, b_sh[v].to_bytes(33, "big"), s_sh[v].to_bytes(33, "big"))
            nonce = self._rng.randbytes(12)
            ct = AESGCM(self._shared(v, "enc")).encrypt(nonce, plain, _aad(p.round, self.client, v))
            self.encryptions += 1
            out.append(EncryptedShare(self.client, v, nonce + ct))
        return out

    def receive_shares(self, messages: Iterable[EncryptedShare]) -> None:
        for m in messages:
            if m.recipient != self.client or m.sender not in self._roster or m.sender not in self.neighbours:
                raise ValueError(f"share {m.sender}->{m.recipient} is not for client {self.client}")
            plain = AESGCM(self._shared(m.sender, "enc")).decrypt(m.ciphertext[:12], m.ciphertext[12:],
                                                                  _aad(self.params.round, m.sender, m.recipient))
            self.decryptions += 1
            owner, rcpt, b, s = _PLAIN.unpack(plain)
            if owner != m.sender or rcpt != self.client:
                raise ValueError("share header does not match its envelope")
            self._held[owner] = (int.from_bytes(b, "big"), int.from_bytes(s, "big"))

    # ---------------------------------------------------------------- round 2
    def mask(self, encoded: np.ndarray, stream: MaskStream | None = None) -> MaskedUpload:
        """y_u = x_u + PRG(b_u) + Σ_{v≠u} p_uv over this client's neighbours in the roster (1 + d expansions)."""
        p = self.params
        if encoded.dtype != p.dtype or encoded.shape != (p.length,):
            raise ValueError(f"expected a ({p.length},) {np.dtype(p.dtype).name} vector")
        stream = stream or MaskStream(p.length, p.bits)
        y = encoded.copy()
        stream.add_into(y, self._self_seed, +1)
        for v in self._roster:
            if v in self.neighbours:
                stream.add_into(y, self._shared(v, "mask"), pair_sign(self.client, v))
        return MaskedUpload(self.client, y)

    # ---------------------------------------------------------------- round 3
    def unmask(self, survivors: Iterable[int], dropped: Iterable[int]) -> UnmaskShares:
        """Shares of b_v (v survived) and of s_v^SK (v dropped). Refuses inconsistent or repeated requests."""
        surv, drop = frozenset(survivors), frozenset(dropped)
        if surv & drop or not (surv | drop) <= set(self._roster):
            raise ValueError("survivors and dropped must be disjoint subsets of the roster")
        if self.client not in surv:
            raise ValueError("only a client whose masked input was accepted takes part in unmasking")
        near = len(surv & (self.neighbours | {self.client}))
        if near < self.params.threshold:
            raise ValueError(f"only {near} survivors in this client's neighbourhood, fewer than the threshold "
                             f"{self.params.threshold}")
        if not self.params.complete:
            key = ("connected", surv)  # the same public check for every client: computed once per cohort
            if key not in self._cache:
                self._cache[key] = connected(surv, self.params.graph)
            if not self._cache[key]:
                raise ValueError("the survivors' masking graph is disconnected: unmasking would reveal the sum "
                                 "of each component")
        if self._answered is not None and self._answered != (surv, drop):
            raise ValueError("already answered an unmasking request with different sets")
        self._answered = (surv, drop)
        return UnmaskShares(self.client, {v: self._held[v][0] for v in surv if v in self._held},
                            {v: self._held[v][1] for v in drop if v in self._held})


class Cohort:
    """All sampled clients of one round, simulated together (same messages and masked uploads as running
    `SecAggClient`s one by one, at half the key agreements and mask expansions)."""

    def __init__(self, params: RoundParams, rng: random.Random):
        self.params = params
        self._cache: dict = {}
        self.clients = {c: SecAggClient(c, params, rng, self._cache) for c in params.clients}
        self._masks: dict[int, np.ndarray] = {}
        self.stream = MaskStream(params.length, params.bits)
        # expansions each client would compute itself in a deployment (a pair's mask counts at both ends)
        self.expansions_of: dict[int, int] = {c: 0 for c in params.clients}

    def setup(self, server) -> None:
        """Rounds 0 and 1 through the server: it sees public keys and ciphertexts only."""
        roster = server.collect_keys([c.advertise() for c in self.clients.values()])
        routed = server.route_shares([m for c in self.clients.values() for m in c.share_keys(roster)])
        for cid, c in self.clients.items():
            c.receive_shares(routed.get(cid, []))

    def prepare(self, survivors: Iterable[int]) -> None:
        """Precompute PRG(b_u) + Σ_v p_uv for every client whose upload will arrive (pairs with a dropped
        client included: the survivor cannot know in advance)."""
        surv = sorted(set(survivors))
        p, s = self.params, self.stream
        self._masks = {u: np.zeros(p.length, dtype=p.dtype) for u in surv}
        for u in surv:
            s.add_into(self._masks[u], self.clients[u]._self_seed, +1)
            self.expansions_of[u] += 1
        ids = p.clients
        for i, u in enumerate(ids):
            for v in (ids[i + 1:] if p.complete else sorted(w for w in p.neighbours_of(u) if w > u)):
                mu, mv = self._masks.get(u), self._masks.get(v)
                if mu is None and mv is None:
                    continue
                r = s.expand(self.clients[u]._shared(v, "mask"))
                for w, m in ((u, mu), (v, mv)):
                    self.expansions_of[w] += m is not None
                if mu is not None:
                    np.add(mu, r, out=mu)  # u < v: +PRG
                if mv is not None:
                    np.subtract(mv, r, out=mv)

    def mask(self, client: int, encoded: np.ndarray) -> MaskedUpload:
        m = self._masks.pop(client)
        np.add(m, encoded.astype(self.params.dtype, copy=False), out=m)
        return MaskedUpload(client, m)

    def unmask(self, survivors: Iterable[int], dropped: Iterable[int]) -> list[UnmaskShares]:
        surv, drop = sorted(set(survivors)), sorted(set(dropped))
        return [self.clients[u].unmask(surv, drop) for u in surv]


__all__ = ["SecAggClient", "Cohort"]
