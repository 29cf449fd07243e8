"""front.html and `fedevo plot` / `fedevo front` (no browser: see tests/browser for the rendered page)."""

import math
import re

import pytest

from fedevo.viz.front import front_html, write_front_html
from fedevo.viz.front_figures import figure_3d, figure_parallel, figure_projections
from fedevo.viz.front_model import Model
from fedevo.viz.numfmt import num
from fedevo.searching.rundata import load_run
from tests.helpers import read_csv as csv_rows, run_cli as cli
from tests.viz.fedevo_runs import digits_run, five_objective_run, synthetic_run


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    return digits_run(tmp_path_factory)


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    return synthetic_run(tmp_path_factory)




def parts_of(run_dir):
    data = load_run(run_dir)
    return data, Model(data)


def evaluation_traces(fig):
    return [t for t in fig.data if t.meta == "evaluations"]


def test_plot_cli_writes_one_self_contained_page(real_run, capsys):
    (real_run / "front.html").unlink(missing_ok=True)
    code, out, err = cli(["plot", str(real_run), "--plotly-js", "embed"], capsys)
    assert code in (0, None), err
    page = (real_run / "front.html").read_text()
    assert str(real_run / "front.html") in out
    for div in ("front3d", "projections", "parallel", "hypervolume"):
        assert f'id="{div}"' in page
    # plotly.js is inlined: no script, stylesheet or font comes from anywhere else
    assert "<script src=" not in page and not re.search(r"<link[^>]+href=", page)
    assert len(page) > 3_000_000 and "Plotly.newPlot" in page


def test_every_ok_evaluation_is_one_point_with_full_hover(real_run):
    data, parts = parts_of(real_run)
    ev = csv_rows(real_run / "evaluations.csv")
    front_ids = {int(r["id"]) for r in csv_rows(real_run / "front.csv")}
    fig = figure_3d(parts)
    traces = evaluation_traces(fig)
    ids = [i for t in traces for i in t.customdata]
    assert sorted(ids) == sorted(int(r["id"]) for r in ev if r["status"] == "ok")
    front = next(t for t in traces if t.name == "Pareto front")
    assert set(front.customdata) == front_ids
    dominated = next((t for t in traces if t.name == "dominated"), None)
    assert dominated is None or dominated.opacity < front.opacity
    for t in traces:
        for i, text in zip(t.customdata, t.text):
            r = data.by_id[i]
            assert f"id {i}</b>" in text and "ε (accountant)" in text and "ε (paper)" in text
            for g in data.gene_names:
                assert f"{g} = " in text
            assert f"generation {r['generation']}" in text
    # the 2D projections: 3 panels, each with every ok evaluation once
    proj = figure_projections(parts)
    for axis in ("x", "x2", "x3"):
        pts = [i for t in evaluation_traces(proj) if (t.xaxis or "x") == axis for i in t.customdata]
        assert sorted(pts) == sorted(ids)
    par = figure_parallel(parts)
    labels = [d.label for d in par.data[0].dimensions]
    assert [lab.split(" (")[0] for lab in labels[:len(data.gene_names)]] == list(data.gene_names)
    assert "error" in labels and any(lab.startswith("ε") for lab in labels)
    # comm with its unit, as the header, the hover and the 3D / 2D axes write it (one label everywhere)
    assert any(lab.startswith("comm (params/round/client slot)") for lab in labels), labels
    assert "sigma (log)" in labels  # digits_mlp declares sigma log = true; drawn as log10 (labelled in units by the page), no snapping ticks
    assert not [d.label for d in par.data[0].dimensions if d.tickvals and d.label != "Pareto"]


def test_infinite_eps_capped_and_failed_listed(fake_run):
    data, parts = parts_of(fake_run)
    ok = data.ok_rows
    inf_ids = {r["id"] for r in ok if not math.isfinite(r["eps"])}
    assert inf_ids and data.bad_rows, "the synthetic run must have ε = inf and failed rows"
    fig = figure_3d(parts)
    z = {i: v for t in evaluation_traces(fig) for i, v in zip(t.customdata, t.z)}
    assert all(math.isfinite(v) for v in z.values())
    finite_max = max(r["eps"] for r in ok if math.isfinite(r["eps"]))
    assert all(z[i] > finite_max for i in inf_ids)
    assert len(z) == len(ok)  # failed / diverged are not plotted
    page = front_html(data)
    assert "drawn at the cap" in page
    assert f"{len(inf_ids)} points with ε ∞ (no privacy) drawn at the cap" in page  # ∞, not "or undefined"
    # how each view marks them: ε (the 3D view's third axis) in 2D and 3D, ε paper (not an objective: on the
    # parallel axes only) in none
    notes = re.findall(r'<p class="note">([^<]*drawn at the cap[^<]*)</p>', page)
    assert "(marked × in 2D, ■ in 3D; the hover text" in next(n for n in notes if "with ε ∞" in n)
    paper = next(n for n in notes if "with ε (paper) ∞" in n)
    assert "marked" not in paper and "(the hover text shows the true value)" in paper, paper
    texts = {i: tx for t in evaluation_traces(fig) for i, tx in zip(t.customdata, t.text)}
    assert all("ε (accountant) ∞ (no privacy) · ε (paper) ∞ (no privacy)" in texts[i] for i in inf_ids)  # "∞" alone
    assert not any("(no privacy)" in texts[i] for i in set(texts) - inf_ids)
    assert f"Not plotted: failed or diverged ({len(data.bad_rows)})" in page
    for r in data.bad_rows:
        assert f"<td class=\"\">{r['id']}</td>" in page


def test_write_front_html_api(fake_run, tmp_path):
    p = write_front_html(fake_run, tmp_path / "x.html", plotly="embed")
    assert p == tmp_path / "x.html" and p.stat().st_size > 3_000_000
    p = write_front_html(fake_run, tmp_path / "y.html")  # the default: plotly.js shared beside the page
    assert p.stat().st_size < 1_000_000 and list(tmp_path.glob("plotly-*.min.js"))
    assert write_front_html(str(fake_run)) == fake_run / "front.html"


def test_front_cli_marks_knee_and_lowest_error(real_run, capsys):
    code, out, err = cli(["front", str(real_run)], capsys)
    assert code in (0, None), err
    assert "knee" in out and "lowest-error #1" in out and "lowest-error #2" in out
    front_ids = [int(r["id"]) for r in csv_rows(real_run / "front.csv")]
    shown = [int(m.group(1)) for m in re.finditer(r"^│\s*(\d+)\s*│", out, flags=re.M)]
    assert sorted(shown) == sorted(front_ids)
    errors = {int(r["id"]): float(r["error"]) for r in csv_rows(real_run / "front.csv")}
    assert [errors[i] for i in shown] == sorted(errors[i] for i in shown)  # default: sorted by error
    code, out, _ = cli(["front", str(real_run), "--sort", "comm"], capsys)
    comm = {int(r["id"]): float(r["comm"]) for r in csv_rows(real_run / "front.csv")}
    shown = [int(m.group(1)) for m in re.finditer(r"^│\s*(\d+)\s*│", out, flags=re.M)]
    assert [comm[i] for i in shown] == sorted(comm.values())
    code, out, _ = cli(["front", str(real_run), "--pick", "knee"], capsys)
    assert code in (0, None) and "1 picked by 'knee'" in out


def test_bad_run_dirs(real_run, tmp_path, capsys):
    from fedevo.searching.run import SearchRun, SearchSettings

    (tmp_path / "empty").mkdir()
    SearchRun.create(SearchSettings(problem="digits_mlp", pop=8, gen=1, seed=0), tmp_path / "fresh")
    (tmp_path / "file").write_text("x")
    cases = [
        (["plot", str(tmp_path / "missing")], "does not exist"),
        (["plot", str(tmp_path / "empty")], "is not a fedevo search run"),
        (["plot", str(tmp_path / "fresh")], "holds no evaluations yet"),
        (["plot", str(tmp_path / "file")], "is not a directory"),
        (["front", str(tmp_path / "fresh")], "holds no evaluations yet"),
        (["front", str(real_run), "--sort", "accuracy"], "--sort must be one of error, comm, eps"),
        (["front", str(real_run), "--pick", "12345"], "no evaluation with id 12345"),
        (["front", str(real_run), "--pick", ""], "empty pick"),  # as retrain's; it printed the whole front
    ]
    for argv, msg in cases:
        code, out, err = cli(argv, capsys)
        assert code == 2, (argv, out, err)
        assert msg in err and err.count("\n") == 1, (argv, err)


# ============================================================================================ issue 18
@pytest.fixture(scope="module")
def chance_dir(tmp_path_factory):
    from tests.viz.fedevo_runs import chance_run

    return chance_run(tmp_path_factory)


def test_front_json_pick_and_chance_knee(chance_dir, capsys):
    import json

    code, out, err = cli(["front", str(chance_dir), "--pick", "knee,lowest-eps,12", "--json"], capsys)
    assert code in (0, None), err
    picks = json.loads(out)
    rows = {int(r["id"]): r for r in csv_rows(chance_dir / "evaluations.csv")}
    assert [p["id"] for p in picks][2] == 12 and picks[0]["picked_by"] == ["knee"]
    for p in picks:
        assert set(p) >= {"id", "objectives", "genes", "picked_by", "on_front", "status"}
        r = rows[p["id"]]
        for k in ("error", "eps"):  # JSON null: a CSV cell that is no finite number (∞, or NaN: not measured)
            v = float(r[k])
            assert p["objectives"][k] == v if math.isfinite(v) else p["objectives"][k] is None
        assert p["genes"]["sigma"] == float(r["sigma"]) and p["genes"]["layers"] == int(r["layers"])
    assert picks[0]["objectives"]["error"] < 0.9  # the knee is better than chance
    assert picks[1]["objectives"]["error"] >= 0.9  # ... while the most private solution is not
    # without --pick: the whole front, with its marks; the table's caption names the rule
    code, out, _ = cli(["front", str(chance_dir), "--json"], capsys)
    front = json.loads(out)
    assert sorted(p["id"] for p in front) == sorted(int(r["id"]) for r in csv_rows(chance_dir / "front.csv"))
    assert sum("knee" in p["picked_by"] for p in front) == 1
    code, out, _ = cli(["front", str(chance_dir)], capsys)
    flat = " ".join(out.split())  # the caption wraps with the console's width
    assert "clearly better than chance (error < 0.863" in flat  # chance 0.9 minus the 99 % margin of 360 tests
    assert "chance minus the test set's 99 % margin" in flat
    assert "e-0" not in out and "e+0" not in out


def test_mechanism_gene_is_shown_per_point_not_as_fixed(tmp_path):
    from fedevo.searching.run import Runtime, SearchSettings, search
    from tests.searching.search_fakes import fake_evaluate

    search(SearchSettings(problem="fashion_mlp_mech", pop=8, gen=1, seed=0, rounds=1), tmp_path / "mech",
           Runtime(workers=0), evaluator=fake_evaluate)
    data, m = parts_of(tmp_path / "mech")
    page = front_html(data)
    assert "mechanism <b>none</b>" not in page and "mechanism none" not in page
    assert "privacy settings that are genes" in page and "<b>mechanism</b>" in page
    assert "delta <b>1e-4</b>" in page and "clip <b>2</b>" in page  # fixed settings, once, readable
    par = figure_parallel(m)
    mech = next(d for d in par.data[0].dimensions if d.label == "mechanism")
    assert list(mech.ticktext) == list(data.problem.gene("mechanism").choices)
    fig = figure_3d(m)
    for t in evaluation_traces(fig):
        for i, text in zip(t.customdata, t.text):
            assert f"mechanism = {data.by_id[i]['mechanism']}" in text


def test_a_runs_pages_share_one_plotly_beside_them_by_default(fake_run, tmp_path, capsys):
    """Issue #36: `fedevo plot RUN` writes plotly.js once beside the run's pages (RUN/plotly-VERSION.min.js), which
    front.html and importance.html load; `--plotly-js embed` still writes one self-contained page; the search's
    live rewrite keeps each page's choice."""
    import shutil

    from fedevo.viz.live import LivePage

    runs = tmp_path / "runs"
    a, b = runs / "a", runs / "b"
    shutil.copytree(fake_run, a)
    shutil.copytree(fake_run, b)
    for p in list(a.glob("*.html")) + list(a.glob("plotly-*.js")) + list(b.glob("*.html")) + list(b.glob("plotly-*.js")):
        p.unlink()
    code, out, err = cli(["plot", str(a)], capsys)
    assert code in (0, None), err
    js = list(a.glob("plotly-*.min.js"))
    assert len(js) == 1 and js[0].stat().st_size > 3_000_000
    for name in ("front.html", "importance.html"):
        page = (a / name).read_text()
        assert f'<script src="{js[0].name}"' in page and len(page) < 1_000_000, name
    LivePage().on_generation(load_run(a).generations, load_run(a))
    assert len((a / "front.html").read_text()) < 1_000_000
    code, out, err = cli(["plot", str(b), "--plotly-js", "embed"], capsys)
    assert code in (0, None), err
    assert not list(b.glob("plotly-*.min.js")) and len((b / "front.html").read_text()) > 3_000_000
    LivePage().on_generation(load_run(b).generations, load_run(b))  # the live rewrite keeps the page embedded
    assert len((b / "front.html").read_text()) > 3_000_000 and not list(b.glob("plotly-*.min.js"))
    code, _, err = cli(["plot", str(a), "--plotly-js", "cdn"], capsys)
    assert code == 2 and "--plotly-js must be embed or shared" in err


def test_live_page_is_written_from_the_run_in_memory(fake_run, tmp_path):
    """LivePage (the search callback) writes the page `fedevo plot` writes, from the RunData it is handed: with the
    run directory's run.json and evaluations.csv gone it writes the same page."""
    import shutil

    from fedevo.viz.live import LivePage

    d, ref = tmp_path / "r", tmp_path / "ref"
    shutil.copytree(fake_run, d)
    shutil.copytree(fake_run, ref)
    (d / "front.html").unlink(missing_ok=True)  # (written by an earlier test of this file, if one ran)
    write_front_html(ref)  # from disk
    data = load_run(d)
    for name in ("run.json", "evaluations.csv", "hypervolume.csv"):
        (d / name).unlink()
    LivePage().on_generation(data.generations, data)
    assert (d / "front.html").read_text() == (ref / "front.html").read_text().replace(str(ref), str(d))
    assert (d / "front.stamp.js").read_text() == (ref / "front.stamp.js").read_text()


def test_live_page_never_stops_the_search(fake_run, tmp_path, capsys):
    import shutil

    from fedevo.viz.live import LivePage

    d = tmp_path / "r"
    shutil.copytree(fake_run, d)
    data = load_run(d)
    shutil.rmtree(d)
    d.write_text("a file where the run directory was")  # nowhere to write
    page = LivePage()
    page.on_generation(1, data)
    page.on_generation(2, data)
    err = capsys.readouterr().err
    assert err.count("could not update front.html") == 1 and f"fedevo plot {d}" in err


def test_hypervolume_not_flat_on_log_eps(fake_run):
    hv = [float(r["hypervolume"]) for r in csv_rows(fake_run / "hypervolume.csv")]
    assert hv[0] > 0 and hv[-1] > hv[0]


def test_watch_reads_again_a_last_row_logged_while_it_read(fake_run, tmp_path, monkeypatch):
    """The search logs its last row and writes its last checkpoint between the watch's read of the rows and its
    completeness check (which reads the newest checkpoint now): the watch wrote the page of all rows but the last,
    said the run was complete and returned (CI, test_page_follows_a_running_search: 23 of 24). It reads again."""
    import fcntl
    import shutil

    import fedevo.searching.rundata as rundata
    from fedevo.viz.live import watch

    d = tmp_path / "race"
    shutil.copytree(fake_run, d)
    last = sorted((d / "checkpoints").glob("gen-*.pkl"))[-1]
    ending = last.read_bytes()
    last.unlink()  # the last generation under way: all its rows but one logged, its checkpoint not yet written
    lines = (d / "evaluations.csv").read_text().splitlines(keepends=True)
    (d / "evaluations.csv").write_text("".join(lines[:-1]))
    real, seen = rundata.load_run, []

    def load_run(run_dir, **kw):
        data = real(run_dir, **kw)
        if kw.get("require_evaluations") and not seen:  # right after this read the search logs its last row
            with open(d / "evaluations.csv", "a") as f:   # and writes the checkpoint that ends it
                f.write(lines[-1])
            last.write_bytes(ending)
        return data

    monkeypatch.setattr(rundata, "load_run", load_run)
    with open(d / ".lock", "a+") as lock:  # the search still holds the run when the watch starts its round
        fcntl.flock(lock, fcntl.LOCK_EX)
        watch(d, interval=0.01, timeout=30, on_write=lambda p, data: seen.append(len(data.rows)))
    assert seen == [len(lines) - 2, len(lines) - 1]


def test_watch_writes_until_complete_and_follows_changes(fake_run, tmp_path, capsys):
    """`fedevo plot --watch` on a complete run writes once and returns; on a run that grows it writes again
    (a thread appends the last generation's rows while it watches)."""
    import shutil
    import threading
    import time

    from fedevo.viz.live import watch

    code, out, err = cli(["plot", str(fake_run), "--watch", "--interval", "0.1"], capsys)
    assert code in (0, None), err
    assert out.count("wrote ") == 1 and "30 evaluations, generation 3/3" in out and "complete" in err

    d = tmp_path / "grow"
    shutil.copytree(fake_run, d)
    last = sorted((d / "checkpoints").glob("gen-*.pkl"))[-1]
    last.unlink()  # generation 3 under way: its checkpoint is not written yet (rows 20..29 are not counted)
    lines = (d / "evaluations.csv").read_text().splitlines(keepends=True)
    rows = lines[1:]
    keep = lines[0] + "".join(rows[:20])
    (d / "evaluations.csv").write_text(keep)
    seen = []

    import fcntl

    lock = open(d / ".lock", "a+")  # what a running search holds (fedevo.searching.run.LOCK)
    fcntl.flock(lock, fcntl.LOCK_EX)

    def grow():
        while not seen:
            time.sleep(0.05)
        with open(d / "evaluations.csv", "a") as f:
            f.write("".join(rows[20:]))
        lock.close()

    t = threading.Thread(target=grow, daemon=True)  # a failing watch must not leave pytest waiting on it
    t.start()
    path = watch(d, interval=0.1, timeout=30, on_write=lambda p, data: seen.append(len(data.rows)))
    t.join()
    assert seen == [20, 30] and path == d / "front.html"

    # a stopped search (nobody holds the run): one write, then back, saying how to go on (it used to wait forever)
    stopped = tmp_path / "stopped"
    shutil.copytree(fake_run, stopped)
    (stopped / "checkpoints" / last.name).unlink()
    (stopped / "evaluations.csv").write_text(keep)
    code, out, err = cli(["plot", str(stopped), "--watch", "--interval", "0.1"], capsys)
    assert code in (0, None), err
    assert out.count("wrote ") == 1 and "20 evaluations" in out
    assert "no search is writing the run (20 of 30 evaluations)" in err and "fedevo resume" in err
    assert "fedevoStamp" in (d / "front.stamp.js").read_text()
    for argv, msg in ((["plot", str(d), "--watch", "--interval", "0"], "--interval must be a positive finite number"),
                      (["plot", str(tmp_path / "nope"), "--watch"], "does not exist")):
        code, _, err = cli(argv, capsys)
        assert code == 2 and msg in err, err


def test_stamp_file_per_page_name(fake_run, tmp_path):
    p = write_front_html(fake_run, tmp_path / "other.html")
    assert (tmp_path / "other.stamp.js").exists() and '"stamp_file": "other.stamp.js"' in p.read_text()


# ============================================================================================ context (issue #28)
@pytest.fixture(scope="module")
def central(tmp_path_factory):
    from tests.viz.fedevo_runs import central_run

    return central_run(tmp_path_factory)


def test_undefined_eps_paper_is_left_out_under_central_trust(central):
    """Under central trust the paper's ε is NaN for every evaluation: no parallel axis, colour choice, table column,
    hover line or "drawn at the cap" note for it; the page says why it is left out."""
    data, m = parts_of(central)
    assert all(not math.isfinite(r["eps_paper"]) for r in data.ok_rows)
    assert m.undefined == ("eps_paper",)
    labels = [d.label for d in figure_parallel(m).data[0].dimensions]
    assert not [lab for lab in labels if "paper" in lab]
    assert "eps_paper" not in dict(m.colour_options())
    assert all("ε (paper)" not in t for t in m.text) and all("ε (accountant)" in t for t in m.text)
    page = front_html(data)
    table = page[page.index('id="front-table"'):]
    table = table[:table.index("</thead>")]
    assert "ε paper" not in table and ">ε<" in table
    assert "ε (paper) is left out of the views and the table: it is undefined for every evaluation" in page
    assert "with ε (paper)" not in page  # no "N points with ε (paper) ∞ drawn at the cap"


def test_local_trust_keeps_eps_paper(real_run):
    data, m = parts_of(real_run)
    assert m.undefined == ()
    assert any("paper" in d.label for d in figure_parallel(m).data[0].dimensions)


def test_header_states_the_rounds_that_ran(central):
    """--rounds 2 overrides the problem file's 10: the header says 2 once (the rows ran 2), names the override,
    and the fixed simulation settings do not say rounds 10 beside it (issue #28: "rounds per evaluation 2" beside
    "simulation (fixed): rounds 5")."""
    data, _ = parts_of(central)
    assert {r["rounds_trained"] for r in data.ok_rows} == {2} and data.problem.fixed["rounds"] == 10
    page = front_html(data)
    assert "rounds per evaluation <b>2</b> (--rounds 2; the problem file's 10 not used)" in page
    sim = page[page.index("simulation (fixed):"):]
    sim = sim[:sim.index("</p>")]
    assert "rounds" not in sim and "epochs" in sim
    assert 'delta <b>1e-6</b></span>' in page  # a setting and its value never break apart


def test_header_of_a_multi_fidelity_run_gives_rounds_per_rung(central):
    from dataclasses import replace

    from fedevo.viz.front import rounds_text

    data, _ = parts_of(central)
    mf = replace(data, settings=replace(data.settings, fidelity=(1 / 3, 1.0)))
    assert mf.settings.multi_fidelity
    txt = rounds_text(mf)
    assert txt.startswith("rounds per rung <b>1, 2</b>") and "rounds per evaluation" not in txt
    assert rounds_text(data).startswith("rounds per evaluation <b>2</b>")


def test_the_neighbouring_relation_is_stated_beside_every_eps(central, capsys):
    """Every ε the run shows says under which neighbouring relation it holds, beside the trust model and the
    accountant: front.html's header and each point's hover, and `fedevo front`'s 'holds under' line (they named
    trust, sampling, δ and the accountant only; central trust with Poisson sampling is add/remove one user)."""
    data, m = parts_of(central)
    assert {r["privacy"]["neighbouring"] for r in data.ok_rows} == {"add/remove one user"}
    page = front_html(data)
    assert 'neighbouring relation (from the evaluations): <b class="prose">add/remove one user</b>' in page
    assert all("neighbouring add/remove one user" in t for t in m.text)
    code, out, err = cli(["front", str(central)], capsys)
    assert code in (0, None), err
    line = next(ln for ln in out.splitlines() if ln.startswith("every ε above holds under"))
    assert "trust central" in line and "neighbouring add/remove one user" in line and "accountant PLD" in line


def test_hover_lines_are_short_and_the_layout_keeps_titles_clear(central):
    from fedevo.viz.front_figures import figure_hypervolume
    from fedevo.viz.front_model import HOVER_LINE

    data, m = parts_of(central)
    for t in m.text:
        for line in t.split("<br>"):
            assert len(re.sub("<[^>]+>", "", line)) <= HOVER_LINE or " · " not in line, line
    fig = figure_3d(m)
    assert fig.layout.scene.zaxis.title.text == ""  # drawn level, as a scene annotation
    assert [a.text for a in fig.layout.scene.annotations] == ["ε (log)"]
    assert fig.layout.margin.t >= 60 and fig.layout.title.yref == "container"
    hv = data.hypervolume()
    lo, hi = figure_hypervolume(hv).layout.yaxis.range
    vals = [r["hypervolume"] for r in hv]
    assert lo > 0 and lo <= min(vals) and hi >= max(vals)  # starts near its values, not at 0


def test_lower_rungs_are_drawn_grey_and_never_as_evaluations(tmp_path):
    """A multi-fidelity run: every lower-rung evaluation (ok) is a grey point in the 3D view and in each projection,
    in a trace of its own that selection, colour and the knee ignore (meta 'lower-rung'); the evaluations' traces
    hold exactly the full-fidelity ok rows. A plain run has no such trace."""
    from fedevo.searching import Runtime, SearchSettings, search
    from fedevo.viz.front_model import LOWER_COLOR

    out = tmp_path / "mf"
    search(SearchSettings(problem="digits_mlp_local", pop=9, gen=2, seed=3, rounds=9, fidelity=(1 / 9, 1 / 3, 1.0),
                          evaluator="tests.searching.search_fakes:CONTINUING"), out, Runtime(workers=0))
    data = load_run(out)
    m = Model(data)
    assert len(m.lower) == len(data.lower_rows) > 0
    full_ok = {r["id"] for r in data.full_rows if r["status"] == "ok"}
    for fig, panels in ((figure_3d(m), 1), (figure_projections(m), 3)):
        lower = [t for t in fig.data if t.meta == "lower-rung"]
        assert len(lower) == panels and all(t.marker.color == LOWER_COLOR for t in lower)
        assert all(len(t.x) == len(m.lower) and "not in the front" in t.text[0] for t in lower)
        evals = {i for t in fig.data if t.meta == "evaluations" for i in t.customdata}
        assert evals == full_ok
        # issue #36: a grey point's hover gives its rounds of the planned ones
        assert all("of the 9 planned rounds" in x for t in lower for x in t.text)
    page = front_html(data)
    assert "lower-rung" in page
    # issue #36: the header counts evaluations (individuals), not rung rows
    ids = {r["id"] for r in data.rows}
    at_full = {r["id"] for r in data.full_rows}
    assert len(data.rows) > len(ids)
    assert (f"{len(ids)} evaluations: {len(at_full)} trained the full rounds ({len(full_ok)} ok, " in page
            and f"{len(ids) - len(at_full)} stopped at a lower rung" in page
            and f"{len(data.rows)} rung trainings in all" in page)
    assert f"{len(data.rows)} evaluations" not in page


def test_a_plain_run_has_no_lower_rung_trace(real_run):
    m = Model(load_run(real_run))
    assert not m.lower
    assert not [t for t in figure_3d(m).data if t.meta == "lower-rung"]


def test_the_page_follows_the_runs_objective_list(fake_run):
    """Issue #36: a run of four objectives (RunData.objectives from run.json's `objectives`; here ε (paper) as the
    fourth, set on the run held in memory) gets a cap input and a "lowest NAME" choice per objective, the 3D view of
    the first three, a projection per pair (six) and a parallel axis per objective; the header names them in order."""
    import dataclasses

    three = load_run(fake_run)
    meta = {k: v for k, v in three.meta.items() if k != "objective_specs"}  # the names alone: read from the registry
    data = dataclasses.replace(three, meta={**meta, "objectives": ["error", "comm", "eps", "eps_paper"]})
    assert data.objectives.names == ("error", "comm", "eps", "eps_paper")
    m = Model(data)
    assert m.keys == ("error", "comm", "eps") and len(m.pairs) == 6
    proj = figure_projections(m)
    assert {t.xaxis for t in evaluation_traces(proj)} == {"x", "x2", "x3", "x4", "x5", "x6"}
    labels = [d.label for d in figure_parallel(m).data[0].dimensions]
    assert sum(lab.startswith("ε paper") for lab in labels) == 1
    page = front_html(data)
    for name in ("error", "comm", "eps", "eps_paper"):
        assert f'id="cap-{name}"' in page and f'value="lowest-{name}"' in page
    assert "ε (paper formula) minimised" in page
    page3 = front_html(three)
    assert 'id="cap-eps_paper"' not in page3 and 'id="cap-eps"' in page3
    assert len(Model(three).pairs) == 3


def test_a_fourth_objective_is_in_the_tables_and_the_hypervolume_note(tmp_path_factory):
    """The 2026-11 audit (no browser: tests/browser/test_objectives_browser.py draws it): a run of error, comm, ε and
    worst_client_error has the fourth in the Pareto table, in the page's objectives (the selection table and the
    export), in the hypervolume note, axis title and reference point (4-D, as hypervolume.csv), and in
    importance.html's header, ranking and slices; the error axis never runs past 1 and the chance band reaches it."""
    from fedevo.viz.front_figures import error_range, figure_hypervolume
    from fedevo.viz.front_model import hv_space
    from fedevo.viz.importance import importance, importance_html
    from tests.viz.fedevo_runs import four_objective_run

    data = load_run(four_objective_run(tmp_path_factory))
    m = Model(data)
    assert m.other_objectives() == [("worst_client_error", "worst-10 % client error")]
    page = front_html(data)
    assert "<th class=\"\" title=\"click to sort\">worst-10 % client error</th>" in page
    space, ref = hv_space(data)
    assert space == "(error, comm, log10 ε, worst-10 % client error)" and ref == "(1.1, 1.1, 1.1, 1.1)"
    assert f"in {space}" in page and f"reference point {ref}" in page and "(1.1, 1.1, 1.1);" not in page
    assert "worst-10 % client error" in figure_hypervolume(data.hypervolume(), space=space).layout.yaxis.title.text
    lo, hi = error_range(m)
    assert hi <= max(1.0, max(r["error"] for r in data.ok_rows) + 0.01)
    imp = importance_html(data)
    assert "worst-10 % client error minimised" in imp and "objectives (all minimised)" not in imp
    assert [o.objective for o in importance(data)] == ["error", "comm", "eps", "worst_client_error"]


def _same_point(problem, params, *, seed, rounds=None, data_dir=None, **_):
    """Every evaluation the same point: no hypervolume growth, so --patience 1 ends the search early."""
    from fedevo.result import EvaluationResult

    return EvaluationResult(error=0.2, comm=100.0, eps=1.0, eps_paper=1.0, accuracy_global=0.8, omega=10,
                            rounds=1, wall_s=0.01)


def test_the_page_says_running_only_while_a_search_writes_the_run(fake_run, tmp_path, capsys):
    """A search that ended early (--patience: 8 of 24 evaluations) is complete: no 'still running', no waiting
    for importance.html; a stopped one (killed: no lock held) says how to go on; only a held run is running."""
    import fcntl
    import shutil

    from fedevo.searching import Runtime, SearchSettings, search
    from fedevo.viz.front import is_complete

    out = tmp_path / "patience"
    search(SearchSettings(problem="digits_mlp_local", pop=4, gen=6, seed=1, rounds=1, patience=1), out,
           Runtime(workers=0), evaluator=_same_point)
    data = load_run(out)
    assert len(data.rows) < data.settings.expected_evaluations and is_complete(data)
    page = front_html(data)
    assert "The search is still running" not in page and "stopped before its end" not in page
    assert "importance.html (which genes matter) is written" not in page
    code, out_text, err = cli(["front", str(out)], capsys)
    assert code in (0, None) and "stopped before its end" not in out_text and "is writing" not in out_text, err

    stopped = tmp_path / "stopped"  # generation 3 under way when the search was killed
    shutil.copytree(fake_run, stopped)
    sorted((stopped / "checkpoints").glob("gen-*.pkl"))[-1].unlink()
    lines = (stopped / "evaluations.csv").read_text().splitlines(keepends=True)
    (stopped / "evaluations.csv").write_text("".join(lines[:21]))
    data = load_run(stopped)
    assert not is_complete(data)
    page = front_html(data)
    assert "The search is still running" not in page
    assert "stopped before its end (20 of 30 evaluations" in page and f"fedevo resume {stopped}" in page
    # fedevo front lists every logged evaluation (20), front.csv the finished generations: it says why they differ
    code, text, err = cli(["front", str(stopped)], capsys)
    flat = " ".join(text.split())
    assert code in (0, None) and f"the search stopped before its end (20 of 30 evaluations; `fedevo resume {stopped}`" \
        in flat and "front.csv holds the generations finished so far" in flat, err
    with open(stopped / ".lock", "a+") as lock:  # what a running search holds (fedevo.searching.run.LOCK)
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert "The search is still running" in front_html(data)
        code, text, err = cli(["front", str(stopped)], capsys)
        assert "a search is writing this run (20 of 30 evaluations so far)" in " ".join(text.split()), err


def test_an_objectives_unit_is_on_its_axes_and_in_the_hover(tmp_path):
    """A run's objective beyond error, comm and ε is drawn with its unit, as the header names it ("model size Ω
    (parameters)"; a user's "latency (ms)"): the 3D view's, the projections' and importance.html's axes said "model size Ω" alone and
    the hover "model size Ω 1.2k", so a reader could not tell milliseconds from seconds."""
    import fedevo
    from fedevo.problem import problems_dir
    from fedevo.viz.importance import figure_slices
    from tests.searching.search_fakes import fake_evaluate

    prob = tmp_path / "p.toml"
    prob.write_text('objectives = ["error", "model_size", "eps"]\n' + (problems_dir() / "digits_mlp.toml").read_text())
    run = fedevo.search(str(prob), pop=6, gen=1, workers=0, seed=1, out=tmp_path / "run", evaluator=fake_evaluate,
                        page=False)
    m = Model(load_run(run.path))
    assert m.keys == ("error", "model_size", "eps")
    proj = figure_projections(m)
    titles = [getattr(proj.layout, k).title.text for k in proj.layout.to_plotly_json() if k[1:5] == "axis"]
    assert "model size Ω (parameters)" in titles and "model size Ω" not in titles
    assert figure_3d(m).layout.scene.yaxis.title.text == "model size Ω (parameters)"
    r = m.rows[0]
    assert f"model size Ω {num(r['model_size'])} parameters" in m.hover(r, True)
    slices = figure_slices(m.data)  # importance.html's slices: the objective's axes too
    assert "model size Ω (parameters)" in {getattr(slices.layout, k).title.text
                                           for k in slices.layout.to_plotly_json() if k.startswith("yaxis")}


def test_the_hypervolume_axis_title_of_five_objectives_fits_the_axis():
    """The hypervolume axis' title names the space it is measured in; with five objectives and their labels it was
    one line of 67 characters, cut at the axis' 280 px ("…, model size Ω, later"). Now it wraps between objectives."""
    from fedevo.viz.front_figures import figure_hypervolume

    space = "(error, log10 ε, worst-10 % client error, model size Ω, latency)"
    rows = [{"generation": 1, "front_size": 3, "hypervolume": 0.6, "evaluations": 6},
            {"generation": 2, "front_size": 4, "hypervolume": 0.7, "evaluations": 12}]
    title = figure_hypervolume(rows, space=space).layout.yaxis.title.text
    lines = title.split("<br>")
    assert max(len(x) for x in lines) <= 40, lines
    assert " ".join(lines[1:]) == f"in {space}"
    assert figure_hypervolume(rows).layout.yaxis.title.text == "hypervolume (normalised)<br>in (error, comm, log10 ε)"


@pytest.fixture(scope="module")
def five_run(tmp_path_factory):
    return five_objective_run(tmp_path_factory)


def test_the_parallel_axes_and_the_chosen_line_carry_units(five_run):
    """Five objectives, a user's latency (ms) and model size Ω (parameters) among them: the parallel coordinates
    titled them "latency" and "model size Ω" (every other view "latency (ms)"), and the page's "Chosen:" line wrote
    "latency 3.59, comm 797" (the script's objectives had comm's unit as the registry writes it, no page's). Now
    each axis carries its unit as elsewhere, and the script gets the unit the page writes after a value."""
    m = Model(load_run(five_run))
    labels = [d.label for d in figure_parallel(m).data[0].dimensions]
    assert "latency (ms)" in labels and "model size Ω (parameters)" in labels, labels
    assert "comm (params/round/client slot)" in labels and "error" in labels
    assert {o["name"]: o["unit"] for o in m.objectives()} == {
        "error": "", "comm": "params/round/client slot", "eps": "", "model_size": "parameters", "latency": "ms"}


def _row_domains(fig) -> list[tuple[float, float]]:
    lay = fig.layout.to_plotly_json()
    return sorted({tuple(lay[k]["domain"]) for k in lay if re.fullmatch(r"yaxis\d*", k)}, reverse=True)


def test_the_projection_rows_of_five_objectives_are_whole_and_close(five_run, fake_run):
    """Five objectives draw ten projections in four rows; the rows stood 16 % of the figure apart: 250 px of gap
    around panels 200 px high, and the one colour bar ran down all four rows. Now every panel is as high as one
    row of three objectives draws it (346 px), the rows 100 px apart, the colour bar beside the first row as long
    as with one row (and set on the trace that shows it alone); a run of three objectives is drawn as before."""
    from fedevo.viz.front_figures import PANEL_H, ROW_GAP

    for run, n_rows in ((five_run, 4), (fake_run, 1)):
        fig = figure_projections(Model(load_run(run)))
        m = fig.layout.margin
        plot_h = fig.layout.height - m.t - m.b
        rows = _row_domains(fig)
        assert len(rows) == n_rows, rows
        assert all(round((b - a) * plot_h) == PANEL_H for a, b in rows), (rows, plot_h)
        assert all(round((hi[0] - lo[1]) * plot_h) == ROW_GAP for hi, lo in zip(rows, rows[1:])), (rows, plot_h)
        bars = [t.marker.colorbar for t in fig.data if t.meta == "evaluations" and t.marker.colorbar.len is not None]
        assert len(bars) == 1 and [t.marker.showscale for t in fig.data if t.meta == "evaluations"].count(True) == 1
        assert round(bars[0].len * plot_h) == round(0.6 * PANEL_H) and bars[0].yanchor == "top"
        assert round((1 - bars[0].y) * plot_h) == round(0.2 * PANEL_H)
    assert fig.layout.height == 470  # three objectives: one row, as before


def test_front_shows_no_omega_for_a_diverged_pick(tmp_path_factory, capsys):
    """A diverged evaluation measured nothing: `fedevo front --pick ID` showed its Ω as 0."""
    from tests.viz.fedevo_runs import chance_run

    run = chance_run(tmp_path_factory)
    bad = next(r for r in csv_rows(run / "evaluations.csv") if r["status"] == "diverged")
    code, out, err = cli(["front", str(run), "--pick", bad["id"]], capsys)
    assert code in (0, None), err
    row = next(ln for ln in out.splitlines() if ln.strip("│ ").startswith(bad["id"] + " "))
    cells = [c.strip() for c in row.split("│")]
    assert "diverged" in row and "0" not in cells[9:10] and "–" in cells[9], cells


def test_each_hover_text_is_written_once_in_the_page(tmp_path_factory):
    """The 3D view and every projection showed the same hover text per point, each trace with its own copy: most
    of the page at thousands of evaluations (5.3 MB at 2,000 of 3 objectives, 14.6 MB at 2,000 of 5). The page
    holds each once (window.FEDEVO.hover, by id), the traces their ids, and its script fills the text in."""
    import json

    run = five_objective_run(tmp_path_factory)
    data = load_run(run)
    m = Model(data)
    page = front_html(data)
    assert len(m.rows) > 5 and len(m.pairs) == 10
    for r, text in zip(m.rows, m.text):
        assert page.count(json.dumps(text, ensure_ascii=False).replace("</", "<\\/")) == 1, r["id"]
    figs = json.JSONDecoder().raw_decode(page[page.index("window.FEDEVO_FIGS = ") + 21:])[0]
    traces = [t for f in figs.values() for t in f["data"] if t.get("meta") in ("evaluations", "mark")]
    assert traces and all("text" not in t and isinstance(t.get("customdata", []), list) for t in traces)
    hover = json.JSONDecoder().raw_decode(page[page.index("window.FEDEVO = ") + 16:])[0]["hover"]
    assert {int(k) for k in hover} == {r["id"] for r in m.rows}
    assert "t.customdata.map(i => hover[i])" in page


def test_front_table_sorts_by_the_first_objective_and_shows_model_size_once(tmp_path, capsys):
    """`fedevo front` sorts by the run's first objective by default, as the search's closing table does (it said
    "sorted by error" on a run whose objectives began with another), and a run searching model_size has one Ω
    column, the objective's (a second "Ω" column repeated it)."""
    import fedevo
    from fedevo.problem import problems_dir
    from tests.searching.search_fakes import fake_evaluate

    prob = tmp_path / "p.toml"
    prob.write_text('objectives = ["model_size", "error", "eps"]\n' + (problems_dir() / "digits_mlp.toml").read_text())
    run = fedevo.search(str(prob), pop=8, gen=1, workers=0, seed=2, out=tmp_path / "run", evaluator=fake_evaluate,
                        page=False)
    code, out, err = cli(["front", str(run.path)], capsys)
    assert code == 0, err
    assert "(sorted by model_size)" in out
    header = next(line for line in out.splitlines() if "│ id" in line or line.lstrip("┃ ").startswith("id"))
    assert header.count("Ω") == 1, header
    sizes = {int(r["id"]): float(r["model_size"]) for r in csv_rows(run.path / "front.csv")}
    shown = [int(m.group(1)) for m in re.finditer(r"^│\s*(\d+)\s*│", out, flags=re.M)]
    assert sorted(shown) == sorted(sizes) and len(shown) > 1
    assert [sizes[i] for i in shown] == sorted(sizes[i] for i in shown)
    code, out, _ = cli(["front", str(run.path), "--sort", "error"], capsys)
    assert code == 0 and "(sorted by error)" in out


def _resolved(v, arrays):
    """The page's data as its script resolves it (fedevo.viz.shared_arrays.RESOLVE_JS)."""
    if isinstance(v, list):
        return [_resolved(x, arrays) for x in v]
    if not isinstance(v, dict):
        return v
    if list(v) == ["$a"]:
        return list(arrays[v["$a"]])
    if list(v) == ["$rows"]:
        keys, cols = _resolved(v["$rows"][0], arrays), [_resolved(c, arrays) for c in v["$rows"][1]]
        return [dict(zip(keys, vals)) for vals in zip(*cols)]
    return {k: (x if k == "customdata" else _resolved(x, arrays)) for k, x in v.items()}


def test_each_array_is_written_once_in_the_page(tmp_path_factory):
    """The page held the same arrays many times: a dominated point's objective in the 3D view and in every
    projection that shows it, its colour in every trace, each column of the parallel coordinates again among the
    colour choices, each row's keys once per row: 14 MB at 10,000 evaluations of three objectives. Each array is now
    written once (window.FEDEVO_ARRAYS) and the rows as columns; what the page's script resolves is what it held."""
    import json
    from collections import Counter

    from fedevo.viz.front import SHARED_TEXT, is_complete, script_data, stamp_name, stamp_of
    from fedevo.viz.html import figure_deferred
    from fedevo.viz.front_figures import figure_hypervolume
    from fedevo.viz.front_model import hv_space
    from fedevo.viz.shared_arrays import MIN_LEN

    run = five_objective_run(tmp_path_factory)
    data = load_run(run)
    m = Model(data)
    page = front_html(data)
    dec = json.JSONDecoder()
    fed = dec.raw_decode(page[page.index("window.FEDEVO = ") + 16:])[0]
    figs = dec.raw_decode(page[page.index("window.FEDEVO_FIGS = ") + 21:])[0]
    arrays = dec.raw_decode(page[page.index("window.FEDEVO_ARRAYS = ") + 23:])[0]
    seen = Counter()

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k != "customdata":
                    walk(x)
        elif isinstance(v, list):
            if len(v) >= MIN_LEN and all(x is None or isinstance(x, (int, float, str)) for x in v):
                seen[json.dumps(v)] += 1
            else:
                for x in v:
                    walk(x)

    walk([fed, figs, arrays])
    assert len(m.rows) >= MIN_LEN and seen and max(seen.values()) == 1, seen.most_common(1)[0][1]
    # nothing lost: the resolved data and figures are those written before
    want = script_data(m, stamp_of(data), is_complete(data), stamp_name("front.html"))
    got = _resolved(fed, arrays)
    assert json.dumps(got, sort_keys=True) == json.dumps(json.loads(json.dumps(want)), sort_keys=True)
    space, _ = hv_space(data)
    for div, fig in (("front3d", figure_3d(m)), ("projections", figure_projections(m)),
                     ("parallel", figure_parallel(m)), ("hypervolume", figure_hypervolume(data.hypervolume(), space=space))):
        spec = json.loads(figure_deferred(fig, div, shared_text=SHARED_TEXT)[1])
        assert json.dumps(_resolved(figs[div], arrays), sort_keys=True) == json.dumps(spec, sort_keys=True), div


def _always_fails(problem, params, *, seed, rounds=None, data_dir=None, **_):
    from fedevo.result import EvaluationResult

    return EvaluationResult(error=math.nan, comm=math.nan, eps=math.nan, eps_paper=math.nan, accuracy_global=math.nan,
                            omega=0, status="failed", message="RuntimeError: training step failed on device")


def test_a_run_where_every_evaluation_failed_says_so_and_nothing_else(tmp_path_factory):
    """No ok evaluation: the page says nothing was plotted, lists the failures, and claims nothing of the ε values or
    the knee it does not have (it said 'ε (paper) ... is ∞ for every evaluation (no privacy)' of a run under central
    trust, and that no Pareto solution was better than chance, of an empty Pareto set)."""
    from tests.viz.fedevo_runs import _make

    run_dir = _make(tmp_path_factory.getbasetemp(), "all_failed_run", problem="digits_mlp", evaluator=_always_fails,
                    pop=4, gen=1, optimizer="random")
    html = front_html(load_run(run_dir))
    assert "No evaluation finished with status ok: nothing to plot." in html
    assert "Not plotted: failed or diverged (4)" in html and "training step failed on device" in html
    assert "no privacy" not in html.split("<h2>")[0].replace("ε = ∞ (no privacy) adds nothing", "")
    assert "is left out of the views" not in html
    assert "The Pareto set is empty: no knee is marked." in html
    assert "better than chance: no knee" not in html


def test_points_outside_the_constraints_are_said_so_not_dominated(tmp_path_factory):
    """A run with [constraints]: an ok evaluation outside them is not on the front whether or not another dominates
    it; its hover said 'dominated' (id 15 of a digits run at error 0.38, ε 2.9 under eps <= 1: nothing dominated
    it). Now its hover, the legend and the parallel Pareto axis say so."""
    from fedevo.problem import problems_dir
    from fedevo.searching.front_math import non_dominated
    from tests.searching.search_fakes import fake_evaluate
    from tests.viz.fedevo_runs import _make

    base = tmp_path_factory.getbasetemp()
    problem = base / "digits_constrained.toml"
    problem.write_text((problems_dir() / "digits_mlp.toml").read_text()
                       .replace('name = "digits_mlp"', 'name = "digits_constrained"', 1) + "\n[constraints]\neps = 8\n")
    run_dir = _make(base, "constrained_run", problem=str(problem), evaluator=fake_evaluate, gen=3)
    data, m = parts_of(run_dir)
    rows = {r["id"]: r for r in m.rows}
    outside = {i for i, r in rows.items() if r["eps"] > 8}
    assert outside and outside.isdisjoint(data.front_ids)
    pts = [[r["error"], r["comm"], r["eps"]] for r in m.rows]
    undominated = {m.rows[i]["id"] for i in non_dominated(pts)}
    assert outside & undominated  # the case of the bug: off the front only because of the constraint
    for r, text in zip(m.rows, m.text):
        head = text.split("<br>")[0]
        if r["id"] in outside:
            assert "outside the constraints (eps ≤ 8)" in head and "dominated" not in head, head
        elif r["id"] not in data.front_ids:
            assert "dominated" in head and "outside" not in head, head
    names = {t.name for t in figure_3d(m).data} | {t.name for t in figure_projections(m).data}
    assert "dominated or outside the constraints" in names and "dominated" not in names
    pareto = next(d for d in figure_parallel(m).data[0].dimensions if d.label == "Pareto")
    assert list(pareto.ticktext) == ["off front", "front"]


@pytest.mark.parametrize("top", [41.0, 9.0, 0.2, 1.0, 700.0, 3.3e4])
def test_the_infinity_label_stands_clear_of_the_highest_label(top):
    """ε = ∞ (no privacy) is drawn at a cap labelled ∞, at least × 3 (0.48 decade) beyond the largest value AND
    the axis' highest label: at 3 × 41 = 124 it stood 0.09 decade above the label 100, the two written over each other
    (a run mixing mechanism none and update: every view of ε)."""
    from fedevo.viz.axes import make_column

    rows = [{"eps": v} for v in (0.012, top / 7, top, math.inf)]
    c = make_column(rows, "eps", "ε", eps_log=True)
    vals, labels = c.ticks()
    assert labels[-1] == "∞" and vals[-1] == pytest.approx(math.log10(c.cap))
    assert vals[-1] - max(vals[:-1]) >= math.log10(3) - 1e-9, (vals, labels)
    assert c.cap >= 3 * top
    lo, hi = c.log_range()
    assert hi >= math.log10(c.cap)


def test_a_projection_marks_x_where_one_of_its_own_axes_is_capped(fake_run):
    """In each 2D panel a point is drawn × where it stands at the ∞ cap of one of that panel's axes (as compare.html
    does): the panels took the 3D view's axes instead, so error–comm drew ε = ∞ points as × though neither of its
    axes is ε, and a fourth or fifth objective's missing value (a user's latency whose function raised) stood at its
    cap labelled ∞ as a plain diamond."""
    data, m = parts_of(fake_run)
    pos = {r["id"]: i for i, r in enumerate(m.rows)}
    axes = {("x" if n == 1 else f"x{n}"): pair for n, pair in enumerate(m.pairs, start=1)}  # panel -> its axes
    seen = set()
    for t in evaluation_traces(figure_projections(m)):
        a, b = axes[t.xaxis or "x"]
        for rid, sym in zip(t.customdata, t.marker.symbol):
            want = m.cols[a].capped[pos[rid]] or m.cols[b].capped[pos[rid]]
            assert (sym == "x") == want, (a, b, rid, sym)
            seen.add((a, b, want))
    assert ("error", "comm", False) in seen and ("error", "eps", True) in seen
    assert ("error", "comm", True) not in seen  # the run's ε = ∞ points are plain in error–comm


def test_a_missing_value_is_drawn_at_a_cap_labelled_missing_not_infinity():
    """A user's objective whose function raised (no value: None) is drawn at the cap of its axis, which said '∞'
    and 'non-finite' (latency ∞ ms: infinitely slow, where it was not measured). The cap is labelled 'missing' in
    the ticks, the note and the parallel axis' title and meta (the page's script labels the cap from it); ε = ∞
    keeps ∞."""
    from fedevo.viz.axes import make_column

    lat = make_column([{"latency": v} for v in (3.0, 9.5, None, float("nan"), 14.0)], "latency", "latency")
    vals, labels = lat.ticks()
    assert labels[-1] == "missing" and "∞" not in labels and vals[-1] == lat.cap
    assert "2 points with latency missing (not measured) drawn at the cap" in lat.note
    assert "labelled missing" in lat.note
    eps = make_column([{"eps": v} for v in (0.5, 3.0, math.inf, None)], "eps", "ε", eps_log=True)
    assert eps.ticks()[1][-1] == "∞" and "labelled ∞" in eps.note
    inf = make_column([{"latency": v} for v in (3.0, math.inf, 14.0)], "latency", "latency")
    assert inf.ticks()[1][-1] == "∞" and "1 point with latency ∞ drawn" in inf.note


def test_the_parallel_axis_of_a_missing_user_objective_says_missing(tmp_path_factory):
    from fedevo.problem import problems_dir
    from fedevo.viz.front_figures import parallel_meta
    from tests.searching.search_fakes import fake_evaluate
    from tests.viz.fedevo_runs import _make

    base = tmp_path_factory.getbasetemp()
    (base / "latency_unread.py").write_text(
        "def latency(result):\n    if result.omega % 3 == 0:\n        raise RuntimeError('profiler unavailable')\n"
        "    return 2.0 + result.omega / 500.0\n")
    problem = base / "digits_unread.toml"
    problem.write_text('objectives = ["error", "comm", "eps", "latency"]\n'
                       + (problems_dir() / "digits_mlp.toml").read_text().replace('name = "digits_mlp"',
                                                                                 'name = "digits_unread"', 1)
                       + '\n[objective.latency]\nread = "python:latency_unread.py:latency"\nworst = 1e6\nunit = "ms"\n')
    data, m = parts_of(_make(base, "unread_run", problem=str(problem), evaluator=fake_evaluate, gen=2))
    assert any(m.cols["latency"].capped) and not all(m.cols["latency"].capped)
    meta = next(p for p in parallel_meta(m) if p["key"] == "latency")
    assert meta["cap_label"] == "missing"
    title = next(d.label for d in figure_parallel(m).data[0].dimensions if d.label.startswith("latency"))
    assert title.endswith("(missing on top)"), title
    page = front_html(data)
    assert "labelled missing" in page
    # latency, a fourth objective, is drawn in the 2D projections only: its note named a ■ in 3D too
    lat = next(n for n in re.findall(r'<p class="note">([^<]*)</p>', page) if "with latency missing" in n)
    assert "(marked ×; the hover text" in lat and "3D" not in lat, lat


def test_a_run_of_one_evaluation_says_one_evaluation(tmp_path_factory):
    """'1 evaluation (1 ok, none failed)' in front.html's header and importance.html's ('1 evaluations' before)."""
    from fedevo.viz.importance import importance_html
    from tests.viz.fedevo_runs import one_run

    data = load_run(one_run(tmp_path_factory))
    assert "· 1 evaluation (1 ok, none failed)" in front_html(data)
    assert "· 1 evaluation, 1 ok" in importance_html(data)
