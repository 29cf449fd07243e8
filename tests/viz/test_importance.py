"""importance.html: which genes drive each objective (random-forest permutation importance), slices per gene, and
the hypervolume on a scale near its values; written by `fedevo plot RUN` and at the end of a search."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest

from fedevo.result import EvaluationResult
from fedevo.searching.rundata import load_run
from fedevo.viz.history import figure_hv_history, value_range
from fedevo.viz.importance import (MIN_EVALUATIONS, figure_slices, importance, importance_path,
                                   objective_importance, write_importance_html)
from tests.helpers import run_cli as cli


def _unit(problem, params, name):
    g = problem.gene(name)
    v, lo, hi = params[name], g.low, g.high
    if g.log:
        v, lo, hi = math.log(v), math.log(lo), math.log(hi)
    return (v - lo) / (hi - lo)


def driven_evaluate(problem, params, *, seed, rounds=None, data_dir=None, **_):
    """error is driven by lr alone, comm by participation alone, ε by sigma alone (plus a little seed noise)."""
    noise = float(np.random.default_rng(seed).random())
    error = 0.05 + 0.8 * _unit(problem, params, "lr") + 0.01 * noise
    comm = 100 + 3000 * _unit(problem, params, "participation") + 5 * noise
    eps = 10 ** (3 - 4 * _unit(problem, params, "sigma") + 0.01 * noise)
    return EvaluationResult(error=error, comm=comm, eps=eps, eps_paper=eps, accuracy_global=1 - error,
                            omega=int(comm), status="ok", rounds=1, wall_s=0.0)


@pytest.fixture(scope="module")
def driven_run(tmp_path_factory):
    """40 random individuals (one generation) of digits_mlp_local, through fedevo.search: its pages included."""
    import fedevo

    out = tmp_path_factory.mktemp("imp") / "run"
    fedevo.search("digits_mlp_local", pop=40, gen=1, workers=0, seed=5, out=out, evaluator=driven_evaluate,
                  importance=True)  # importance.html at the end of a search only when asked (issue #34's overhead)
    return out


@pytest.fixture(scope="module")
def driven(driven_run):
    data = load_run(driven_run)
    return data, importance(data, seed=0)


def test_the_driving_gene_ranks_first_for_its_objective(driven):
    data, result = driven
    by = {o.objective: o for o in result}
    assert [o.objective for o in result] == ["error", "comm", "eps"]
    for key, gene in (("error", "lr"), ("comm", "participation"), ("eps", "sigma")):
        o = by[key]
        assert o.n == 40 and o.left_out == 0 and not o.note, o
        assert o.ranked[0] == gene, (key, o.genes[:3])
        top, second = o.genes[0], o.genes[1]
        # the driver clearly apart: its importance is large, its whiskers (± one sd) clear of every other gene's
        assert top.mean > 0.3 and top.mean - top.std > second.mean + second.std, (key, o.genes[:3])
        assert o.r2 > 0.5
    assert by["eps"].transform == "log10" and by["error"].transform == "none"


def test_the_same_seed_gives_the_same_numbers(driven):
    data, result = driven
    again = objective_importance(data, "error", seed=0)
    assert again == result[0]


def test_too_few_constant_and_infinite(driven):
    data, _ = driven
    few = dataclasses.replace(data, rows=data.rows[:MIN_EVALUATIONS - 1])
    o = objective_importance(few, "error")
    assert o.genes == () and o.r2 is None and "too few evaluations" in o.note and str(MIN_EVALUATIONS) in o.note
    flat = dataclasses.replace(data, rows=[{**r, "comm": 500.0} for r in data.rows])
    o = objective_importance(flat, "comm")
    assert o.genes == () and "same for every evaluation" in o.note
    # ε = ∞ (no privacy) is left out of the ε model, and counted
    inf = dataclasses.replace(data, rows=[{**r, "eps": math.inf} if r["id"] % 4 == 0 else r for r in data.rows])
    o = objective_importance(inf, "eps", trees=30)
    assert o.left_out == 10 and o.n == 30 and o.ranked[0] == "sigma"


def test_an_objective_never_finite_is_said_so_not_too_few(driven):
    """ε = ∞ in all 40 evaluations (a run without privacy): the page said 'too few evaluations to say anything: 0
    ok evaluations with a finite ε, at least 20 needed' of a run of 40; it says ε is ∞ in every one."""
    data, _ = driven
    inf = dataclasses.replace(data, rows=[{**r, "eps": math.inf} for r in data.rows])
    o = objective_importance(inf, "eps")
    assert o.genes == () and o.note == "ε is ∞ (no privacy) in every one of the 40 ok evaluations: no gene moves it"
    lost = dataclasses.replace(data, rows=[{**r, "comm": None} for r in data.rows])
    assert "comm" in objective_importance(lost, "comm").note and "missing (not measured) in every one of the 40" \
        in objective_importance(lost, "comm").note


def test_slices_one_panel_per_gene_and_objective(driven):
    data, _ = driven
    fig = figure_slices(data)
    traces = [t for t in fig.data if t.meta == "slice"]
    assert len(traces) == 3 * len(data.gene_names)
    ok_ids = sorted(r["id"] for r in data.ok_rows)
    for t in traces:
        assert sorted(t.customdata) == ok_ids
        assert list(t.marker.color) == [r["generation"] for r in data.ok_rows]
    layout = fig.layout.to_plotly_json()
    sigma_row = list(data.gene_names).index("sigma")
    # row r, column c is axis number 3 * r + c + 1: sigma (declared log) on a log x axis, ε on log y axes
    n = 3 * sigma_row + 1
    assert layout[f"xaxis{n}"]["type"] == "log"
    assert layout["xaxis"].get("type") != "log"  # layers: linear
    assert layout["yaxis3"]["type"] == "log" and layout["yaxis"].get("type") != "log"


def test_hypervolume_scale_starts_near_its_range():
    rows = [{"generation": g, "hypervolume": v, "evaluations": 12 * g} for g, v in ((1, 1.196), (2, 1.25), (3, 1.298))]
    fig = figure_hv_history({"run": rows})
    lo, hi = fig.layout.yaxis.range
    assert 1.18 < lo < 1.196 and 1.298 < hi < 1.31  # not 0 → 1.3, where 1.196 → 1.298 looks flat
    assert list(fig.data[0].y) == [1.196, 1.25, 1.298]
    assert 1.18 < lo < 1.196 and 1.298 < hi < 1.31
    assert value_range([]) is None and value_range([0.5, 0.5])[0] > 0.4
    # a hypervolume is never negative: all 0 (no ok evaluation yet) or near 0, the axis starts at 0, not below
    assert value_range([0.0, 0.0]) == [0.0, pytest.approx(0.004)] and value_range([0.0, 0.01])[0] == 0.0
    assert value_range([-1.0, 1.0])[0] < -1.0  # (a range with negative values keeps its margin)


def test_the_search_and_fedevo_plot_write_the_page(driven_run, tmp_path, capsys):
    page = (driven_run / "importance.html").read_text()  # written at the end of the search (importance=True)
    for div in ("importance", "slices", "hypervolume"):
        assert f'id="{div}"' in page
    # the search's pages share one plotly.js beside them (issue #36)
    assert '<a href="front.html">' in page and '<script src="plotly-' in page
    assert list(driven_run.glob("plotly-*.min.js")) and '<script src="plotly-' in (driven_run / "front.html").read_text()
    (driven_run / "importance.html").unlink()
    code, out, err = cli(["plot", str(driven_run)], capsys)
    assert code in (0, None), err
    assert f"wrote {driven_run / 'importance.html'}" in out and (driven_run / "importance.html").exists()
    code, out, err = cli(["plot", str(driven_run), "--out", tmp_path / "a.html", "--no-importance"], capsys)
    assert code in (0, None), err
    assert (tmp_path / "a.html").exists() and not (tmp_path / "a-importance.html").exists()
    code, out, err = cli(["plot", str(driven_run), "--out", tmp_path / "a.html"], capsys)
    assert (tmp_path / "a-importance.html").exists() and importance_path(tmp_path / "a.html").name == "a-importance.html"
    assert '<a href="a.html">' in (tmp_path / "a-importance.html").read_text()


def test_too_few_evaluations_are_said_on_the_page(driven_run, tmp_path):
    data = load_run(driven_run)
    few = dataclasses.replace(data, rows=data.rows[:12])
    p = write_importance_html(driven_run, tmp_path / "few.html", data=few)
    # issue #36: one clear note with the counts, not three piled notes and blank panels
    text = p.read_text()
    assert text.count("Too few evaluations to rank the genes") == 1 and 'id="importance-none"' in text
    assert "too few evaluations to say anything" not in text and 'id="importance"' not in text
    assert 'id="slices"' in text


def test_front_page_links_to_its_importance_page(tmp_path):
    """front.html of a finished run links importance.html (NAME-importance.html beside any other NAME.html)."""
    import fedevo
    from fedevo.viz.front import front_html
    from tests.searching.search_helpers import FAKE, toy_problem_file

    run = fedevo.search(str(toy_problem_file(tmp_path)), pop=4, gen=1, seed=0, workers=0, out=tmp_path / "R",
                        evaluator=FAKE, page=False)
    assert '<a href="importance.html">' in front_html(run.data)
    assert '<a href="mine-importance.html">' in front_html(run.data, page_name="mine.html")


def _panels(fig, letter: str) -> list[tuple[float, float]]:
    lay = fig.layout.to_plotly_json()
    keys = [k for k in lay if re.fullmatch(letter + r"axis\d*", k)]
    return [tuple(lay[k]["domain"]) for k in sorted(keys, key=lambda k: int(k[5:] or 1))]


@pytest.mark.parametrize("n, grid", [(2, (1, 2)), (3, (1, 3)), (4, (2, 2)), (5, (2, 3))])
def test_the_bar_panels_of_four_or_five_objectives_are_wide_enough(n, grid):
    """Five objectives drew five bar panels in one row, each a tenth of the figure (100–150 px at 1,280–1,600 px): the
    last one's axis title, wider than its panel, ran past the figure's edge and was cut. Now at most three a row (2 × 2
    for four), each panel at least a quarter of the figure's width, the rows 90 px apart whatever the figure's
    height, each row as high as one row was."""
    from fedevo.viz.importance import BAR_ROW_GAP, GeneImportance, ObjectiveImportance, figure_importance

    genes = tuple(GeneImportance(g, 0.1 * k, 0.01) for k, g in enumerate(("lr", "units", "sigma", "clip")))
    result = [ObjectiveImportance(f"o{k}", "none", 30, 0, 0.5, genes, "", f"objective {k}") for k in range(n)]
    fig = figure_importance(result)
    xs, ys = _panels(fig, "x")[:n], _panels(fig, "y")[:n]  # (a grid's empty last cells are not drawn)
    assert len(set(ys)) == grid[0] and len(set(xs)) == grid[1], (xs, ys)
    assert min(b - a for a, b in xs) >= 0.25, xs
    m = fig.layout.margin
    plot_h = fig.layout.height - m.t - m.b
    rows = sorted(set(ys), reverse=True)
    assert all(round((b - a) * plot_h) == 190 for a, b in rows), rows  # max(190, 20 + 26 · 4 genes)
    assert all(round((hi[0] - lo[1]) * plot_h) == BAR_ROW_GAP for hi, lo in zip(rows, rows[1:])), rows


# ---------------------------------------------------------------- at scale: a bounded forest, a bounded drawing
def test_the_forest_is_fitted_to_a_bounded_sample_and_the_page_says_so(driven_run, driven, tmp_path, monkeypatch):
    """At 10,000 evaluations the forests were most of `fedevo plot`'s 46 s: beyond FIT_MAX evaluations a forest is
    fitted to a seeded sample of them, the same on every write, and the page says what the numbers come from."""
    from fedevo.viz import importance as imp
    from fedevo.viz.sample import sample

    data, _ = driven
    o = objective_importance(data, "error", fit_max=25, trees=30)
    assert (o.n, o.eligible, o.sampled) == (25, 40, True) and o.basis == "a sample of 25 of 40 evaluations"
    assert objective_importance(data, "error", fit_max=25, trees=30) == o  # the same sample, the same numbers
    assert objective_importance(data, "error", fit_max=25, trees=30, seed=1) != o
    assert o.ranked[0] == "lr"
    ids = [r["id"] for r in data.ok_rows]
    rev = ids[::-1]
    assert sorted(ids[i] for i in sample(ids, 25)) == sorted(rev[i] for i in sample(rev, 25))  # whatever the order
    assert len(sample(ids, 25)) == 25 and sample(ids, 40) == list(range(40))
    full = objective_importance(data, "error", trees=30)
    assert (full.n, full.eligible, full.sampled, full.basis) == (40, 40, False, "all 40 evaluations")
    monkeypatch.setattr(imp, "FIT_MAX", 30)
    text = " ".join(write_importance_html(driven_run, tmp_path / "fit.html", data=data).read_text().split())
    assert "at most 30 of them" in text and "Computed from error: a sample of 30 of 40 evaluations; comm: a sample " \
        "of 30 of 40 evaluations; ε: a sample of 30 of 40 evaluations (a sample: those whose ids hash lowest with " \
        "seed 0" in text
    assert text.count("; 30 of 40)") == 3  # the panels' titles: "error (R² 0.97; 30 of 40)"


def test_slices_beyond_draw_max_draw_a_sample_and_say_so(driven_run, tmp_path, monkeypatch):
    from fedevo.viz import importance as imp

    data = load_run(driven_run)
    monkeypatch.setattr(imp, "DRAW_MAX", 25)
    drawn = imp.slice_rows(data)
    assert len(drawn) == 25 and drawn == imp.slice_rows(data) and set(r["id"] for r in drawn) < \
        set(r["id"] for r in data.ok_rows)
    fig = figure_slices(data)
    assert all(sorted(t.customdata) == sorted(r["id"] for r in drawn) for t in fig.data if t.meta == "slice")
    text = " ".join(write_importance_html(driven_run, tmp_path / "s.html", data=data).read_text().split())
    assert "Showing 25 of 40 ok evaluations: a sample (the 25 whose ids hash lowest with seed 0, the same on every " \
        "write)" in text


def test_the_page_holds_each_drawn_point_once(driven_run, tmp_path):
    """importance.html held every point once per (gene, objective) panel: 24.6 MB at 10,000 evaluations. Now each
    point's values and hover parts once, shared by the panels (27 here): the page grows by a few hundred bytes a
    point, not by 27 times a point's trace entries."""
    import json

    data = load_run(driven_run)
    pages = {n: write_importance_html(driven_run, tmp_path / f"p{n}.html", data=dataclasses.replace(
        data, rows=data.rows[:n])).read_text() for n in (20, 40)}
    per_point = (len(pages[40].encode()) - len(pages[20].encode())) / 20
    assert per_point < 600, per_point
    fig = json.loads(re.search(r"window\.FEDEVO_SLICES_FIG = (\{.*?\});\n", pages[40]).group(1))
    slices = [t for t in fig["data"] if t.get("meta") == "slice"]
    assert len(slices) == 27 and not any(k in t for t in slices for k in ("x", "y", "text", "customdata"))


def test_the_slices_hover_gives_each_value_its_unit(tmp_path_factory):
    """A slice's hover writes the objective's value with its unit, as front.html's hover ('comm = 834
    params/round/client slot', 'latency = 13.1 ms'); it gave the number alone. The unit is held once per objective
    (window.FEDEVO_SLICES), not once per point."""
    from fedevo.viz.importance import slice_hover, slice_points
    from tests.viz.fedevo_runs import five_objective_run

    data = load_run(five_objective_run(tmp_path_factory))
    pts = slice_points(data, data.ok_rows)
    want = {"comm": " params/round/client slot", "latency": " ms", "model_size": " parameters", "error": ""}
    for k, unit in want.items():
        assert pts["objectives"][k]["unit"] == unit
        hover = slice_hover(pts, "units", k)
        assert all(re.search(rf"= [^<]+{re.escape(unit)}$", h) for h in hover), hover[0]
