"""The Python API's arguments held to their type hints (fedevo/argcheck.py)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import pytest

from fedevo.argcheck import checked, plain
from fedevo.errors import FedevoError


@checked
def _f(pop: Optional[int] = None, *, rate: float = 1.0, name: str = "x", page: bool = True):
    return pop, rate, name, page


def test_numpy_scalars_are_the_python_values_they_hold():
    """np.int64(4) (a DataFrame row's, np.arange's) was refused as 'pop must be an int or None, got int64'; the
    function now gets the Python value, so what it writes (JSON, TOML) takes it. A bool stays no number."""
    got = _f(np.int64(4), rate=np.float32(0.5), page=np.bool_(False))
    assert got == (4, 0.5, "x", False) and [type(v) for v in got] == [int, float, str, bool]
    assert _f(rate=np.int32(2)) == (None, 2, "x", True)
    for bad in (np.bool_(True), np.float64(1.5), np.array([1, 2])):
        with pytest.raises(FedevoError, match=r"^_f\(\): pop must be an int or None, got "):
            _f(bad)
    assert plain(np.array(3)) == 3 and plain([np.int64(1)]) == [np.int64(1)]  # a 0-d array too; no list walked
