"""The FEDEVO_* environment variables that fedevo reads as counts: one reader, and a value that is not an
integer is a SetupError (one line; a search stops at the first evaluation that meets it, resumable) rather than
a ValueError in every evaluation. (The choices, FEDEVO_SECAGG, FEDEVO_SCHEDULE and FEDEVO_DEVICE, are checked
where they are read, with the same error.)"""

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


__all__ = ["env_count"]
