"""The registry of privacy mechanisms and trust models: every mechanism or trust name fedevo knows comes from here.

A mechanism is registered once as a `Spec` (builtin.py holds the built-in ones; a test or a plug-in may call
`register` at runtime): its name, its own parameters (a frozen dataclass whose fields are the flat problem-file
and `--params` keys), its rules (validation), which privacy budgets it can meet (`target_eps`, `eps_budget`), its
scheduling cost (`step_noise`), and, per trust model it supports, the runtime class (`privacy/mechanism.py`'s `Mechanism`)
that calibrates it, privatises the round loop and accounts for it. Torch-free: problem files load without it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from importlib import import_module
from typing import Any, Callable, Mapping, Optional, Union

from ..errors import FedevoError


# PrivacyConfig's settings shared by every mechanism (fedevo/config.py); a mechanism's own keys are the others
SHARED_KEYS = ("mechanism", "trust", "delta", "target_eps", "eps_budget", "max_participations", "sampling",
               "aggregation", "secagg_bits", "secagg_range", "secagg_threshold", "secagg_neighbours")


def _no_rules(pc) -> None:
    return None


def _no_noise(cfg, params: float) -> float:
    return 0.0


@dataclass(frozen=True)
class Spec:
    """One mechanism. `runtime`: trust model -> its `Mechanism` class, or "module:Class" under fedevo.privacy
    (imported on use). `rules(pc)`: the mechanism's checks on a `PrivacyConfig` whose mechanism it is (its
    parameters are `pc.params`). `step_noise(cfg, params)`: noise values drawn per local step of one client beyond the
    training itself, for the scheduler's cost model (fl/cost.py; `params` = the active parameter count)."""

    name: str
    params: type
    runtime: Mapping[str, Union[str, type]]
    doc: str = ""
    private: bool = True  # False: no privacy claim (ε = ∞) under any trust model
    budgets: tuple[str, ...] = ()  # which of "target_eps" / "eps_budget" it can be calibrated to
    rules: Callable[[Any], None] = _no_rules
    step_noise: Callable[[Any, float], float] = _no_noise

    @property
    def trusts(self) -> tuple[str, ...]:
        return tuple(self.runtime)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self.params))

    def runtime_class(self, trust: str) -> type:
        ref = self.runtime[trust]
        if isinstance(ref, str):
            module, cls = ref.split(":")
            return getattr(import_module(f"{__package__}.{module}"), cls)
        return ref


@dataclass(frozen=True)
class Trust:
    """One trust model: who must be trusted (docs/privacy.md's threat-model table). `implies`: settings it fixes
    (problem files need not repeat them); `rules(cfg)`: its checks on a private SimConfig."""

    name: str
    doc: str
    implies: Mapping[str, Any] = field(default_factory=dict)
    rules: Callable[[Any], None] = _no_rules


_MECHANISMS: dict[str, Spec] = {}
_TRUSTS: dict[str, Trust] = {}
_loaded = False


def _builtins() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        import_module(f"{__package__}.builtin")  # registers the built-in trust models and mechanisms


def register(spec: Spec, *, replace: bool = False) -> Spec:
    """Add a mechanism (a name already taken is an error unless `replace`)."""
    _builtins()
    if spec.name in _MECHANISMS and not replace:
        raise FedevoError(f"mechanism {spec.name!r} is already registered")
    clash = [k for k in spec.keys if k in SHARED_KEYS or k == "params"]
    if clash:
        raise FedevoError(f"mechanism {spec.name!r}: parameter(s) {', '.join(clash)} are PrivacyConfig's shared "
                          "settings; name them otherwise")
    unknown = [t for t in spec.runtime if t not in _TRUSTS]
    if unknown:
        raise FedevoError(f"mechanism {spec.name!r}: unknown trust model(s) {', '.join(map(repr, unknown))}; "
                          f"registered: {', '.join(_TRUSTS)}")
    _MECHANISMS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    _MECHANISMS.pop(name, None)


def register_trust(trust: Trust) -> Trust:
    _TRUSTS[trust.name] = trust
    return trust


def mechanism(name: str) -> Spec:
    _builtins()
    if name not in _MECHANISMS:
        raise FedevoError(f"unknown mechanism {name!r}; choose one of {', '.join(_MECHANISMS)}")
    return _MECHANISMS[name]


def trust(name: str) -> Trust:
    _builtins()
    if name not in _TRUSTS:
        raise FedevoError(f"unknown trust {name!r}; choose one of {', '.join(_TRUSTS)}")
    return _TRUSTS[name]


def mechanisms() -> tuple[str, ...]:
    _builtins()
    return tuple(_MECHANISMS)


def trusts() -> tuple[str, ...]:
    _builtins()
    return tuple(_TRUSTS)


def default_mechanism() -> str:
    """The mechanism of the default privacy object: the first registered one without a privacy claim."""
    _builtins()
    return next(n for n, s in _MECHANISMS.items() if not s.private)


def default_trust() -> str:
    _builtins()
    return next(iter(_TRUSTS))


def mechanism_keys() -> tuple[str, ...]:
    """Every registered mechanism's own flat keys, in registration order, each once."""
    _builtins()
    out: dict[str, None] = {}
    for s in _MECHANISMS.values():
        out.update(dict.fromkeys(s.keys))
    return tuple(out)


def owners(key: str) -> list[Spec]:
    _builtins()
    return [s for s in _MECHANISMS.values() if key in s.keys]


def trust_implies(name: Optional[str]) -> Mapping[str, Any]:
    """The settings a trust model fixes ({} for an unknown name: PrivacyConfig reports it)."""
    _builtins()
    t = _TRUSTS.get(name) if isinstance(name, str) else None
    return dict(t.implies) if t is not None else {}


def private(pc) -> bool:
    """Whether a PrivacyConfig makes a privacy claim (its mechanism is not the no-privacy one)."""
    return mechanism(pc.mechanism).private


__all__ = ["SHARED_KEYS", "Spec", "Trust", "register", "unregister", "register_trust", "mechanism", "trust", "mechanisms", "trusts",
           "default_mechanism", "default_trust", "mechanism_keys", "owners", "trust_implies", "private"]
