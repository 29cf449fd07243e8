import gzip

import numpy as np
import pytest

from fedevo.data import datasets
from fedevo.data.datasets import load_dataset
from fedevo.errors import DataNotFoundError, FedevoError


def test_digits_offline():
    d = load_dataset("digits")
    assert d.x_train.shape[1:] == (1, 8, 8) and d.num_classes == 10
    assert len(d.y_train) + len(d.y_test) == 1797
    assert abs(float(d.x_train.mean())) < 1e-4


def _write_idx(path, arr):
    header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.astype(np.uint8).tobytes())


def test_fashion_from_data_dir_idx(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "absent")
    rng = np.random.default_rng(0)
    for split, n in (("train", 30), ("t10k", 10)):
        _write_idx(tmp_path / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        _write_idx(tmp_path / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    d = datasets._fashion(str(tmp_path), False)
    assert d.x_train.shape == (30, 1, 28, 28) and d.y_test.shape == (10,)


def _fake_fashion(root, n_train=30, n_test=10):
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", n_train), ("t10k", n_test)):
        _write_idx(root / f"{split}-images-idx3-ubyte.gz", rng.integers(0, 255, (n, 28, 28)))
        _write_idx(root / f"{split}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))


def test_fashion_absent_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "absent")
    with pytest.raises(DataNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets._fashion(None, False)


@pytest.mark.parametrize("kind", ["missing", "empty", "file", "partial"])
def test_fashion_data_dir_given_is_used_or_refused(tmp_path, monkeypatch, kind):
    """Issue 14: a --data-dir the user gave is never silently replaced by the Debian copy."""
    debian = tmp_path / "debian"
    _fake_fashion(debian, n_train=20)
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", debian)
    assert datasets._fashion(None, False).x_train.shape[0] == 20  # no --data-dir: Debian's copy
    d = tmp_path / "mine"
    if kind == "empty":
        d.mkdir()
    elif kind == "file":
        d.write_text("x")
    elif kind == "partial":
        _fake_fashion(d)
        (d / "t10k-labels-idx1-ubyte.gz").unlink()
    expect = {"missing": "does not exist", "empty": "lacks train-images", "file": "is not a directory",
              "partial": "lacks t10k-labels-idx1-ubyte:"}[kind]
    with pytest.raises(DataNotFoundError, match=expect):
        datasets._fashion(str(d), False)
    if kind == "file":
        d = tmp_path / "mine2"
    _fake_fashion(d, n_train=40)
    assert datasets._fashion(str(d), False).x_train.shape[0] == 40  # the given copy, not Debian's


def test_mnist_needs_data_dir(tmp_path):
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        datasets._torchvision("mnist", None, False)
    with pytest.raises(DataNotFoundError, match="does not exist.*--download"):
        datasets._torchvision("mnist", str(tmp_path / "missing"), False)
    with pytest.raises(DataNotFoundError, match="--download"):
        datasets._torchvision("cifar10", str(tmp_path), False)


def test_unknown_dataset():
    with pytest.raises(FedevoError, match="unknown dataset"):
        load_dataset("imagenet")


def test_bad_idx_file(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(FedevoError, match="IDX"):
        datasets._read_idx(p)
