"""Mistakes in the user's data, each one line naming the problem, the file and what is wrong, at load (before any
run directory): a stray label that would make a model of a million classes (the audit of 2026-11-28)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

from fedevo.data.sources import ArraySource, open_source
from fedevo.errors import FedevoError
from fedevo.problem import load_problem

from .user_data import problem, rows, write_npz

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
