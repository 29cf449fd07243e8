"""front.html: the whole search on one page a researcher can decide from (plotly; opens offline).

Sections (each a plotly graph div with a fixed id, so scripts and tests can find it):

* ``front3d``      3D scatter of (error, comm, ε) of every evaluation with status ok: the Pareto front opaque
                   (diamonds), dominated points faded (circles); the knee and the two lowest-error solutions
                   ringed; selected solutions ringed black. Click a point to add it to (or drop it from) the
                   selection.
* ``projections``  the three 2D projections (error–comm, error–ε, comm–ε); lasso or box-select points to select
                   them, double-click to clear. The region no better than chance (error ≥ the knee bar), which the
                   knee is never chosen from, is shaded.
* ``parallel``     parallel coordinates of the genes and objectives (log genes and log objectives on log10
                   axes); drag along an axis to brush a range: the brushed solutions are the selection. A
                   selection made elsewhere is drawn here as one brush range per id on the ``id`` axis.
* ``hypervolume``  hypervolume of the front after each generation (in the search's space: the run's objectives,
                   by default (error, comm, log10 ε); `front_model.hv_space`) and the front size.
* ``selection``    the selected solutions (the same ids in every view) as a sortable table, a copyable
                   ``fedevo retrain RUN --pick 12,31,40`` command and CSV / JSON downloads of the rows.

"ε ≤" and "comm ≤" inputs re-pick the knee within caps in the browser (:mod:`fedevo.viz.knee_js`: the rule of
``--pick knee:eps<=X:comm<=Y``) and move its rings; a note names it (or says that nothing is within the caps).

A "colour by" selector colours every view by any objective, gene or the generation. Every number is written by
:func:`fedevo.viz.numfmt.num` (tables, hover texts, ticks, colour bars). Axes: see :mod:`fedevo.viz.axes`.
Evaluations that failed or diverged are not plotted; they are listed in a table below the plots.

Live: while the search runs (`fedevo search` rewrites the page after every generation, `fedevo plot --watch`
after every change), the page polls a small ``front.stamp.js`` beside it and reloads itself when a newer page
was written, keeping the colour choice, the knee caps and the selection.

Its pieces: the data model every view reads (fedevo.viz.front_model), the figures (fedevo.viz.front_figures), the
page's script (fedevo.viz.front_js); here the page: its header, tables, notes and assembly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..searching.rundata import RunData, load_run
from .axes import finite
from .front_figures import _scale_stops, figure_3d, figure_hypervolume, figure_parallel, figure_projections, \
    parallel_meta, ranges_html
from .front_model import DEPLOYMENT_KEYS, EPS_NAME, OBJECTIVE_LABELS, Model, _fmt_any, hv_space, planned_rounds
from .html import esc, figure_deferred, figure_div, kv_list, page, table, write
from .numfmt import JS_NUM, num

from .html import FRONT_HTML, importance_path  # noqa: E402  (FRONT_HTML re-exported)
STAMP_SUFFIX = ".stamp.js"  # front.html -> front.stamp.js beside it


def privacy_settings(data: RunData) -> tuple[dict, list[str], dict]:
    """(the problem's fixed settings with privacy / deployment defaults filled in, the privacy / deployment keys
    among them in display order, and what the evaluations' neighbouring relations and accountants were): what
    every ε of the run is under."""
    from ..privacy import registry
    from ..problem import PRIVACY_KEYS

    fixed = dict(data.problem.fixed)
    if not data.problem.simulated:  # the user's own evaluator: its ε is its own; fedevo knows no trust model
        return fixed, [], {"accountant": f"the problem's own evaluator ({data.problem.evaluator}); fedevo does not "
                                         "know its trust model or accountant"}
    genes = set(data.gene_names)
    for key, default in (("mechanism", registry.default_mechanism()), ("trust", registry.default_trust()),
                         ("delta", 1e-4)):
        if key not in fixed and key not in genes:
            fixed[key] = default
    order = ("mechanism", "trust", "population", "cohort", "sampling", "delta")
    priv_keys = [k for k in order if k in fixed] + [k for k in fixed if k not in order and
                                                   (k in PRIVACY_KEYS or k in DEPLOYMENT_KEYS)]
    seen = {}
    for key in ("neighbouring", "accountant"):  # as the evaluations' privacy summaries state them
        values = sorted({str((r.get("privacy") or {}).get(key)) for r in data.ok_rows
                         if (r.get("privacy") or {}).get(key)})
        if values:
            seen[key] = "; ".join(values)
    return fixed, priv_keys, seen


def settings_html(data: RunData, *, see: str = "; see the hover text and colour by") -> str:
    """The problem's fixed settings once (privacy / deployment first), and which settings are genes (`see`: where
    the page shows their values; compare.html shows none)."""
    from ..problem import PRIVACY_KEYS

    fixed, priv_keys, seen = privacy_settings(data)
    # rounds: stated once, as run, by rounds_text (the problem file's may be overridden by --rounds)
    other = [k for k in fixed if k not in priv_keys and not (k == "rounds" and data.problem.simulated)]

    def kv(keys):
        return kv_list((k, _fmt_any(fixed[k])) for k in keys)

    if not data.problem.simulated:  # the user's evaluator: its settings mean what it makes of them
        return ('<p class="meta">' + f"ε, comm and error: as the problem's own evaluator computes them "
                f"(<b>{esc(data.problem.evaluator)}</b>); fedevo does not know its trust model or accountant"
                f"<br>settings passed to the evaluator (fixed): {kv(other) or '–'}</p>")
    gene_settings = [g for g in data.gene_names if g in PRIVACY_KEYS or g in DEPLOYMENT_KEYS]
    lines = [f"privacy and deployment (fixed): {kv(priv_keys) or '–'}"]
    for key, name in (("neighbouring", "neighbouring relation"), ("accountant", "accountant")):
        if key in seen:
            # a sentence, or two joined by "; " (a trust gene): wrapped as prose, where a value stays on one line
            lines.append(f"{name} (from the evaluations): <b class=\"prose\">{esc(seen[key])}</b>")
    if gene_settings:
        lines.append(f"privacy settings that are genes (they vary per point{see}): "
                     + ", ".join(f"<b>{esc(g)}</b>" for g in gene_settings))
    lines.append(f"simulation (fixed): {kv(other) or '–'}")
    return '<p class="meta">' + "<br>".join(lines) + "</p>"


def rounds_text(data: RunData) -> str:
    """The rounds each evaluation trained, as the run records them: the full-fidelity rows' rounds_trained (what
    ran), the rounds planned (--rounds, which overrides the problem file's, else the problem's), and the rungs of a
    multi-fidelity search (ranked at each rung's rounds; only the last rung's rows make the front)."""
    from ..searching.fidelity import _show, rung_rounds

    s, p = data.settings, data.problem
    if "rounds" in data.gene_names:
        return "rounds per evaluation: the gene <b>rounds</b>"
    planned = planned_rounds(data)
    ran = sorted({int(r["rounds_trained"]) for r in data.ok_rows if r.get("rounds_trained")})
    if s.multi_fidelity and planned is not None:
        rungs = rung_rounds(s.fidelity, int(planned))
        txt = (f"rounds per rung <b>{', '.join(map(str, rungs))}</b> (fidelity {esc(_show(s.fidelity))}; the "
               f"front holds evaluations of all {rungs[-1]} rounds)")
    else:
        txt = f"rounds per evaluation <b>{esc(planned if planned is not None else ', '.join(map(str, ran)) or '–')}</b>"
    if s.rounds is not None and p.fixed.get("rounds") not in (None, s.rounds):
        txt += f" (--rounds {s.rounds}; the problem file's {esc(p.fixed['rounds'])} not used)"
    if ran and planned is not None and ran != [int(planned)]:
        txt += f" · rounds the evaluations ran: {esc(', '.join(map(str, ran)))}"
    return txt


def _summary(data: RunData, m: Model) -> str:
    s = data.settings
    n_ok = len(data.ok_rows)
    full = data.full_rows
    bad: dict[str, int] = {}
    for r in full:
        if r["status"] != "ok":
            bad[r["status"]] = bad.get(r["status"], 0) + 1
    bad_s = ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) or "none failed"
    if len(full) == len(data.rows):
        counted = f"{len(data.rows)} evaluation{'s' if len(data.rows) != 1 else ''} ({n_ok} ok, {bad_s})"
    else:  # a multi-fidelity search: an evaluation (an individual) has one row per rung it reached
        ids = {r["id"] for r in data.rows}
        at_full = {r["id"] for r in full}
        low_bad = sum(1 for r in data.rows if r["status"] != "ok" and r["id"] not in at_full)
        counted = (f"{len(ids)} evaluations: {len(at_full)} trained the full rounds ({n_ok} ok, {bad_s}), "
                   f"{len(ids) - len(at_full)} stopped at a lower rung"
                   + (f" ({low_bad} of them failed or diverged)" if low_bad else "")
                   + f" · {len(data.rows)} rung trainings in all")
    p = data.problem
    cons = m.constraints_text
    eps_scale = "log10 ε" if m.eps_log else "ε (linear: a run made before log-ε search)"
    what = f"{esc(p.dataset)}, {esc(p.model)}" if p.simulated else "trained by its own evaluator"
    return (f'<p class="meta">problem <b>{esc(p.name)}</b> ({what}) · run '
            f'{esc(data.meta.get("run_id", ""))} · created {esc(data.meta.get("created", ""))}<br>'
            f'population {s.pop} · generations {data.generations_text()}{_note(data)} · seed {s.seed} · '
            f'{rounds_text(data)} · '
            f'{counted} · '
            f'Pareto front of {len(data.front)}{" · constraints " + esc(cons) if cons else ""}<br>objectives: '
            f'{esc(_objectives_text(m))}{esc(_eps_seen(data, eps_scale))}{_sources(data)}</p>'
            + settings_html(data))


def _sources(data: RunData) -> str:
    """'<br>rows 0–47 by fedevo … ; numbers may not be comparable' where the rows come from more than one fedevo
    source (RunData.sources_note), else ""."""
    note = data.sources_note()
    return f'<br><span class="sources">{esc(note)}</span>' if note else ""


def _eps_seen(data: RunData, eps_scale: str) -> str:
    """How the search saw ε: "; the search saw ε as log10 ε", or why it did not search it (no privacy: run.json's
    objectives_left_out), or nothing (an objectives list without ε)."""
    if any(n in ("eps", "eps_paper") for n in data.objectives.names):
        return f"; the search saw ε as {eps_scale}"
    if data.meta.get("objectives_left_out"):
        return "; ε left out of the objectives: no privacy, ε = ∞ in every evaluation"
    return ""


def _note(data: RunData) -> str:
    """ " (ended: --time-budget seconds reached)", " (may end sooner: --time-budget 25 s)" (`time_budget=25 s` from
    Python) or "" (RunData.budget_note)."""
    note = data.budget_note()
    return f" ({esc(note)})" if note else ""


def _objectives_text(m: Model) -> str:
    """The run's objectives in order, each with its direction: "error (1 − mean client accuracy) ↓, …"."""
    out = []
    for o in m.data.objectives:
        if o.name in m.objective_names:
            lab = OBJECTIVE_LABELS.get(o.name, o.heading)
            out.append(f"{lab} {'maximised' if o.maximize else 'minimised'}")
    return ", ".join(out)


def _sortable(headers: Sequence[str], rows: Sequence[Sequence[Any]], keys: Sequence[Any], *, left=(),
              table_id: str = "") -> str:
    """A table whose headers sort it (the page's script); cells carry their raw value in data-v."""
    th = "".join(f'<th class="{"l" if i in left else ""}" title="click to sort">{esc(h)}</th>'
                 for i, h in enumerate(headers))
    body = []
    for r, raw in zip(rows, keys):
        tds = []
        for i, (c, v) in enumerate(zip(r, raw)):
            dv = "" if v is None else (json.dumps(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                                       and math.isfinite(v) else ("Infinity" if v == math.inf else esc(v)))
            tds.append(f'<td class="{"l" if i in left else ""}" data-v="{esc(dv)}">{esc(c)}</td>')
        body.append(f"<tr>{''.join(tds)}</tr>")
    tid = f' id="{table_id}"' if table_id else ""
    return f'<table class="sortable"{tid}><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _front_table(data: RunData, marks: Mapping[int, Sequence[str]], skip: Sequence[str] = (),
                 others: Sequence[tuple[str, str]] = ()) -> str:
    """The Pareto set: id, generation, mark, error, global accuracy, comm, both ε, Ω, a column per other objective
    of the run (`others`: (name, header), Model.other_objectives), the genes — as `fedevo front` lists them."""
    rows = sorted(data.front, key=lambda r: (r["error"], r["comm"], r["id"]))
    cols = [(h, k) for h, k in (("id", "id"), ("gen", "generation"), ("mark", None), ("error", "error"),
                                ("global acc", "accuracy_global"), ("comm", "comm"), ("ε", "eps"),
                                ("ε paper", "eps_paper"), ("Ω", "omega"), *((h, k) for k, h in others),
                                *((g, g) for g in data.gene_names))
            if k not in skip]
    head, keys = [h for h, _ in cols], [k for _, k in cols]
    cells = [[_fmt_any(r.get(k)) if k not in (None, "id", "generation") else
              (", ".join(marks.get(r["id"], ())) if k is None else r[k]) for k in keys] for r in rows]
    raws = [[r.get(k) if k else ", ".join(marks.get(r["id"], ())) for k in keys] for r in rows]
    return _sortable(head, cells, raws, left=(2,), table_id="front-table")


def _bad_table(data: RunData) -> str:
    bad = data.bad_rows
    if not bad:
        return "<p class=\"note\">Every evaluation finished with status ok.</p>"
    body = [[r["id"], r["generation"], r["status"], _first_line(r["message"]), *(_fmt_any(r[g]) for g in data.gene_names)]
            for r in bad]
    return table(["id", "gen", "status", "message", *data.gene_names], body, left=(2, 3))


def _first_line(msg: Optional[str], n: int = 200) -> str:
    lines = [x for x in (msg or "").strip().splitlines() if x.strip()]
    return lines[0][:n] if lines else ""


def _undefined_note(m: Model, key: str) -> str:
    """Why an ε column is left out of every view (Model.undefined)."""
    raw = m.cols[key].raw
    n_inf = sum(1 for v in raw if isinstance(v, (int, float)) and v == math.inf)
    what = ("∞ for every evaluation (no privacy)" if n_inf == len(raw) else
            "undefined for every evaluation (the paper's closed form covers local trust only; under central or "
            "distributed trust there is none)" if n_inf == 0 else
            f"∞ (no privacy) or undefined for every evaluation ({n_inf} ∞)")
    return f"{EPS_NAME[key]} is left out of the views and the table: it is {what}."


def _knee_note(data: RunData, m: Model) -> str:
    if m.chance is None:
        return "The knee is chosen among the Pareto solutions with status ok."
    n_ex = sum(1 for r in data.front if finite(r["error"]) and r["error"] >= m.chance)
    knee = [i for i, ms in m.marks.items() if "knee" in ms]
    margin = (f" minus the 99 % binomial margin of {data.n_test} test examples" if data.n_test else "")
    s = (f"The knee is chosen only among Pareto solutions clearly better than chance: error < {num(m.chance)} "
         f"(chance, 1 − 1/{data.num_classes} classes,{margin}); {n_ex} Pareto solution{'s' if n_ex != 1 else ''} "
         f"at or above it {'were' if n_ex != 1 else 'was'} left out (shaded region of the error axes), as are "
         "failed and diverged evaluations. `--pick knee:eps<=X` re-picks it within caps (docs/plots.md, The knee).")
    if not data.front:
        s += " The Pareto set is empty: no knee is marked."
    elif not knee:
        s += " No Pareto solution is better than chance: no knee is marked."
    return s


def _caps_html(m: Model) -> str:
    """Caps on any objective of the run and what to choose within them (the knee, or the lowest value of one
    objective: the highest of a maximised one). The page's script (fedevo.viz.front_js, fedevo.viz.knee_js) picks with the rule of
    `--pick knee:eps<=X:comm<=Y` / `--pick eps<=X,comm<=Y,lowest-error`, rings the choice, dims every solution
    outside the caps and writes what it chose, and why, into #knee-note."""
    tip = "empty: no cap; numbers as the page writes them: 0.05, 1000, 1k, 1.3k, 1,000, 1000 params; inf: no bound"
    inputs = []
    for o in m.objectives():
        op = "≥" if o["maximize"] else "≤"
        inputs.append(f'<span class="nb"><label for="cap-{esc(o["name"])}">{esc(o["label"])} {op} </label>'
                      f'<input id="cap-{esc(o["name"])}" class="cap" data-key="{esc(o["name"])}" type="text" '
                      f'size="7" placeholder="no cap" title="{esc(tip)}"></span>')
    opts = ['<option value="knee">the knee</option>'] + [  # a maximised objective's best is its highest
        f'<option value="{way}-{esc(o["name"])}">the {way} {esc(o["label"])}</option>'
        for o in m.objectives() for way in [("highest" if o["maximize"] else "lowest")]]
    return ('<div class="controls" id="knee-caps"><p><b>Choose a solution to deploy.</b> Caps: '
            + " ".join(inputs) + ' · choose <select id="choose-by">' + "".join(opts) + '</select> within them. '
            '<span class="note">A cap applies on Enter or when you leave its box (1000, 1k, 1.3k, 1,000, '
            '1000 params; inf: no bound). Solutions outside the caps are dimmed (grey) in every view and the tables; '
            'the choice is ringed green.</span></p><p id="caps-invalid" class="note invalid" role="status"></p>'
            '<p id="knee-note" class="note"></p></div>')


def script_data(m: Model, stamp: str, complete: bool, stamp_file: str) -> dict:
    """The page's data for its script (window.FEDEVO): the rows, colour choices, axes, the knee's inputs."""
    data = m.data
    cols = {}
    for key, label in m.colour_options():
        c = m.cols[key]
        tv, tt = c.ticks()
        cols[key] = {"label": label + (" (log)" if c.log else ""), "draw": c.draw, "tickvals": tv, "ticktext": tt}
    rows = []
    for r, f in zip(m.rows, m.on_front):
        rows.append({"id": r["id"], "generation": r["generation"], "front": f,
                     "marks": list(m.marks.get(r["id"], ())),
                     **{k: r[k] for k in ("error", "comm", "eps", "eps_paper", "accuracy_global")},
                     **{k: r.get(k) for k in m.objective_names},
                     **{g: r[g] for g in data.gene_names}})
    knee = [i for i, ms in m.marks.items() if "knee" in ms]
    # the knee's inputs (fedevo.viz.knee_js re-picks it within caps): the Pareto set in front.csv's order
    # (ties go to the first), the bar a candidate's error must stay below, Python's knee
    from ..retraining import DEFAULT_ROUNDS

    return {"run": str(Path(data.run_dir).resolve()), "run_id": str(data.meta.get("run_id", "")),
            "eps_key": data.eps_key, "objectives": m.objectives(), "retrain_rounds": DEFAULT_ROUNDS,
            "scale": _scale_stops(), "int_axes": [k for k, c in m.cols.items() if c.kind == "int"],
            "log_axes": [k for k, c in m.cols.items() if c.log], "parallel": parallel_meta(m),
            "genes": list(data.gene_names), "rows": rows, "front_ids": [r["id"] for r in data.front],
            "knee_bar": m.chance, "knee": knee[0] if knee else None, "undefined": list(m.undefined),
            "knee_objectives": [{"name": o.name, "worst": o.worst, "maximize": o.maximize} for o in data.objectives],
            "colour": cols, "colour_default": "generation", "stamp": stamp, "complete": complete,
            "stamp_file": stamp_file, "hover": {str(r["id"]): t for r, t in zip(m.rows, m.text)}}


SHARED_TEXT = ("evaluations", "mark")  # traces whose hover text the page holds once (script_data's hover, by id)


def stamp_of(data: RunData) -> str:
    last = data.rows[-1]["id"] if data.rows else -1
    return f"{data.meta.get('run_id', '')}-{len(data.rows)}-{last}-{data.generations}"


def is_complete(data: RunData) -> bool:
    """Nothing more will be evaluated: every planned evaluation is in, or the search ended early (a budget,
    --patience, an exhausted space; a multi-fidelity search's failures promote fewer): resume's own rule,
    :func:`fedevo.searching.run.run_finished`, on the run's newest checkpoint."""
    from ..searching.run import run_finished

    planned = data.settings.planned_evaluations  # (None: only a time budget or patience ends it)
    return (planned is not None and len(data.rows) >= planned) or run_finished(data.run_dir, data.settings)


def run_state(data: RunData, complete: Optional[bool] = None) -> str:
    """"complete" (is_complete), "running" (a search holds the run's lock: it is writing it now) or "stopped"
    (neither: killed or interrupted before its end, resumable; rows after its newest checkpoint are in the log, not
    yet in front.csv and hypervolume.csv)."""
    from ..dirlock import is_held

    if is_complete(data) if complete is None else complete:
        return "complete"
    return "running" if is_held(data.run_dir) else "stopped"


def _live_note(data: RunData, complete: bool) -> str:
    """What the page says of a run that is not complete: a search writing it now (it holds the run's lock), or
    one that stopped before its end (killed, interrupted: resumable)."""
    state = run_state(data, complete)
    if state == "complete":
        return ""
    if state == "running":
        return ('<p class="note live" id="live-note">The search is still running: this page reloads itself when a '
                'newer one is written (after every generation; every evaluation with <code>fedevo plot --watch</code>).'
                '</p>')
    n, of = len(data.rows), data.settings.planned_evaluations
    return (f'<p class="note live" id="live-note">The search stopped before its end ({n}'
            f'{"" if of is None else f" of {of}"} evaluations{_note(data)}; no search is writing the run): '
            f'<code>fedevo resume {esc(str(data.run_dir))}</code> continues it, and this page reloads itself when a '
            'newer one is written.</p>')


SELECTION_HTML = """
<h2>Selection</h2>
<p class="note">Brush a range on any axis of the parallel coordinates, lasso or box-select points in a 2D
projection (Shift adds), click points in the 3D view or rows of the Pareto-set table: the same solutions are
shown in every view and listed here.
A double-click in a projection or the button clears it in every view.
<button id="clear-selection" type="button">clear selection</button></p>
<div id="selection"><p id="selection-summary" class="note">Nothing selected.</p>
<p><code id="retrain-cmd"></code> <button id="copy-cmd" type="button" disabled>copy</button>
download the selected rows (every column of the table, genes included):
<button id="export-csv" type="button" disabled>CSV</button>
<button id="export-json" type="button" disabled>JSON</button></p>
<div id="selection-table"></div></div>
"""


def stamp_name(page_name: str) -> str:
    """The live page's reload signal beside it: front.html -> front.stamp.js (one per page name)."""
    return Path(page_name).stem + STAMP_SUFFIX


def _marked(m: Model, key: str) -> str:
    """How front.html marks a point at the cap of `key`'s axis: the 3D view's axes in 3D and 2D, a fourth or fifth
    objective's in the 2D projections only, ε paper (not an objective: the parallel axes only) nowhere."""
    return "× in 2D, ■ in 3D" if key in m.keys else "×" if key in m.objective_names else ""


def front_html(data: RunData, *, plotly_src: Optional[str] = None, page_name: str = FRONT_HTML) -> str:
    m = Model(data)
    notes = [c.cap_note(marked=_marked(m, k)) for k, c in m.cols.items()  # every objective's (a fourth's, fifth's
             if k in (*m.keys, *m.objective_names, "eps_paper") and k not in m.undefined and c.note]  # too), ε paper's
    notes += [_undefined_note(m, k) for k in m.undefined if m.rows]  # (no ok evaluation: nothing is ∞ or undefined)
    logs = [f"{c.label} ({'gene declared log' if k in data.gene_names else 'log'})"
            for k, c in m.cols.items() if c.log and k not in m.undefined]
    if logs:
        notes.append("Logarithmic axes: " + ", ".join(logs) + ". Objectives use a log axis when their values span "
                     "two decades or more (ε: whenever the search saw ε on a log scale); genes when declared "
                     "log = true.")
    notes.append(_knee_note(data, m))
    n_bad = len(data.bad_rows)
    if n_bad:
        notes.append(f"{n_bad} evaluation{'s' if n_bad != 1 else ''} that failed or diverged "
                     f"{'are' if n_bad != 1 else 'is'} not plotted (listed at the bottom).")
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    stamp, complete = stamp_of(data), is_complete(data)
    live = _live_note(data, complete)
    options = "".join(f'<option value="{esc(k)}">{esc(lab)}</option>' for k, lab in m.colour_options())
    imp = importance_path(page_name).name
    more = (f'<p class="note"><a href="{esc(imp)}">Which genes matter: importance and slices ({esc(imp)})</a></p>'
            if complete else f'<p class="note">{esc(imp)} (which genes matter) is written when the search ends, or by '
            f'<code>fedevo plot {esc(str(data.run_dir))}</code>.</p>')
    figs: dict[str, str] = {}  # div id -> the figure's JSON: drawn by the page's script, the first screen first

    def fig_div(fig, div_id: str, what: str) -> str:
        if not m.rows:
            return figure_div(fig, div_id)
        div, figs[div_id] = figure_deferred(fig, div_id, f"drawing the {what}…", shared_text=SHARED_TEXT)
        return div

    body = [f"<h1>fedevo search — {esc(data.problem.name)}</h1>", _summary(data, m), live, more, note_html]
    if m.rows:
        body += [f'<p class="controls"><label for="colour-by">colour by </label><select id="colour-by">{options}'
                 '</select></p>',
                 f'<div class="fig">{fig_div(figure_3d(m), "front3d", "3D view")}</div>', _caps_html(m),
                 "<h2>2D projections</h2>",
                 '<p class="note">Lasso (default) or box-select points to select them; double-click to clear.</p>',
                 f'<div class="fig">{fig_div(figure_projections(m), "projections", "2D projections")}</div>',
                 "<h2>Genes and objectives</h2>",
                 '<p class="note">Drag along an axis to select a range (brushing; several axes combine): the range '
                 'is the one under the pointer; click outside the range on the axis to clear it. Log axes (log) are '
                 'labelled in the quantity\'s units at every decade.</p>',
                 f'<div class="fig">{fig_div(figure_parallel(m), "parallel", "parallel coordinates")}</div>', ranges_html(m),
                 SELECTION_HTML]
    else:
        body.append('<p class="note"><b>No evaluation finished with status ok: nothing to plot.</b></p>')
    space, ref = hv_space(data)
    body += ["<h2>Hypervolume per generation</h2>",
             f'<p class="note" id="hypervolume-note">Measured where the search works: in {esc(space)}, each '
             'normalised by the ideal point and range of the first generation(s) (finite ε; at least objectives + 1 '
             f'points); reference point {esc(ref)}; pymoo\'s HV indicator (as in hypervolume.csv). ε = ∞ (no '
             'privacy) adds nothing.'
             + (' A maximised objective is negated (−NAME): the search minimises every coordinate.'
                if any(o.maximize for o in data.objectives) else '') + '</p>',
             f'<div class="fig">{fig_div(figure_hypervolume(data.hypervolume(), space=space), "hypervolume", "hypervolume")}</div>',
             f"<h2>Pareto set ({len(data.front)})</h2>",
             '<p class="note">Click a header to sort, a row to add it to (or drop it from) the selection; with the '
             'keyboard, Tab to it and press Enter or Space.</p>',
             f'<div class="scroll">{_front_table(data, m.marks, m.undefined, m.other_objectives())}</div>',
             f"<h2>Not plotted: failed or diverged ({n_bad})</h2>", _bad_table(data)]
    script = ""
    if m.rows:
        from .front_js import FRONT_JS
        from .knee_js import KNEE_JS

        from .shared_arrays import RESOLVE_JS, columns, share

        payload = script_data(m, stamp, complete, stamp_name(page_name))
        payload["rows"] = columns(payload["rows"])  # each row's keys once (shared_arrays)
        # every array the data and the figures hold more than once, written once (shared_arrays)
        pool, (payload, fig_specs) = share([payload, {k: json.loads(v) for k, v in figs.items()}])
        blob, figs_js, arrays = (json.dumps(v, ensure_ascii=False).replace("</", "<\\/")
                                 for v in (payload, fig_specs, pool))
        script = (f"<script>window.FEDEVO = {blob};\nwindow.FEDEVO_FIGS = {figs_js};\n"
                  f"window.FEDEVO_ARRAYS = {arrays};\n{RESOLVE_JS}\n{JS_NUM}\n{KNEE_JS}\n{FRONT_JS}</script>")
    elif not complete:  # nothing drawn yet: the page still reloads itself when a newer one is written, as it says
        script = "<script>" + LIVE_ONLY_JS.replace("STAMP", json.dumps(stamp)).replace(
            "FILE", json.dumps(stamp_name(page_name))) + "</script>"
    return page(f"fedevo — {data.problem.name} — {data.meta.get('run_id', '')}", "\n".join(body) + script,
                plotly_src=plotly_src, defer=bool(m.rows))


# the polling of a page with no view drawn (no ok evaluation yet) of a run not complete: FRONT_JS's fedevoStamp /
# fedevoLive without the views (a page written after a first generation that all failed said it reloaded itself
# and never did)
LIVE_ONLY_JS = """(function () {
  window.fedevoStamp = s => { if (s && s !== STAMP) location.reload(); };
  setInterval(() => {
    const s = document.createElement('script');
    s.src = FILE + '?t=' + Date.now();
    s.onload = s.onerror = () => s.remove();
    document.head.appendChild(s);
  }, 2000);
})();"""


def write_front_html(run_dir: Path | str, out: Optional[Path | str] = None, *,
                     plotly: Optional[str] = None, data: Optional[RunData] = None) -> Path:
    """Write RUN_DIR/front.html (or `out`) for the run in `run_dir` (atomically); returns its path.

    plotly: "shared" (the default, also None) = plotly.js written once beside the page (RUN_DIR/plotly-VERSION.min.js,
    shared with importance.html) and loaded from there; "embed" = inside the page (one self-contained file);
    "keep" = as the page already at that path does, shared when there is none (what the search's rewrite uses);
    see `fedevo.viz.html.plotly_src_for`. Also writes front.stamp.js (the
    live page's reload signal). FedevoError if `run_dir` is not a run or holds no evaluation.
    data: the run as already held in memory (a running search's, see fedevo.viz.live.LivePage): the run directory
    is then not read.
    """
    from .html import plotly_src_for

    if data is None:
        data = load_run(run_dir, reading=True)
    path = Path(out) if out is not None else Path(run_dir) / FRONT_HTML
    src = plotly_src_for(path, plotly)
    write(path, front_html(data, plotly_src=src, page_name=path.name))
    write(path.parent / stamp_name(path.name),
          f"window.fedevoStamp && window.fedevoStamp({json.dumps(stamp_of(data))});\n")
    return path
