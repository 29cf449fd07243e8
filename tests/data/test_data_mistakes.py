"""Mistakes in the user's data, each one line naming the problem, the file and what is wrong, at load (before any
run directory): a stray label that would make a model of a million classes, labels that are not integers, a test
set left empty, a file that is no NumPy archive of numbers, a [data] key out of range (the audit of 2026-11-28)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from fedevo.data.sources import ArraySource, open_source
from fedevo.errors import FedevoError
from fedevo.problem import load_problem

from .user_data import SIZES, problem, rows, write_npz

NATURAL = 'source = "npz"\npath = "d.npz"\npartition = "natural"'


def refused(tmp_path, data: str, expect: str) -> str:
    """load_problem of a problem file with [data] `data`: one FedevoError line matching `expect`."""
    with pytest.raises(FedevoError) as e:
        load_problem(str(problem(tmp_path / "p.toml", data)))
    msg = str(e.value)
    assert "\n" not in msg and re.search(expect, msg), msg
    assert "pickle" not in msg and "np.float" not in msg, msg
    return msg


# ------------------------------------------------------------------------------------------------ the classes
@pytest.mark.parametrize("stray", [1_000_000, 2**40])
def test_a_stray_label_is_refused_naming_it_not_the_model(tmp_path, stray):
    """Labels 0..3 and one 1,000,000 (5 distinct): a model of 1,000,001 classes (201M parameters) searched for a minute with
    error 1.0 everywhere; 2**40 blamed the model's size. Both name the label and the counts now, at once."""
    _, y, _ = rows()
    y[5] = stray
    write_npz(tmp_path / "d.npz", y=y)
    t0 = time.monotonic()
    msg = refused(tmp_path, NATURAL, rf"^problem 'p': .*d\.npz: labels are class indices 0\.\.C-1: the largest is "
                                     rf"{stray} \(a model of {stray + 1:,} classes\) but only 5 distinct labels occur "
                                     r"in the train and test sets; relabel them 0\.\.4$")
    assert "GiB" not in msg and time.monotonic() - t0 < 10


def test_a_stray_label_in_the_test_file_names_that_file(tmp_path):
    write_npz(tmp_path / "d.npz")
    _, y, _ = rows()
    y[-1] = 50_000
    write_npz(tmp_path / "t.npz", y=y)
    refused(tmp_path, NATURAL + '\ntest_path = "t.npz"', r"t\.npz: labels are class indices .* the largest is 50000")


def _classes(y) -> int:
    x = np.random.default_rng(0).normal(size=(len(y), 3)).astype(np.float32)
    return open_source(ArraySource(x=x, y=y), natural=False).num_classes


def test_classes_absent_from_the_data_are_not_refused():
    """Up to 1000 classes any labels go, and beyond, up to 10 classes per distinct label: a split that lacks
    classes (here most of them) keeps its model's outputs for them."""
    assert _classes(np.array([0, 9] * 20)) == 10
    assert _classes(np.array([0, 999] * 20)) == 1000  # two labels of a thousand classes
    labels = np.linspace(0, 1499, 150).astype(np.int64)  # 150 distinct labels of 1500 classes: 10 per label
    assert len(np.unique(labels)) == 150 and _classes(np.tile(labels, 2)) == 1500
    with pytest.raises(FedevoError, match=r"the largest is 1499 .* but only 149 distinct labels occur"):
        _classes(np.tile(np.linspace(0, 1499, 149).astype(np.int64), 2))


# ------------------------------------------------------------------------------------------------ the labels' values
def test_a_non_integral_label_is_shown_as_the_number(tmp_path):
    _, y, _ = rows()
    y = y.astype(np.float64)
    y[0] = 0.5
    write_npz(tmp_path / "d.npz", y=y)
    refused(tmp_path, NATURAL, r"d\.npz: labels must be integer classes; row 0 has 0\.5$")


# ------------------------------------------------------------------------------------------------ an empty test set
def test_a_test_file_of_other_clients_says_which_file_and_why(tmp_path):
    write_npz(tmp_path / "d.npz")
    _, _, ids = rows()
    write_npz(tmp_path / "t.npz", client_id=np.char.add("z", ids.astype(str)))
    msg = refused(tmp_path, NATURAL + '\ntest_path = "t.npz"',
                  r"^problem 'p': \S*t\.npz: the test set is empty: test rows of clients without train rows are left "
                  r"out, and no test row's client id 'client_id' is a train row's \(test: 'za', 'zb', 'zc', \.\.\. "
                  r"\(5 in all\); train: 'a', 'b', 'c', \.\.\. \(5 in all\)\)$")
    assert "d.npz" not in msg


def test_a_test_file_without_rows(tmp_path):
    write_npz(tmp_path / "d.npz")
    x, y, ids = rows()
    write_npz(tmp_path / "t.npz", x=x[:0], y=y[:0], client_id=ids[:0])
    refused(tmp_path, NATURAL + '\ntest_path = "t.npz"', r"\S*t\.npz: the test set has no rows$")


def test_clients_of_one_row_each_leave_no_holdout(tmp_path):
    _, _, ids = rows()
    write_npz(tmp_path / "d.npz", client_id=np.arange(len(ids)))
    refused(tmp_path, NATURAL, r"d\.npz: every client \(client id 'client_id'\) has one row, and holdout keeps a "
                               r"one-row client's row for training: no test rows are left; give a test_path")


# ------------------------------------------------------------------------------------------------ not an .npz
def test_a_text_file_named_npz(tmp_path):
    (tmp_path / "d.npz").write_text("x,y,client_id\n1,0,a\n")
    refused(tmp_path, NATURAL, r"d\.npz: not a NumPy \.npz of numeric arrays \(it is not a zip file\); save the "
                               r"arrays with numpy\.savez")


def test_an_npz_of_python_objects(tmp_path):
    x, y, ids = rows()
    np.savez(tmp_path / "d.npz", x=x, y=y, client_id=np.array(list(ids), dtype=object))
    msg = refused(tmp_path, NATURAL, r"d\.npz: not a NumPy \.npz of numeric arrays \(array 'client_id' holds Python "
                                     r"objects, dtype=object\)")
    assert "truncated" not in msg and "damaged" not in msg


def test_a_single_npy_array_and_a_damaged_archive_still_say_so(tmp_path):
    x, _, _ = rows()
    with open(tmp_path / "d.npz", "wb") as f:
        np.save(f, x)
    refused(tmp_path, NATURAL, r"d\.npz: a single array \(\.npy format\) under an \.npz name")
    write_npz(tmp_path / "d.npz")
    data = (tmp_path / "d.npz").read_bytes()
    (tmp_path / "d.npz").write_bytes(data[: len(data) // 2])
    refused(tmp_path, NATURAL, r"d\.npz: not a readable \.npz file, truncated or damaged")


# ------------------------------------------------------------------------------------------------ [data] keys
@pytest.mark.parametrize("data, expect", [
    ('source = "npz"\npath = "d.npz"\nholdout = 1.5', r"^problem 'p': \[data\] holdout must be a fraction in \(0, 1\)"),
    ('source = "csv"\npath = "d.npz"', r"^problem 'p': \[data\] source 'csv' is not one of npz, parquet, hf"),
])
def test_data_keys_name_the_problem(tmp_path, data, expect):
    write_npz(tmp_path / "d.npz")
    refused(tmp_path, data, expect)


def test_sizes_have_several_rows_per_client():  # the one-row test above is not the fixture's shape
    assert min(SIZES.values()) > 1
