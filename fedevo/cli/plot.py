"""`fedevo plot`, `fedevo front` and `fedevo retrain`: look at a search run and retrain its picks."""

from __future__ import annotations

import contextlib

import math
import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app, run_dir_path, stderr_is_terminal
from .stopped import stopped

_PICK_HELP = ("Solutions to retrain, comma-separated: an evaluation id (12), knee, lowest-NAME[:N] for any objective "
              "of the run (lowest-error, lowest-comm, lowest-eps, lowest-worst_client_error, ...), front, and filters "
              "on the Pareto set (eps<=8, comm<=2000, error<=0.2, NAME<=X). See docs/plots.md.")


@app.command()
def plot(
    run_dirs: list[Path] = typer.Argument(..., parser=run_dir_path, metavar="RUN_DIR", help="Run directory of `fedevo search`; several (with --out) to compare them."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where to write the page (default: RUN_DIR/front.html; required when comparing runs). An existing file that fedevo did not write is never replaced."),
    watch: bool = typer.Option(False, "--watch", help="Keep the page current while the search runs (the run checked every --interval seconds, the page rewritten when evaluations finished since; an open page reloads itself); returns when the run is complete. Ctrl-C stops."),
    interval: Optional[float] = typer.Option(None, "--interval", help="With --watch: seconds between checks of the run (default 2)."),
    plotly_js: str = typer.Option("shared", "--plotly-js", help="shared (default): plotly.js written once beside the pages (RUN_DIR/plotly-VERSION.min.js, 4.8 MB) and loaded from there by front.html and importance.html; embed: inside each page (one self-contained file)."),
    importance: bool = typer.Option(True, "--importance/--no-importance", help="Also write RUN_DIR/importance.html (NAME-importance.html beside --out NAME.html): which genes drive each objective, slices per gene, hypervolume."),
) -> None:
    """Write RUN_DIR/front.html: the evaluations and the Pareto front in 3D and 2D, parallel coordinates of
    genes and objectives with linked selection, hypervolume per generation (opens offline); and
    RUN_DIR/importance.html. With several runs of one problem, `fedevo plot RUN1 RUN2 --out compare.html` overlays
    their fronts and hypervolume histories (one shared reference point)."""
    from .. import api
    from ..viz.importance import importance_path

    runs = run_dirs if len(run_dirs) > 1 else run_dirs[0]
    kwargs = dict(out=out, plotly_js=plotly_js, interval=interval, importance=importance)
    if len(run_dirs) > 1:
        print(f"wrote {api.plot(runs, watch=watch, **kwargs)} ({len(run_dirs)} runs compared)")
        return
    if not watch:
        path = api.plot(runs, **kwargs)
        print(f"wrote {path}")
        if importance:
            print(f"wrote {importance_path(path)}")
        return

    def said(path, data):
        note = data.budget_note()
        print(f"wrote {path} ({len(data.rows)} evaluations, generation {data.generations_text()}"
              + (f" ({note})" if note else "") + f", front of {len(data.front)})", flush=True)

    api._plot_checks(runs, out, plotly_js, interval, watch, importance)  # one line and nothing else when wrong
    api.open_run(runs)
    print(f"watching {runs} (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        path = api.plot(runs, watch=True, on_write=said, **kwargs)
    except KeyboardInterrupt:
        raise typer.Exit(130)
    from ..viz.front import is_complete

    imp = f"; wrote {importance_path(path)}" if importance and path.exists() else ""
    data = api.open_run(runs).data
    print(f"{runs}: the run is complete{imp}" if is_complete(data) else
          f"{runs}: no search is writing the run ({_of(data)} evaluations){imp}; continue it with `fedevo resume {runs}`", file=sys.stderr)


def _console():
    """stdout console; output that is not a terminal (a file, a pipe) is not cut to 80 columns."""
    from rich.console import Console

    c = Console(highlight=False)
    return c if c.is_terminal else Console(highlight=False, width=200)


def _fmt(v) -> str:
    from ..viz.numfmt import num

    return num(v)


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None  # as `fedevo evaluate --json`: inf (no privacy) and NaN are null
    return v


def _pick_json(data, rows, marks) -> list[dict]:
    """The rows as `fedevo front --json` prints them: id, why, objectives, genes (full precision)."""
    out = []
    for r in rows:
        out.append({"id": r["id"], "generation": r["generation"], "picked_by": list(marks.get(r["id"], [])),
                    "on_front": r["id"] in data.front_ids, "status": r["status"],
                    "objectives": {k: _json_value(r[k]) for k in dict.fromkeys(
                        ("error", "comm", "eps", "eps_paper", *data.objectives.names))},
                    "accuracy_global": _json_value(r["accuracy_global"]), "omega": r["omega"],
                    "genes": {g: _json_value(r[g]) for g in data.gene_names},
                    "privacy": r.get("privacy") or {}})
    return out


@app.command()
def front(
    run_dir: Path = typer.Argument(..., parser=run_dir_path, metavar="RUN_DIR", help="Run directory of `fedevo search`."),
    sort: Optional[str] = typer.Option(None, "--sort", "-s", show_default="the run's first objective", help="Sort by an objective of the run: error, comm, eps (the ε the search minimised), or any other it has (e.g. worst_client_error); a maximised one best first."),
    pick: Optional[str] = typer.Option(None, "--pick", "-p", help="Show only what this pick selects (same grammar as `retrain --pick`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the solutions as a JSON list (id, picked_by, objectives, genes) instead of a table."),
) -> None:
    """Print the Pareto set of a run as a table, marking the knee (never one no better than chance) and the two
    lowest-error solutions."""
    from .. import api
    from ..errors import FedevoError

    data = api.open_run(run_dir).data
    objs = data.objectives
    sorts = dict.fromkeys(("error", "comm", "eps", *objs.names))
    sort = objs.names[0] if sort is None else sort  # as the search's closing table: its first objective first
    if sort not in sorts:
        raise FedevoError(f"--sort must be one of {', '.join(sorts)}, got {sort!r}")
    key = data.eps_key if sort == "eps" else sort
    extra = [o for o in objs if o.name not in ("error", "comm", "eps", "eps_paper")]  # columns of their own
    m = data.marks()
    if pick is not None:  # an empty --pick is a bad pick (one line), not no pick
        picks = data.pick(pick)
        rows = [p.row for p in picks]
        m = {p.id: list(p.reasons) for p in picks}
        title = f"{len(rows)} picked by {pick!r}"
    else:
        from ..picking import lowest

        high = key in objs.names and objs.by_name(key).maximize
        rows = lowest(data.front, key, len(data.front), objs, highest=high)
        title = f"Pareto set of {data.problem.name}: {len(rows)} of {len(data.rows)} evaluations (sorted by {sort})"
    if as_json:
        import json

        print(json.dumps(_pick_json(data, rows, m), indent=2, ensure_ascii=False))
        return
    from ..viz.front import run_state

    c = _console()
    state, note = run_state(data), data.budget_note()
    if rows:
        _front_table(c, data, rows, m, title, extra)
    else:  # no table: its header, caption and footers would speak of rows that are not there
        ended = state == "complete"  # ('none yet', 'so far' of a search that has ended said it might still come)
        c.print(f"Pareto set of {data.problem.name}: none{'' if ended else ' yet'} — {_why_no_front(data, ended)}",
                highlight=False, markup=False)
    bad = data.bad_rows
    if bad and pick is None:
        c.print(f"{len(bad)} evaluation(s) not ok (failed/diverged): ids {', '.join(str(r['id']) for r in bad[:20])}"
                f"{' …' if len(bad) > 20 else ''}")
    if state != "complete":  # the table holds every logged evaluation; front.csv the finished generations only
        more = f"; {note}" if note else ""
        c.print((f"a search is writing this run ({_of(data)} evaluations so far{more})" if state == "running" else
                 f"the search stopped before its end ({_of(data)} evaluations{more}; `fedevo resume {run_dir}` continues "
                 "it)") + "; front.csv holds the generations finished so far", highlight=False, markup=False)
    elif note:  # ended by another budget than --gen: 'generations 2/1000' would say nothing
        c.print(f"generations {data.generations_text()} ({note})", highlight=False, markup=False)
    if sources := data.sources_note():  # resumed by another fedevo: which rows each wrote
        c.print(sources, highlight=False, markup=False)


def _of(data) -> str:
    """'24 of 48' (evaluations), or '24' where no count bounds the search (only a time budget or patience)."""
    of = data.settings.planned_evaluations
    return f"{len(data.rows)}" if of is None else f"{len(data.rows)} of {of}"


def _why_no_front(data, ended: bool = False) -> str:
    """Why a run's Pareto set is empty, in words (`fedevo front` says so instead of an empty table); `ended`: its
    search has ended (no 'so far')."""
    from ..searching.front_math import is_full

    n = len(data.rows)
    ok = [r for r in data.rows if r["status"] == "ok"]
    full = [r for r in ok if is_full(r)]
    so_far = "" if ended else " so far"
    if not ok:
        return f"none of the {n} evaluation{'s' if n != 1 else ''}{so_far} finished with status ok (failed or diverged)"
    if not full:
        return f"none of the {len(ok)} ok evaluations{so_far} was trained for all the rounds (lower rungs only)"
    cons = ", ".join(f"{k} {'>=' if floor else '<='} {_fmt(v)}"
                     for k, floor, v in data.objectives.constraint_terms(data.constraints))
    return (f"none of the {len(full)} ok evaluations (of {n}) meets the problem's constraints ({cons})" if cons else
            f"none of the {len(full)} ok evaluations (of {n}) is on it")


def _front_table(c, data, rows, m, title, extra) -> None:
    """`fedevo front`'s table of `rows` (at least one), its caption and footers, and the genes table on a narrow
    console."""
    from rich.table import Table

    eps_name = "ε" if data.eps_key == "eps" else "ε paper (searched)"
    other_eps = "eps_paper" if data.eps_key == "eps" else "eps"
    wide = c.width >= 160
    chance = data.knee_bar
    knee_shown = any("knee" in reason for r in rows for reason in m.get(r["id"], []))
    inf_shown = any(isinstance(r.get(k), float) and r[k] == math.inf for r in rows for k in ("eps", "eps_paper"))
    notes = (["knee: pymoo high trade-off point on normalised objectives (fallback: closest to the ideal point)"
              + (f", among solutions clearly better than chance (error < {_fmt(chance)}: chance minus the test set's "
                 "99 % margin)" if chance else "")] if knee_shown else []) + (["ε = ∞: no privacy"] if inf_shown else [])
    t = Table(title=title, caption="; ".join(notes) or None)
    omega_col = [] if "model_size" in data.objectives.names else ["Ω"]  # the objective's own column says Ω then
    for col in ("id", "gen", "mark", "error", "global acc", "comm", eps_name,
                "ε paper" if data.eps_key == "eps" else "ε accountant", *omega_col, *(o.heading for o in extra)):
        t.add_column(col, justify="left" if col == "mark" else "right", no_wrap=True)
    if wide:
        t.add_column("genes", justify="left", ratio=1, min_width=30)
    genes = Table(title="genes", show_edge=True)
    genes.add_column("id", justify="right")
    for g in data.gene_names:
        genes.add_column(g, justify="right", no_wrap=True)
    for r in rows:
        mk = ", ".join(m.get(r["id"], []))
        if r["id"] not in data.front_ids:
            mk = (mk + ", " if mk else "") + ("dominated" if r["status"] == "ok" else r["status"])
        style = "bold" if "knee" in mk or "lowest-error" in mk else None
        omega = str(r["omega"]) if r["status"] == "ok" else "–"  # not measured (a diverged row's 0 is no Ω)
        cells = [str(r["id"]), str(r["generation"]), mk, _fmt(r["error"]), _fmt(r["accuracy_global"]),
                 _fmt(r["comm"]), _fmt(r[data.eps_key]), _fmt(r[other_eps]), *([omega] if omega_col else []),
                 *(_fmt(r[o.name]) for o in extra)]
        if wide:
            cells.append(" ".join(f"{g}={_fmt(r[g])}" for g in data.gene_names))
        t.add_row(*cells, style=style)
        genes.add_row(str(r["id"]), *(_fmt(r[g]) for g in data.gene_names), style=style)
    c.print(t)
    from ..viz.front import privacy_settings
    from ..viz.front_model import _fmt_any

    fixed, priv_keys, seen = privacy_settings(data)
    eps_shown = any(_fmt(r[k]) != "–" for r in rows for k in (data.eps_key, other_eps))  # none: a failed pick's
    if eps_shown and not data.problem.simulated:
        c.print(f"every ε above is as {seen['accountant']}", highlight=False, markup=False)
    elif eps_shown:
        c.print("every ε above holds under: " + " · ".join(f"{k} {_fmt_any(fixed[k])}" for k in priv_keys)
                + "".join(f" · {k} {seen[k]}" for k in ("neighbouring", "accountant") if k in seen), highlight=False)
    if not wide:
        c.print(genes)


@app.command()
def retrain(
    run_dir: Path = typer.Argument(..., parser=run_dir_path, metavar="RUN_DIR", help="Run directory of `fedevo search`."),
    pick: str = typer.Option("lowest-error:2,knee", "--pick", "-p", help=_PICK_HELP),
    rounds: int = typer.Option(150, "--rounds", help="Rounds of federated training per solution (paper: 150)."),
    workers: str = typer.Option("auto", "--workers", "-w", help="auto (default): in-process on a machine of 2 cores or fewer or for one training, else a local Ray with a worker per core (at most one per training); N: a local Ray with N workers; 0: in-process (its progress round by round)."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of every training, in 0..2**32-1 (default: the run's seed); the same seed gives the same numbers. The search evaluated each pick with a seed of its own (report.csv's search_seed): --pick ID --rounds R --seed S with its rounds and seed gives the search's numbers again."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root (default: the run's)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Report directory, new or empty (default: RUN_DIR/retrain, or retrain-2, ... if that exists)."),
    standard: Optional[str] = typer.Option(None, "--standard", help="JSON settings overriding the standard solution's, e.g. '{\"participation\": 1.0}' (seed 004's standard: C = 1)."),
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help="Ray GPUs reserved per training (each then trains on its GPU; 0: on the CPU)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Train on a running Ray cluster (HOST:PORT, e.g. from `ray start --head`), as `fedevo search --ray-address`."),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs reserved per training (its torch threads)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no table."),
) -> None:
    """Retrain picked Pareto solutions and the standard solution (dense, no privacy) for --rounds rounds;
    write RUN_DIR/retrain/report.csv, report.md, curves.html and results.json (seed 004's Tables 5–6; retrain-2/,
    ... when an earlier report exists: nothing is overwritten)."""
    from .. import api
    from ..errors import RetrainFailedError
    from ..problem import parse_params

    std = parse_params(standard, "--standard")
    kwargs = dict(rounds=rounds, workers=workers, seed=seed, data_dir=data_dir, out=out, standard=std,
                  gpus_per_task=gpus_per_task, ray_address=ray_address, cpus_per_task=cpus_per_task)
    failed = None
    try:
        if quiet or not stderr_is_terminal():  # no bar in a log or a pipe (it left an empty line there)
            report = api.retrain(run_dir, pick, **kwargs)
        else:
            report = _retrain_with_bar(run_dir, pick, kwargs, rounds)
    except RetrainFailedError as e:  # no pick gave a result (the API decides): the report first, then its line
        report, failed = e.report, e
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: the finished trainings are kept (fedevo.retrain_kept)
        raise stopped(e, "any training that finished is kept (the report is written once every training has "
                         "finished); run the same command again to continue") from None
    if not quiet:
        _print_report(report)
    print(f"wrote {report.out_dir}/ (report.csv, report.md, curves.html, results.json)")
    if failed is not None:
        raise failed


def _retrain_with_bar(run_dir, pick, kwargs, rounds):
    """api.retrain with a progress bar on stderr (from its first report: an error before it is one line, no bar)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .. import api

    with contextlib.ExitStack() as stack:
        shown = {}

        def progress(done, total, note):
            if not shown:
                shown["bar"] = bar = stack.enter_context(Progress(
                    TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"),
                    TimeElapsedColumn(), TextColumn("{task.fields[last]}"), console=Console(stderr=True),
                    transient=True))
                shown["task"] = bar.add_task(f"retraining, {rounds} rounds each", total=total, completed=done,
                                             last=note)  # its first frame already counts (it showed 0/?)
            shown["bar"].update(shown["task"], total=total, completed=done, last=note)

        return api.retrain(run_dir, pick, progress=progress, **kwargs)


def _print_report(report) -> None:
    from rich.markup import escape
    from rich.table import Table

    c = _console()
    narrow = c.width < 120
    cols = (("solution", "sol."), ("label", "picked by"), ("id", "id"), ("accuracy", "acc"),
            ("accuracy_global", "global acc"), ("accuracy_pct_of_standard", "acc % std"), ("comm", "comm"),
            ("comm_pct_of_standard", "comm % std"), ("eps", "ε"), ("eps_paper", "ε paper"))
    t = Table(title=f"{report.problem_name}: {report.rounds} rounds, seed {report.seed} (% std: of the standard "
                    "solution; all columns in report.md)")
    if narrow:
        cols = tuple(x for x in cols if x[0] not in ("accuracy_global", "eps_paper", "label"))
    cols += tuple((o.name, o.heading) for o in report.extra_objectives)  # the run's other objectives, retrained
    if any(report.results[s.key].status != "ok" for s in report.solutions):  # a training that diverged or failed
        cols = cols[:3] + (("status", "status"),) + cols[3:]
    for k, h in cols:
        t.add_column(h, justify="left" if k in ("solution", "label") else "right", no_wrap=k != "label")
    for s in report.solutions:
        cells = report.cells(s)
        t.add_row(*(escape(cells[k] or "–") for k, _ in cols), style="dim" if s.is_standard else None)
    c.print(t)
    for line in report.privacy_claims():
        c.print(line, highlight=False, markup=False, soft_wrap=True)
