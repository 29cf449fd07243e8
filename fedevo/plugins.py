"""The user's own code named in a problem file: `"python:path/to/file.py:function"` (a path relative to the
problem file) or `"package.module:function"` (importable from the Python path).

Loading such a spec runs that code with the user's rights, as any import does. A `python:` file is imported
once per process under a private module name and its functions are pickled by value, so Ray workers (and a
cluster's nodes) get them without the file being importable there.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from .errors import FedevoError

PREFIX = "python:"


def split_spec(spec: str, *, what: str) -> tuple[Optional[str], str, str]:
    """(file or None, module, function) of a spec; FedevoError naming `what` if it is malformed."""
    if not isinstance(spec, str):
        raise FedevoError(f"{what} must be a string like \"python:file.py:function\" or \"package.module:function\", "
                          f"got {spec!r}")
    if spec.startswith(PREFIX):
        path, sep, fn = spec[len(PREFIX):].rpartition(":")
        if not sep or not path or not fn:
            raise FedevoError(f"{what} {spec!r} must look like \"python:path/to/file.py:function\"")
        return path, "", fn
    mod, sep, fn = spec.partition(":")
    if not sep or not mod or not fn:
        raise FedevoError(f"{what} {spec!r} must look like \"package.module:function\" or "
                          "\"python:path/to/file.py:function\"")
    return None, mod, fn


def resolve_spec(spec: str, base: Optional[str | Path], *, what: str) -> str:
    """The spec with a `python:` path made absolute against `base` (the problem file's directory)."""
    path, _, fn = split_spec(spec, what=what)
    if path is None or Path(path).is_absolute() or base is None:
        return spec
    return f"{PREFIX}{(Path(base) / path).resolve()}:{fn}"


def _import_file(path: Path, *, what: str):
    name = f"fedevo_user_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    if not path.is_file():
        raise FedevoError(f"{what}: file {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # noqa: BLE001 - the user's module failed to import: one line
        del sys.modules[name]
        raise FedevoError(f"{what}: importing {str(path)!r} failed ({type(e).__name__}: {e})") from None
    try:
        import cloudpickle

        cloudpickle.register_pickle_by_value(mod)
    except (ImportError, ValueError):  # pragma: no cover - cloudpickle comes with Ray
        pass
    return mod


def load_callable(spec: str, *, base: Optional[str | Path] = None, what: str = "function") -> Callable[..., Any]:
    """The function a spec names; FedevoError (one line naming `what`) if the file, module or function is
    missing or not callable."""
    path, mod_name, fn = split_spec(spec, what=what)
    if path is not None:
        p = Path(path)
        if not p.is_absolute() and base is not None:
            p = Path(base) / p
        mod = _import_file(p.resolve(), what=what)
        where = str(p)
    else:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            raise FedevoError(f"{what} {spec!r}: cannot import module {mod_name!r} ({e})") from None
        except Exception as e:  # noqa: BLE001
            raise FedevoError(f"{what} {spec!r}: importing {mod_name!r} failed ({type(e).__name__}: {e})") from None
        where = mod_name
    obj = getattr(mod, fn, None)
    if obj is None:
        raise FedevoError(f"{what} {spec!r}: {where} has no {fn!r}")
    if not callable(obj):
        raise FedevoError(f"{what} {spec!r}: {fn!r} is not callable")
    return obj


__all__ = ["PREFIX", "load_callable", "resolve_spec", "split_spec"]
