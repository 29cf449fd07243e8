"""compare.html: the Pareto fronts and hypervolume histories of several runs of one problem on one page (plotly;
opens offline) — `fedevo plot RUN1 RUN2 … --out compare.html`.

* ``fronts``       the 2-D projections of every pair of the runs' objectives (error–comm–ε: three; rows of three
                   for more) of each run's Pareto set, one colour and legend entry per run (clicking a legend entry
                   hides or shows that run in every panel).
* ``hypervolume``  each run's hypervolume after each generation, all measured with **one** normalisation and
                   reference point shared by every run (`shared_hypervolume`: fedevo.hypervolume's), on the runs'
                   objectives as the search sees them (log10 ε; a maximised one negated), each normalised by the
                   minimum and range of the ok evaluations of *all* compared runs whose objectives are all finite;
                   reference point 1.1 in each. A run's own hypervolume.csv normalises by its own
                   first generation(s), so its numbers are not comparable with another run's; these are.

Runs are comparable only when they searched the same problem: the problems' definitions (run.json's problem
text, parsed: comments and layout do not matter) must be equal, else `check_same_problem` refuses, naming both.
Settings that may differ (seed, population, generations, rounds per evaluation, evaluator) are listed in a
table.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..errors import FedevoError
from ..searching.rundata import RunData, load_run
from .axes import finite, make_column
from .front_model import SHORT, axis_title, hv_space, value_unit
from .grid import cell, panel_rows, rows_of_three
from .history import figure_hv_history
from .html import esc, figure_div, page, table, write
from .numfmt import num

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
           "#bcbd22")
BUILTIN_AXES = ("error", "comm", "eps", "eps_paper")  # axes.make_column's own rules (ε on the search's scale)


def _definition(data: RunData) -> dict:
    from .. import _toml

    return _toml.loads(data.meta["problem"]["text"])


def _differences(a: dict, b: dict, prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(a) | set(b), key=str):
        x, y = a.get(k), b.get(k)
        if isinstance(x, dict) and isinstance(y, dict):
            out += _differences(x, y, f"{prefix}{k}.")
        elif x != y:
            out.append(f"{prefix}{k}")
    return out


def check_same_problem(runs: Sequence[RunData]) -> None:
    """FedevoError (one line, naming both runs and problems) unless every run searched the same problem."""
    first = runs[0]
    ref = _definition(first)
    for other in runs[1:]:
        d = _definition(other)
        a, b = first.problem.name, other.problem.name
        mine, theirs = ([o.name for o in r.objectives] for r in (first, other))
        if d == ref and mine == theirs:
            continue
        if a != b:
            raise FedevoError(f"{first.run_dir} searched problem {a!r} and {other.run_dir} problem {b!r}: runs are "
                              f"compared only on the same problem")
        # the objectives the runs searched, whatever their problem files: one file gives two lists where one run
        # was made before a search without privacy left ε out (run.json objectives_left_out); the keys alone
        # ("objective, objectives differ") did not say what differs
        if mine != theirs:
            left_out = next((r for r in (first, other) if (r.meta or {}).get("objectives_left_out")), None)
            why = (f" ({left_out.run_dir} left ε out: {left_out.meta['objectives_left_out']})"
                   if left_out is not None else "")
            raise FedevoError(f"{first.run_dir} searched the objectives ({', '.join(mine)}) of problem {a!r} and "
                              f"{other.run_dir} ({', '.join(theirs)}): runs are compared only on the same problem, "
                              f"its objectives included{why}")
        keys = _differences(ref, d)
        raise FedevoError(f"{first.run_dir} and {other.run_dir} both searched a problem named {a!r} but defined "
                          f"differently ({', '.join(keys[:5])}{' …' if len(keys) > 5 else ''} differ): runs are "
                          f"compared only on the same problem")


def labels(runs: Sequence[RunData]) -> list[str]:
    """A legend name per run: its directory name, or its path where two names are equal."""
    names = [r.run_dir.name for r in runs]
    return [n if names.count(n) == 1 else str(r.run_dir) for n, r in zip(names, runs)]


# ============================================================================================ hypervolume
def shared_hypervolume(runs: Sequence[RunData]) -> tuple[list[list[dict[str, Any]]], np.ndarray, np.ndarray]:
    """Each run's hypervolume after each generation under ONE normalisation: `fedevo.hypervolume`'s
    (fedevo.searching.front_math.common_hypervolume), on the runs' objectives as the search sees them (log10 ε, a
    maximised objective negated), normalised by the minimum and range of the ok evaluations of all the runs whose
    objectives are all finite (an objective none measured, ε = ∞ in all, is not asked), reference point HV_REF (1.1)
    in each. Returns (records per run, lo, scale)."""
    from ..searching.front_math import common_hypervolume, measured_rows

    objs = runs[0].objectives
    if not measured_rows([r for d in runs for r in d.ok_rows], objs)[0]:
        raise FedevoError("no run holds an ok evaluation with finite objectives: there is no hypervolume to compare")
    return common_hypervolume([(d.rows, d.constraints) for d in runs], objs)


# ============================================================================================ figures
FRONTS_PANEL_H, FRONTS_ROW_GAP = 360, 100  # px: a fronts panel (one row: as before) and the gap between two rows


def figure_fronts(runs: Sequence[RunData], names: Sequence[str]):
    """Each run's Pareto set in every pair of the runs' objectives (as front.html's projections: rows of three),
    one colour and legend entry per run; returns (figure, the axes' notes)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    objs = runs[0].objectives
    eps_log = any(d.meta.get("search_objectives", {}).get("eps_scale") == "log10" for d in runs)
    rows = [r for d in runs for r in d.front]
    owner = [n for d, n in zip(runs, names) for _ in d.front]
    cols = {}
    for o in objs:  # as front.html's columns: ε on the search's scale, another log objective on a log axis
        pos = o.name not in BUILTIN_AXES and o.log and all(finite(r.get(o.name)) and r[o.name] > 0 for r in rows)
        cols[o.name] = make_column(rows, o.name, axis_title(objs, o.name, o.label), eps_log=eps_log,
                                   log=True if pos else None)
    pairs = list(combinations(objs.names, 2))
    nrow, ncol = rows_of_three(len(pairs))
    short = {k: SHORT.get(k, objs.by_name(k).label) for k in objs.names}
    plot_h, spacing = panel_rows(nrow, FRONTS_PANEL_H, FRONTS_ROW_GAP)
    fig = make_subplots(rows=nrow, cols=ncol, horizontal_spacing=0.08, vertical_spacing=spacing,
                        subplot_titles=[f"{short[a]} vs {short[b]}" for a, b in pairs])
    # each value with the unit front.html's hover gives it ("comm 1.2k params/round/client slot", "latency 5 ms")
    units = {o.name: (" " + value_unit(o.name, o.unit)).rstrip() for o in objs}
    for c, (a, b) in enumerate(pairs, start=1):
        row, col = cell(c, ncol)
        for name, colour in zip(names, COLOURS * (len(names) // len(COLOURS) + 1)):
            idx = [i for i, o in enumerate(owner) if o == name]
            text = [f"<b>{esc(name)}</b> · id {rows[i]['id']} · generation {rows[i]['generation']}<br>"
                    + " · ".join(f"{esc(short[k])} {num(rows[i].get(k))}{esc(units[k])}" for k in objs.names)
                    for i in idx]
            capped = [cols[a].capped[i] or cols[b].capped[i] for i in idx]
            fig.add_trace(go.Scatter(
                x=[cols[a].data[i] for i in idx], y=[cols[b].data[i] for i in idx], mode="markers", name=name,
                legendgroup=name, showlegend=c == 1, meta="front", customdata=[rows[i]["id"] for i in idx],
                text=text, hovertemplate="%{text}<extra></extra>",
                marker=dict(color=colour, size=9, opacity=0.85, symbol=[("x" if x else "circle") for x in capped],
                            line=dict(width=0.5, color="white"))), row=row, col=col)
        fig.update_xaxes(**cols[a].axis_layout(cols[a].label), row=row, col=col)
        fig.update_yaxes(**cols[b].axis_layout(cols[b].label), row=row, col=col)
    fig.update_layout(height=120 + plot_h, margin=dict(l=60, r=20, t=60, b=60), hovermode="closest",
                      legend=dict(orientation="h", y=-90 / plot_h))
    notes = [cols[k].note for k in cols if cols[k].note]
    return fig, notes


# ============================================================================================ page
def compare_html(runs: Sequence[RunData], *, plotly_src: Optional[str] = None) -> str:
    from ..searching.evaluator import evaluating_spec
    from ..searching.front_math import HV_REF
    from .front import settings_html

    check_same_problem(runs)
    names = labels(runs)
    colours = dict(zip(names, COLOURS * (len(names) // len(COLOURS) + 1)))
    tables, lo, scale = shared_hypervolume(runs)
    hv = dict(zip(names, tables))
    objs = runs[0].objectives
    p = runs[0].problem
    fronts, notes = figure_fronts(runs, names)
    heads = ["run", "seed", "pop", "generations", "rounds / evaluation", "evaluator", "evaluations", "ok",
             "Pareto set", "HV (shared)"]
    body = [[n, d.settings.seed, d.settings.pop, d.generations_text(),
             d.settings.rounds or p.fixed.get("rounds", "default"), evaluating_spec(d.settings.evaluator, p), len(d.rows),
             len(d.ok_rows), len(d.front), num(hv[n][-1]["hypervolume"]) if hv[n] else "–"]
            for n, d in zip(names, runs)]
    differ = [h for j, h in enumerate(heads) if j in (1, 2, 3, 4, 5) and len({str(r[j]) for r in body}) > 1]
    where = " · ".join(f"{esc(n)}: {esc(d.run_dir)}" for n, d in zip(names, runs) if n != str(d.run_dir))
    words, ref = hv_space(runs[0])
    coords = words.strip("()").split(", ")  # each objective as the search sees it: "log10 ε", "−acc"
    space = ", ".join(f"{k} from {num(float(lo[j]))} over {num(float(scale[j]))}" for j, k in enumerate(coords))
    parts = [f"<h1>fedevo — {esc(p.name)} — {len(runs)} runs compared</h1>",
             f'<p class="meta">problem <b>{esc(p.name)}</b> (the same definition in every run)'
             + (f" · settings that differ: {esc(', '.join(differ))}" if differ else "") + "</p>",
             settings_html(runs[0], see=""),  # what every ε is under (trust, δ, N, M): the problem's, in every run
             f'<div style="overflow-x: auto">{table(heads, body, left=(0, 5))}</div>',
             (f'<p class="note">run directories: {where}</p>' if where else ""),
             "<h2>Pareto fronts</h2>",
             '<p class="note">Each run\'s Pareto set (status ok, within the problem\'s constraints) in the 2-D '
             f"projections of every pair of its {len(objs)} objectives ({esc(', '.join(o.label for o in objs))}); "
             "one colour per run (click a legend entry to hide or show a run)."
             + (f" A point on a run's {len(objs)}-objective front can look dominated in one projection."
                if len(objs) > 2 else "") + "</p>",
             *(f'<p class="note">{esc(x)}</p>' for x in notes),
             f'<div class="fig">{figure_div(fronts, "fronts")}</div>',
             "<h2>Hypervolume per generation (shared reference)</h2>",
             f'<p class="note">Every run\'s hypervolume is measured with <b>one normalisation and reference point '
             f"shared by all {len(runs)} runs</b>: in {esc(words)} as the search sees them, each "
             f"objective normalised by the minimum and range of the ok evaluations of all these runs whose objectives "
             f"are all finite ({esc(space)}), reference point {esc(ref)}; ε = ∞ adds nothing. These numbers "
             "are comparable across the runs; each run's own hypervolume.csv (and its front page) normalises by its "
             "own first generation(s) and is not. The axis spans the values, not 0 → max.</p>",
             f'<div class="fig">{figure_div(figure_hv_history(hv, colours=colours, title="hypervolume (shared)"), "hypervolume")}'
             "</div>"]
    blob = json.dumps({"runs": [str(d.run_dir) for d in runs], "labels": names,
                       "normalisation": {"lo": [float(x) for x in lo], "scale": [float(x) for x in scale],
                                         "ref": [HV_REF] * len(objs), "objectives": list(objs.names)},
                       "hypervolume": {n: [r["hypervolume"] for r in v] for n, v in hv.items()}}).replace("</", "<\\/")
    return page(f"fedevo — {p.name} — compare {len(runs)} runs",
                "\n".join(parts) + f"<script>window.FEDEVO_COMPARE = {blob};</script>", plotly_src=plotly_src)


def load_runs(run_dirs: Sequence[Path | str]) -> list[RunData]:
    seen: dict[Path, Path] = {}
    for d in run_dirs:
        key = Path(d).resolve()
        if key in seen:
            raise FedevoError(f"run {d} is given twice")
        seen[key] = Path(d)
    runs = [load_run(d, reading=True) for d in run_dirs]
    check_same_problem(runs)
    return runs


def write_compare_html(run_dirs: Sequence[Path | str], out: Path | str, *, plotly: Optional[str] = None,
                       runs: Optional[Sequence[RunData]] = None) -> Path:
    """Write the comparison page of `run_dirs` to `out` (atomically); returns its path. plotly: "shared" (the default,
    also None: plotly.js written once beside the page and loaded from there) or "embed". FedevoError if a directory is not a
    run, or the runs searched different problems."""
    from .html import plotly_src_for

    runs = load_runs(run_dirs) if runs is None else runs
    path = Path(out)
    src = plotly_src_for(path, plotly)
    write(path, compare_html(runs, plotly_src=src))
    return path
