"""Small user datasets written by the tests: clients of very unequal sizes, in .npz, Parquet and `datasets` form."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# rows per client id: a handful to hundreds (one client below any batch size)
SIZES = {"a": 3, "b": 160, "c": 41, "d": 9, "e": 70}


def rows(seed: int = 0, shape=(1, 8, 8), classes: int = 4, sizes=SIZES):
    """(x, y, client ids): learnable class clusters; each client's rows contiguous, ids as strings."""
    rng = np.random.default_rng(seed)
    ids = np.concatenate([np.full(n, k) for k, n in sizes.items()])
    y = rng.integers(0, classes, len(ids))
    centers = rng.normal(size=(classes, *shape)).astype(np.float32)
    x = (centers[y] + 0.5 * rng.normal(size=(len(ids), *shape))).astype(np.float32)
    return x, y.astype(np.int64), ids


def holdout_sizes(sizes=SIZES, frac: float = 0.2) -> dict[str, tuple[int, int]]:
    """(train, test) rows per client under the documented holdout rule."""
    out = {}
    for k, n in sizes.items():
        t = 0 if n < 2 else min(max(1, round(frac * n)), n - 1)
        out[k] = (n - t, t)
    return out


def write_npz(path: Path, **over) -> Path:
    x, y, ids = rows()
    arrays = {"x": x, "y": y, "client_id": ids, **over}
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def write_parquet(path: Path, tabular: bool = True) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    x, y, ids = rows(shape=(6,))
    cols = {f"f{i}": x[:, i] for i in range(x.shape[1])} if tabular else {"pixels": list(x)}
    pq.write_table(pa.table({**cols, "label": y, "user": ids}), path)
    return path


def write_hf(path: Path, with_test: bool = False) -> Path:
    import datasets

    x, y, ids = rows()
    ds = datasets.Dataset.from_dict({"x": x.tolist(), "y": y, "client_id": ids})
    if with_test:
        xt, yt, it = rows(seed=1, sizes={"a": 2, "b": 5, "c": 4, "d": 1, "e": 3})
        ds = datasets.DatasetDict({"train": ds, "test": datasets.Dataset.from_dict(
            {"x": xt.tolist(), "y": yt, "client_id": it})})
    ds.save_to_disk(str(path))
    return path


def problem(path: Path, data: str, *, train: str = "", genes: str = "") -> Path:
    """A problem file beside the data: an MLP, a few cheap rounds, an lr gene."""
    path.write_text(f"""model = "mlp"
[data]
{data}
[train]
rounds = 2
epochs = 1
batch_size = 16
participation = 1.0
layers = 1
units = 16
{train}
[genes]
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
{genes}
""")
    return path
