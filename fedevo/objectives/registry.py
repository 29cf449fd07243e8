"""The objectives fedevo knows, by name (builtin.py registers the built-in ones; a user or a test may register
more at run time, or name a function with ``python:FILE.py:FUNC`` in a problem file)."""

from __future__ import annotations

from .objective import Objective

_REGISTRY: dict[str, Objective] = {}


def register(objective: Objective, *, replace: bool = False) -> Objective:
    """Add an objective; a second one of the same name is refused unless replace=True."""
    if not isinstance(objective, Objective):
        raise TypeError(f"register() takes an Objective, got {type(objective).__name__}")
    if objective.name in _REGISTRY and not replace and _REGISTRY[objective.name] is not objective:
        raise ValueError(f"an objective named {objective.name!r} is registered already")
    _REGISTRY[objective.name] = objective
    return objective


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def get(name: str) -> Objective:
    """The registered objective `name`; KeyError naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown objective {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)
