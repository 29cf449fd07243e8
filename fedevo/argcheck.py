"""The Python API's arguments held to their type hints (issue #35): one decorator, no hand-written checks.

``@checked`` reads a function's annotations (``typing.get_type_hints``) and checks every argument a call passes
before the function runs: a wrong type is a :class:`~fedevo.errors.FedevoError` naming the function and the
argument (``search(): pop must be an int, got bool``). The rules are the problem files' (fedevo/schema.py): a bool
is not a number, an int is a float, ``None`` only where the hint is ``Optional``; a NumPy scalar stands for the
Python value it holds (``np.int64(4)`` is the int 4, and the function gets 4); ``Mapping`` and ``Sequence`` are
checked one level deep (a string is not a sequence); ``Callable`` must be callable; ``Any`` takes anything.
Ranges (pop >= 1, a seed in 0..2**32-1, ...) stay with the checks that know them (fedevo/guards.py, the configs).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import inspect
import os
import types
import typing
from pathlib import Path
from typing import Any, Callable, Literal, Union

from .errors import FedevoError

_NAMES = {bool: "a bool", int: "an int", float: "a number", str: "a str", bytes: "bytes", Path: "a path",
          dict: "a dict", type(None): "None"}


class _Mismatch(Exception):
    pass


def describe(hint: Any) -> str:
    """What a hint asks for, in words: 'an int', 'a str or a path', 'one of "embed", "shared"'."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return "anything"
    if origin in (Union, types.UnionType):
        parts = [describe(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(parts)) + (" or None" if type(None) in args else "")
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (cabc.Mapping, dict, cabc.MutableMapping):
        return "a dict"
    if origin in (cabc.Sequence, list, tuple, cabc.Iterable):
        return "a list or tuple" + (f" of {_plain(describe(args[0]))}" if args and args[0] is not Ellipsis else "")
    if origin in (cabc.Callable,) or hint is Callable:
        return "a function"
    if isinstance(hint, type):
        return _NAMES.get(hint, f"a {hint.__name__}")
    return str(hint)


def _plain(text: str) -> str:
    return text.removeprefix("a ").removeprefix("an ") + "s" if text.startswith(("a ", "an ")) else text


def _ok(hint: Any, value: Any) -> bool:
    if hint is Any or hint is object:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return any(_ok(a, value) for a in args)
    if origin is Literal:
        return any(value == a and type(value) is type(a) for a in args)
    if hint is type(None) or hint is None:
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is Path:
        return isinstance(value, os.PathLike)
    if hint is Callable or origin is cabc.Callable:
        return callable(value)
    if origin in (cabc.Mapping, dict, cabc.MutableMapping) or hint in (dict, cabc.Mapping):
        return isinstance(value, cabc.Mapping) and (not args or all(_ok(args[0], k) for k in value))
    if origin in (cabc.Sequence, list, tuple, cabc.Iterable) or hint in (list, tuple):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return False
        item = args[0] if args and args[0] is not Ellipsis else Any
        return all(_ok(item, v) for v in value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a hint this checker does not know: the function checks


matches = _ok  # whether a value is of a hint's kind, by the rules above (fedevo/config.py's fields too)


def plain(value: Any) -> Any:
    """A NumPy scalar (or 0-d array) as the Python number, bool or str it holds (`np.int64(2)` -> 2: what a
    DataFrame row or `np.arange` gives a notebook); any other value as it is."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        item = value.item()
        return item if isinstance(item, (bool, int, float, str)) else value
    return value


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def checked(fn: Callable) -> Callable:
    """Check every argument of a call to `fn` against `fn`'s type hints first (FedevoError naming it)."""
    sig = inspect.signature(fn)
    name = fn.__qualname__.split(".<locals>.")[-1]
    hints: dict[str, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not hints:  # resolved on first call: the module's names (forward references) exist by then
            hints.update({k: v for k, v in typing.get_type_hints(fn).items() if k != "return"} or {"": None})
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise FedevoError(f"{name}(): {e}") from None
        for arg, value in bound.arguments.items():
            p = sig.parameters[arg]
            hint = hints.get(arg)
            if hint is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            if not _ok(hint, value) and _ok(hint, plain(value)):  # np.int64(4) for an int: 4
                value = bound.arguments[arg] = plain(value)
            if not _ok(hint, value):
                raise FedevoError(f"{name}(): {arg} must be {describe(hint)}, got {_kind(value)}"
                                  + (f" {value!r}" if isinstance(value, (int, float, str)) and len(repr(value)) < 40
                                     and not isinstance(value, bool) else ""))
        return fn(*bound.args, **bound.kwargs)

    wrapper.__signature__ = sig
    return wrapper


__all__ = ["checked", "describe", "matches", "plain"]
