"""The FEDEVO_* environment variables that fedevo reads as counts or as on/off opt-ins: one reader each, and a
value it does not take is a SetupError (one line; a search stops at the first evaluation that meets it,
resumable) rather than a ValueError in every evaluation, or an opt-in silently off. (The choices, FEDEVO_SECAGG,
FEDEVO_SCHEDULE and FEDEVO_DEVICE, are checked where they are read, with the same error.)"""

from __future__ import annotations

import os
from typing import Optional

from .errors import SetupError


def env_count(name: str) -> Optional[int]:
    """The integer in environment variable `name`, at least 1 (0 or less counts as 1); None where it is unset or
    empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SetupError(f"{name} must be an integer (a count), got {raw!r}") from None
    return max(1, value)


ON, OFF = ("1", "on", "yes", "true"), ("0", "off", "no", "false")


def env_flag(name: str) -> Optional[bool]:
    """The on/off in environment variable `name` (1/0, on/off, yes/no, true/false, any case); None where it is
    unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    if raw.lower() in ON:
        return True
    if raw.lower() in OFF:
        return False
    raise SetupError(f"{name} must be 1 or 0 (on/off, yes/no, true/false), got {raw!r}")


__all__ = ["env_count", "env_flag"]
