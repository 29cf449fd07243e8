"""The user's own data: a NumPy `.npz`, Parquet files, a Hugging Face `datasets` directory, or arrays from Python.

A problem file names it in `[data]` (docs/data.md): `source`, `path`, the feature / label / client-id names `x`,
`y`, `client_id` (also their defaults), an optional `test_path`, `holdout` and `normalise`. From Python the same
comes as arrays: `ArraySource(x=..., y=..., client_id=...)`. Either is read once (`open_source`, at problem load:
every mistake is a FedevoError before anything runs), giving a `UserData` whose facts (input shape, classes,
samples, clients) the cost and memory estimates read without the data; `load_user` turns it into the `Dataset`
the simulator trains on (cached per process, like the bundled datasets).

Rows keep their client id: `partition = "natural"` makes each distinct id one client (data/partition.py). Without
a test set, each client's last `holdout` fraction of its rows (at least one row, none for a one-row client) is
its test split; without client ids, a fixed random `holdout` fraction of all rows is the test set.
"""

from __future__ import annotations

import functools
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import numpy as np

from ..errors import ChannelsLastWarning, FedevoError, warn

SOURCES = ("npz", "parquet", "hf")
# keys of a problem file's [data] table that name the data (the others, DATA_KEYS of problem.py, split it)
SOURCE_KEYS = ("source", "path", "x", "y", "client_id", "test_path", "holdout", "normalise")
HF_FILE_BUILDERS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet", ".txt": "text"}


@dataclass(frozen=True)
class FileSource:
    """Data in files, as a problem file's [data] table names it (paths absolute here)."""

    source: str
    path: str
    x: Union[str, tuple[str, ...]] = "x"
    y: str = "y"
    client_id: str = "client_id"
    test_path: Optional[str] = None
    holdout: float = 0.2
    normalise: bool = True

    def __post_init__(self):
        if self.source not in SOURCES:
            raise FedevoError(f"[data] source {self.source!r} is not one of {', '.join(SOURCES)}")
        _check_common(self.holdout, self.normalise)


@dataclass(frozen=True, eq=False)
class ArraySource:
    """Data as NumPy arrays (the Python form of a [data] table): features `x` (N, C, H, W) images, (N, H, W)
    one-channel images or (N, D) vectors; integer labels `y` (N,); optional `client_id` (N,) (any values: each
    distinct one is a client); optional test arrays (`client_id_test` where the train set has client ids and the
    partition is natural). Equal (and hashed) by content, so a worker's cache knows it again."""

    x: Any
    y: Any
    client_id: Any = None
    x_test: Any = None
    y_test: Any = None
    client_id_test: Any = None
    holdout: float = 0.2
    normalise: bool = True
    name: str = "arrays"
    digest: str = field(default="", compare=False)

    def __post_init__(self):
        for key in ("x", "y", "client_id", "x_test", "y_test", "client_id_test"):
            v = getattr(self, key)
            if (v is not None or key in ("x", "y")) and (isinstance(v, (str, bytes)) or np.ndim(v) == 0):
                raise FedevoError(f"ArraySource(): {key} must be an array (NumPy, or a list), got {type(v).__name__}")
        if not isinstance(self.name, str):
            raise FedevoError(f"ArraySource(): name must be a str, got {type(self.name).__name__}")
        _check_common(self.holdout, self.normalise)
        if (self.x_test is None) != (self.y_test is None):
            raise FedevoError("ArraySource: give both x_test and y_test, or neither")
        object.__setattr__(self, "digest", self.content_digest())

    def content_digest(self) -> str:
        """The digest of the arrays as they are now (`digest`: as they were when the source was made)."""
        h = hashlib.sha1()
        for a in (self.x, self.y, self.client_id, self.x_test, self.y_test, self.client_id_test):
            if a is not None:
                a = np.asarray(a)
                h.update(f"{a.dtype}{a.shape}".encode())
                h.update(_bytes_of(a))
            h.update(b"|")
        h.update(f"{self.holdout}{self.normalise}".encode())
        return h.hexdigest()

    def check_unchanged(self) -> None:
        """FedevoError where the arrays changed in place since the source was made (`y[:] = ...` in a notebook):
        the source is equal to itself as it was, so a process that read it then would reuse the old data, one that
        reads it now the new: one line instead."""
        if self.content_digest() != self.digest:
            raise FedevoError("ArraySource: its arrays changed in place since it was made; make a new ArraySource "
                              "of them (fedevo.ArraySource(x=..., y=..., ...)) to train on the new data")

    def __eq__(self, other):
        return isinstance(other, ArraySource) and other.digest == self.digest

    def __hash__(self):
        return hash(self.digest)


def _bytes_of(a: np.ndarray):
    """An array's bytes for a digest: its buffer where it has one (no copy: a 188 MB x hashed in 0.3 s, not 0.6),
    else a copy (datetimes), its items' repr for objects."""
    if a.dtype == object:
        return repr(a.tolist()).encode()
    try:
        return memoryview(np.ascontiguousarray(a)).cast("B")
    except (TypeError, ValueError):  # a dtype without a buffer format (datetime64), an empty array's shape
        return a.tobytes()


def _check_common(holdout, normalise) -> None:
    if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0 < holdout < 1:
        raise FedevoError(f"[data] holdout must be a fraction in (0, 1), got {holdout!r}")
    if not isinstance(normalise, bool):
        raise FedevoError(f"[data] normalise must be true or false, got {normalise!r}")


@dataclass(frozen=True)
class UserData:
    """A source and the facts of its data, known from loading it once (they travel with the config)."""

    spec: Union[FileSource, ArraySource]
    name: str
    input_shape: tuple[int, ...]
    num_classes: int
    n_train: int
    clients: Optional[int]  # distinct client ids (None: the data has none)
    max_client: int  # train rows of the largest client (n_train without ids)
    natural: bool = False  # read for partition = "natural" (client ids required)
    stamp: tuple = ()  # the files' (size, mtime) when read: a changed file is read again, not taken from a cache
    n_test: Optional[int] = None  # test rows (the error is measured on them)


FACTS = ("name", "input_shape", "num_classes", "n_train", "clients", "max_client", "natural", "n_test")


def facts_of(ud: UserData) -> dict:
    """What a run directory records of its user data (run.json's `data_facts`): its readers rebuild the UserData
    from them (`from_facts`) instead of reading the files."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in ((k, getattr(ud, k)) for k in FACTS)}


def from_facts(spec: Union[FileSource, ArraySource], facts: dict) -> UserData:
    """The UserData of `spec` as a run recorded it (`facts_of`), without opening its files (a reader of the run:
    `fedevo front`, `plot`, `open_run`); its files are read only if it trains (and checked then)."""
    return UserData(spec=spec, **{k: (tuple(facts[k]) if k == "input_shape" else facts[k]) for k in FACTS})


@dataclass(frozen=True)
class _Table:
    x: np.ndarray
    y: np.ndarray
    ids: Optional[np.ndarray]
    where: str  # for messages


# ---------------------------------------------------------------------------------------------------- readers


def _need(module: str, source: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise FedevoError(f"[data] source = {source!r} needs the {module.split('.')[0]!r} package: "
                          "pip install 'fedevo[data]'") from None


def _x_names(x) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def _missing(what: str, names: list[str], have: list[str], where: str) -> FedevoError:
    kind = "array" if where.endswith(".npz") else "column"
    return FedevoError(f"{where}: no {kind} {', '.join(map(repr, names))} for {what}; it has "
                       f"{', '.join(map(repr, have)) or 'none'}")


def _stack_column(values) -> np.ndarray:
    """A column of scalars, of (nested) lists or of arrays as one array (N, ...)."""
    arr = np.asarray(values)
    if arr.dtype == object:  # ragged or nested lists
        try:
            arr = np.stack([np.asarray(v) for v in values])
        except ValueError as e:
            raise FedevoError(f"feature rows of unequal shape ({e})") from None
    return arr


def _from_columns(get, have: list[str], spec: FileSource, where: str, need_ids: bool) -> _Table:
    xs = _x_names(spec.x)
    miss = [c for c in xs if c not in have]
    if miss:
        raise _missing("the features x", miss, have, where)
    if spec.y not in have:
        raise _missing("the labels y", [spec.y], have, where)
    if len(xs) == 1:
        try:
            x = _stack_column(get(xs[0]))
        except FedevoError as e:
            raise FedevoError(f"{where}: {e}") from None
    else:  # tabular: one scalar column per feature
        cols = [np.asarray(get(c)) for c in xs]
        bad = [c for c, v in zip(xs, cols) if v.ndim != 1 or v.dtype.kind not in "biuf"]
        if bad:
            raise FedevoError(f"{where}: feature column(s) {', '.join(map(repr, bad))} are not numeric scalars; a "
                              "list of x columns must name one number per row each")
        x = np.stack(cols, axis=1)
    ids = np.asarray(get(spec.client_id)) if spec.client_id in have else None
    if need_ids and ids is None:
        raise _missing("the client ids (partition = \"natural\")", [spec.client_id], have, where)
    return _Table(x, np.asarray(get(spec.y)), ids, where)


def _read_npz(path: Path, spec: FileSource, need_ids: bool) -> _Table:
    """An .npz archive's arrays; every defect of the file (empty, truncated, a single .npy array under an .npz
    name, not numpy's at all) is one FedevoError naming it."""
    hint = "save the arrays with numpy.savez(path, x=..., y=..., client_id=...)"
    try:
        if path.is_file() and path.stat().st_size == 0:
            raise FedevoError(f"{path}: an empty file (0 bytes), not an .npz archive; {hint}")
        with open(path, "rb") as f:
            head = f.read(6)
        # told apart by their first bytes: numpy.load would read any other file as a pickle, and its refusal
        # ("contains pickled (object) data ... allow_pickle") would be the message
        if head.startswith(b"\x93NUMPY"):
            raise FedevoError(f"{path}: a single array (.npy format) under an .npz name, not an archive of named "
                              f"arrays; {hint}")
        if not head.startswith(b"PK"):
            raise FedevoError(f"{path}: not a NumPy .npz of numeric arrays (it is not a zip file); {hint}")
        with np.load(path, allow_pickle=False) as z:
            have = list(z.files)
            data = {}
            for k in have:
                if k in _x_names(spec.x) + [spec.y, spec.client_id]:
                    try:
                        data[k] = z[k]
                    except ValueError as e:
                        if "allow_pickle" not in str(e):
                            raise
                        raise FedevoError(f"{path}: not a NumPy .npz of numeric arrays (array {k!r} holds Python "
                                          "objects, dtype=object); save numbers, or strings for client ids "
                                          "(numpy.asarray(ids, dtype=str))") from None
    except FedevoError:
        raise
    except Exception as e:  # noqa: BLE001 - zipfile's, numpy's, EOF...: a damaged or foreign file, one line
        detail = " ".join(str(e).split()) or "no detail"
        if "pickle" in detail:  # never numpy's advice to load it unsafely
            detail = "it holds Python objects"
        raise FedevoError(f"{path}: not a readable .npz file, truncated or damaged ({type(e).__name__}: "
                          f"{detail}); {hint}") from None
    return _from_columns(data.__getitem__, have, spec, str(path), need_ids)


def _read_parquet(path: Path, spec: FileSource, need_ids: bool) -> _Table:
    pq = _need("pyarrow.parquet", "parquet")
    try:
        schema = pq.read_schema(path) if path.is_file() else pq.ParquetDataset(path).schema
        have = list(schema.names)
        cols = [c for c in _x_names(spec.x) + [spec.y, spec.client_id] if c in have]
        table = pq.read_table(path, columns=list(dict.fromkeys(cols)))
    except Exception as e:  # pyarrow's own errors: not a Parquet file, unreadable
        raise FedevoError(f"{path}: not a readable Parquet file or directory ({type(e).__name__}: {e})") from None
    return _from_columns(lambda c: _arrow_column(table.column(c)), have, spec, str(path), need_ids)


def _arrow_column(col) -> np.ndarray:
    """An Arrow column as one array: nested lists of equal lengths (images stored as lists of rows of pixels)
    become the dimensions after the first, (N, H, W) or (N, C, H, W); anything else as Arrow converts it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    shape: list[int] = []
    flat = arr
    while pa.types.is_list(flat.type) or pa.types.is_large_list(flat.type) or pa.types.is_fixed_size_list(flat.type):
        if flat.null_count:
            break
        lengths = pc.list_value_length(flat)
        lo, hi = pc.min_max(lengths).values() if len(flat) else (None, None)
        if lo is None or lo.as_py() != hi.as_py():
            break  # ragged: the generic path below says so
        shape.append(lo.as_py())
        flat = flat.flatten()
    else:
        if shape:
            return flat.to_numpy(zero_copy_only=False).reshape(len(arr), *shape)
    return col.to_numpy(zero_copy_only=False)


def _hf_split(ds, path: Path, split: Optional[str]):
    dd = _need("datasets", "hf")
    if isinstance(ds, dd.DatasetDict):
        if split is None:
            split = "train" if "train" in ds else next(iter(ds))
        return ds.get(split)
    return ds if split in (None, "train") else None


def _open_hf(path: Path):
    dd = _need("datasets", "hf")
    quiet = dd.is_progress_bar_enabled()
    if quiet:  # one line per problem on the command line, not datasets' progress bars
        dd.disable_progress_bars()
    try:
        return _open_hf_quietly(dd, path)
    finally:
        if quiet:
            dd.enable_progress_bars()


def _open_hf_quietly(dd, path: Path):
    try:
        if path.is_dir() and any((path / f).exists() for f in ("dataset_dict.json", "dataset_info.json",
                                                                "state.json")):
            return dd.load_from_disk(str(path))
        if path.is_dir():
            return dd.load_dataset(str(path))
        builder = HF_FILE_BUILDERS.get(path.suffix.lower())
        if builder is None:
            raise FedevoError(f"{path}: [data] source = \"hf\" reads a save_to_disk directory, a folder of data "
                              f"files or a {', '.join(HF_FILE_BUILDERS)} file")
        return dd.load_dataset(builder, data_files=str(path))
    except FedevoError:
        raise
    except Exception as e:
        raise FedevoError(f"{path}: `datasets` cannot read it ({type(e).__name__}: {e})") from None


def _read_hf(ds, path: Path, spec: FileSource, need_ids: bool) -> _Table:
    dd = _need("datasets", "hf")
    have = list(ds.column_names)
    images = {c for c in _x_names(spec.x) if c in have and isinstance(ds.features.get(c), dd.Image)}
    npy = ds.with_format("numpy")

    def get(c):
        if c in images:  # PIL images: (H, W) or (H, W, C) arrays, made (C, H, W)
            arr = np.stack([np.asarray(im) for im in ds[c]])
            return arr[:, None] if arr.ndim == 3 else arr.transpose(0, 3, 1, 2)
        return npy[c]
    return _from_columns(get, have, spec, str(path), need_ids)


def _read_file_source(spec: FileSource, need_ids: bool) -> tuple[_Table, Optional[_Table]]:
    for p in (spec.path, spec.test_path):
        if p is not None and not Path(p).exists():
            raise FedevoError(f"[data] {'path' if p == spec.path else 'test_path'}: {p} does not exist")
    path = Path(spec.path)
    if spec.source == "npz":
        train = _read_npz(path, spec, need_ids)
        test = _read_npz(Path(spec.test_path), spec, False) if spec.test_path else None
    elif spec.source == "parquet":
        train = _read_parquet(path, spec, need_ids)
        test = _read_parquet(Path(spec.test_path), spec, False) if spec.test_path else None
    else:
        ds = _open_hf(path)
        test = None
        if spec.test_path:
            tds = _hf_split(_open_hf(Path(spec.test_path)), Path(spec.test_path), "test")
            if tds is None:
                tds = _hf_split(_open_hf(Path(spec.test_path)), Path(spec.test_path), None)
            test = _read_hf(tds, Path(spec.test_path), spec, False)
        else:
            dd = _need("datasets", "hf")
            if isinstance(ds, dd.DatasetDict) and "test" in ds:  # a saved DatasetDict's own test split
                test = _read_hf(ds["test"], path / "test", spec, False)
        train = _read_hf(_hf_split(ds, path, None), path, spec, need_ids)
    return train, test


def _read_arrays(spec: ArraySource, need_ids: bool) -> tuple[_Table, Optional[_Table]]:
    if spec.client_id is None and need_ids:
        raise FedevoError("ArraySource: partition = \"natural\" needs client_id (one id per row)")
    train = _Table(np.asarray(spec.x), np.asarray(spec.y),
                   None if spec.client_id is None else np.asarray(spec.client_id), "ArraySource")
    test = None
    if spec.x_test is not None:
        test = _Table(np.asarray(spec.x_test), np.asarray(spec.y_test),
                      None if spec.client_id_test is None else np.asarray(spec.client_id_test), "ArraySource test")
    return train, test


# ---------------------------------------------------------------------------------------------------- checks


def _features(t: _Table) -> np.ndarray:
    x = t.x
    if x.dtype.kind not in "biuf":
        raise FedevoError(f"{t.where}: features must be numbers, got dtype {x.dtype}")
    if x.ndim == 1:
        x = x[:, None]  # one scalar feature
    elif x.ndim == 3:
        x = x[:, None]  # (N, H, W): one channel
    if x.ndim not in (2, 4):
        raise FedevoError(f"{t.where}: features of shape {x.shape}; use (N, D) vectors or (N, C, H, W) images")
    if len(x) != len(t.y):
        raise FedevoError(f"{t.where}: {len(x)} feature rows but {len(t.y)} labels")
    if t.ids is not None and len(t.ids) != len(t.y):
        raise FedevoError(f"{t.where}: {len(t.ids)} client ids but {len(t.y)} labels")
    x = x.astype(np.float32, copy=False)
    if not np.isfinite(x).all():
        raise FedevoError(f"{t.where}: features hold NaN or infinite values")
    return x


def channels_last(shape: tuple) -> bool:
    """Whether images of this shape look like (N, H, W, C) — a last axis of 1, 3 or 4 (grey, RGB, RGBA) after two
    of more than 4 pixels — rather than the (N, C, H, W) fedevo reads."""
    return len(shape) == 4 and shape[3] in (1, 3, 4) and min(shape[1], shape[2]) > 4


def _warn_if_channels_last(shape: tuple, where: str) -> None:
    """One line on stderr (once per process: the read is cached) where the images seem channels-last: read as
    (N, C, H, W) they train, silently, on H channels of W×C images. A ChannelsLastWarning: Python's warning filters
    silence it (a model that takes them so)."""
    if channels_last(shape):
        n, c, h, w = shape
        warn(f"{where}: images of shape {tuple(shape)} look channels-last (N, H, W, C); fedevo reads images as "
             f"(N, C, H, W), so these are {c} channels of {h}×{w} images: transpose them first (x.transpose(0, 3, 1, "
             "2)) unless that is what they are (then filter fedevo.ChannelsLastWarning)", ChannelsLastWarning)


def _labels(t: _Table) -> np.ndarray:
    y = t.y
    if y.ndim != 1:
        raise FedevoError(f"{t.where}: labels must be one integer class per row, got shape {y.shape}")
    if y.dtype.kind == "f":
        frac = ~np.isfinite(y) | (y != np.round(y))
        if frac.any():
            raise FedevoError(f"{t.where}: labels must be integer classes; row {int(np.argmax(frac))} has "
                              f"{y[np.argmax(frac)].item()!r}")
    elif y.dtype.kind not in "iu":
        raise FedevoError(f"{t.where}: labels must be integer classes, got dtype {y.dtype}"
                          + (" (map the class names to 0..K-1 first)" if y.dtype.kind in "OUS" else ""))
    y = y.astype(np.int64)
    if len(y) and y.min() < 0:
        raise FedevoError(f"{t.where}: labels must be classes 0..K-1, found {int(y.min())}")
    return y


def _client_index(ids: np.ndarray, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct ids, each row's index into them)."""
    if ids.ndim != 1:
        raise FedevoError(f"{where}: client ids must be one value per row, got shape {ids.shape}")
    if ids.dtype.kind == "f" and not np.isfinite(ids).all():
        raise FedevoError(f"{where}: client ids hold NaN")
    try:
        return np.unique(ids, return_inverse=True)
    except TypeError as e:  # mixed types in an object column
        raise FedevoError(f"{where}: client ids of mixed types ({e})") from None


def _holdout_by_client(inv: np.ndarray, frac: float) -> np.ndarray:
    """Boolean mask of test rows: each client's last round(frac·n) rows in file order, at least 1 and at most n − 1
    (none for a one-row client)."""
    test = np.zeros(len(inv), dtype=bool)
    order = np.argsort(inv, kind="stable")
    counts = np.bincount(inv)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    for s, n in zip(starts, counts):
        k = 0 if n < 2 else min(max(1, round(frac * n)), n - 1)
        test[order[s + n - k: s + n]] = True
    return test


def _normalise(x_train: np.ndarray, x_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Standardise per channel (images) or per feature (vectors) with the train set's mean and std."""
    axes = (0, 2, 3) if x_train.ndim == 4 else (0,)
    mean = x_train.mean(axes, keepdims=True, dtype=np.float64)
    std = np.maximum(x_train.std(axes, keepdims=True, dtype=np.float64), 1e-6)
    return (((x_train - mean) / std).astype(np.float32), ((x_test - mean) / std).astype(np.float32))


@dataclass(frozen=True)
class Arrays:
    """The checked arrays of a source: train and test features/labels, each row's client index (None: no ids)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    train_clients: Optional[np.ndarray]
    test_clients: Optional[np.ndarray]
    client_names: tuple
    num_classes: int


def _stamp(spec) -> tuple:
    if not isinstance(spec, FileSource):
        return ()
    out = []
    for p in (spec.path, spec.test_path):
        try:
            st = Path(p).stat() if p else None
            out.append((st.st_size, st.st_mtime_ns) if st else None)
        except OSError:
            out.append(None)
    return tuple(out)


def read_arrays(spec: Union[FileSource, ArraySource], *, natural: bool) -> Arrays:
    """Read and check a source (every mistake a FedevoError naming it); split off the test rows. Cached per
    process while the files are unchanged (problem load reads them; the evaluations after it reuse them)."""
    if isinstance(spec, ArraySource):  # the arrays read now, or cached, are those the source was made of (its
        spec.check_unchanged()  # digest: the cache's key)
    return _read_arrays_cached(spec, natural, _stamp(spec))


@functools.lru_cache(maxsize=2)
def _read_arrays_cached(spec, natural: bool, stamp: tuple) -> Arrays:
    train, test = _read_file_source(spec, natural) if isinstance(spec, FileSource) else _read_arrays(spec, natural)
    x, y = _features(train), _labels(train)
    _warn_if_channels_last(x.shape, train.where)
    if len(y) < 2:
        raise FedevoError(f"{train.where}: {len(y)} row(s); federated training needs more")
    names, inv = (None, None) if train.ids is None else _client_index(train.ids, train.where)
    if natural and len(names) < 2:
        raise FedevoError(f"{train.where}: client id {_col(spec)} has only one client ({names[0].item()!r}); "
                          "partition = \"natural\" needs at least two")
    if test is not None:
        xt, yt = _features(test), _labels(test)
        if xt.shape[1:] != x.shape[1:]:
            raise FedevoError(f"{test.where}: test features of shape {xt.shape[1:]}, train {x.shape[1:]}")
        if len(yt) == 0:
            raise FedevoError(f"{test.where}: the test set has no rows")
        tinv = None
        if names is not None:
            if test.ids is None and natural:
                raise FedevoError(f"{test.where}: no client id {_col(spec)} in the test set; partition = "
                                  "\"natural\" gives each client its own test rows")
            if test.ids is not None:
                known = np.isin(test.ids, names)  # test rows of clients without train rows are left out
                if not known.any():
                    raise FedevoError(f"{test.where}: the test set is empty: test rows of clients without train "
                                      f"rows are left out, and no test row's client id {_col(spec)} is a train "
                                      f"row's (test: {_some(test.ids)}; train: {_some(names)})")
                xt, yt = xt[known], yt[known]
                tinv = np.searchsorted(names, test.ids[known])
        x_tr, y_tr, inv_tr = x, y, inv
    elif inv is not None:
        held = _holdout_by_client(inv, spec.holdout)
        if not held.any():  # every client has one row (a one-row client only trains)
            raise FedevoError(f"{train.where}: every client (client id {_col(spec)}) has one row, and holdout "
                              "keeps a one-row client's row for training: no test rows are left; give a test_path, "
                              "or clients of two rows or more")
        x_tr, y_tr, inv_tr, xt, yt, tinv = x[~held], y[~held], inv[~held], x[held], y[held], inv[held]
    else:  # no ids: a fixed random holdout (not a run seed: the same split for every evaluation)
        if len(y) < 2:
            raise FedevoError(f"{train.where}: one row, and no test set: a holdout needs two rows or more")
        perm = np.random.default_rng(0).permutation(len(y))
        k = min(max(1, round(spec.holdout * len(y))), len(y) - 1)  # a test row and a train row at least
        te, tr = np.sort(perm[:k]), np.sort(perm[k:])
        x_tr, y_tr, inv_tr, xt, yt, tinv = x[tr], y[tr], None, x[te], y[te], None
    if spec.normalise:
        x_tr, xt = _normalise(x_tr, xt)
    classes = int(max(y_tr.max(), yt.max())) + 1
    where = train.where if y.max() == classes - 1 else test.where  # (the split holding the largest label)
    _check_classes(classes, y_tr, yt, where)
    _warn_if_unused_classes(classes, y_tr, yt, where)
    if classes < 2:
        raise FedevoError(f"{train.where}: every label is {classes - 1}; classification needs two classes or more")
    return Arrays(x_tr, y_tr, xt, yt, inv_tr, tinv, tuple(names.tolist()) if names is not None else (), classes)


# The classes are the largest label + 1, not the distinct labels: a split may lack a few classes, and its model
# keeps their outputs. A stray label (an id or a sentinel like 999999 in the label column) would make a model of
# that many outputs, almost all of them of classes no row holds; at 2**40 the memory check blames the model. So
# a largest label is refused only when both are true: more than MAX_CLASSES_ANY classes (up to 1000 classes, any
# labels go: such an output layer is small whatever the labels present) and more than SPARSE_CLASSES times the
# distinct labels of the train and test sets together (over 90 % of the classes without a single row: no data
# where a few classes are absent from a split looks like that, and outputs no row holds can never be learnt or
# measured, so relabelling the classes 0..K-1 loses nothing).
MAX_CLASSES_ANY = 1000
SPARSE_CLASSES = 10


def _warn_if_unused_classes(classes: int, y_train: np.ndarray, y_test: np.ndarray, where: str) -> None:
    """One line on stderr (once per process: the read is cached) where most of the model's outputs are classes no
    row holds (labels 3 and 7: a model of 8 outputs): its output layer, which Ω and the communication cost count,
    is that much larger, silently."""
    distinct = np.unique(np.concatenate([y_train, y_test]))
    if classes > 2 * len(distinct):
        print(f"fedevo: warning: {where}: labels are class indices 0..K-1: the largest is {classes - 1} (a model of "
              f"{classes} outputs, which Ω and the communication cost count) but only {len(distinct)} distinct labels "
              f"occur ({_some(distinct)}); relabel them 0..{len(distinct) - 1} (np.unique(y, return_inverse=True)[1]) "
              "unless the other classes are meant", file=sys.stderr)


def _check_classes(classes: int, y_train: np.ndarray, y_test: np.ndarray, where: str) -> None:
    if classes <= MAX_CLASSES_ANY:
        return
    distinct = len(np.unique(np.concatenate([y_train, y_test])))
    if classes > SPARSE_CLASSES * distinct:
        raise FedevoError(f"{where}: labels are class indices 0..C-1: the largest is {classes - 1} (a model of "
                          f"{classes:,} classes) but only {distinct} distinct labels occur in the train and test sets; "
                          f"relabel them 0..{distinct - 1}")


def _some(values: np.ndarray, n: int = 3) -> str:
    """The first `n` distinct values, in order, for a message: 'a', 'b', 'c', ... (7 in all)."""
    distinct = list(dict.fromkeys(values.tolist()))
    shown = ", ".join(repr(v) for v in distinct[:n])
    return shown if len(distinct) <= n else f"{shown}, ... ({len(distinct)} in all)"


def _col(spec) -> str:
    return repr(spec.client_id) if isinstance(spec, FileSource) else "array"


def open_source(spec: Union[FileSource, ArraySource], *, natural: bool, name: Optional[str] = None) -> UserData:
    """Read a source once (at problem load), check it and return it with its facts."""
    a = read_arrays(spec, natural=natural)
    if a.train_clients is not None:
        sizes = np.bincount(a.train_clients, minlength=len(a.client_names))
        clients, biggest = len(a.client_names), int(sizes.max())
    else:
        clients, biggest = None, len(a.y_train)
    if name is None:
        name = Path(spec.path).stem if isinstance(spec, FileSource) else spec.name
    return UserData(spec=spec, name=name, input_shape=tuple(int(s) for s in a.x_train.shape[1:]),
                    num_classes=a.num_classes, n_train=len(a.y_train), clients=clients, max_client=biggest,
                    natural=natural, stamp=_stamp(spec), n_test=len(a.y_test))


@functools.lru_cache(maxsize=4)
def load_user(ud: UserData):
    """The Dataset of a UserData (cached per process, so a worker reuses it across evaluations)."""
    import torch

    from .datasets import Dataset

    a = read_arrays(ud.spec, natural=ud.natural)
    return Dataset(ud.name, torch.from_numpy(np.ascontiguousarray(a.x_train)), torch.from_numpy(a.y_train),
                   torch.from_numpy(np.ascontiguousarray(a.x_test)), torch.from_numpy(a.y_test), ud.num_classes,
                   train_clients=a.train_clients, test_clients=a.test_clients)


def anchor_path(p: str, base: Optional[Path]) -> str:
    """A data file's name as fedevo reads it: `~` expanded, a relative one made absolute against `base` (a problem
    file's folder; None: left relative)."""
    q = Path(p).expanduser()
    return str(q if q.is_absolute() or base is None else (base / q).resolve())


def source_from_table(table: Mapping[str, Any], *, base: Optional[Path],
                      problem: str) -> Union[FileSource, ArraySource]:
    """A problem's [data] source keys as a source; file paths relative to the problem file's folder."""
    src = table.get("source")
    if isinstance(src, ArraySource):
        extra = sorted(set(table) & set(SOURCE_KEYS) - {"source"})
        if extra:
            raise FedevoError(f"problem {problem!r}: [data] {', '.join(extra)} do not apply to an ArraySource "
                              "(give them to ArraySource itself)")
        return src
    if "path" not in table:
        raise FedevoError(f"problem {problem!r}: [data] source = {src!r} needs a path")

    def where(key: str) -> Optional[str]:
        p = table.get(key)
        if p is None:
            return None
        if not isinstance(p, str):
            raise FedevoError(f"problem {problem!r}: [data] {key} must be a path string, got {p!r}")
        return anchor_path(p, base)

    x = table.get("x", "x")
    if not (isinstance(x, str) or (isinstance(x, list) and x and all(isinstance(c, str) for c in x))):
        raise FedevoError(f"problem {problem!r}: [data] x must be a name or a non-empty list of names, got {x!r}")
    for key in ("y", "client_id"):
        if key in table and not isinstance(table[key], str):
            raise FedevoError(f"problem {problem!r}: [data] {key} must be a name, got {table[key]!r}")
    try:  # its own checks (source, holdout, normalise) name the problem as the others do
        return FileSource(source=src, path=where("path"), x=x if isinstance(x, str) else tuple(x),
                          y=table.get("y", "y"), client_id=table.get("client_id", "client_id"),
                          test_path=where("test_path"), holdout=table.get("holdout", 0.2),
                          normalise=table.get("normalise", True))
    except FedevoError as e:
        raise FedevoError(f"problem {problem!r}: {e}") from None

