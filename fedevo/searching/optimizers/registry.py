"""The optimiser registry: name -> Optimizer class (``--optimizer NAME``)."""

from __future__ import annotations

from typing import Any

from ...errors import FedevoError
from .base import Optimizer

DEFAULT = "nsga3"
_REGISTRY: dict[str, type[Optimizer]] = {}


def register(cls: type[Optimizer]) -> type[Optimizer]:
    """Register an Optimizer subclass under ``cls.name`` (a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> type[Optimizer]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FedevoError(f"--optimizer: unknown optimiser {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise FedevoError(f"--optimizer must be a name ({', '.join(names())}), got {name!r}")
    get(name)
    return name


def make(name: str, space, problem, *, pop: int, seed: int, settings=None) -> Optimizer:
    """A new optimiser (nothing told yet)."""
    return get(name)(space, problem, pop=pop, seed=seed, settings=settings)


def from_state(name: str, state: Any, space, problem, *, pop: int, seed: int, settings=None) -> Optimizer:
    """An optimiser continuing from a checkpointed `state`."""
    opt = get(name)(space, problem, pop=pop, seed=seed, settings=settings)
    opt.restore(state)
    return opt


__all__ = ["DEFAULT", "check_name", "from_state", "get", "make", "names", "register"]
