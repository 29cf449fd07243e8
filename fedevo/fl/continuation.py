"""Training continued exactly from a saved state (multi-fidelity search: a promoted individual continues).

The state after round r is everything the round loop carries into round r + 1, pickled: the loop's own state
(parameters, SET masks, counters, communication so far, the accuracy curve), the seeded generator, the mechanism
and its privatizer (clipping state, per-user budgets and ledgers, the recall store, the adaptive controller,
secure aggregation), and the noise stream's position. What `prepare` rebuilds the same from the config and the
seed — the data, the partition, the model object, the noise source itself — is not stored: the pickle refers to
it by name and gets the freshly built objects back when loaded. A fingerprint of the calibrated config and the
seed is stored with it, and a state is refused for any other (problem, genes, seed, planned rounds).

Continuing r₁ → r₂ → T rounds gives the numbers of one T-round run with the same seed (tests/fl/test_continuation.py).
"""

from __future__ import annotations

import hashlib
import io
import pickle
from typing import Any

import cloudpickle
import torch

from ..errors import FedevoError

FORMAT = 1
_SHARED = ("data", "part", "model", "noise", "gen")  # rebuilt by simulate.prepare from (config, seed): referred to by name


def fingerprint(cfg, seed: int) -> str:
    """The identity a state belongs to: the calibrated config (problem settings, genes, planned rounds, data) and
    the seed."""
    return hashlib.sha256(f"{FORMAT}|{cfg!r}|{int(seed)}".encode()).hexdigest()


class _Pickler(cloudpickle.CloudPickler):  # the mechanisms' transforms are closures: cloudpickle pickles them
    def __init__(self, f, shared: dict[str, Any]):
        super().__init__(f, protocol=pickle.HIGHEST_PROTOCOL)
        self._ids = {id(v): k for k, v in shared.items()}

    def persistent_id(self, obj):
        return self._ids.get(id(obj))



class _Unpickler(pickle.Unpickler):
    def __init__(self, f, shared: dict[str, Any]):
        super().__init__(f)
        self._shared = shared

    def persistent_load(self, pid):
        return self._shared[pid]


def save_state(*, cfg, seed: int, setup, loop) -> bytes:
    """The bytes of a run stopped after `loop.done` rounds (`setup`: simulate.Setup of that run)."""
    shared = {k: getattr(setup, k) for k in _SHARED}
    buf = io.BytesIO()
    _Pickler(buf, shared).dump({"format": FORMAT, "fingerprint": fingerprint(cfg, seed), "done": loop.done,
                                "mech": setup.mech, "privatizer": setup.privatizer, "gen": setup.gen.get_state(),
                                "noise": setup.noise.get_state(), "loop": loop,
                                "torch_rng": torch.get_rng_state()})
    return buf.getvalue()


def load_state(state: bytes, *, cfg, seed: int, setup):
    """Restore `setup` (freshly prepared from the same config and seed) to where the saved run stopped; returns
    the loop state to continue with. FedevoError for a state of another run."""
    if not isinstance(state, (bytes, bytearray)):
        raise FedevoError(f"resume_from: expected the bytes of a saved training state, got {type(state).__name__}")
    shared = {k: getattr(setup, k) for k in _SHARED}
    try:
        saved = _Unpickler(io.BytesIO(state), shared).load()
    except Exception as e:  # noqa: BLE001 - any damage is one message
        raise FedevoError(f"resume_from: not a readable training state ({type(e).__name__}: {e})") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise FedevoError("resume_from: a training state of another format")
    if saved["fingerprint"] != fingerprint(cfg, seed):
        raise FedevoError("resume_from: the state belongs to another evaluation (problem, genes, seed or planned "
                          "rounds differ); it can only continue the run that saved it")
    setup.mech, setup.privatizer = saved["mech"], saved["privatizer"]
    setup.gen.set_state(saved["gen"])
    setup.noise.set_state(saved["noise"])
    torch.set_rng_state(saved["torch_rng"])
    return saved["loop"]


__all__ = ["fingerprint", "load_state", "save_state"]
