"""What a run ran with beyond run.json's text: a fingerprint of the user's data files and code.

run.json freezes the problem file's text and the settings, but a problem names files it does not hold: its data
(`[data] path`, `test_path`: a file or a folder) and its code (`model = "python:FILE:FUNC"`, `evaluator = ...`,
`--evaluator`, `--optimizer python:FILE:Class`, an objective's `[objective.NAME] read`; a "package.module:function"
spec names the module's file; a `python:` file's modules beside it that it imports, `from helper import f`, are
recorded after it: the ones `plugins.imported_beside` names once fedevo has imported the file). :func:`fingerprint`
records each one's SHA-256 in run.json's ``inputs`` when the run is created (run.json's bytes start
evaluations.csv's hash chain, so the record is covered too); :func:`check_inputs` recomputes them before a run is
continued, and a file that changed or is gone is refused with one line naming it: a resumed search never mixes two
tasks. fedevo's own code is recorded by its source hash (run.json's ``versions``; a resume by another is said
and recorded, not refused: provenance.py) and the bundled datasets under --data-dir are not fingerprinted by a run (a retrain's continuation hashes
them: retraining.data_content); a run made before this record (no ``inputs``) is resumed unchecked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ..errors import FedevoError

CHUNK = 1 << 20


def _file_digest(path: Path, h) -> int:
    n = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            n += len(chunk)
    return n


def digest(path: Path) -> tuple[str, int]:
    """(SHA-256, bytes) of a file, or of a folder: every file below it, by relative name, in name order."""
    path = Path(path)
    h = hashlib.sha256()
    if not path.is_dir():
        n = _file_digest(path, h)
        return h.hexdigest(), n
    total = 0
    for p in sorted(q for q in path.rglob("*") if q.is_file()):
        sub = hashlib.sha256()
        n = _file_digest(p, sub)
        total += n
        h.update(f"{p.relative_to(path).as_posix()}\0{n}\0{sub.hexdigest()}\n".encode())
    return h.hexdigest(), total


def _code_file(spec: Optional[str]) -> Optional[Path]:
    """The file a "python:FILE:FUNC" or "package.module:function" spec runs (None: fedevo's own, or not a
    file)."""
    from ..plugins import split_spec

    if not spec:
        return None
    try:
        path, module, _ = split_spec(spec)
    except FedevoError:
        return None
    if path is not None:
        return Path(path).resolve()
    mod = sys.modules.get(module)
    origin = getattr(mod, "__file__", None)
    if origin is None:
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
        origin = found.origin if found is not None else None
    if not origin or not Path(origin).is_file():
        return None
    origin = Path(origin).resolve()
    fedevo_root = Path(__file__).resolve().parents[1]
    return None if origin.is_relative_to(fedevo_root) else origin


def _by_path(spec: Optional[str]) -> bool:
    """Whether a code spec is a "python:FILE:FUNC" (imported from its path; a "package.module:function" is imported
    by name, from each machine's own install)."""
    from ..plugins import split_spec

    try:
        return bool(spec) and split_spec(spec)[0] is not None
    except FedevoError:
        return False


def _found(problem, settings) -> Iterator[tuple[str, Path, bool]]:
    """(what it is, its path, whether an evaluation opens it by that path) of every data and code file the run
    depends on, each once."""
    from ..plugins import imported_beside, split_spec

    seen: set[Path] = set()
    spec = getattr(getattr(problem, "data_source", None), "spec", None)
    code = [("model", getattr(problem, "model_ref", None)), ("evaluator", getattr(problem, "evaluator", None)),
            ("--evaluator", getattr(settings, "evaluator", None)),
            ("--optimizer", getattr(settings, "optimizer", None))]  # your own optimiser's file (a name: none)
    # a problem file's own objectives (`[objective.NAME] read = "python:FILE:FUNC"`): a changed function would give
    # the resumed rows other values than the logged ones under the same column
    code += [(f"[objective.{o.name}] read", getattr(o.read, "spec", None)) for o in getattr(problem, "objective_defs", ())]
    found = [("[data] path", getattr(spec, "path", None), True), ("[data] test_path", getattr(spec, "test_path", None), True)]
    for role, c in code:
        a_file = _by_path(c)  # (--evaluator's module travels to Ray's workers by value: plugins.ray_by_value; the
        by_path = a_file and not role.startswith("--")  # optimiser runs in the search's process)
        found.append((role, _code_file(c), by_path))
        if a_file:  # the modules beside a python: file that it imports, read where it is
            found += [(f"imported by {role}", s, by_path) for s in imported_beside(split_spec(c)[0])]
    for role, p, by_path in found:
        if p is None:
            continue
        p = Path(p).resolve()
        if p not in seen:
            seen.add(p)
            yield role, p, by_path


def role_text(role: str) -> str:
    """A recorded role as a message says it: a search argument's ("--evaluator", "--optimizer", "imported by
    --optimizer": run.json keeps these) spelled as the caller spells it (errors.arg: `optimizer=` from Python)."""
    from ..errors import arg

    head, sep, name = role.rpartition("--")
    return f"{head}{arg(name.replace('-', '_'))}" if sep and name in ("evaluator", "optimizer") else role


def input_files(problem, settings) -> Iterator[tuple[str, Path]]:
    """(what it is, its path) of every data file and code file the run depends on, each once."""
    for role, p, _ in _found(problem, settings):
        yield role, p


def files_read_by_path(problem) -> list[tuple[str, Path]]:
    """(what it is, its path) of the problem's files an evaluation opens by their absolute path — its data and its
    `python:FILE:FUNC` code — which every machine that evaluates it needs at that path."""
    return [(role, p) for role, p, by_path in _found(problem, None) if by_path]


def fingerprint(problem, settings) -> list[dict[str, Any]]:
    """What run.json's ``inputs`` records: per file, what it is, its absolute path, SHA-256 and size."""
    out = []
    for role, p in input_files(problem, settings):
        try:
            sha, n = digest(p)
        except OSError as e:
            raise FedevoError(f"cannot read {p} ({role_text(role)}) to record its fingerprint: "
                              f"{e.strerror or e}") from None
        _check_imported(p, role_text(role), sha, "the search would run the old code and record the new file",
                        "nothing was written")
        out.append({"role": role, "path": str(p), "sha256": sha, "bytes": n})
    return out


def check_inputs(meta: Mapping[str, Any], run_dir: Path, action: str = "resume") -> None:
    """FedevoError naming the first file of run.json's ``inputs`` that is gone or changed since the run was made;
    `action` ("resume", "retrain" or "audit") is what the file would have fed."""
    after = {"resume": "nothing was evaluated", "audit": "nothing was audited"}.get(action, "nothing was trained")
    for entry in meta.get("inputs") or ():
        p, role = Path(entry["path"]), role_text(entry.get("role", "input"))
        if not p.exists():
            raise FedevoError(f"{p} ({role}), which run {run_dir} was made with, is gone; restore it to {action} "
                              f"({after})")
        try:
            sha, _ = digest(p)
        except OSError as e:
            raise FedevoError(f"cannot read {p} ({role}): {e.strerror or e}") from None
        if sha != entry["sha256"]:
            mixed = ("resuming would mix two tasks; restore it, or start a new search" if action == "resume" else
                     f"its picks would be {'audited' if action == 'audit' else 'retrained'} on another task than the "
                     "one searched; restore it, or search again")
            raise FedevoError(f"{p} ({role}) changed since run {run_dir} was made (SHA-256 {sha[:12]}… now, "
                              f"{entry['sha256'][:12]}… then): {mixed} ({after})")
        _check_imported(p, role, sha, f"the {action} would run the old code", after)


def _check_imported(p: Path, role: str, sha: str, doing: str, after: str) -> None:
    """FedevoError where this process imported the file `p` with another text than its `sha` now (it runs the text
    it imported, not the file's; a module beside a `python:` file reloaded since runs the file's: plugins._changed):
    '{p} ({role}) changed since this process imported it: {doing}; start a new Python process (...) ({after})'."""
    from ..plugins import imported_sha, reload_hint

    held = imported_sha(str(p))
    if held is not None and held != sha:
        raise FedevoError(f"{p} ({role}) changed since this process imported it: {doing}; {reload_hint(p)}start a new "
                          f"Python process (in a notebook: restart the kernel) ({after})")


def _code_roles(objectives, evaluator) -> Iterator[tuple[str, Any]]:
    """The functions the run calls that have no file to fingerprint, by role: each objective registered from Python
    ("objective NAME": a notebook's lambda; a `python:` file's functions are its file's, `inputs`) and an evaluator
    passed as a function of a module or of the script ("evaluator")."""
    from ..objectives.registry import builtin
    from ..objectives.spec import FunctionRead
    from ..plugins import USER_MODULE_PREFIX

    for o in objectives:
        if not (builtin(o.name) or isinstance(o.read, FunctionRead)):
            yield f"objective {o.name}", o.read
    if not (getattr(evaluator, "__module__", "") or "").startswith(USER_MODULE_PREFIX):
        yield "evaluator", evaluator


def code_digests(objectives, evaluator) -> dict[str, str]:
    """What run.json's ``code`` records of the code the run calls that has no file to fingerprint (`_code_roles`):
    each function's `plugins.code_digest` (its code, not its closure's values: `code_value_records`)."""
    from ..plugins import code_digest

    return {role: d for role, fn in _code_roles(objectives, evaluator) if (d := code_digest(fn)) is not None}


def code_value_records(objectives, evaluator) -> dict[str, dict[str, str]]:
    """What run.json's ``code_values`` records beside ``code``: the values each of those functions reads that are
    not its code (`plugins.code_values`: closure variables, parameter defaults; simple values by their repr, others
    by their type), for those that have any."""
    from ..plugins import code_values

    return {role: v for role, fn in _code_roles(objectives, evaluator) if (v := code_values(fn))}


def _value_changes(then: Mapping[str, str], now: Mapping[str, str]) -> str:
    """'threshold 0.1 then, 0.2 now; scale= 2 then, 3 now' of the values that differ."""
    return "; ".join(f"{k} {then.get(k, 'none')} then, {now.get(k, 'none')} now"
                     for k in sorted(set(then) | set(now)) if then.get(k) != now.get(k))


def warn_changed_code(meta: Mapping[str, Any], objectives, evaluator, run_dir: Path) -> None:
    """One line on stderr for each function of run.json's ``code`` whose code differs in this process (a notebook
    that fixed its objective's lambda, then resumed: the rows after it hold another function's values under the
    same column), or, its code the same, whose closure values or defaults differ from run.json's ``code_values``
    (`make_objective(threshold=0.2)` resuming a run made with 0.1; a run made before the record: unchecked). A
    warning: another Python's bytecode differs too."""
    from ..objectives.registry import registered

    recorded = meta.get("code") or {}
    values = meta.get("code_values")
    fns = [registered(o.name) or o for o in objectives]
    now = code_digests(fns, evaluator)
    now_values = code_value_records(fns, evaluator)
    for role, digest in recorded.items():
        if role not in now:
            continue
        if now[role] != digest:
            print(f"fedevo: warning: the {role}'s function is not the code run {run_dir} was searched with (its code "
                  "differs): the resumed evaluations call it as it is now, beside rows the earlier code gave",
                  file=sys.stderr)
            continue
        diff = _value_changes(values.get(role) or {}, now_values.get(role) or {}) if isinstance(values, dict) else ""
        if diff:
            print(f"fedevo: warning: the {role}'s function reads other values than run {run_dir} was searched with "
                  f"({diff}): the resumed evaluations call it as it is now, beside rows the earlier values gave",
                  file=sys.stderr)


__all__ = ["check_inputs", "code_digests", "code_value_records", "digest", "files_read_by_path", "fingerprint",
           "input_files", "role_text", "warn_changed_code"]
