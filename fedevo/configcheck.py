"""The rule every typed config is held to: each field of its type hint before its range checks (config.py's and
arch.py's dataclasses), and a range check as one line. Torch-free; imports only errors and argcheck."""

from __future__ import annotations

import functools
import numbers
import typing
from dataclasses import fields
from typing import Any, Literal

from .errors import FedevoError


def check(cond: bool, msg: str) -> None:
    if not cond:
        raise FedevoError(msg)


def _fits(hint: Any, v: Any) -> bool:
    """A field's value of its hint's kind, by the Python API's rules (argcheck.matches: an int field an integer,
    not a bool; a number; None only where Optional), a numpy scalar taken as its Python value. A field of
    choices (Literal) is left to its own check, which names them."""
    if typing.get_origin(hint) is Literal or any(typing.get_origin(a) is Literal for a in typing.get_args(hint)):
        return True
    from .argcheck import matches

    if isinstance(v, numbers.Number) and type(v).__module__ == "numpy":
        v = v.item()
    return matches(hint, v)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def typed(obj: Any) -> None:
    """Every field of a config held to its type hint (`_fits`), before its range checks: a config built from
    Python as from a problem file (whose values schema.py checks) — MLPArch(layers=1.5) and SimConfig(epochs="1")
    are one line, not a range check comparing a str or a silently fractional layer count."""
    hints = _hints(type(obj))
    for f in fields(obj):
        v = getattr(obj, f.name)
        if not _fits(hints[f.name], v):
            from .argcheck import describe

            raise FedevoError(f"{f.name} must be {describe(hints[f.name])}, got {v!r}")
