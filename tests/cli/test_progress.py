"""The search's plain progress lines (output not a terminal): their clock."""

import io
import re
import types

from rich.console import Console

from fedevo.viz import progress


def test_the_plain_lines_clock_never_goes_back(monkeypatch):
    """Its clock started when the display was made, before the set-up (native kernels built: seconds), while the
    last line showed the summary's wall_s, timed from the search's start: 12 s, then 10 s; on Ray the summary's
    also counts Ray's start: 4 s, then 10 s two seconds later (the 2026-11-27 audits). Now every line counts
    from the evaluation's start (on_start), the last too."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=200))
    now[0] += 5.0  # the set-up before the search starts
    rep.on_start(n_gen=3, generation=1, total=6, done=0)
    for g, t in ((2, 4.0), (3, 4.0)):
        now[0] += t
        rep.on_generation_start(g)
    now[0] += 4.0
    rep.on_finish(types.SimpleNamespace(wall_s=19.0))  # run()'s clock: Ray's start too
    seconds = [int(s) for s in re.findall(r"· (\d+) s(?:, ETA \S+)?$", buf.getvalue(), re.M)]
    assert seconds == [4, 8, 12], buf.getvalue()


def _live(monkeypatch):
    """A reporter on a terminal whose clock (and rich's) is `now[0]`."""
    now = [1000.0]
    clock = lambda: now[0]  # noqa: E731
    monkeypatch.setattr(progress.time, "monotonic", clock)
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=True, width=400, get_time=clock))
    return rep, buf, now


def _eta_shown(rep, buf) -> str:
    rep._progress.refresh()
    return re.findall(r"ETA ([-\d:]+)", re.sub(r"\x1b\[[\d;]*m", "", buf.getvalue()))[-1]


def _row(wall_s):
    return {"status": "ok", "error": 0.2, "comm": 100.0, "eps": 1.0, "wall_s": wall_s}


def test_the_eta_of_evaluations_longer_than_30_s(monkeypatch):
    """rich's own ETA took the rate of the last 30 s: with evaluations of a minute (the user `gp` is for) it held
    one completion at most and showed -:--:-- for the whole search. Now: the evaluations left at the mean interval
    of the last completions, counted down while one runs."""
    rep, buf, now = _live(monkeypatch)
    rep.on_start(n_gen=10, generation=1, total=10, done=0)
    try:
        assert _eta_shown(rep, buf) == "-:--:--"  # nothing finished yet: nothing to go by
        for _ in range(3):
            now[0] += 60.0
            rep.on_evaluation(_row(58.0))
        assert _eta_shown(rep, buf) == "0:07:00"  # 7 left at 60 s
        now[0] += 20.0
        assert _eta_shown(rep, buf) == "0:06:40"  # the running one 20 s in
        now[0] += 100.0  # it takes longer than the others: the ETA waits at the 6 after it
        assert _eta_shown(rep, buf) == "0:06:00"
        assert "last eval 58 s" in buf.getvalue()
    finally:
        rep.on_finish(None)


def test_the_eta_of_a_time_budget(monkeypatch):
    """--time-budget 25 alone (1000 batches planned): the ETA said 1:56:13, the 998 evaluations left at the
    rate so far. Now never past what is left of the time budget (from a resume: of what it left)."""
    rep, buf, now = _live(monkeypatch)
    rep.on_start(n_gen=1000, generation=1, total=1000, done=0, time_left=25.0)
    try:
        assert _eta_shown(rep, buf) == "0:00:25"
        now[0] += 7.0
        rep.on_evaluation(_row(7.0))
        assert _eta_shown(rep, buf) == "0:00:18"
    finally:
        rep.on_finish(None)


def _shown(rep, buf) -> str:
    rep._progress.refresh()
    return re.sub(r"\x1b\[[\d;?]*[a-zA-Z]", "", buf.getvalue()).replace("\r", "\n").splitlines()[-1]


def test_a_time_budget_alone_counts_time_not_the_open_cap(monkeypatch):
    """--time-budget alone plans 1000 batches nobody asked for: the bar said `gen 1/1000 ... 0/12000 evaluated`
    and never moved. Now, while the time budget is what ends the search first, the bar is its seconds and the
    count has no total; when the planned evaluations end first (--budget), the count and its total again."""
    rep, buf, now = _live(monkeypatch)
    rep.on_start(n_gen=1000, generation=1, total=12000, done=0, time_left=20.0)
    try:
        line = _shown(rep, buf)
        assert "0 evaluated" in line and "/12000" not in line and "gen 1/1000" not in line, line
        assert rep.fraction() == 0.0
        now[0] += 5.0
        rep.on_evaluation(_row(5.0))
        line = _shown(rep, buf)
        assert "1 evaluated" in line and "/12000" not in line, line
        assert rep.fraction() == 0.25  # 5 s of 20
        now[0] += 5.0
        assert rep.fraction() == 0.5  # time moves the bar while an evaluation runs
    finally:
        rep.on_finish(None)

    rep, buf, now = _live(monkeypatch)
    rep.on_start(n_gen=2, generation=1, total=8, done=0, time_left=3600.0)  # --budget 8 --time-budget 3600
    try:
        for _ in range(2):
            now[0] += 1.0
            rep.on_evaluation(_row(1.0))
        line = _shown(rep, buf)
        assert "gen 1/2" in line and "2/8 evaluated" in line, line
        assert rep.fraction() == 0.25
    finally:
        rep.on_finish(None)



def test_past_a_derived_count_the_line_shows_what_ran_not_more_than_all(monkeypatch):
    """A --gen derived from the other budgets no longer ends the search (budgets.gen_derived): a short batch makes a
    --budget search run a batch more, a --patience-only one runs past OPEN_GEN; 'gen 5/4', '1001/1000' said more
    than all had run."""
    rep, buf, now = _live(monkeypatch)
    rep.on_start(n_gen=4, generation=4, total=8, done=6, time_left=None)
    try:
        assert "gen 4/4" in _shown(rep, buf)
        rep.on_generation_start(5)
        for _ in range(3):
            now[0] += 1.0
            rep.on_evaluation(_row(1.0))
        line = _shown(rep, buf)
        assert "gen 5" in line and "gen 5/4" not in line and "9 evaluated" in line and "9/8" not in line, line
    finally:
        rep.on_finish(None)


def test_the_plain_line_of_a_time_budget_alone(monkeypatch):
    """The same without a terminal: `gen 2: 24 evaluated`, not `gen 2/1000: 24/12000 evaluated`."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=200))
    rep.on_start(n_gen=1000, generation=1, total=12000, done=0, time_left=60.0)
    for _ in range(12):
        now[0] += 1.0
        rep.on_evaluation(_row(1.0))
    rep.on_generation_start(2)
    assert re.search(r"^gen 1: 12 evaluated ·", buf.getvalue(), re.M), buf.getvalue()
    assert "/1000" not in buf.getvalue() and "/12000" not in buf.getvalue()


def test_a_patience_alone_shows_no_total_and_no_eta_of_the_open_cap(monkeypatch):
    """`fedevo search --optimizer gp --patience 3`: only the patience ends the search, its batches are the open cap
    OPEN_GEN, and the line said `gen 19/1000: 19/1000 evaluated … ETA 0:17:18` (1,000 evaluations at the recent
    rate) for a search that ended at 19 evaluations in 11 s: with evaluations of minutes, days. Now it counts
    without a total and gives no ETA (the end is the patience's); with a time budget besides, the time's."""
    from fedevo.searching.budgets import OPEN_GEN

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=300))
    rep.on_start(n_gen=OPEN_GEN, generation=1, total=OPEN_GEN, done=0, time_left=None)
    for g in (2, 3, 4):
        now[0] += 1.0
        rep.on_evaluation(_row(1.0))
        rep.on_generation_start(g)
    assert rep.eta() is None
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("gen 3: 3 evaluated · ") and lines[-1].endswith(", ETA -:--:--"), lines
    assert f"/{OPEN_GEN}" not in buf.getvalue(), buf.getvalue()

    rep.on_start(n_gen=OPEN_GEN, generation=1, total=OPEN_GEN, done=0, time_left=60.0)  # --patience, --time-budget
    now[0] += 10.0
    rep.on_evaluation(_row(1.0))
    assert rep.eta() == 50.0


def test_a_search_shows_its_seconds_and_a_settled_hypervolume(tmp_path, monkeypatch):
    """A model-based optimiser's batches of one: the display showed HV 1.33 after the first evaluation, then
    0.131 after the second (the normalisation still moving: hypervolume.csv itself then says 0.143 for the first);
    now the hypervolume appears once it is fixed (4 evaluations for 3 objectives). Each line also says the last
    evaluation's seconds and the optimiser's seconds per proposal (batches.csv), and the time budget's ETA came
    from the search (time_left)."""
    import fedevo
    from fedevo.searching.callbacks import SearchCallback

    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=400))

    class Seen(SearchCallback):
        def on_start(self, *, n_gen, generation, total, done, rows=(), runner="", run_dir=None, eps_key="eps"):
            self.started = True  # a callback written before `objectives` and `time_left`: still called

    class Told(SearchCallback):
        def on_start(self, *, time_left=None, **kw):
            self.time_left = time_left

    seen, told = Seen(), Told()
    fedevo.search("digits_mlp", optimizer="random", pop=1, budget=6, time_budget=3600.0, rounds=1, workers=0,
                  seed=0, out="r", page=False, callbacks=[rep, seen, told])
    lines = [x for x in buf.getvalue().splitlines() if x.startswith("gen ")]
    assert len(lines) == 6, buf.getvalue()
    ok = [r for r in fedevo.open_run("r").evaluations if r.ok]
    assert len(ok) == 6  # every one measured: the 4th evaluation fixes the normalisation
    assert ["HV" in x for x in lines] == [False, False, False, True, True, True], lines  # after 1, 2, ... 6
    assert all("last eval" in x and "random" in x and "s/proposal" in x for x in lines), lines
    assert seen.started
    assert 3000 < told.time_left <= 3600  # an hour's time budget, all but the set-up's seconds left
    assert re.search(r"ETA 0:00:\d\d$", lines[0]), lines[0]  # the evaluations' rate ends it sooner


def test_the_closing_lines_say_where_the_time_went(tmp_path):
    """The closing line said the front, the counts and this process's seconds; how long an evaluation took and what
    the optimiser cost per proposal (what decides whether `gp` pays) were in batches.csv only, and a resumed search's
    seconds of search in all (stop.json's search_s, what --time-budget counts) nowhere."""
    import json

    from tests.helpers import cli
    from tests.searching.search_helpers import FAKE, toy_problem_file

    out = tmp_path / "R"
    r = cli("search", "--problem", toy_problem_file(tmp_path), "--optimizer", "random", "--pop", 2, "--budget", 5,
            "--workers", 0, "--quiet", "--evaluator", FAKE, "--out", out)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("search finished") and lines[-1].startswith("results in "), r.stdout
    (timing,) = [x for x in lines if x.startswith("seconds: ")]
    search_s = json.loads((out / "stop.json").read_text())["search_s"]
    assert re.fullmatch(r"seconds: evaluations \S+ s median, \S+ s max · random \S+ s per proposal \(\S+ s in the "
                        rf"last batch; batches.csv\) · {search_s:.0f} s of search in all", timing), timing


def test_the_line_names_each_objective_by_its_label_and_short_unit(monkeypatch):
    """A search of five objectives named them by key, without units: `best error 0.2 · worst_client_error 0.4 ·
    model_size 1.2k · latency 12.5 · ε 1`. Now by label (ε for the search's ε), a short unit after its value
    (`latency 12.5 ms`; a unit of words, as comm's, is left to the pages), a value still missing without one."""
    from fedevo.objectives import Objective, ObjectiveSet, get

    latency = Objective(name="latency", label="latency", unit="ms", worst=1e4, read=lambda r: None)
    objs = ObjectiveSet((get("error"), get("worst_client_error"), get("model_size"), latency, get("eps")))
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=400))
    rep.on_start(n_gen=2, generation=1, total=4, done=0, objectives=objs)
    rep.on_evaluation({**_row(1.0), "worst_client_error": 0.4, "model_size": 1234.0})  # no latency yet
    rep.on_generation_start(2)
    rep.on_evaluation({**_row(1.0), "worst_client_error": 0.5, "model_size": 999.0, "latency": 12.5})
    rep.on_finish(None)
    first, last = [x for x in buf.getvalue().splitlines() if x.startswith("gen ")]
    assert "best error 0.2 · worst-10 % client error 0.4 · model size Ω 1.23k · latency – · ε 1 ·" in first, first
    assert "best error 0.2 · worst-10 % client error 0.4 · model size Ω 999 · latency 12.5 ms · ε 1 ·" in last, last
    assert "worst_client_error" not in buf.getvalue() and "model_size" not in buf.getvalue()


def test_an_objective_not_read_is_said_at_its_first_evaluation(monkeypatch):
    """An objective whose function fails showed only `latency –` until the closing lines, hours later for
    evaluations of minutes: its first unread value is said at once, once per objective."""
    from fedevo.objectives import Objective, ObjectiveSet

    objs = ObjectiveSet.of(["error", "comm", "eps", Objective(name="latency", label="latency", read=lambda r: None,
                                                               worst=1e4, unit="ms")])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=300))
    rep.on_start(n_gen=1, generation=1, total=3, done=0, objectives=objs)
    rep.on_evaluation({**_row(1.0), "id": 0, "latency": 3.0, "message": ""})
    assert "not read" not in buf.getvalue()
    for i in (1, 2):
        rep.on_evaluation({**_row(1.0), "id": i, "latency": None,
                           "message": f"objective latency: TypeError: unsupported operand {i}"})
    lines = [line for line in buf.getvalue().splitlines() if "not read" in line]
    assert lines == ["objective latency: not read in evaluation 1 (TypeError: unsupported operand 1); its worst "
                     "value stands in (the closing lines count every such evaluation)"], buf.getvalue()


def test_one_reporter_serving_two_searches_starts_each_afresh(monkeypatch):
    """A notebook passes one display to two searches: the second showed the first's bests, failures and settled
    hypervolume (HV 1.33 after its first evaluation, 0.131 after its second: what the settling hides)."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=300))
    rep.on_start(n_gen=2, generation=1, total=4, done=0)
    rep.on_evaluation({**_row(1.0), "error": 0.1})
    rep.on_evaluation({"status": "failed", "wall_s": 1.0})
    rep._settled = True  # (as after four evaluations of three objectives)
    rep.on_generation_start(2)
    rep.on_finish(None)
    first = buf.getvalue()
    assert "0.1" in first and "failed" in first, first
    buf.truncate(0), buf.seek(0)
    rep.on_start(n_gen=2, generation=1, total=4, done=0)
    rep.on_evaluation({**_row(1.0), "error": 0.5})
    assert not rep._settled
    rep.on_generation_start(2)
    line = [x for x in buf.getvalue().splitlines() if x.startswith("gen 1")][0]
    assert "best error 0.5" in line and "failed" not in line, line


def test_the_first_failed_and_first_diverged_evaluation_are_said_with_their_message():
    """A failure showed only as `1 failed` on the line, its reason in evaluations.csv alone: with evaluations of
    minutes, a region of the genes that fails (an out-of-memory, a bug of the evaluator) went unexplained for
    hours. The first failed and the first diverged evaluation are said at once with their message's first line,
    once per status (a message's brackets are its own, not rich markup)."""
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=300))
    rep.on_start(n_gen=1, generation=1, total=5, done=0)
    rep.on_evaluation({**_row(1.0), "id": 0, "message": ""})
    assert "evaluation 0" not in buf.getvalue()
    for i in (1, 2):
        rep.on_evaluation({"status": "failed", "wall_s": 1.0, "id": i,
                           "message": f"RuntimeError: out of memory [a={i}]\nTraceback (most recent call last):"})
    for i in (3, 4):
        rep.on_evaluation({"status": "diverged", "wall_s": 1.0, "id": i, "message": f"loss NaN at round {i}"})
    lines = [line for line in buf.getvalue().splitlines() if line.startswith("evaluation ")]
    assert lines == ["evaluation 1 failed: RuntimeError: out of memory [a=1] (said once; each evaluation's message "
                     "in evaluations.csv)",
                     "evaluation 3 diverged: loss NaN at round 3 (said once; each evaluation's message in "
                     "evaluations.csv)"], buf.getvalue()
