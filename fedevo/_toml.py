"""The one TOML reader: the standard library's tomllib (Python 3.11+), else tomli (its backport, a requirement on
Python 3.10 only). Import `loads` and `TOMLDecodeError` from here."""

from __future__ import annotations

try:
    from tomllib import TOMLDecodeError, loads
except ModuleNotFoundError:  # Python 3.10
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
