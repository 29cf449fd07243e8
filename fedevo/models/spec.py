"""A user model's factory reference, without torch (problem files resolve it when they load):
"python:path/to/file.py:function" (the path relative to the problem file) or "package.module:function"."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import FedevoError

PYTHON_PREFIX = "python:"


def split_spec(spec: str) -> tuple[Optional[str], str, str]:
    """(file path or None, module name, function name) of "python:path.py:fn" / "package.module:fn"."""
    if spec.startswith(PYTHON_PREFIX):
        path, sep, fn = spec[len(PYTHON_PREFIX):].rpartition(":")
        if not sep or not path or not fn:
            raise FedevoError(f"model {spec!r}: expected 'python:path/to/file.py:function'")
        return path, "", fn
    mod, sep, fn = spec.rpartition(":")
    if not sep or not mod or not fn:
        raise FedevoError(f"model {spec!r}: expected 'package.module:function'")
    return None, mod, fn


def resolve_spec(spec: str, problem_path: Optional[str]) -> str:
    """The spec with a `python:` file's path made absolute, relative to the problem file's folder (the current
    folder for a problem without a file)."""
    path, _, fn = split_spec(spec)
    if path is None:
        return spec
    p = Path(path)
    if not p.is_absolute():
        p = (Path(problem_path).resolve().parent if problem_path else Path.cwd()) / p
    return f"{PYTHON_PREFIX}{p.resolve()}:{fn}"
