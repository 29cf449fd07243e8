"""compare.html: `fedevo plot RUN1 RUN2 … --out compare.html` overlays the fronts and hypervolume histories of runs
of one problem, with one normalisation and reference point shared by every run; runs of different problems are
refused."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pytest

from fedevo.searching.rundata import load_run
from fedevo.viz.compare import compare_html, figure_fronts, labels, shared_hypervolume
from tests.helpers import read_csv, run_cli as cli
from tests.searching.search_fakes import fake_evaluate


def _search(out, problem, seed, pop=8, gen=2):
    import fedevo

    fedevo.search(problem, pop=pop, gen=gen, workers=0, seed=seed, out=out, evaluator=fake_evaluate, page=False)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("cmp")
    a = _search(base / "a", "digits_mlp_local", 1)
    b = _search(base / "b", "digits_mlp_local", 2, gen=3)
    other = _search(base / "other", "digits_mlp", 1, pop=4, gen=1)
    # the same name, another definition: lr's upper bound changed
    text = load_run(a).meta["problem"]["text"].replace("high = 0.3", "high = 0.4")
    assert text != load_run(a).meta["problem"]["text"]
    (base / "edited.toml").write_text(text)
    edited = _search(base / "edited", str(base / "edited.toml"), 1, pop=4, gen=1)
    # the same name, a fourth objective
    (base / "four.toml").write_text('objectives = ["error", "comm", "eps", "worst_client_error"]\n'
                                    + load_run(a).meta["problem"]["text"])
    four = _search(base / "four", str(base / "four.toml"), 1, pop=4, gen=1)
    return base, a, b, other, edited, four


def _blob(page: str) -> dict:
    return json.loads(re.search(r"window.FEDEVO_COMPARE = (\{.*?\});</script>", page).group(1))


def test_compare_page_holds_each_runs_front(runs, capsys):
    base, a, b, _, _, _ = runs
    out = base / "compare.html"
    code, stdout, err = cli(["plot", a, b, "--out", out], capsys)
    assert code in (0, None), err
    assert f"wrote {out} (2 runs compared)" in stdout and not (a / "front.html").exists()
    page = out.read_text()
    for div in ("fronts", "hypervolume"):
        assert f'id="{div}"' in page
    assert "one normalisation and reference point shared by all 2 runs" in page
    data = [load_run(a), load_run(b)]
    fig, _ = figure_fronts(data, labels(data))
    fronts = [t for t in fig.data if t.meta == "front"]
    assert len(fronts) == 2 * 3  # each run in each of the three projections
    for name, d in zip(("a", "b"), (a, b)):
        want = sorted(int(r["id"]) for r in read_csv(d / "front.csv"))
        mine = [t for t in fronts if t.name == name]
        assert len(mine) == 3 and all(sorted(t.customdata) == want for t in mine)
        assert len({t.marker.color for t in mine}) == 1
    assert fronts[0].marker.color != next(t for t in fronts if t.name == "b").marker.color
    blob = _blob(page)
    assert blob["labels"] == ["a", "b"] and blob["normalisation"]["ref"] == [1.1, 1.1, 1.1]
    assert len(blob["hypervolume"]["a"]) == 2 and len(blob["hypervolume"]["b"]) == 3


def test_hypervolume_uses_one_reference_for_every_run(runs):
    from pymoo.indicators.hv import HV

    base, a, b, _, _, _ = runs
    data = [load_run(a), load_run(b)]
    tables, lo, scale = shared_hypervolume(data)
    # the normalisation: minimum and range of every ok evaluation of both runs (ε as log10), from the CSVs
    rows = [r for d in (a, b) for r in read_csv(d / "evaluations.csv") if r["status"] == "ok"]
    F = np.array([[float(r["error"]), float(r["comm"]), math.log10(max(float(r["eps"]), 1e-3))] for r in rows])
    assert np.allclose(lo, F.min(axis=0)) and np.allclose(scale, F.max(axis=0) - F.min(axis=0))
    # the last generation's hypervolume of each run: its front.csv normalised by that, pymoo's HV
    for t, run in zip(tables, (a, b)):
        front = np.array([[float(r["error"]), float(r["comm"]), math.log10(max(float(r["eps"]), 1e-3))]
                          for r in read_csv(run / "front.csv")])
        expect = HV(ref_point=np.full(3, 1.1))((front - lo) / scale)
        assert t[-1]["hypervolume"] == pytest.approx(expect)
    # the same numbers whatever the order, and not the runs' own (generation-1) normalisation
    ab = _blob(compare_html(data))["hypervolume"]
    ba = _blob(compare_html(data[::-1]))["hypervolume"]
    assert ab == ba
    own = [float(r["hypervolume"]) for r in read_csv(b / "hypervolume.csv")]
    assert ab["b"] != pytest.approx(own)


def test_runs_of_different_problems_are_refused(runs, capsys):
    base, a, _, other, edited, four = runs
    out = base / "refused.html"
    for run, words in ((other, ["'digits_mlp_local'", "'digits_mlp'"]), (edited, ["defined differently", "genes.lr"]),
                       (four, ["objectives (error, comm, eps)", "(error, comm, eps, worst_client_error)",
                               "its objectives included"])):
        code, stdout, err = cli(["plot", a, run, "--out", out], capsys)
        assert code == 2 and stdout == "" and not out.exists(), err
        assert err.count("\n") == 1 and err.startswith("fedevo: error: ")
        assert str(a) in err and str(run) in err and all(w in err for w in words), err


def test_out_is_required_checked_and_never_replaces_another_file(runs, capsys):
    base, a, b, _, _, _ = runs
    foreign = base / "notes.html"
    foreign.write_text("<p>my notes</p>")
    for argv, msg in (([a, b], "give its name with --out"),
                      ([a, b, "--out", foreign], "is not a page fedevo wrote"),
                      ([a, b, "--out", base], "is a directory"),
                      ([a, b, "--out", base / "w.html", "--watch"], "--watch follows one run"),
                      ([a, a, "--out", base / "w.html"], "given twice")):
        code, stdout, err = cli(["plot", *argv], capsys)
        assert code == 2 and msg in err and err.count("\n") == 1, (argv, err)
    assert foreign.read_text() == "<p>my notes</p>" and not (base / "w.html").exists()
    # one run: --out refuses a foreign file too; a page fedevo wrote is replaced
    code, _, err = cli(["plot", a, "--out", foreign], capsys)
    assert code == 2 and "is not a page fedevo wrote" in err and foreign.read_text() == "<p>my notes</p>"
    page = base / "again.html"
    for _ in range(2):
        code, _, err = cli(["plot", a, b, "--out", page], capsys)
        assert code in (0, None), err


def test_identical_runs_have_identical_curves(runs, tmp_path):
    _, a, _, _, _, _ = runs
    twin = tmp_path / "a"
    shutil.copytree(a, twin)
    data = [load_run(a), load_run(twin)]
    blob = _blob(compare_html(data))
    assert blob["labels"] == [str(a), str(twin)]  # equal directory names: told apart by their paths
    assert blob["hypervolume"][str(a)] == blob["hypervolume"][str(twin)]


def test_the_evaluator_column_names_what_evaluated_each_run(tmp_path):
    """A problem file's own evaluator is what evaluated its runs (without --evaluator): the table said fedevo's
    simulator, 'fedevo.evaluate:evaluate'; a run given --evaluator names that one."""
    import fedevo

    ev = tmp_path / "ev.py"
    ev.write_text("def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
                  "    return (0.1 + 0.5 * params['x'], 10.0 + 90.0 * (1 - params['x']), 1.0)\n"
                  "other = evaluate\n")
    (tmp_path / "own.toml").write_text('name = "own"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    own = fedevo.search(str(tmp_path / "own.toml"), pop=3, gen=1, workers=0, seed=1, out=tmp_path / "own",
                        page=False)
    given = fedevo.search(str(tmp_path / "own.toml"), pop=3, gen=1, workers=0, seed=2, out=tmp_path / "given",
                          page=False, evaluator=f"python:{ev}:other")
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in
             re.findall(r"<tr>(.*?)</tr>", compare_html([own.data, given.data]), flags=re.S)]
    evaluators = {c[0]: c[5] for c in cells if c and c[0] in ("own", "given")}
    assert evaluators["own"] == own.problem.evaluator and evaluators["own"].endswith("ev.py:evaluate")
    assert evaluators["given"].endswith("ev.py:other")


@pytest.mark.parametrize("objectives", [["error", "comm"], ["error", "eps", "model_size", "comm"]])
def test_the_fronts_are_drawn_in_the_runs_own_objectives(tmp_path, objectives):
    """Runs that searched other objectives than (error, comm, ε): each pair of theirs is a panel, its axes name
    the objective with its unit. The page drew error–ε, error–comm and comm–ε whatever the runs searched (a
    2-objective run's front in ε, which it never minimised; a model-size search's front without model size)."""
    from itertools import combinations

    from fedevo.problem import problems_dir

    prob = tmp_path / "p.toml"
    prob.write_text(f"objectives = {json.dumps(objectives)}\n" + (problems_dir() / "digits_mlp.toml").read_text())
    runs = [_search(tmp_path / name, str(prob), seed, pop=6, gen=1) for name, seed in (("a", 1), ("b", 2))]
    data = [load_run(d) for d in runs]
    fig, _ = figure_fronts(data, labels(data))
    pairs = list(combinations(objectives, 2))
    fronts = [t for t in fig.data if t.meta == "front"]
    assert len(fronts) == 2 * len(pairs)
    short = {"error": "error", "comm": "comm", "eps": "ε", "model_size": "model size Ω"}
    assert [a.text for a in fig.layout.annotations] == [f"{short[a]} vs {short[b]}" for a, b in pairs]
    titles = {getattr(fig.layout, k).title.text for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))}
    assert ("model size Ω (parameters)" in titles) == ("model_size" in objectives)
    assert ("ε (log)" in titles or "ε" in titles) == ("eps" in objectives), titles
    for t in fronts:  # each trace: its run's Pareto set, in its panel's pair of objectives
        want = {int(r["id"]) for r in read_csv(tmp_path / t.name / "front.csv")}
        assert set(t.customdata) == want
        # the hover gives each value its unit, as front.html's does (it gave none: 'comm 1.2k', 'model size Ω 7k')
        assert all(("params/round/client slot" in x) == ("comm" in objectives) for x in t.text), t.text[0]
        assert all(re.search(r"model size Ω \S+ parameters", x) for x in t.text) == ("model_size" in objectives)
    # rows of three panels, each as high as one row draws it and 100 px apart (a fixed 16 % of the figure apart, four
    # rows of five objectives' ten pairs were 200 px high with 250 px between them)
    from fedevo.viz.compare import FRONTS_PANEL_H, FRONTS_ROW_GAP

    lay, m = fig.layout.to_plotly_json(), fig.layout.margin
    plot_h = fig.layout.height - m.t - m.b
    rows = sorted({tuple(lay[k]["domain"]) for k in lay if re.fullmatch(r"yaxis\d*", k)}, reverse=True)
    assert len(rows) == -(-len(pairs) // 3) and all(round((b - a) * plot_h) == FRONTS_PANEL_H for a, b in rows)
    assert all(round((hi[0] - lo[1]) * plot_h) == FRONTS_ROW_GAP for hi, lo in zip(rows, rows[1:])), rows
    page = compare_html(data)
    assert f"every pair of its {len(objectives)} objectives" in page and "(error, comm, ε)" not in page


def test_the_page_says_what_every_eps_is_under(runs):
    """ε is compared across runs: the page states once the problem's privacy and deployment settings it holds under
    (mechanism, trust, δ, …) and which privacy settings are genes, as front.html's header; it gave ε with no δ or
    trust model anywhere."""
    _, a, b, _, _, _ = runs
    page = compare_html([load_run(a), load_run(b)])
    head = page.split("<h2>")[0]
    assert "privacy and deployment (fixed):" in head, head[-800:]
    assert re.search(r"delta</span> <b>1e-4</b>|delta <b>1e-4</b>", head), head[-800:]
    assert "privacy settings that are genes (they vary per point):" in head and "<b>sigma</b>" in head
    assert "colour by" not in head  # (front.html's words: this page has no colour choice)


def _fake_without_privacy(problem, params, *, seed, rounds=None, data_dir=None):
    from dataclasses import replace

    r = fake_evaluate(problem, params, seed=seed, rounds=rounds)
    return replace(r, eps=math.inf, eps_paper=math.inf) if seed % 3 == 0 else r


def test_the_capped_points_note_names_no_3d_view(tmp_path):
    """compare.html draws its fronts in 2D only: the note on points at the cap (ε ∞) says "marked ×", not
    "marked × in 2D, ■ in 3D" (front.html's wording, copied: the page has no 3D view)."""
    import fedevo

    runs = []
    for seed in (1, 2):
        fedevo.search("digits_mlp_local", pop=6, gen=1, workers=0, seed=seed, out=tmp_path / str(seed),
                      evaluator=_fake_without_privacy, page=False)
        runs.append(load_run(tmp_path / str(seed)))
    assert any(r["eps"] == math.inf for d in runs for r in d.front)
    page = compare_html(runs)
    notes = [n for n in re.findall(r'<p class="note">([^<]*)</p>', page) if "drawn at the cap" in n]
    assert notes and all("(marked ×; the hover text" in n and "3D" not in n for n in notes), notes


def test_a_run_made_before_eps_was_left_out_is_not_compared_on_the_others_objectives(tmp_path, monkeypatch):
    """review17 F9: one problem file without privacy gives two objective lists, (error, comm, eps) in a run made
    before the search left ε out and (error, comm) since; their definitions were equal, so compare.html drew both
    on the FIRST run's objectives (HV 0.0745 or 0.745 by the order given). Refused, as fedevo.hypervolume does."""
    import fedevo
    from fedevo import finite_eps
    from fedevo.errors import FedevoError
    from fedevo.viz.compare import check_same_problem

    prob = tmp_path / "plain.toml"
    prob.write_text('name = "plain"\ndataset = "digits"\nmodel = "mlp"\n[data]\nclients = 4\n[train]\nrounds = 1\n'
                    'epochs = 1\n[genes]\nlr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }\n')
    kw = dict(optimizer="random", pop=2, gen=1, workers=0, seed=1, page=False, progress=False)
    with monkeypatch.context() as m:  # the search as it was: ε kept
        m.setattr(finite_eps, "search_objectives", lambda problem, objectives, simulator: (objectives, None))
        fedevo.search(str(prob), out=tmp_path / "old", **kw)
    fedevo.search(str(prob), out=tmp_path / "new", **kw)
    old, new = load_run(tmp_path / "old"), load_run(tmp_path / "new")
    assert old.objectives.names == ("error", "comm", "eps") and new.objectives.names == ("error", "comm")
    for pair in ((old, new), (new, old)):
        with pytest.raises(FedevoError, match=r"runs are compared only on the same problem, its objectives included "
                                              r"\(.*new left ε out: .*no privacy"):
            check_same_problem(pair)
