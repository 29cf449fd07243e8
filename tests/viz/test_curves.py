"""curves.html of `fedevo retrain`: y range from the curves, mean of the last evaluations."""

import math

import pytest

from fedevo.viz.curves import curves_figure, tail_rounds, tail_stats, y_range


def curve(vals):
    return [(t + 1, v, v - 0.01) for t, v in enumerate(vals)]


def test_tail_rounds_and_stats():
    assert [tail_rounds(n) for n in (1, 2, 3, 10, 50, 150, 1000)] == [1, 2, 3, 3, 5, 10, 10]
    m, sd, k = tail_stats([0.1, 0.5, 0.9, 0.8, 1.0, 0.9])
    assert k == 3 and m == pytest.approx(0.9) and sd == pytest.approx(0.1)
    assert math.isnan(tail_stats([])[0])


def test_y_axis_spans_the_curves_not_zero_to_one():
    series = [("a", curve([0.1] + [0.90 + 0.001 * i for i in range(20)])),
              ("b", curve([0.2] + [0.93 + 0.001 * i for i in range(20)]))]
    lo, hi = y_range(series, 1)
    assert 0.85 < lo < 0.9 and 0.95 < hi <= 1.0  # the first round's 0.1 does not squash the top
    fig = curves_figure(series, standard="b")
    assert tuple(fig.layout.yaxis.range) == pytest.approx((lo, hi))
    tails = [t for t in fig.data if t.meta == "tail"]
    assert len(tails) == 4  # one per curve and panel
    mean_a = sum(0.90 + 0.001 * i for i in range(17, 20)) / 3
    assert tails[0].y[0] == pytest.approx(mean_a) and "mean of the last 3 rounds" in tails[0].hovertemplate


def test_error_log_view_separates_curves_near_one():
    series = [("a", curve([0.5] + [0.98] * 10)), ("b", curve([0.5] + [0.99] * 10))]
    fig = curves_figure(series)
    acc, err = fig.layout.updatemenus[0].buttons
    assert acc.args[1]["yaxis.type"] == "linear" and err.args[1]["yaxis.type"] == "log"
    ys = err.args[0]["y"]
    assert ys[0][-1] == pytest.approx(0.02) and ys[4][-1] == pytest.approx(0.01)  # a, b: curve, tail per panel
