"""Cryptographic primitives shared by both sides of secure aggregation: X25519 key agreement, HKDF, and an
AES-256-CTR pseudo-random generator that expands a 32-byte seed into a vector over Z_{2^k}.

AES-CTR keystream is a cryptographic PRG (unlike numpy's PCG64/Philox) and, through OpenSSL's AES-NI, the
fastest option measured on this machine (~8 GB/s on one core, vs ~0.3–2 GB/s for numpy's bit generators).
"""

from __future__ import annotations

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MASK_INFO = b"fedevo/secagg/v1/pairwise-mask"
ENC_INFO = b"fedevo/secagg/v1/share-encryption"
SELF_INFO = b"fedevo/secagg/v1/self-mask"
DTYPES = {32: np.uint32, 64: np.uint64}
_NONCE = b"\0" * 16  # every key expands exactly one stream, so a fixed CTR nonce is safe


def hkdf(secret: bytes, info: bytes, round_id: int = 0) -> bytes:
    """32 uniformly random bytes from a Diffie–Hellman output (HKDF-SHA256, RFC 5869), bound to the round."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                info=info + b"/round=" + str(int(round_id)).encode()).derive(secret)


def agree(private: X25519PrivateKey, peer_public: bytes, info: bytes, round_id: int = 0) -> bytes:
    """The key two parties share: HKDF(X25519(sk_u, pk_v)); symmetric in u and v."""
    return hkdf(private.exchange(X25519PublicKey.from_public_bytes(peer_public)), info, round_id)


class MaskStream:
    """Expands 32-byte seeds into length-n vectors over Z_{2^bits} (AES-256-CTR keystream), reusing buffers."""

    def __init__(self, length: int, bits: int):
        if bits not in DTYPES:
            raise ValueError(f"bits must be 32 or 64, got {bits}")
        self.length, self.bits, self.dtype = int(length), int(bits), DTYPES[bits]
        self.nbytes = self.length * (bits // 8)
        self._zeros = bytes(self.nbytes)
        self._out = bytearray(self.nbytes + 16)
        self._view = np.frombuffer(self._out, dtype=self.dtype, count=self.length)
        self.expansions = 0

    def expand(self, seed: bytes) -> np.ndarray:
        """The PRG output for `seed`, as a view into a reused buffer (copy it to keep it)."""
        enc = Cipher(algorithms.AES(seed), modes.CTR(_NONCE)).encryptor()
        enc.update_into(self._zeros, self._out)
        self.expansions += 1
        return self._view

    def add_into(self, acc: np.ndarray, seed: bytes, sign: int) -> None:
        """acc ← acc ± PRG(seed)  (mod 2^bits; numpy unsigned arithmetic wraps)."""
        r = self.expand(seed)
        if sign > 0:
            np.add(acc, r, out=acc)
        else:
            np.subtract(acc, r, out=acc)


def pair_sign(u: int, v: int) -> int:
    """p_uv = +PRG(s_uv) for u < v and −PRG(s_uv) for u > v, so p_uv = −p_vu and Σ_u Σ_v p_uv = 0."""
    return 1 if u < v else -1


__all__ = ["MASK_INFO", "ENC_INFO", "SELF_INFO", "DTYPES", "hkdf", "agree", "MaskStream", "pair_sign"]
