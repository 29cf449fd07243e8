"""Write a small offline federated dataset with natural client ids: examples/data/digits_clients.npz.

scikit-learn's 8×8 digits (1,797 images, shipped with scikit-learn: nothing is downloaded) dealt out to
`--clients` users of very unequal sizes, as real federated data is: client sizes fall off as a power of their rank
(a few users with hundreds of images, many with a few dozen, the smallest with a handful), the users' ids and
the rows dealt to them drawn from `--seed`. The file holds what a problem file's `[data] source = "npz"` reads
(docs/data.md):

    x          (N, 1, 8, 8) float32 images, pixel values 0..1
    y          (N,) int64 labels 0..9
    client_id  (N,) int64, one user id per row (each distinct id is one client with `partition = "natural"`)

    python examples/make_clients.py                 # writes examples/data/digits_clients.npz
    fedevo search --problem examples/digits_clients.toml --pop 8 --gen 2

The same arguments always give the same arrays; a file that already holds them is left as it is.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "digits_clients.npz"


def client_sizes(n: int, clients: int, *, skew: float = 1.3, smallest: int = 3) -> np.ndarray:
    """Sizes summing to n, the k-th largest ∝ k^-skew, none below `smallest` (largest first)."""
    if clients * smallest > n:
        raise ValueError(f"{clients} clients of at least {smallest} rows need {clients * smallest} rows; there are {n}")
    share = np.arange(1, clients + 1, dtype=np.float64) ** -skew
    spare = n - clients * smallest
    sizes = smallest + np.floor(spare * share / share.sum()).astype(np.int64)
    sizes[: n - int(sizes.sum())] += 1  # the rounding's remainder, one row each to the largest clients
    return sizes


def make(clients: int = 50, seed: int = 0, skew: float = 1.3) -> dict[str, np.ndarray]:
    """The dataset's arrays: x (N, 1, 8, 8) float32, y (N,) int64, client_id (N,) int64."""
    from sklearn.datasets import load_digits

    images, labels = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    sizes = client_sizes(len(labels), clients, skew=skew)
    ids = rng.permutation(clients)                        # which user id gets which size: not in size order
    owner = np.repeat(ids, sizes)[rng.permutation(len(labels))]  # each row's user
    order = np.argsort(owner, kind="stable")              # rows grouped by user, as a log of users' data would be
    return {
        "x": (images[order] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8),
        "y": labels[order].astype(np.int64),
        "client_id": owner[order].astype(np.int64),
    }


def _same(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    try:
        with np.load(path) as f:
            return set(f.files) == set(arrays) and all(
                f[k].dtype == v.dtype and np.array_equal(f[k], v) for k, v in arrays.items())
    except Exception:  # absent, truncated, not an .npz: write it anew
        return False


def write(path: Path, arrays: dict[str, np.ndarray]) -> bool:
    """Write the arrays to `path` (atomically) unless it already holds them; True if written."""
    if _same(path, arrays):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the .npz to write (default: {DEFAULT_OUT})")
    ap.add_argument("--clients", type=int, default=50, help="number of users (default: 50)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the ids and of the rows' assignment (default: 0)")
    ap.add_argument("--skew", type=float, default=1.3, help="size of the k-th largest user ∝ k^-skew (default: 1.3)")
    a = ap.parse_args(argv)
    try:
        arrays = make(a.clients, a.seed, a.skew)
    except ValueError as e:
        print(f"make_clients.py: error: {e}", file=sys.stderr)
        return 2
    written = write(a.out, arrays)
    sizes = np.bincount(arrays["client_id"])
    sizes = np.sort(sizes[sizes > 0])[::-1]
    print(f"{a.out}: {'written' if written else 'up to date'}: {len(arrays['y'])} images of {len(sizes)} clients, "
          f"{sizes[0]} rows the largest, {int(np.median(sizes))} the median, {sizes[-1]} the smallest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
