"""The user's own code named in a problem file — a model factory (`model = ...`) or an evaluator
(`evaluator = ...`): `"python:path/to/file.py:function"` (a path relative to the problem file) or
`"package.module:function"` (importable from the Python path). Torch-free.

Loading such a spec runs that code with the user's rights, as any import does. A `python:` file is imported once
per process under a private module name, and its functions are pickled by value, so Ray workers get them without
the file being importable there.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

from .errors import FedevoError, one_line
from .usercode import UserExit, call_user, stdout_to_stderr

USER_MODULE_PREFIX = "fedevo_user_"  # the modules of the user's files (`_import_file`): by value to Ray's workers

PYTHON_PREFIX = "python:"
_import_lock = threading.Lock()  # chunk threads may build a model at once


def split_spec(spec: str, *, kind: str = "model") -> tuple[Optional[str], str, str]:
    """(file path or None, module name, function name) of "python:path.py:fn" / "package.module:fn"."""
    if not isinstance(spec, str):
        raise FedevoError(f"{kind} {spec!r}: expected 'python:path/to/file.py:function' or 'package.module:function'")
    if spec.startswith(PYTHON_PREFIX):
        path, sep, fn = spec[len(PYTHON_PREFIX):].rpartition(":")
        if not sep or not path or not fn:
            raise FedevoError(f"{kind} {spec!r}: expected 'python:path/to/file.py:function'")
        return path, "", fn
    mod, sep, fn = spec.rpartition(":")
    if not sep or not mod or not fn:
        raise FedevoError(f"{kind} {spec!r}: expected 'package.module:function' or 'python:path/to/file.py:function'")
    return None, mod, fn


def resolve_spec(spec: str, problem_path: Optional[str], *, kind: str = "model") -> str:
    """The spec with a `python:` file's path made absolute, relative to the problem file's folder (the current
    folder for a problem without a file)."""
    path, _, fn = split_spec(spec, kind=kind)
    if path is None:
        return spec
    p = Path(path)
    if not p.is_absolute():
        p = (Path(problem_path).resolve().parent if problem_path else Path.cwd()) / p
    return f"{PYTHON_PREFIX}{p.resolve()}:{fn}"


# a user's file (its resolved path) -> the modules beside it that it imported (`_imported_beside`): by value to
# Ray's workers with it, and fingerprinted with it in run.json's `inputs` (`imported_beside`)
_SIBLINGS: dict[str, tuple] = {}


_IMPORTED_SHA: dict[str, str] = {}  # a user's file (its resolved path) -> SHA-256 of the text this process imported
# a file of _IMPORTED_SHA -> (st_mtime_ns, st_size) when its text was last seen to be that one: a file not touched
# since is not read again (`changed_since_import` runs at each evaluate and each load of a problem's function)
_IMPORTED_STAT: dict[str, tuple] = {}
_SIBLING_FILES: dict[str, tuple] = {}  # a user's file (resolved) -> its _SIBLINGS' files (resolved), as imported
# a module beside a user's file (its file, resolved) -> (the module, its __spec__) when its text was held:
# `importlib.reload` finds the module's spec anew, so another spec (or another module under its name) is a reload
_SIBLING_MODULE: dict[str, tuple] = {}
_USER_MODULE: dict[str, str] = {}  # a user's file (resolved) -> the name fedevo imported it under
_ON_REIMPORT: list = []  # what forgets what it holds of the user's code when a file is imported anew (`on_reimport`)
# a module beside a user's file, brought in by its import, that may hold names taken from another module beside it
# that was reloaded since (amod's `from bmod import K`, bmod reloaded): its name -> the module, run again in place at
# the file's next import (`_import_file`), as `importlib.reload` would run it, so that it takes the reloaded names
_RUN_AGAIN: dict[str, Any] = {}
_REIMPORTS = 0  # reloads taken so far (`_take_reload`): what holds a user's function outside the caches (`reimports`)


def reimports() -> int:
    """How many reloads of a module beside a user's file this process has taken (`_take_reload`): a function loaded
    from a user's file when it was another number is the old code's (load it again)."""
    return _REIMPORTS


def reloaded_since(spec: Any, fn: Any) -> bool:
    """For a `package.module:name` spec: whether its module (as sys.modules holds it) now has another object under
    that name than `fn`, loaded from it before (importlib.reload of the module since, in a notebook); then every cache
    built from user code is cleared (`on_reimport`'s), as for a reload beside a user's file. False for a `python:`
    file's spec (its reloads are `_take_reload`'s) and where the module is not imported."""
    if not isinstance(spec, str) or spec.startswith(PYTHON_PREFIX):
        return False
    try:
        _, mod_name, name = split_spec(spec)
    except FedevoError:
        return False
    mod = sys.modules.get(mod_name)
    if mod is None or getattr(mod, name, fn) is fn:
        return False
    _forget_user_code()
    return True


def _forget_user_code() -> None:
    """A reload taken (`_take_reload`, `reloaded_since`): counted (`reimports`), and every cache built from the
    user's code cleared (`on_reimport`'s)."""
    global _REIMPORTS
    _REIMPORTS += 1
    for forget in _ON_REIMPORT:
        forget()


def on_reimport(forget: Callable[[], None]) -> Callable[[], None]:
    """Register `forget` (a cache's clear: the factories, templates and sizes built from a user's file) to be
    called when a user's file is to be imported anew (`_take_reload`): what it holds came from the old code."""
    _ON_REIMPORT.append(forget)
    return forget


def imported_sha(path: str) -> Optional[str]:
    """The SHA-256 of a `python:` file as this process imported it, or of a module beside it that the file's import
    brought in (`_imported_beside`), as it was then or as reloaded since (`_changed`) (None: not imported here)."""
    f = str(Path(path).resolve())
    if f in _IMPORTED_SHA:
        _changed(f)  # (a module beside it reloaded after its edit: its text now)
    return _IMPORTED_SHA.get(f)


def held_sha(path: str) -> Optional[str]:
    """The SHA-256 of the text this process holds of a `python:` file or a module beside it (as imported, or as
    reloaded since and taken), without looking at the file (None: not imported here)."""
    return _IMPORTED_SHA.get(str(Path(path).resolve()))


def _sha(p: Path) -> Optional[str]:
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    except OSError:  # gone or unreadable: what reads it next says so
        return None


def _stat(f: str) -> Optional[tuple]:
    try:
        st = os.stat(f)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _held(f: str) -> None:
    """`f`'s text as this process imports it (its SHA-256), with the file's stat where it did not change while read
    (else none: the next look reads the text)."""
    st = _stat(f)
    sha = _sha(Path(f))
    if sha is not None:
        _IMPORTED_SHA[f] = sha
        _IMPORTED_STAT[f] = st if st is not None and _stat(f) == st else None


def _not_imported(name: str, f: str) -> None:
    """A file whose import failed: nothing of it runs, so its text is no longer held (a fixed file imports anew,
    rather than being refused as changed since this process imported it)."""
    sys.modules.pop(name, None)
    _IMPORTED_SHA.pop(f, None)
    _IMPORTED_STAT.pop(f, None)


def _changed(f: str) -> bool:
    """Whether the file `f` (imported in this process) holds another text than the one imported. A module beside a
    user's file that was reloaded since (`importlib.reload`, after the edit) holds the file's text: taken
    (`_take_reload`), not changed."""
    held, st = _IMPORTED_SHA.get(f), _stat(f)
    if held is None or st is None or _IMPORTED_STAT.get(f) == st:
        return False
    now = _sha(Path(f))
    if now is None or now == held:  # touched, the same text: not read again until touched again
        _IMPORTED_STAT[f] = st
        return False
    reloaded = _reloaded(f)
    if reloaded is not None:
        _take_reload(f, reloaded, now, st)
        return False
    return True


def _reloaded(f: str):
    """The module of `f`, a module beside a user's file, where it was reloaded since its text was held (another
    __spec__: `importlib.reload` finds it anew; or another module under its name: removed from sys.modules and
    imported again), else None."""
    mod, spec = _SIBLING_MODULE.get(f, (None, None))
    now = sys.modules.get(getattr(mod, "__name__", None) or "")
    if mod is None or now is None or (now is mod and getattr(now, "__spec__", None) is spec):
        return None
    try:
        same_file = Path(now.__file__).resolve() == Path(f)
    except (AttributeError, TypeError, OSError):
        return None
    return now if same_file else None


def _take_reload(f: str, mod, sha: str, st) -> None:
    """A module beside a user's file reloaded after its edit: its new text held, and each user file that imported it
    imported anew at its next load (`_import_file`), so that the names it took from the module (`from helper
    import f`) are the reloaded ones: what that file runs is the files' text, as run.json records it. The other
    modules beside it that import the reloaded one (`_dependents`) run again then, in place (amod's `from bmod import
    K`, where the reload of bmod rebinds nothing in amod)."""
    _IMPORTED_SHA[f] = sha
    _IMPORTED_STAT[f] = st
    _SIBLING_MODULE[f] = (mod, getattr(mod, "__spec__", None))
    _RUN_AGAIN.pop(mod.__name__, None)  # (run again by the reload itself)
    for user_file, files in list(_SIBLING_FILES.items()):
        if f in files and user_file in _USER_MODULE:
            sys.modules.pop(_USER_MODULE[user_file], None)
            for m in _dependents(mod.__name__, _SIBLINGS.get(user_file, ())):
                _RUN_AGAIN.setdefault(m.__name__, m)
    _forget_user_code()


def _dependents(name: str, siblings) -> list:
    """The modules of `siblings` (.py files) that import the module `name`, directly or through one another, as
    their source's import statements say (anywhere in the file; one that cannot be read or parsed counts): only
    they run again after its reload, not every module beside the file (its import-time work repeated, a module of
    yours that registers an objective refused as 'registered already': review18 F3)."""
    mods = [m for m in siblings if m.__name__ != name and str(getattr(m, "__file__", None) or "").endswith(".py")]
    imports = {m.__name__: _imports_of(m) for m in mods}
    stale, grew = {name}, True
    while grew:
        grew = False
        for m in mods:
            if m.__name__ not in stale and (imports[m.__name__] is None or imports[m.__name__] & stale):
                stale.add(m.__name__)
                grew = True
    return [m for m in mods if m.__name__ in stale]


def _imports_of(m) -> Optional[set[str]]:
    """The modules a module's source imports (`import a.b`: a and a.b; `from a import b`: a and a.b; relative ones
    resolved against its package), or None where its source cannot be read or parsed."""
    import ast

    try:
        tree = ast.parse(Path(m.__file__).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""), m.__package__ or None) \
                    if node.level else (node.module or "")
            except (ImportError, ValueError):
                continue
            parts = base.split(".")
            out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


class _RunAgain:
    """A finder (first on sys.meta_path while a user's file is imported anew) of the modules beside it that a reload
    made stale (`_RUN_AGAIN`): each found as its own module object and run again in place, as `importlib.reload`
    runs a module, when the file's import asks for it: in import order, so that each takes the names of the
    modules it imports as they are now (the notebook's own `amod` is that module: it sees them too)."""

    def __init__(self, modules: dict):
        self.left, self.ran = dict(modules), []

    def find_spec(self, name, path=None, target=None):
        mod = self.left.pop(name, None)
        spec = None if mod is None else importlib.util.spec_from_file_location(name, mod.__file__)
        if spec is None:
            return None
        spec.loader = _Into(mod, spec.loader)
        self.ran.append(name)
        return spec


class _Into:
    """A loader that runs a module's file in the module object it is given (`_RunAgain`), its spec's loader the
    file's own again once it runs (what `importlib.reload` of it would find)."""

    def __init__(self, mod, loader):
        self.mod, self.loader = mod, loader

    def create_module(self, spec):
        return self.mod

    def exec_module(self, module) -> None:
        module.__spec__.loader = self.loader
        self.loader.exec_module(module)


def changed_since_import(spec: Optional[str]) -> Optional[Path]:
    """The first file of a `python:` spec's code — the file, then the modules beside it that its import brought in —
    whose text changed since this process imported it (the process runs the text it imported: Python never imports
    a module twice), or None (unchanged, not imported here, or not a `python:` file). A module beside it that was
    reloaded after its edit (`importlib.reload`) runs its new text: not changed, and the file is imported anew at
    its next load (`_take_reload`)."""
    if not isinstance(spec, str) or not spec.startswith(PYTHON_PREFIX):
        return None
    path = split_spec(spec)[0]
    if path not in _IMPORTED_SHA:  # a resolved spec's path is its key; another spelling: resolved
        path = str(Path(path).resolve())
        if path not in _IMPORTED_SHA:
            return None
    return Path(path) if _changed(path) else _changed_beside(path)


def _changed_beside(path: str) -> Optional[Path]:
    """The first module beside the user's file `path` (resolved) that its import brought in whose text changed since
    this process imported it (a reload of it taken: `_changed`), or None."""
    for f in _SIBLING_FILES.get(path, ()):
        if _changed(f):
            return Path(f)
    return None


def check_current(spec: Optional[str], *, kind: str, doing: str = "this process would run the old code") -> None:
    """FedevoError (one line) when a `python:` spec's file, or a module beside it that it imported, changed since
    this process imported it (`changed_since_import`): a notebook that edits its model file and evaluates again
    would otherwise train the old model, silently."""
    f = changed_since_import(spec)
    if f is not None:
        raise _changed_error(f, Path(split_spec(spec)[0]).resolve(), kind, doing)


def _changed_error(f: Path, path: Path, kind: str, doing: str) -> FedevoError:
    """'{f} ({kind} file | imported by {kind} file PATH) changed since this process imported it: {doing}; ...'."""
    what = f"{kind} file" if f == path else f"imported by {kind} file {str(path)!r}"
    return FedevoError(f"{f} ({what}) changed since this process imported it: {doing}; {reload_hint(f)}start a new "
                       "Python process (in a notebook: restart the kernel)")


def reload_hint(f) -> str:
    """'importlib.reload(helper) it, or ' for a module beside a user's file (`_changed` takes its reload), else ''."""
    mod = _SIBLING_MODULE.get(str(Path(f).resolve()), (None,))[0]
    name = getattr(mod, "__name__", None)
    return f"importlib.reload({name}) it, or " if name else ""


def _import_file(p: Path, kind: str):
    """The user's file imported under a private name, its folder on the import path while it is imported (as for a
    script run from there: a module beside it, `from layers import block`, is found however fedevo was started;
    taken off again afterwards where fedevo put it there, so the process's imports are as before: the modules it
    imported stay in sys.modules); the modules it imports from that folder are pickled by value with it (a Ray
    worker need not find them)."""
    if not p.is_file():
        raise FedevoError(f"{kind} file {str(p)!r} does not exist")
    name = f"{USER_MODULE_PREFIX}{kind}_" + hashlib.sha256(str(p).encode()).hexdigest()[:12]
    resolved = p.resolve()
    if sys.modules.get(name) is not None:  # imported before: the text it ran must be the file's still (a module
        check_current(f"{PYTHON_PREFIX}{p}:_", kind=kind)  # beside it reloaded since: the file is imported anew)
    elif str(resolved) in _USER_MODULE:  # imported anew (a reload beside it taken): the modules beside it that run
        f = _changed_beside(str(resolved))  # again must be as held (one edited, not reloaded: refused as before)
        if f is not None:
            raise _changed_error(f, resolved, kind, "this process would run the old code")
    mod = sys.modules.get(name)
    if mod is None:
        folder = str(resolved.parent)
        earlier = {m.__name__ for m in _SIBLINGS.get(str(resolved), ())}  # imported anew: those it had still count
        stale = {m.__name__: m for m in _SIBLINGS.get(str(resolved), ())
                 if _RUN_AGAIN.get(m.__name__) is m and sys.modules.get(m.__name__) is m}
        for n in stale:  # run again, in place, where the file's import asks for them (`_RunAgain`)
            del sys.modules[n]
        again = _RunAgain(stale)
        sys.meta_path.insert(0, again)
        added = folder not in sys.path
        if added:
            sys.path.append(folder)  # after the installed packages: a file beside it never shadows one
        before = set(sys.modules)
        try:
            _held(str(resolved))
            mod_spec = importlib.util.spec_from_file_location(name, p)
            mod = importlib.util.module_from_spec(mod_spec)
            sys.modules[name] = mod
            with stdout_to_stderr():  # what it prints at import: stdout is fedevo's (its results, a JSON object)
                call_user(mod_spec.loader.exec_module, mod)  # sys.exit, os._exit: this file's failure
        except UserExit as e:
            _not_imported(name, str(resolved))
            raise FedevoError(f"{kind} file {str(p)!r} {e.what} while it was imported") from None
        except Exception as e:  # the user's code: any exception is their file's problem
            _not_imported(name, str(resolved))
            raise FedevoError(f"{kind} file {str(p)!r} failed to import: {type(e).__name__}: {one_line(e)}") from None
        finally:
            if added and folder in sys.path:  # the entry fedevo appended: the last one
                del sys.path[len(sys.path) - 1 - sys.path[::-1].index(folder)]
            sys.meta_path.remove(again)
            for n, m in stale.items():  # not asked for again (or its run failed): the module as it was, in its place
                sys.modules.setdefault(n, m)
        for n in again.ran:
            _RUN_AGAIN.pop(n, None)
        by_value(mod)
        _USER_MODULE[str(resolved)] = name
        new = (set(sys.modules) - before - {name}) | earlier
        _SIBLINGS[str(resolved)] = siblings = _imported_beside(mod, new, folder)
        for m in siblings:
            by_value(m)
        _SIBLING_FILES[str(resolved)] = files = tuple(str(Path(m.__file__).resolve()) for m in siblings)
        for f, m in zip(files, siblings):
            if f not in _IMPORTED_SHA or m.__name__ in again.ran:  # its text now: imported (or run again) just
                _held(f)  # now, or before it by the user
                _SIBLING_MODULE[f] = (m, getattr(m, "__spec__", None))
    return mod


def _imported_beside(mod, new: set, folder: str) -> tuple:
    """The modules from the file's folder (or below it, outside installed packages) that its import brought in:
    those first imported while it was (`new`), and those it refers to at its top level (`import helper`, `from
    helper import f`: a module, or a function, class or object whose `__module__` is one) which were imported
    before it, by another file of the user's or their script (never `__main__`); then, the same way, those the
    ones found refer to. In name order: for the same code, the same files whatever the process imported before
    (except a module imported before that the file only takes constants from: numbers and strings name no
    module)."""
    def beside(m) -> bool:
        return (m is not None and m is not mod and getattr(m, "__name__", "__main__") != "__main__"
                and not m.__name__.startswith(USER_MODULE_PREFIX) and _beside(getattr(m, "__file__", None), folder))

    found = {n: sys.modules[n] for n in new if beside(sys.modules.get(n))}
    todo = [mod, *found.values()]
    while todo:
        for v in list(vars(todo.pop()).values()):
            try:
                ref = v if isinstance(v, type(sys)) else sys.modules.get(getattr(v, "__module__", None) or "")
            except Exception:  # noqa: BLE001 - an object whose attribute lookup fails: no module of the user's
                continue
            if beside(ref) and ref.__name__ not in found:
                found[ref.__name__] = ref
                todo.append(ref)
    return tuple(found[n] for n in sorted(found))


def imported_beside(path: str) -> tuple[Path, ...]:
    """The files of the modules beside a `python:` file that its import brought in (`_imported_beside`), once
    fedevo has imported it in this process (none before, or for a file not imported)."""
    return tuple(Path(m.__file__).resolve() for m in _SIBLINGS.get(str(Path(path).resolve()), ()))


def _beside(file: Optional[str], folder: str) -> bool:
    """Whether a module's file is in `folder` or below it, outside installed packages (a virtual environment
    inside the project folder holds torch too), Python's own library and fedevo's own source (a Python installed
    below the folder, pyenv or conda in $HOME with the file in $HOME, or an editable fedevo checkout with the file
    at its root: a reload taken ran their modules again in place, enum and abc, fedevo.result — review18 F2)."""
    if not file:
        return False
    path = Path(file).resolve()
    try:
        rel = path.relative_to(folder)
    except ValueError:
        return False
    if {"site-packages", "dist-packages"} & set(rel.parts):
        return False
    return not any(path.is_relative_to(d) for d in _not_users())


@functools.lru_cache(maxsize=1)
def _not_users() -> tuple[Path, ...]:
    """Folders whose modules are never a user's: Python's standard library (this environment's and its base's)
    and fedevo's package."""
    import sysconfig

    out = {Path(__file__).resolve().parent}
    for scheme_vars in (None, {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}):
        paths = sysconfig.get_paths(vars=scheme_vars) if scheme_vars else sysconfig.get_paths()
        out |= {Path(paths[k]).resolve() for k in ("stdlib", "platstdlib") if paths.get(k)}
    return tuple(sorted(out))


def by_value(mod) -> None:
    """The user's file module pickled by value (a worker cannot import it by its made-up name): with the
    standalone cloudpickle (the child processes of --eval-timeout), and with Ray's own copy where Ray is loaded
    (Ray serialises tasks with ray.cloudpickle: a --evaluator python:FILE:fn failed every evaluation on Ray with
    "No module named 'fedevo_user_evaluator_...'"); RayRunner calls `ray_by_value` once Ray is imported."""
    for name in ("cloudpickle", "ray.cloudpickle"):
        if name == "ray.cloudpickle" and "ray" not in sys.modules:
            continue
        try:
            importlib.import_module(name).register_pickle_by_value(mod)
        except (ImportError, ValueError):  # pragma: no cover - cloudpickle comes with Ray; registered already
            pass


def ray_by_value() -> None:
    """Every user file module imported so far, registered with Ray's cloudpickle (Ray imported after them)."""
    for name, mod in list(sys.modules.items()):
        if name.startswith(USER_MODULE_PREFIX) and mod is not None:
            by_value(mod)
    for siblings in _SIBLINGS.values():
        for mod in siblings:
            by_value(mod)


def load_callable(spec: str, *, kind: str = "model") -> Callable[..., Any]:
    """The function a (resolved) spec names; FedevoError (one line naming `kind`) when the file, module or
    function does not exist or is not callable."""
    path, mod_name, fn = split_spec(spec, kind=kind)
    with _import_lock:
        if path is not None:
            mod = _import_file(Path(path), kind)
            where = f"{kind} file {path!r}"
        else:
            try:
                mod = importlib.import_module(mod_name)
            except Exception as e:  # noqa: BLE001 - ImportError, or the module's own failure
                hint = f" (a file is named python:{mod_name}:{fn})" if mod_name.endswith(".py") else ""
                raise FedevoError(f"{kind} module {mod_name!r} cannot be imported: {type(e).__name__}: "
                                  f"{one_line(e)}{hint}") from None
            where = f"{kind} module {mod_name!r}"
    f = getattr(mod, fn, None)
    if f is None:
        raise FedevoError(f"{where} has no {'class' if kind == 'optimizer' else 'function'} {fn!r}")
    if not callable(f):
        raise FedevoError(f"{where}: {fn!r} is not a function")
    return f


def code_digest(fn: Any) -> Optional[str]:
    """A digest of a Python function's code — its bytecode, constants and names, its nested functions' too; not
    its file, line numbers or closure values — the same in every process of one Python for the same body (a
    notebook cell run again), another where the body changed. None for what has no code (a builtin, an object)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    h = hashlib.sha256()

    def walk(c) -> None:
        h.update(c.co_code)
        h.update(repr(c.co_names).encode())
        for k in c.co_consts:
            if hasattr(k, "co_code"):
                walk(k)
            else:  # a frozenset's order follows the string hash's seed: sorted
                h.update(repr(sorted(map(repr, k)) if isinstance(k, frozenset) else k).encode())
    walk(code)
    return h.hexdigest()


_SIMPLE = (type(None), bool, int, float, complex, str, bytes)
VALUE_REPR_MAX = 200  # a longer repr is recorded by its SHA-256 (a long list's values still count)


def _value_text(v: Any, seen: set) -> str:
    """A closure's or default's value as `code_values` records it: the repr of a simple value (None, a bool, a
    number, a string, bytes; tuples, lists, sets and dicts of them; a NumPy scalar), a function by its code digest
    and its own values, anything else by its type only ("<ndarray>": its repr may hold a memory address, so it would
    differ in every process; a change in it is not seen)."""
    if isinstance(v, _SIMPLE):
        return repr(v)
    if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", None) == 0:
        return f"{type(v).__name__}({v.item()!r})"
    if isinstance(v, (tuple, list, set, frozenset, dict)):
        if id(v) in seen:  # a container that holds itself (cfg["parent"] = cfg): RecursionError at the run's start
            return f"<{type(v).__name__} cycle>"
        seen = seen | {id(v)}  # (on this path only: the same list twice, side by side, is written twice)
        if isinstance(v, (tuple, list)):
            inner = ", ".join(_value_text(x, seen) for x in v)
            return f"({inner})" if isinstance(v, tuple) else f"[{inner}]"
        if isinstance(v, (set, frozenset)):
            return "{" + ", ".join(sorted(_value_text(x, seen) for x in v)) + "}"
        return "{" + ", ".join(f"{_value_text(k, seen)}: {_value_text(x, seen)}" for k, x in v.items()) + "}"
    if getattr(v, "__code__", None) is not None:
        if id(v) in seen:  # a recursive inner function's cell holds itself
            return f"<function {getattr(v, '__name__', '?')}>"
        seen.add(id(v))
        inner = _values(v, seen)
        return f"<function {code_digest(v)}{' ' + repr(inner) if inner else ''}>"
    return f"<{type(v).__name__}>"


def _values(fn: Any, seen: set) -> dict[str, str]:
    code = fn.__code__
    out = {}
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            out[name] = _value_text(cell.cell_contents, seen)
        except ValueError:  # an empty cell (a name assigned after the function was made)
            out[name] = "<empty>"
    positional = code.co_varnames[:code.co_argcount]
    defaults = getattr(fn, "__defaults__", None) or ()
    for name, v in zip(positional[len(positional) - len(defaults):], defaults):
        out[f"{name}="] = _value_text(v, seen)
    for name, v in (getattr(fn, "__kwdefaults__", None) or {}).items():
        out[f"{name}="] = _value_text(v, seen)
    for k, t in out.items():
        if len(t) > VALUE_REPR_MAX:
            out[k] = f"<sha256 {hashlib.sha256(t.encode()).hexdigest()[:16]}>"
    return out


def code_values(fn: Any) -> dict[str, str]:
    """The values a Python function's code reads that are not its code (`code_digest` leaves them out): each
    closure variable by its name ("threshold": `make_objective(threshold=0.1)`'s inner function), each parameter's
    default as "name=", as `_value_text` writes them ({}: none, or not a function). What run.json's
    ``code_values`` records beside ``code``, so that a resume with threshold=0.2 says so."""
    if getattr(fn, "__code__", None) is None:
        return {}
    return _values(fn, {id(fn)})


EVALUATOR_CALL = "(problem, params, *, seed, rounds, data_dir)"  # how fedevo calls an evaluator (docs/api.md)


def check_evaluator_signature(fn: Callable[..., Any]) -> None:
    """FedevoError (one line) when `fn` cannot be called as fedevo calls an evaluator, `fn(problem, params,
    seed=..., rounds=..., data_dir=...)` (**kwargs takes the keywords): said when it is loaded, not by every
    evaluation of a run failing with a TypeError. A callable without a signature (a builtin) is not checked."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(None, None, seed=0, rounds=None, data_dir=None)
    except TypeError as e:
        name = getattr(fn, "__name__", type(fn).__name__)
        fix = ("give its other parameters defaults" if str(e).startswith("missing") else
               "give it those parameters, or **kwargs")
        raise FedevoError(f"evaluator {name}{sig} cannot take fedevo's call evaluator{EVALUATOR_CALL} ({e}); "
                          f"{fix}") from None


__all__ = ["EVALUATOR_CALL", "PYTHON_PREFIX", "changed_since_import", "check_current", "check_evaluator_signature", "code_digest",
           "imported_beside", "imported_sha", "load_callable", "reimports", "resolve_spec", "split_spec"]
