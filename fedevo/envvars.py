"""The FEDEVO_* environment variables fedevo reads: one strict reader per kind of value, and a value a reader does
not take is a SetupError (one line; a search stops at the first evaluation that meets it, resumable) rather than a
ValueError in every evaluation, or an opt-in silently off (or on):

- `env_count`: a count (FEDEVO_CHUNK_THREADS, FEDEVO_POPULATION_THREADS, FEDEVO_ACCOUNTANT_PROCESSES,
  FEDEVO_GPU_CLIENTS);
- `env_flag`: an on/off, 1/0 or its words (FEDEVO_CUDA_TF32, FEDEVO_CUDA_COMPILE, FEDEVO_STACKED,
  FEDEVO_STACKED_CNN, FEDEVO_CUDA_GRAPHS, FEDEVO_NATIVE, FEDEVO_BIAS_IN_WEIGHTS);
- `env_auto_flag`: 'auto' or an on/off (FEDEVO_LOWER, FEDEVO_SPARSE);
- `env_choice`: one of a few words, any case (FEDEVO_SECAGG, FEDEVO_SCHEDULE, FEDEVO_DEVICE,
  FEDEVO_CUDA_FUSED_UPDATE);
- `env_share`: a share, a number in (0, 1] (FEDEVO_GPU_SHARE).

Unset or empty is the caller's default for each. FEDEVO_CACHE (a folder) is the one FEDEVO_* variable read
without one of these. docs/engine.md lists them all."""

from __future__ import annotations

import contextlib
import os
from typing import Optional, Sequence, TypeVar

from .errors import SetupError

T = TypeVar("T")


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


def env_count(name: str) -> Optional[int]:
    """The integer in environment variable `name`, at least 1 (0 or less counts as 1); None where it is unset or
    empty."""
    raw = _raw(name)
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SetupError(f"{name} must be an integer (a count), got {raw!r}") from None
    return max(1, value)


ON, OFF = ("1", "on", "yes", "true"), ("0", "off", "no", "false")
FLAG_WORDS = "1 or 0 (on/off, yes/no, true/false)"


def _flag(name: str, raw: str, expected: str) -> bool:
    if raw.lower() in ON:
        return True
    if raw.lower() in OFF:
        return False
    raise SetupError(f"{name} must be {expected}, got {raw!r}")


def env_flag(name: str, default: Optional[bool] = None) -> Optional[bool]:
    """The on/off in environment variable `name` (1/0, on/off, yes/no, true/false, any case); `default` where it
    is unset or empty."""
    raw = _raw(name)
    return default if not raw else _flag(name, raw, FLAG_WORDS)


def env_auto_flag(name: str) -> Optional[bool]:
    """An on/off as `env_flag` reads it, or 'auto' (any case): None for 'auto', unset or empty."""
    raw = _raw(name)
    if not raw or raw.lower() == "auto":
        return None
    return _flag(name, raw, f"auto or {FLAG_WORDS}")


def env_choice(name: str, choices: Sequence[str], default: T, *, expected: Optional[str] = None) -> "str | T":
    """The value of environment variable `name`, stripped and lower-cased, where it is one of `choices`
    (lower-case words); `default` where it is unset or empty. `expected` words the choices in the error (default
    "one of a, b")."""
    raw = _raw(name)
    if not raw:
        return default
    if raw.lower() in choices:
        return raw.lower()
    raise SetupError(f"{name} must be {expected or 'one of ' + ', '.join(choices)}, got {raw!r}")


@contextlib.contextmanager
def env_set(name: str, value: str):
    """Inside, environment variable `name` is `value` (for this process and the processes it starts); after, what it
    was, or unset where it was unset."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def env_share(name: str) -> Optional[float]:
    """The share in environment variable `name`: a number greater than 0 and at most 1 (0.25: a quarter); None
    where it is unset or empty."""
    raw = _raw(name)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # NaN too
        raise SetupError(f"{name} must be a share, a number in (0, 1], got {raw!r}")
    return value


__all__ = ["env_auto_flag", "env_choice", "env_count", "env_flag", "env_set", "env_share"]
