"""evaluations.csv, the run's evaluation log: one line per evaluation, appended and fsync'ed the moment it finishes,
a torn last line cut off on open; and atomic_write, how every other file of a run is written.

The log's last column, ``chain``, is a hash chain over its lines: each row's cell is :func:`chain_next` of the
previous row's cell (the first row's: of :func:`chain_start`, which covers run.json's bytes and the header) and
the row's own bytes up to that cell. fedevo.searching.integrity checks it to the last row. A log written before
the chain (no ``chain`` column) is read and appended to as it is, unchained.

A row whose status is not ok (failed, diverged) holds NaN for error, comm, eps, eps_paper and accuracy_global,
whatever the evaluation returned: they were not measured (a diverged model's stand-ins, error 1 and ε = inf, read
as a result and as 'no privacy'); its objectives are their worst values for the search either way."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from ..errors import DiskFullError, FedevoError, disk_full
from ..result import EvaluationResult
from .record import HEAD_COLUMNS, RESULT_COLUMNS, RUNG_COLUMNS, EvaluationRecord
from .runner import Task, task_label

# the columns (fedevo.searching.record): HEAD_COLUMNS, the genes, RESULT_COLUMNS, then one column per objective of
# the run that is not one of RESULT_COLUMNS (its raw value, fedevo.objectives: e.g. worst_client_error), so a run
# with the default objectives writes the same columns as before the objectives list; a multi-fidelity search's
# rows end with RUNG_COLUMNS (fedevo.searching.fidelity): the rung (0 = lowest) and its fraction of the rounds
# (1.0: full fidelity); a plain search's evaluations.csv has neither (all its rows are full)
CHAIN_COLUMN = "chain"  # the last column: the hash chain over the rows (see the module doc)
CHAIN_CHARS = 32  # 128 bits of SHA-256 per row


def chain_next(prev: str, body: bytes) -> str:
    """The chain cell of a line whose bytes before ``,<cell>`` are `body`, after a line whose cell is `prev`."""
    return hashlib.sha256(prev.encode() + b"\n" + body).hexdigest()[:CHAIN_CHARS]


def chain_start(run_json: bytes, header: bytes) -> str:
    """Where a log's chain starts: the run's run.json (its bytes) and the log's header line (without newline)."""
    return chain_next(hashlib.sha256(run_json).hexdigest(), header)


def _write(f, data) -> None:
    """Write and flush (one place, so that a test can fill the disk)."""
    f.write(data)
    f.flush()


def _disk_full(path: Path, e: BaseException) -> DiskFullError:
    return DiskFullError(f"disk full while writing {path} ({e.strerror or e}); it is left as it was before")


def row_key(row: Mapping[str, Any]) -> tuple[int, int]:
    """A logged row's key: (id, rung); a plain search's rows are rung 0, a multi-fidelity search logs one row per
    rung an individual reached."""
    return int(row["id"]), int(row.get("rung", 0) or 0)


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write to a temporary file beside `path`, fsync, rename over `path`. On any failure the temporary file is
    removed and `path` is untouched; a full disk is a DiskFullError (one line)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            _write(f, data.encode() if isinstance(data, str) else data)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if disk_full(e):
            raise _disk_full(path, e) from None
        raise
    with contextlib.suppress(OSError):
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


def _unescape(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            out.append({"n": "\n", "r": "\r", "\\": "\\"}.get(s[i + 1], s[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _fmt_float(v: Any) -> str:
    if v is None:
        return ""
    return repr(float(v))  # repr round-trips exactly (inf, nan too)


def _parse_float(s: str) -> Optional[float]:
    return None if s == "" else float(s)


def check_objective_names(gene_names: Iterable[str], objectives: Iterable) -> None:
    """FedevoError (one line) for an objective named as a gene or a column of the log that is not its own: the
    built-in error, comm, eps and eps_paper have their columns; `status`, `omega`, `accuracy_global`... are the
    evaluation's, and an objective of that name would read the column, not its function."""
    from ..objectives.builtin import BUILTIN

    taken = set(gene_names) | set(HEAD_COLUMNS) | set(RUNG_COLUMNS) | {CHAIN_COLUMN} \
        | (set(RESULT_COLUMNS) - set(BUILTIN))
    for o in objectives:
        if o.name in taken:
            raise FedevoError(f"objective {o.name!r} has the name of a gene or a column of the evaluation log; "
                              "rename it")


class EvalLog:
    """evaluations.csv: one physical line per evaluation (newlines inside the message are escaped as \\n)."""

    def __init__(self, path: Path, genes: Sequence, *, rungs: bool = False, run_json: Optional[bytes] = None,
                 objectives=None):
        """run_json: the run's run.json bytes; given, a new log is chained (its header ends with ``chain``).
        objectives: the run's ObjectiveSet; each one without a column of RESULT_COLUMNS gets its own."""
        self.path = Path(path)
        self.genes = tuple(genes)
        self.rungs = rungs
        self.run_json = run_json
        gene_names = [g.name for g in self.genes]
        clash = set(gene_names) & (set(HEAD_COLUMNS) | set(RESULT_COLUMNS) | set(RUNG_COLUMNS if rungs else ())
                                   | {CHAIN_COLUMN})
        assert not clash, clash
        check_objective_names(gene_names, objectives or ())
        # the run's objectives that have no column of their own above (a run before the objectives list: none)
        self.objectives = tuple(o for o in (objectives or ()) if o.name not in RESULT_COLUMNS)
        # the data columns (what a row holds; front.csv's columns); the file's header adds CHAIN_COLUMN if chained
        self.columns = (list(HEAD_COLUMNS) + gene_names + list(RESULT_COLUMNS) + [o.name for o in self.objectives]
                        + list(RUNG_COLUMNS if rungs else ()))
        self.chained = run_json is not None  # a new log's; an existing log's header decides (`rows_of`)
        self._head: Optional[str] = None  # the chain cell of the last line (appending)
        self._fh = None

    # -- formatting
    def _gene_cell(self, g, v) -> str:
        if g.type == "real":
            return repr(float(v))
        if g.type == "int":
            return str(int(v))
        return str(v)

    def _gene_value(self, g, s: str):
        if g.type == "real":
            return float(s)
        if g.type == "int":
            return int(s)
        for c in g.choices:
            if str(c) == s:
                return c
        return s

    def objective_values(self, r: EvaluationResult, label: str = "") -> tuple[list[Optional[float]], str]:
        """The raw values of the objectives with a column of their own, each one's read called once, and a note
        for the message where one failed (that value is then empty: the objective's worst): the read raised, or
        gave a value outside the objective's range. A failed or diverged evaluation's are not read (worst in
        every objective). What the reads print goes to the run's user.log under `label`, as an evaluation's
        output does (containment.UserLog), never to fedevo's stdout."""
        if r.status != "ok" or not self.objectives:
            return [None] * len(self.objectives), ""
        from ..objectives.registry import builtin
        from .containment import UserLog, call_user, captured_stdout

        values, notes = [], []
        with captured_stdout(stderr=True) as out:
            for o in self.objectives:
                try:
                    v = call_user(o.value, r)  # sys.exit, a raised KeyboardInterrupt: this value's failure
                    if v is not None and math.isnan(v) and not builtin(o.name):  # 0/0 in the user's code, most
                        raise ValueError("returned nan; expected a number or None (None: not measured)")  # likely
                    outside = o.outside(v)
                    if outside:
                        raise ValueError(outside)
                    values.append(v)
                except Exception as e:  # noqa: BLE001 - a user's objective function: its failure is the value's, not the run's
                    values.append(None)
                    notes.append(f"{NOTE_PREFIX.format(name=o.name)}{type(e).__name__}: {' '.join(str(e).split())}")
        UserLog(self.path.parent).write(label or "objectives", out.getvalue())
        return values, "\n".join(notes)

    def cells(self, task: Task, r: EvaluationResult, values: Optional[Sequence[Optional[float]]] = None) -> list[str]:
        """A line's cells; `values`: the objectives' raw values when known (a logged row's), else read from `r`."""
        privacy = json.dumps(r.privacy or {}, sort_keys=True, default=str)
        notes = ""
        if values is None:
            values, notes = self.objective_values(r, task_label(task))
        message = "\n".join(m for m in (r.message or "", notes) if m)
        shown = r.reported()  # not ok: NaN (a diverged model's error 1 and ε = ∞ are stand-ins, not results)
        measured = (shown.error, shown.comm, shown.eps, shown.eps_paper, shown.accuracy_global)
        return ([str(task.id), str(task.generation), str(task.index), str(task.seed)]
                + [self._gene_cell(g, task.params[g.name]) for g in self.genes]
                + [_fmt_float(v) for v in measured]
                + [str(int(r.omega or 0)), r.status, _fmt_float(r.wall_s),
                   str(int(r.rounds or 0)), _escape(privacy), _escape(message)]
                + [_fmt_float(v) for v in values]
                + ([str(int(task.rung)), repr(float(task.fidelity))] if self.rungs else []))

    def row_cells(self, row: Mapping[str, Any]) -> list[str]:
        """A parsed row written back exactly as the log holds it (front.csv's lines)."""
        task = Task(row["id"], row["generation"], row["index"], {g.name: row[g.name] for g in self.genes},
                    row["seed"], rung=row.get("rung", 0), fidelity=row.get("fidelity", 1.0))
        return self.cells(task, row_result(row), [row[o.name] for o in self.objectives])

    def parse(self, cells: Sequence[str]) -> EvaluationRecord:
        """The record of one line's cells (ValueError / KeyError where a cell is not what its column holds)."""
        d = dict(zip(self.columns, cells))
        head = {k: int(d[k]) for k in HEAD_COLUMNS}
        num = {k: _parse_float(d[k]) for k in ("error", "comm", "eps", "eps_paper", "accuracy_global", "wall_s")}
        result = EvaluationResult(
            error=num["error"], comm=num["comm"], eps=num["eps"], eps_paper=num["eps_paper"],
            accuracy_global=num["accuracy_global"], omega=int(d["omega"]), status=d["status"],
            wall_s=num["wall_s"] or 0.0, rounds=int(d["rounds_trained"]),
            privacy=json.loads(_unescape(d["privacy"])) if d["privacy"] else {}, message=_unescape(d["message"]))
        return EvaluationRecord(**head, params={g.name: self._gene_value(g, d[g.name]) for g in self.genes},
                                result=result, objective_values={o.name: _parse_float(d[o.name]) for o in self.objectives},
                                rung=int(d["rung"]) if self.rungs else None,
                                fidelity=float(d["fidelity"]) if self.rungs else None)

    def matches(self, row: Mapping[str, Any], task: Task) -> bool:
        return (row["generation"] == task.generation and row["index"] == task.index and row["seed"] == task.seed
                and row.get("rung", 0) == task.rung
                and all(self._gene_cell(g, row[g.name]) == self._gene_cell(g, task.params[g.name])
                        for g in self.genes))

    @staticmethod
    def _line(cells: Sequence[str]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow(cells)
        return buf.getvalue()

    # -- file
    def header(self) -> str:
        """A new log's header line."""
        return self._line(self.columns + ([CHAIN_COLUMN] if self.chained else []))

    def rows_of(self, lines: Sequence[str], *, header_error: str) -> list[EvaluationRecord]:
        """The rows of the log's lines (`lines[0]`: the header; whole lines only), every row in the file's order;
        sets `chained` from the header. FedevoError naming the file and line of a corrupt row."""
        head = next(csv.reader([lines[0]]))
        if head not in (self.columns, self.columns + [CHAIN_COLUMN]):
            raise FedevoError(f"{self.path}: {header_error}")
        self.chained = head[-1] == CHAIN_COLUMN
        rows = []
        for n, cells in enumerate(csv.reader(lines[1:]), start=2):
            if len(cells) != len(head):
                raise FedevoError(f"{self.path}: line {n} is corrupt ({len(cells)} fields, expected {len(head)})")
            try:
                rows.append(self.parse(cells))
            except (ValueError, KeyError) as e:
                raise FedevoError(f"{self.path}: line {n} is corrupt ({e})") from None
        return rows

    def open(self) -> list[EvaluationRecord]:
        """Repair a torn tail, check the header, return the rows so far, open for appending."""
        header = self.header()
        if not self.path.exists() or self.path.stat().st_size == 0:
            atomic_write(self.path, header)
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):  # killed in the middle of a line: that evaluation is not recorded
            with open(self.path, "r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)
            data = data[: data.rfind(b"\n") + 1]
        if not data:
            atomic_write(self.path, header)
            data = header.encode()
        lines = data.decode("utf-8").split("\n")[:-1]  # "\n" alone ends a row (a message may hold \x0c, \x1e...)
        rows = self.rows_of(lines, header_error="its header does not match this run's genes; the run directory is "
                                                "not consistent with its run.json")
        if self.chained:  # the chain goes on from the last line (integrity.check_chain checks it up to there)
            last = data[:-1].rpartition(b"\n")[2]
            self._head = (last.rpartition(b",")[2].decode() if rows else
                          chain_start(self.run_json, last) if self.run_json is not None else None)
        self._fh = open(self.path, "a", encoding="utf-8", newline="")
        return rows

    def append(self, task: Task, result: EvaluationResult) -> EvaluationRecord:
        """Append one evaluation (flushed and fsync'ed); returns its record exactly as it will be read back."""
        cells = self.cells(task, result)
        line, head = self._line(cells), None
        if self.chained:
            if self._head is None:
                raise ValueError(f"{self.path}: a chained log without rows needs run_json to start its chain")
            head = chain_next(self._head, line[:-1].encode())
            line = f"{line[:-1]},{head}\n"
        end = os.fstat(self._fh.fileno()).st_size  # everything before was flushed
        try:
            _write(self._fh, line)
            os.fsync(self._fh.fileno())
        except OSError as e:  # a full disk: cut the half-written line, so the log stays whole
            with contextlib.suppress(OSError):
                self._fh.close()
                self._fh = None
                os.truncate(self.path, end)
                self._fh = open(self.path, "a", encoding="utf-8", newline="")
            if disk_full(e):
                raise _disk_full(self.path, e) from None
            raise
        if head is not None:
            self._head = head
        return self.parse(cells)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


NOTE_PREFIX = "objective {name}: "  # a message line saying an objective's value could not be read (EvalLog)


def unread_objectives(rows: Iterable[Mapping[str, Any]], names: Iterable[str]) -> list[tuple[str, int, int, str]]:
    """(name, evaluations whose value of it could not be read, ok evaluations, the first such note) for each of
    `names` that some ok evaluation could not read (its worst value stood in: EvalLog.objective_values), from the
    rows' messages."""
    ok = [r for r in rows if r.get("status") == "ok"]
    out = []
    for name in names:
        prefix = NOTE_PREFIX.format(name=name)
        notes = [line for r in ok for line in str(r.get("message") or "").splitlines() if line.startswith(prefix)]
        if notes:
            out.append((name, len(notes), len(ok), notes[0][len(prefix):]))
    return out


def row_result(row: Mapping[str, Any]) -> EvaluationResult:
    """The EvaluationResult of a logged evaluation: a record's own; for a plain mapping of the log's columns, one
    carrying its fixed fields (the objectives' own columns stay in the row: every reader takes ``row[name]``)."""
    if isinstance(row, EvaluationRecord):
        return row.result
    return EvaluationResult(error=row["error"], comm=row["comm"], eps=row["eps"], eps_paper=row["eps_paper"],
                            accuracy_global=row["accuracy_global"], omega=row["omega"], status=row["status"],
                            wall_s=row["wall_s"] or 0.0, rounds=row["rounds_trained"], privacy=row["privacy"],
                            message=row["message"])


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)
    return buf.getvalue()


__all__ = ["CHAIN_COLUMN", "EvalLog", "check_objective_names", "EvaluationRecord", "HEAD_COLUMNS", "chain_next", "chain_start", "RESULT_COLUMNS", "RUNG_COLUMNS", "atomic_write", "csv_text", "row_result", "unread_objectives"]
