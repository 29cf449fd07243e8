"""An axis whose every value is ∞ or missing (ε of a run without privacy, made before such runs left ε out; a
user's objective never read): its one tick is the cap's label. It was labelled '1' and '∞' at one place, as if
ε = 1 were drawn there."""

from __future__ import annotations

import math

import pytest

from fedevo.viz.axes import make_column


@pytest.mark.parametrize("value, label", [(math.inf, "∞"), (None, "missing"), (math.nan, "missing")])
@pytest.mark.parametrize("key, eps_log", [("eps", True), ("latency", False)])
def test_an_axis_of_capped_values_only_is_labelled_at_its_cap_alone(value, label, key, eps_log):
    col = make_column([{key: value} for _ in range(4)], key, key, eps_log=eps_log)
    assert all(col.capped) and col.cap is not None
    vals, labels = col.ticks()
    assert labels == [label] and len(vals) == 1
    assert col.axis_layout()["tickvals"] == [col.cap]


def test_a_capped_value_beside_finite_ones_keeps_their_ticks():
    col = make_column([{"eps": v} for v in (0.5, 5.0, 50.0, math.inf)], "eps", "ε", eps_log=True)
    vals, labels = col.ticks()
    assert labels[-1] == "∞" and "1" in labels and len(labels) > 2
