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
    d = datasets._read("fashion", str(tmp_path), False)
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
        datasets._read("fashion", None, False)


@pytest.mark.parametrize("kind", ["missing", "empty", "file", "partial"])
def test_fashion_data_dir_given_is_used_or_refused(tmp_path, monkeypatch, kind):
    """Issue 14: a --data-dir the user gave is never silently replaced by the Debian copy."""
    debian = tmp_path / "debian"
    _fake_fashion(debian, n_train=20)
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", debian)
    assert datasets._read("fashion", None, False).x_train.shape[0] == 20  # no --data-dir: Debian's copy
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
        datasets._read("fashion", str(d), False)
    if kind == "file":
        d = tmp_path / "mine2"
    _fake_fashion(d, n_train=40)
    assert datasets._read("fashion", str(d), False).x_train.shape[0] == 40  # the given copy, not Debian's


def test_mnist_needs_data_dir(tmp_path):
    with pytest.raises(DataNotFoundError, match="--data-dir"):
        datasets._read("mnist", None, False)
    # --download without --data-dir: 'add --download' told the user to add what they had given
    with pytest.raises(DataNotFoundError, match=r"needs --data-dir DIR \(torchvision layout\); --download fetches it "
                                                r"into that DIR$"):
        datasets._read("mnist", None, True)
    with pytest.raises(DataNotFoundError, match="does not exist.*--download"):
        datasets._read("mnist", str(tmp_path / "missing"), False)
    with pytest.raises(DataNotFoundError, match="--download"):
        datasets._read("cifar10", str(tmp_path), False)


def test_unknown_dataset():
    with pytest.raises(FedevoError, match="unknown dataset"):
        load_dataset("imagenet")


def test_bad_idx_file(tmp_path):
    p = tmp_path / "x"
    p.write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(FedevoError, match="IDX"):
        datasets._read_idx(p)


def test_locate_finds_without_loading_and_refuses_in_one_line(tmp_path, monkeypatch):
    """What a search checks before its run directory exists (api._locate_data)."""
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    for name, expect in (("fashion", "lacks train-images"), ("mnist", "mnist not found in"),
                         ("cifar10", "cifar10 not found in")):
        with pytest.raises(DataNotFoundError, match=expect) as e:
            datasets.locate(name, str(empty))
        assert "\n" not in str(e.value) and "--download (fedevo search or evaluate)" in str(e.value)
    with pytest.raises(DataNotFoundError, match="Fashion-MNIST not found in"):
        datasets.locate("fashion", None)  # neither --data-dir nor Debian's copy
    datasets.locate("digits", None)  # bundled: nothing to find
    _fake_fashion(empty)
    monkeypatch.setattr(datasets, "_read_idx", lambda p: pytest.fail("locate read a file"))
    datasets.locate("fashion", str(empty))


@pytest.mark.parametrize("error", ["runtime", "url"])
def test_a_failed_download_is_one_line(tmp_path, monkeypatch, error):
    """torchvision's MNIST lists every mirror on many lines (RuntimeError); CIFAR-10's raises a URLError."""
    import urllib.error

    import torchvision.datasets as tvd

    def fetch(root, train=True, download=False):
        assert download
        if error == "url":
            raise urllib.error.URLError("[Errno -2] Name or service not known")
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://a/, got:\n"
                           "<urlopen error no host>\nTried https://b/, got:\n<urlopen error no host>\n")
    monkeypatch.setattr(tvd, "MNIST", fetch)
    with pytest.raises(DataNotFoundError, match=r"could not fetch mnist into .*(no host|Name or service).*torchvision's layout") as e:
        datasets.locate("mnist", str(tmp_path), download=True)
    assert "\n" not in str(e.value) and "add --download" not in str(e.value)  # it was given


def test_locate_and_load_make_one_choice(tmp_path, monkeypatch):
    """Where a dataset comes from (files here / a download / a refusal) is decided in one place, `_find`, for
    both the check before a search (`locate`) and the load: they cannot disagree."""
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "absent")
    asked = []
    find = datasets._find

    def spy(name, data_dir, download):
        asked.append(name)
        return find(name, data_dir, download)
    monkeypatch.setattr(datasets, "_find", spy)
    d = tmp_path / "fashion"
    _fake_fashion(d)
    datasets.locate("fashion", str(d))
    load_dataset.cache_clear()
    assert datasets.load_dataset("fashion", str(d)).x_train.shape[0] == 30
    for name in ("fashion", "mnist", "cifar10"):
        for call in (datasets.locate, datasets.load_dataset):
            with pytest.raises(DataNotFoundError) as e:
                call(name, str(tmp_path / "empty"))
            assert "--download" in str(e.value)
    load_dataset.cache_clear()
    assert asked == ["fashion"] * 2 + ["fashion"] * 2 + ["mnist"] * 2 + ["cifar10"] * 2


def test_digits_are_read_without_importing_scikit_learn_and_equal_load_digits():
    """digits comes from the CSV scikit-learn ships, without its import (a second or more per process)."""
    import subprocess
    import sys

    code = ("import sys; from fedevo.data.datasets import load_dataset; load_dataset('digits'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
    from sklearn.datasets import load_digits

    ref = load_digits()
    images, target = datasets._digits_arrays()
    assert images.dtype == ref.images.dtype and target.dtype == ref.target.dtype
    np.testing.assert_array_equal(images, ref.images)
    np.testing.assert_array_equal(target, ref.target)


def test_files_read_are_the_files_a_bundled_dataset_loads(tmp_path, monkeypatch):
    """datasets.files_read (a retrain's data fingerprint hashes them): Fashion-MNIST's four IDX files where
    --data-dir holds them, Debian's without --data-dir; torchvision's folder of MNIST / CIFAR-10; none for a
    dataset made in memory or where nothing is found."""
    _fake_fashion(tmp_path / "f")
    got = datasets.files_read("fashion", str(tmp_path / "f"))
    assert sorted(p.name for p in got) == sorted(f"{s}.gz" for s in datasets.FASHION_STEMS)
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "f")
    assert datasets.files_read("fashion", None) == got
    (tmp_path / "m" / "MNIST" / "raw").mkdir(parents=True)
    (tmp_path / "m" / "MNIST" / "raw" / "train-images-idx3-ubyte").write_bytes(b"x")
    (tmp_path / "m" / "elsewhere.txt").write_text("not read")
    assert [p.name for p in datasets.files_read("mnist", str(tmp_path / "m"))] == ["train-images-idx3-ubyte"]
    assert datasets.files_read("cifar10", str(tmp_path / "m")) == []
    assert datasets.files_read("digits", str(tmp_path / "f")) == []
    monkeypatch.setattr(datasets, "DEBIAN_FASHION", tmp_path / "absent")
    assert datasets.files_read("fashion", None) == []
