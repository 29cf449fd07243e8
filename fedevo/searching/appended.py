"""The CSV files a search grows by a row a batch (batches.csv, hypervolume.csv): appended while rows are only added,
rewritten whole (atomically: log.atomic_write) the first time a process writes one and whenever one of its
earlier rows changed. Rewritten whole after every batch, they cost a search of thousands of batches of one time
that grew with its batches (benchmarks/results-2026-11-28-search-scale-batches-of-one.txt)."""

from __future__ import annotations

import contextlib
import csv
import io
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import disk_full
from .log import _disk_full, _write, atomic_write, csv_text


class GrowingCsv:
    """One such file: `write(records, unchanged)` makes it hold one line per record (a mapping: its `columns`'
    values, floats written exactly: repr)."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path, self.columns = Path(path), list(columns)
        self.count: Optional[int] = None  # the records this object last wrote there (None: none yet)

    def cells(self, record: Mapping[str, Any]) -> list:
        return [repr(record[c]) if isinstance(record[c], float) else record[c] for c in self.columns]

    def write(self, records: Sequence[Any], unchanged: int = 0) -> None:
        """The file to hold `records`, of which the first `unchanged` are as they were at the last write: only the
        new ones appended (flushed, fsync'ed) when this object wrote the file last and its lines are all among
        those; else the file rewritten whole."""
        n = self.count
        if n is not None and not self.path.exists():  # deleted meanwhile
            n = None
        if n is None or n > unchanged or n > len(records):
            atomic_write(self.path, csv_text(self.columns, (self.cells(r) for r in records)))
            self.count = len(records)
            return
        if n == len(records):
            return
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(self.cells(r) for r in records[n:])
        self.count = None  # until the lines are whole on disk
        try:
            end = self.path.stat().st_size
            try:
                with open(self.path, "a", encoding="utf-8", newline="") as f:
                    _write(f, buf.getvalue())
                    os.fsync(f.fileno())
            except OSError:  # (cut back once the file is closed: a line still buffered is written at the close)
                with contextlib.suppress(OSError):
                    os.truncate(self.path, end)  # no half line left: the file as it was
                raise
        except OSError as e:
            if disk_full(e):
                raise _disk_full(self.path, e) from None
            raise
        self.count = len(records)


__all__ = ["GrowingCsv"]
