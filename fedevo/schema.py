"""One typed schema for problem files and `--params`, derived from the frozen config dataclasses.

Every setting a problem file's `[data]`, `[train]`, `[privacy]` and `[deployment]` tables or a `--params` object
may hold is a field of a config dataclass (fedevo/config.py: SimConfig, DataConfig, DeploymentConfig,
PrivacyConfig, the model architectures; fedevo/privacy/params.py: each registered mechanism's parameters;
fedevo/data/sources.py: a [data] source; fedevo/problem.py: a gene). Its type is that field's annotation:
`settings()` reads them with `dataclasses.fields` and `typing.get_type_hints`, so a field added to one of those
dataclasses is a known, typed key at once, with no second list to edit. `check_value` holds a value to its type:

* `bool`: true or false only (no "false" strings, no 0/1);
* `int` (counts: rounds, epochs, batch_size, clients, layers...): an integer; a float with an integral value
  (2.0, as JSON writers may print it) is taken as that integer; 1.5, "2" and booleans are refused;
* `float`: a finite number (integers too); NaN, ±inf, strings and booleans are refused;
* `str`, `Literal[...]` (one of the listed names, with a suggestion), `Optional[...]` (None only from JSON null),
  `Union[...]`, `tuple[X, ...]` (a list).

Ranges and rules between settings are the dataclasses' own `__post_init__` checks (and the mechanism's and trust
model's rules, fedevo/privacy/builtin.py), run when the problem's configuration is built at load.
Every message starts with where the value is (`[train] epochs: expected an integer, got 1.5`).
"""

from __future__ import annotations

import difflib
import math
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, Literal, Mapping, Optional, Union

from .errors import FedevoError


@dataclass(frozen=True)
class Setting:
    """One key: its table in a problem file, its type (a type hint) and the dataclass that declares it."""

    name: str
    section: str
    hint: Any
    owner: type


# SimConfig fields that are other configs (their own sections), and DataConfig fields that are not settings
NESTED = ("data", "arch", "privacy", "deployment")
DATA_NOT_SETTINGS = ("dataset", "data_dir", "download", "source")
# the user model's fields as [train] keys (UserArch.init is `model_init`: `init` alone would say nothing)
USER_ARCH = {"model_init": "init", "sparse_conv": "sparse_conv"}
PRESET = Setting("preset", "privacy", str, object)  # expands to privacy settings (fedevo/privacy/presets.py)


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _own(cls: type, skip: tuple[str, ...] = (), section: str = "") -> dict[str, Setting]:
    h = _hints(cls)
    return {f.name: Setting(f.name, section, h[f.name], cls) for f in fields(cls) if f.name not in skip}


def train_keys(model: Optional[str]) -> dict[str, Setting]:
    """[train]: SimConfig's own fields, then the model's ('mlp', 'cnn'; None: a user model)."""
    from .config import CNNArch, MLPArch, SimConfig, UserArch

    out = _own(SimConfig, NESTED, "train")
    if model is None:
        h = _hints(UserArch)
        out.update({k: Setting(k, "train", h[f], UserArch) for k, f in USER_ARCH.items()})
    else:
        out.update(_own({"mlp": MLPArch, "cnn": CNNArch}[model], (), "train"))
    return out


def arch_keys(model: Optional[str]) -> tuple[str, ...]:
    """The model's own [train] keys (its architecture dataclass's fields)."""
    from .config import CNNArch, MLPArch

    if model is None:
        return tuple(USER_ARCH)
    return tuple(f.name for f in fields({"mlp": MLPArch, "cnn": CNNArch}[model]))


def sim_keys() -> tuple[str, ...]:
    from .config import SimConfig

    return tuple(f.name for f in fields(SimConfig) if f.name not in NESTED)


def data_keys() -> tuple[str, ...]:
    from .config import DataConfig

    return tuple(f.name for f in fields(DataConfig) if f.name not in DATA_NOT_SETTINGS)


def deploy_keys() -> tuple[str, ...]:
    from .config import DeploymentConfig

    return tuple(f.name for f in fields(DeploymentConfig))


def privacy_settings() -> dict[str, Setting]:
    """[privacy]: PrivacyConfig's shared fields, every registered mechanism's own (a mechanism registered at
    runtime brings its keys), and `preset`."""
    from .config import PrivacyConfig
    from .privacy import registry

    out = _own(PrivacyConfig, ("params",), "privacy")
    for name in registry.mechanisms():
        for k, s in _own(registry.mechanism(name).params, (), "privacy").items():
            out.setdefault(k, s)
    out["preset"] = PRESET
    return out


def settings(model: Optional[str], *, user_data: bool = False) -> dict[str, Setting]:
    """Every fedevo setting of a problem of built-in `model` ('mlp', 'cnn') or a user model (None), by key."""
    from .config import DataConfig, DeploymentConfig
    from .data.sources import FileSource

    out = train_keys(model)
    out.update(_own(DataConfig, DATA_NOT_SETTINGS, "data"))
    if user_data:
        out.update(_own(FileSource, (), "data"))
    out.update(privacy_settings())
    out.update(_own(DeploymentConfig, (), "deployment"))
    return out


def section_keys(model: Optional[str], section: str, *, user_data: bool = False) -> tuple[str, ...]:
    return tuple(k for k, s in settings(model, user_data=user_data).items() if s.section == section)


# ---------------------------------------------------------------------------------------------- values
def describe(hint: Any) -> str:
    """A type hint in words, as a message says what was expected."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a finite number"
    if hint is str:
        return "a string"
    if origin is Literal:
        return "one of " + ", ".join(_show(a) for a in args)
    if origin in (Union, types.UnionType):
        arms = sorted(describe(a) for a in args if a is not type(None))  # typing caches Unions in either order
        return " or ".join(arms)
    if origin is tuple or hint is tuple:
        return "a list" + (f" of {_plural(describe(args[0]))}" if args else "")
    if origin is dict or hint is dict:
        return "a table"
    return "a value"


def _plural(words: str) -> str:
    for one, many in (("an integer", "integers"), ("a finite number", "finite numbers"), ("a string", "strings")):
        words = words.replace(one, many)
    return words


def _show(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    text = repr(v)
    return text if len(text) <= 60 else f"{type(v).__name__}(...)"


class _Mismatch(Exception):
    pass


def _coerce(hint: Any, v: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return v
    if hint is bool or hint is str:  # the value's own type, nothing read as one (not 1 as true, not 3 as "3")
        if isinstance(v, hint):
            return v
        raise _Mismatch
    if hint is int:
        if isinstance(v, bool):
            raise _Mismatch
        if isinstance(v, int):
            return v
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return int(v)
        raise _Mismatch
    if hint is float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise _Mismatch
        return v
    if origin is Literal:
        for a in args:
            if type(a) is type(v) and a == v:
                return v
        raise _Mismatch
    if origin in (Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(a, v)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin is tuple or hint is tuple:
        if not isinstance(v, (list, tuple)):
            raise _Mismatch
        if args and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(args[0], x) for x in v)
        return tuple(v)
    if hint is dict or origin is dict:
        if isinstance(v, dict):
            return v
        raise _Mismatch
    if hint is type(None):
        if v is None:
            return None
        raise _Mismatch
    return v


def check_value(where: str, hint: Any, value: Any) -> Any:
    """`value` held to the type `hint` (returned with its proper type: 2.0 for an integer is 2), else a
    FedevoError "WHERE: expected ..., got ..." (with the nearest name for a misspelt choice)."""
    try:
        return _coerce(hint, value)
    except _Mismatch:
        pass
    hint_text = ""
    if typing.get_origin(hint) is Literal and isinstance(value, str):
        near = difflib.get_close_matches(value, [a for a in typing.get_args(hint) if isinstance(a, str)], n=1)
        hint_text = f"; did you mean {_show(near[0])}?" if near else ""
    raise FedevoError(f"{where}: expected {describe(hint)}, got {_show(value)}{hint_text}")


def unknown_key(where: str, key: str, known) -> FedevoError:
    """The error for a key that is not in `known`, with the nearest known key."""
    near = difflib.get_close_matches(str(key), list(known), n=1)
    tip = f"did you mean {near[0]!r}? " if near else ""
    return FedevoError(f"{where}{key}: unknown key; {tip}known: {', '.join(known)}")


def check_table(section: str, table: Any, known: Mapping[str, Setting],
                others: Mapping[str, Setting] = {}) -> dict[str, Any]:
    """A problem file's [section]: a table whose keys are `known` (a key of `others` is named with its own
    section) and whose values have their types; returns the values with their proper types."""
    if not isinstance(table, dict):
        raise FedevoError(f"[{section}]: expected a table, got {_show(table)}")
    out = {}
    for k, v in table.items():
        if k not in known and k in others:
            raise FedevoError(f"[{section}] {k}: belongs in [{others[k].section}]")
        if k not in known:
            raise unknown_key(f"[{section}] ", k, list(known))
        out[k] = check_value(f"[{section}] {k}", known[k].hint, v)
    return out


__all__ = ["Setting", "settings", "section_keys", "train_keys", "arch_keys", "sim_keys", "data_keys",
           "deploy_keys", "privacy_settings", "check_value", "check_table", "unknown_key", "describe"]
