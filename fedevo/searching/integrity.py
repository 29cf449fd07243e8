"""Is a run's evaluation log what was logged?

Every row: evaluations.csv's last column is a hash chain (fedevo.searching.log: each row's cell hashes the
previous cell and the row's own bytes; the first row's starts from run.json's bytes and the header).
:func:`check_chain` follows it to the last row, so an edited row anywhere, a row inserted, removed or appended by
hand, an edited last row after a kill between checkpoints, or an edited run.json are refused with one line naming
the file and line. A torn last line (killed mid-write) is no row: cut off (resume) or left out (readers), never
called damage. The chain is a checksum, not a signature: it tells a changed record from the one fedevo wrote, but
whoever recomputes it with fedevo's own code can forge one. A log written before the chain (no ``chain`` column)
is checked against its checkpoints only (below): rows after the newest checkpoint, and run.json, are not covered.

Each checkpoint records the log it closed: how many rows it counts (those of ids 0..next_id-1, in (id, rung)
order), one SHA-256 over all their short digests (`row_digest`), and the keys and digests of the rows new since the
checkpoint before it (ids `since`..next_id-1: the generation's). So a checkpoint's size grows with its generation,
not with the run, and the checkpoints together hold each row's digest once. Whatever reads a run — `front`, `plot`,
`retrain`, `audit`, `resume` — checks the rows against the newest checkpoint's SHA-256 and refuses a damaged log
with one line naming the damage (rows lost, rows altered, rows inserted), instead of drawing a different front
from what is left; which ids were altered or inserted it takes from the rows recorded by the checkpoints up to the
newest (only read when the SHA-256 differs), and where those are gone or damaged it says so without ids. Rows
after the checkpoint (a generation under way, or killed) are not checked: resume re-evaluates or reuses them.
A checkpoint of an earlier version records every row's key and digest (checked the same way, row by row), or,
before that, nothing (only that no counted id is missing is checked). The checkpoint holds the algorithm's state,
not the rows, so a damaged log cannot be repaired from it: restore evaluations.csv from a copy.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from ..errors import FedevoError
from .log import CHAIN_COLUMN, chain_next, chain_start, row_key

DIGEST_CHARS = 16  # per row: 64 bits of SHA-256, enough to tell an altered row


def row_digest(row: Mapping[str, Any]) -> str:
    """A row's fingerprint: its cells as parsed (floats exactly, via their repr)."""
    text = json.dumps({k: row[k] for k in sorted(row) if k != "wall_s"}, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def log_record(rows: Sequence[Mapping[str, Any]], cache: Optional[dict] = None, *, since: int = 0) -> dict[str, Any]:
    """What a checkpoint records of the log it closes (`rows`: every row it counts): their count and SHA-256
    (`rows_sha256`), and `new`: [id, rung, digest] of the rows of ids `since` and up (those the previous checkpoint,
    whose next id was `since`, did not count), in key order. `cache`: a dict the same search passes each time,
    holding each row object's digest (a logged row never changes), so that a checkpoint per generation hashes each
    row once, not once per later generation; and the SHA-256 so far of the rows of the call before, so that a call
    whose rows are those (the same objects, in key order) followed by rows of higher keys hashes only the new ones
    (a search of thousands of batches of one sorted and hashed every row again after each)."""
    grown = _grown(rows, cache, since)
    n, h = grown if grown is not None else (0, None)
    if grown is None:
        rows = sorted(rows, key=row_key)
    tail = list(rows[n:])  # the rows to hash: those after the call before's (all, without it)
    digests = [_digest(r, cache) for r in tail]
    keys = [row_key(r) for r in tail]
    h = _sha256(zip(keys, digests), h)
    count = len(rows)
    if cache is not None and count:
        cache[_PREFIX] = (count, rows[count - 1], row_key(rows[count - 1]), h.copy())
    return {"count": count, "sha256": h.hexdigest(), "since": since,
            "new": [[i, g, d] for (i, g), d in zip(keys, digests) if i >= since]}


_PREFIX = "rows so far"  # log_record's cache entry: (count, the last row, its key, the SHA-256 object so far)


def _digest(r: Mapping[str, Any], cache: Optional[dict]) -> str:
    if cache is None:
        return row_digest(r)
    held = cache.get(id(r))
    if held is None or held[0] is not r:
        held = cache[id(r)] = (r, row_digest(r))  # the row itself kept: its id is not reused meanwhile
    return held[1]


def _grown(rows: Sequence[Mapping[str, Any]], cache: Optional[dict], since: int):
    """(count, SHA-256 object) of the rows of log_record's call before, when `rows` starts with them (the last in
    its place) and goes on with rows of higher keys in key order, all of ids `since` and up; else None."""
    held = cache.get(_PREFIX) if cache is not None else None
    if held is None:
        return None
    n, last, key, h = held
    if len(rows) < n or rows[n - 1] is not last or key[0] >= since:
        return None
    for r in rows[n:]:
        k = row_key(r)
        if k <= key:
            return None
        key = k
    return n, h


def _sha256(keyed: Iterable[tuple[tuple[int, int], str]], start=None):
    """A SHA-256 object over rows' ((id, rung), digest) pairs, going on from a copy of `start` (one over earlier
    rows) where given."""
    h = hashlib.sha256() if start is None else start.copy()
    for (i, g), d in keyed:
        h.update(f"{i},{g},{d}\n".encode())
    return h


def rows_sha256(keyed: Iterable[tuple[tuple[int, int], str]]) -> str:
    """One SHA-256 over rows' ((id, rung), digest) pairs in the order given (a checkpoint's: key order)."""
    return _sha256(keyed).hexdigest()


def recorded_rows(records: Iterable[Mapping[str, Any]]) -> Optional[dict[tuple[int, int], str]]:
    """Each row's digest as checkpoints' records hold it, from the records of a run's checkpoints, newest first
    (the first one's: the one checked), or None where they do not reach back to the first id (a checkpoint gone,
    unreadable, or of the version that recorded nothing). An earlier version's record lists every row: it ends
    the walk."""
    held: dict[tuple[int, int], str] = {}
    for record in records:
        if not record:
            return None
        if "sha256" not in record:  # an earlier version's: every row it counts
            digests = record.get("digests", [])
            keys = [tuple(k) for k in record.get("keys", [])] or [(i, 0) for i in range(len(digests))]
            for k, d in zip(keys, digests):
                held.setdefault(k, d)
            return held
        for i, g, d in record.get("new", []):
            held.setdefault((i, g), d)
        if not record.get("since"):
            return held
    return None


def _ids(ids: Sequence[int]) -> str:
    ids = sorted(ids)
    if len(ids) == 1:
        return f"id {ids[0]}"
    if ids == list(range(ids[0], ids[-1] + 1)):
        return f"ids {ids[0]}..{ids[-1]}"
    return "ids " + ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")


def check_log(rows: Sequence[Mapping[str, Any]], state: Mapping[str, Any], *, log: Path, checkpoint: str,
              earlier: Iterable[Mapping[str, Any]] = ()) -> None:
    """FedevoError naming the damage if `rows` (first row per id) lack or alter what checkpoint `state` counted.
    `earlier`: the states of the checkpoints before it, newest first (read only to name the ids of a mismatch)."""
    by_key: dict[tuple[int, int], Mapping[str, Any]] = {}
    for r in rows:
        by_key.setdefault(row_key(r), r)
    by_id = {i for i, _ in by_key}
    counted = int(state.get("next_id", 0))
    hint = (f"the run is damaged (an edited, truncated or replaced evaluations.csv?); restore {log.name} from a copy "
            "— nothing was read from it or written")
    lost = [i for i in range(counted) if i not in by_id]
    if lost:
        raise FedevoError(f"{log} lacks {len(lost)} of the {counted} evaluations that checkpoint {checkpoint} counts "
                          f"({_ids(lost)}); {hint}")
    record = state.get("log")
    if not record:  # a checkpoint of the version before the record: the count is all it tells
        return
    mine = sorted(k for k in by_key if k[0] < counted)
    if "sha256" in record:
        if len(mine) == record.get("count") and \
                rows_sha256((k, row_digest(by_key[k])) for k in mine) == record["sha256"]:
            return
        held = recorded_rows(itertools.chain([record], (s.get("log") for s in earlier)))
        held = {k: d for k, d in (held or {}).items() if k[0] < counted}
        if not held or len(held) != record.get("count") or rows_sha256(sorted(held.items())) != record["sha256"]:
            raise FedevoError(f"{log}: the {counted} evaluations that checkpoint {checkpoint} counts differ from "
                              "what was logged (checksum mismatch; the earlier checkpoints that would name the rows "
                              f"are gone or damaged); {hint}")
        inserted = sorted({k[0] for k in mine if k not in held})
    else:  # an earlier version's record: every row's key and digest
        digests = record.get("digests", [])
        keys = [tuple(k) for k in record.get("keys", [])] or [(i, 0) for i in range(len(digests))]
        held = dict(zip(keys, digests))
        # a row beside those listed (a rung no checkpoint counts); a record without keys is of a version before
        # multi-fidelity logs, whose rows it lists by id alone
        inserted = sorted({k[0] for k in mine if k not in held}) if record.get("keys") else []
    missing = sorted({i for (i, g) in held if (i, g) not in by_key})
    if missing:
        raise FedevoError(f"{log} lacks rows of {len(missing)} of the {counted} evaluations that checkpoint "
                          f"{checkpoint} counts ({_ids(missing)}: a rung's row is gone); {hint}")
    changed = sorted({k[0] for k, d in held.items() if row_digest(by_key[k]) != d})
    if changed:
        raise FedevoError(f"{log}: {len(changed)} of the {counted} evaluations that checkpoint {checkpoint} counts "
                          f"differ from what was logged ({_ids(changed)}: checksum mismatch); {hint}")
    if inserted:
        raise FedevoError(f"{log} holds rows that checkpoint {checkpoint} does not count among its {counted} "
                          f"evaluations ({_ids(inserted)}: rows inserted); {hint}")
    if "sha256" in record:  # not reached (the recorded rows hash to the SHA-256 and match the log's): never pass it
        raise FedevoError(f"{log}: the {counted} evaluations that checkpoint {checkpoint} counts differ from what "
                          f"was logged (checksum mismatch); {hint}")


def check_chain(log: Path, run_json: Path) -> None:
    """FedevoError naming the file and line of the first row of `log` (whole lines) whose chain cell is not what
    fedevo wrote; nothing for a log without the chain column (an earlier version's)."""
    try:
        data = Path(log).read_bytes()
    except FileNotFoundError:
        return
    except OSError as e:
        raise FedevoError(f"cannot read {log}: {e.strerror}") from None
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]  # a torn last line is no row yet
    if not lines or not lines[0].endswith(b"," + CHAIN_COLUMN.encode()):
        return
    try:
        head = chain_start(Path(run_json).read_bytes(), lines[0])
    except OSError as e:
        raise FedevoError(f"cannot read {run_json}: {e.strerror}") from None
    for n, line in enumerate(lines[1:], start=2):
        body, _, cell = line.rpartition(b",")
        head = chain_next(head, body)
        if cell != head.encode():
            what = (f"{run_json.name} was changed, or " if n == 2 else "") + \
                   "this row was edited, or rows were removed, inserted or appended by hand"
            ident = line.split(b",", 1)[0].decode(errors="replace")
            raise FedevoError(f"{log}: line {n} (id {ident}) breaks the log's hash chain ({what}, after fedevo "
                              f"logged it); the run is damaged: restore {Path(log).name} (and {run_json.name}) from a "
                              "copy — nothing was read from it or written")


def checked_rows(run_dir: Path, read: Callable[[], list]) -> list:
    """`read()` (the rows of run_dir/evaluations.csv), checked: the hash chain to the last row (check_chain), then
    against the newest checkpoint (rows lost off the end are no broken chain: check_log names them). The checkpoint is
    read first: a search that is writing the run only appends rows, and a checkpoint counts only rows appended
    before it, so rows read after it hold everything it counts (read the other way round, a generation that ends
    in between would look like lost rows)."""
    from .checkpoint import earlier_checkpoints, latest_checkpoint, load_checkpoint

    ck = latest_checkpoint(Path(run_dir))
    state = load_checkpoint(ck) if ck is not None else None
    rows = read()
    log = Path(run_dir) / "evaluations.csv"
    check_chain(log, Path(run_dir) / "run.json")  # every row, to the last (appends only: it holds `rows`)
    if state is not None:  # rows lost at the end (and, in an unchained log, rows altered)
        check_log(rows, state, log=log, checkpoint=ck.stem, earlier=earlier_checkpoints(ck))
    return rows


__all__ = ["check_chain", "check_log", "checked_rows", "log_record", "recorded_rows", "row_digest", "rows_sha256"]
