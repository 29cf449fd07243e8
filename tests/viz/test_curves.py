"""curves.html of `fedevo retrain`: y range from the curves, mean of the last evaluations."""

import math

import pytest

from fedevo.viz.curves import curves_figure, tail_rounds, tail_stats, y_range
from fedevo.viz.numfmt import num


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


def test_error_view_says_error_in_hover_and_titles():
    """Issue #28: in the error view the hover shows the error (not the accuracy) and the panel titles say error."""
    series = [("a", curve([0.5] + [0.98] * 10))]
    fig = curves_figure(series)
    acc, err = fig.layout.updatemenus[0].buttons
    assert [a.text for a in fig.layout.annotations] == ["mean client accuracy (1 − error)", "global test accuracy"]
    assert err.args[1]["annotations[0].text"].startswith("mean client error")
    assert err.args[1]["annotations[1].text"].startswith("global test error")
    assert acc.args[1]["annotations[0].text"] == "mean client accuracy (1 − error)"
    kinds = [t.meta for t in fig.data]
    c = kinds.index("curve")
    assert "error %{customdata}" in err.args[0]["hovertemplate"][c]
    assert err.args[0]["customdata"][c][-1] == "0.02"  # 1 − 0.98, as the hover shows it
    assert "accuracy %{customdata}" in acc.args[0]["hovertemplate"][c] and acc.args[0]["customdata"][c][-1] == "0.98"
    t = kinds.index("tail")
    assert "error 0.02" in err.args[0]["hovertemplate"][t] and "accuracy 0.98" in acc.args[0]["hovertemplate"][t]
    assert "accuracy" in fig.data[c].hovertemplate  # the page opens in the accuracy view


def test_eps_comparison_says_why_the_eps_differs():
    from fedevo.viz.curves import eps_comparison

    assert eps_comparison(0.015, 20, 0.01, 5) == ("ε 0.015 at 20 rounds; the search's 0.01 was at 5 rounds (ε grows "
                                                  "with the rounds a user can join)")
    assert eps_comparison(0.5, 5, 0.5, 5) == "ε 0.5 at 5 rounds (the search's too)"
    assert "participations_max 3 here, 2 in the search" in eps_comparison(
        2.0, 5, 1.5, 5, changed=["participations_max 3 here, 2 in the search"])
    assert "the seed differs" in eps_comparison(2.0, 5, 1.5, 5)
    assert eps_comparison(math.inf, 5, None, None) == "ε ∞ at 5 rounds (no privacy)"


def test_retrain_page_states_trust_delta_population_cohort_and_rounds(tmp_path_factory, tmp_path):
    """curves.html of a central-trust run retrained for more rounds than searched: trust, δ, N, M once, the rounds
    run and the ε there beside the search's at its rounds; no ε (paper) column (undefined under central trust)."""
    import html as htmllib
    import re

    from fedevo.retraining import retrain
    from tests.viz.fedevo_runs import central_run

    run_dir = central_run(tmp_path_factory)
    rep = retrain(run_dir, "knee", rounds=3, workers=0, out=tmp_path / "rt")
    html = (tmp_path / "rt" / "curves.html").read_text()
    text = htmllib.unescape(re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", html[html.index("<h1>"):
                                                                          html.index('<div class="fig">')])))
    assert "privacy of the picked solutions: trust central · δ 1e-6 · population N 100k · cohort M (clients per " \
           "round) 1k" in text
    # and the neighbouring relation and accountant it holds under (the page named trust, δ, N and M only)
    assert ("cohort M (clients per round) 1k · neighbouring add/remove one user · accountant PLD (dp-accounting), "
            "Poisson-subsampled Gaussian") in text
    rows = rep.privacy_rows()
    knee = rows[0]
    search = rep.solutions[0].search
    assert search["rounds_trained"] == 2 and knee["rounds"] == 3
    assert knee["eps_text"] == (f"ε {num(rep.results['1'].eps)} at 3 rounds; the search's {num(search['eps'])} was "
                                "at 2 rounds (ε grows with the rounds a user can join)")
    assert knee["eps_text"] in text
    assert rows[-1]["trust"] == "no privacy" and "ε ∞ at 3 rounds (no privacy)" in text
    assert "ε (paper)</th>" not in html and "ε (paper) is left out" in html
    # the units of its table's numbers (comm 1.3k, Ω 3.71k had none on the page)
    assert "comm: parameters uploaded per round per client slot; Ω: active parameters" in text
