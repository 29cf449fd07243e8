"""Datasets as in-memory tensors (no DataLoader in the hot path).

digits (scikit-learn, offline default), Fashion-MNIST (Debian's `dataset-fashion-mnist` or a --data-dir),
MNIST and CIFAR-10 (torchvision, from a --data-dir; downloaded only when the user asks), synthetic (tests).
"""

from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ..errors import DataNotFoundError, FedevoError

DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")
from .catalog import DATASETS  # noqa: E402,F401  (the bundled datasets by name: torch-free)


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: torch.Tensor  # (N, C, H, W) float32, normalised
    y_train: torch.Tensor  # (N,) int64
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    # the user's data (data/sources.py): each row's client index into the distinct client ids, None without ids
    train_clients: Optional[np.ndarray] = None
    test_clients: Optional[np.ndarray] = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """(C, H, W) for images, (D,) for feature vectors."""
        return tuple(self.x_train.shape[1:])


def _normalise(x_train: torch.Tensor, x_test: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    dims = (0, 2, 3)
    mean, std = x_train.mean(dims, keepdim=True), x_train.std(dims, keepdim=True).clamp_min(1e-6)
    return ((x_train - mean) / std).contiguous(), ((x_test - mean) / std).contiguous()


def _digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as (images [1797, 8, 8], targets [1797]), what `load_digits()` gives: read from the
    CSV it ships (`sklearn/datasets/data/digits.csv.gz`) without importing scikit-learn, whose import (SciPy's
    included) costs a second or more in every process that loads digits; `load_digits()` where the file is not
    where it has always been."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")  # finds the package without running its __init__
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz" if spec and spec.origin else None
    if path is not None and path.is_file():
        with gzip.open(path, "rt", encoding="utf-8") as f:
            data = np.loadtxt(f, delimiter=",")
        if data.ndim == 2 and data.shape[1] == 65:
            return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)
    from sklearn.datasets import load_digits

    d = load_digits()
    return d.images, d.target


def _digits() -> Dataset:
    images, target = _digits_arrays()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(target, dtype=torch.int64)
    perm = torch.from_numpy(np.random.default_rng(0).permutation(len(y)))  # fixed split, not a run seed
    n_train = int(0.8 * len(y))
    tr, te = perm[:n_train], perm[n_train:]
    xtr, xte = _normalise(x[tr], x[te])
    return Dataset("digits", xtr, y[tr], xte, y[te], 10)


def _read_idx(path: Path) -> torch.Tensor:
    """An unsigned-byte IDX file (plain or .gz), the format torchvision reads: magic, big-endian dims, data."""
    raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08":
        raise FedevoError(f"{str(path)!r} is not an unsigned-byte IDX file")
    nd = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(nd)]
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * nd)
    return torch.from_numpy(data.copy()).view(*dims)


def _find_idx(root: Path, stem: str) -> Optional[Path]:
    for sub in ("", "raw", "FashionMNIST/raw", "fashion-mnist"):
        for suffix in ("", ".gz"):
            p = root / sub / f"{stem}{suffix}"
            if p.is_file():
                return p
    return None


FASHION_STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte")


# where a missing dataset's message sends the user: the commands that take --download
DOWNLOAD_HINT = "add --download (fedevo search or evaluate) to fetch it there with torchvision"


def _fashion_paths(data_dir: Optional[str]) -> Optional[list[Path]]:
    """Fashion-MNIST's four IDX files: from --data-dir when given (used or refused, never silently replaced by
    another copy), else from Debian's dataset-fashion-mnist; None where --data-dir lacks them (a download may
    fetch them); DataNotFoundError where Debian's copy is missing."""
    if data_dir:
        paths = [_find_idx(Path(data_dir), s) for s in FASHION_STEMS]
        return paths if all(paths) else None
    paths = [_find_idx(DEBIAN_FASHION, s) for s in FASHION_STEMS]
    if all(paths):
        return paths
    raise DataNotFoundError(
        f"Fashion-MNIST not found in {DEBIAN_FASHION}; install it with `apt-get install dataset-fashion-mnist`, "
        f"or pass --data-dir DIR holding the four IDX files ({DOWNLOAD_HINT})")


def _fashion_missing(data_dir: str) -> DataNotFoundError:
    root = Path(data_dir)
    if not root.is_dir():
        why = "does not exist" if not root.exists() else "is not a directory"
    else:
        why = "lacks " + ", ".join(s for s in FASHION_STEMS if _find_idx(root, s) is None)
    return DataNotFoundError(
        f"--data-dir {data_dir!r} {why}: Fashion-MNIST needs the four IDX files (plain or .gz) there or in its "
        f"raw/ or FashionMNIST/raw/ folder; {DOWNLOAD_HINT}, or drop --data-dir to use Debian's copy "
        f"({DEBIAN_FASHION})")


def _from_uint8(name, xtr, ytr, xte, yte) -> Dataset:
    def img(x):
        x = x.float() / 255.0
        return x.unsqueeze(1) if x.dim() == 3 else x.permute(0, 3, 1, 2)
    a, b = _normalise(img(xtr), img(xte))
    return Dataset(name, a, ytr.long(), b, yte.long(), 10)


def _torchvision_sets(name: str, data_dir: Optional[str], download: bool):
    """torchvision's (train, test) datasets of `name` in `data_dir`, fetched there first with `download`;
    DataNotFoundError in one line where they are missing or the download fails (torchvision's own messages span
    lines and list every mirror)."""
    import torchvision.datasets as tvd

    cls = {"mnist": tvd.MNIST, "cifar10": tvd.CIFAR10, "fashion": tvd.FashionMNIST}[name]
    if not data_dir:
        raise DataNotFoundError(f"dataset {name!r} needs --data-dir DIR (torchvision layout); " + (
            "--download fetches it into that DIR" if download else DOWNLOAD_HINT))
    if not Path(data_dir).is_dir() and not download:
        raise DataNotFoundError(f"--data-dir {data_dir!r} does not exist; point it at a copy of {name}, or "
                                f"{DOWNLOAD_HINT}")
    try:
        return cls(data_dir, train=True, download=download), cls(data_dir, train=False, download=download)
    except (RuntimeError, OSError) as e:  # OSError: a URLError from CIFAR-10's download, a damaged archive
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        if download:
            raise DataNotFoundError(f"could not fetch {name} into {data_dir!r} ({' '.join(lines[-1:])[:200]}); "
                                    f"without internet, copy it there in torchvision's layout") from None
        raise DataNotFoundError(f"{name} not found in {data_dir!r} (torchvision's layout, e.g. "
                                f"{cls.__name__}/raw/ for MNIST, cifar-10-batches-py/ for CIFAR-10); "
                                f"{DOWNLOAD_HINT}") from None


# the bundled datasets read from files (the others are made in memory)
FILE_BACKED = ("fashion", "mnist", "cifar10")


def _find(name: str, data_dir: Optional[str], download: bool):
    """Where a file-backed dataset comes from, the one choice `locate` and `load_dataset` share: Fashion-MNIST's
    four IDX files where they are (`_fashion_paths`), else torchvision's (train, test) datasets in `data_dir`
    (fetched there first with `download`); DataNotFoundError in one line where neither holds."""
    if name == "fashion":
        paths = _fashion_paths(data_dir)
        if paths is not None:
            return paths
        if not download:
            raise _fashion_missing(data_dir)
    return _torchvision_sets(name, data_dir, download)


# torchvision's folder of each dataset under its root: what its classes read
TORCHVISION_FOLDER = {"mnist": "MNIST", "fashion": "FashionMNIST", "cifar10": "cifar-10-batches-py"}


def files_read(name: str, data_dir: Optional[str]) -> list[Path]:
    """The files `load_dataset(name, data_dir)` reads, as `_find` finds them without reading or fetching anything
    (Fashion-MNIST's four IDX files; else every file of torchvision's folder of the dataset in `data_dir`): []
    for a dataset made in memory, or where none are found (loading would fail)."""
    if name not in FILE_BACKED:
        return []
    if name == "fashion":
        try:
            paths = _fashion_paths(data_dir)
        except DataNotFoundError:
            return []
        if paths is not None:
            return paths
    folder = Path(data_dir) / TORCHVISION_FOLDER[name] if data_dir else None
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder is not None and folder.is_dir() else []


def _read(name: str, data_dir: Optional[str], download: bool) -> Dataset:
    """A file-backed dataset read from where `_find` finds it."""
    found = _find(name, data_dir, download)
    if isinstance(found, list):
        return _from_uint8(name, *(_read_idx(p) for p in found))

    def tensors(ds):
        return torch.as_tensor(np.asarray(ds.data)), torch.as_tensor(np.asarray(ds.targets))
    tr, te = found
    return _from_uint8(name, *tensors(tr), *tensors(te))


def locate(name: str, data_dir: Optional[str] = None, download: bool = False) -> None:
    """Finds a bundled dataset's files (fetching them first with `download`) without reading them (torchvision's
    own classes load what they find): what a search checks before its run directory exists, so that missing data
    is one line, not a stopped search. DataNotFoundError as `load_dataset` would raise; unknown names are left to
    `load_dataset`."""
    if name in FILE_BACKED:
        _find(name, data_dir, download)


def synthetic(*, n_train: int = 600, n_test: int = 200, shape=(1, 8, 8), num_classes: int = 10,
              seed: int = 0, noise: float = 1.0) -> Dataset:
    """Gaussian class clusters: learnable, tiny, made on the spot (for tests)."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(num_classes, *shape, generator=g)

    def make(n):
        y = torch.arange(n) % num_classes
        y = y[torch.randperm(n, generator=g)]
        x = centers[y] + noise * torch.randn(n, *shape, generator=g)
        return x, y
    xtr, ytr = make(n_train)
    xte, yte = make(n_test)
    a, b = _normalise(xtr, xte)
    return Dataset("synthetic", a, ytr, b, yte, num_classes)


@functools.lru_cache(maxsize=4)
def load_dataset(name: str, data_dir: Optional[str] = None, download: bool = False) -> Dataset:
    """Load (and cache per process, so a worker reuses it across evaluations) a dataset by name."""
    if name == "digits":
        return _digits()
    if name in FILE_BACKED:
        return _read(name, data_dir, download)
    if name == "synthetic":
        return synthetic()
    raise FedevoError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
