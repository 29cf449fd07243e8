"""The objectives fedevo knows, by name (builtin.py registers the built-in ones; a user or a test may register
more at run time, or name a function with ``python:FILE.py:FUNC`` in a problem file)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, Optional

from .objective import Objective, ObjectiveError

_REGISTRY: dict[str, Objective] = {}
_SEALED: set[str] = set()  # the built-in objectives' names (builtin.py): never replaced nor removed


def register(objective: Objective, *, replace: bool = False) -> Objective:
    """Add an objective; a second one of the same name is refused unless replace=True, and a built-in one's
    always (the evaluation log's columns, picks and readers of earlier runs mean the built-in one)."""
    if not isinstance(objective, Objective):
        raise TypeError(f"register() takes an Objective, got {type(objective).__name__}")
    have = _REGISTRY.get(objective.name)
    if have is not None and have is not objective:
        if objective.name in _SEALED:
            raise ObjectiveError(f"{objective.name!r} is a built-in objective and cannot be replaced; register "
                                 "yours under another name")
        if not replace:
            raise ObjectiveError(f"an objective named {objective.name!r} is registered already")
    _REGISTRY[objective.name] = objective
    return objective


def seal() -> None:
    """The objectives registered so far are the built-in ones (builtin.py calls it once, after registering)."""
    _SEALED.update(_REGISTRY)


def unregister(name: str) -> None:
    if name in _SEALED:
        raise ObjectiveError(f"{name!r} is a built-in objective and cannot be removed")
    _REGISTRY.pop(name, None)


def builtin(name: str) -> bool:
    """Whether `name` is a built-in objective's (builtin.py: never replaced)."""
    return name in _SEALED


def registered(name: str) -> Optional[Objective]:
    """The registered objective `name`, or None."""
    return _REGISTRY.get(name)


def get(name: str) -> Objective:
    """The registered objective `name`; KeyError naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown objective {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


class ByName:
    """`read` of an objective rebuilt from a record (run.json, a checkpoint): the registered objective of that name
    reads; without one, the value must come from a logged row (``row[name]``). Picklable (checkpoints)."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, result: Any) -> Optional[float]:
        obj = registered(self.name)
        if obj is None or isinstance(obj.read, ByName):
            raise LookupError(f"objective {self.name!r} is not registered in this process, so an evaluation cannot "
                              "be read for it (register it, or name its function in the problem file)")
        return obj.read(result)

    def __eq__(self, other):
        return isinstance(other, ByName) and other.name == self.name

    def __hash__(self):
        return hash(("ByName", self.name))


def from_record(rec: Mapping[str, Any]) -> Objective:
    """An objective rebuilt from `Objective.record()` (run.json's ``objective_specs``); it reads evaluations through
    the registered objective of its name (a run's readers take ``row[name]`` instead)."""
    known = {f.name for f in fields(Objective)} - {"read"}
    return Objective(read=ByName(rec["name"]), **{k: v for k, v in rec.items() if k in known})
