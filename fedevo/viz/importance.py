"""importance.html: which genes drive each objective of a run, each objective against each gene, and the
hypervolume per generation (plotly; opens offline).

**Importance** (`importance`): for each objective of the run (its ``objectives`` list in order: by default error,
comm and the ε the search minimised) a random forest
(scikit-learn's ``RandomForestRegressor``) is fitted to the run's ok evaluations, genes → objective, and the
importance of a gene is its **permutation importance** on held-out evaluations (``sklearn.inspection.
permutation_importance``): in each of `FOLDS` cross-validation folds the forest is fitted on the other folds and
the gene's column of the held-out fold is shuffled `REPEATS` times; the importance is the rise of the held-out
mean squared error, divided by the objective's variance over the run — the share of the objective's variance
the forest's predictions lose without that gene. A forest is fitted to at most `FIT_MAX` evaluations: where an
objective has more (ok, with a finite value), to a sample of `FIT_MAX` of them (fedevo.viz.sample: those whose id
hashes lowest with the seed, the same on every write), and the variance is the sample's; the page says, per
objective, how many of how many the numbers are computed from. Mean and standard deviation are over the
FOLDS × REPEATS shuffles. The forest's out-of-fold R² says how much of the objective the genes explain at all; below `MIN_R2`
the ranking is flagged as weak. Everything is seeded (the same run and seed give the same numbers).

Transforms: genes declared ``log = true`` enter as log10, choices as their index (trees only use the order);
error as it is; comm as log10 when its values span two decades or more (as its plot axis), else as it is; ε as
log10(max(ε, 0.001)) — how the search sees it — with evaluations of ε = ∞ (no privacy) left out of the ε model
(and counted); any other objective as the search sees it (log10(max(v, floor)) for a log one, else as it is). An objective with fewer than `MIN_EVALUATIONS` such evaluations, or a constant one, gets no
ranking, only a note saying why.

**Slices** (``slices``): one row per gene, one panel per objective: every ok evaluation at (gene value, objective),
coloured by generation; log axes where the gene is declared log, for ε (as on front.html) and for comm when it
spans two decades. Beyond `DRAW_MAX` ok evaluations, a sample of `DRAW_MAX` of them (the same rule), and the page
says "showing N of M". Each drawn point's values and hover text are written once (``window.FEDEVO_SLICES``) and
shared by its panels, which the page's script fills in before plotly draws them: the page grows with the points,
not with points × genes × objectives.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from ..searching.rundata import RunData, load_run
from .axes import LOG_SPAN, Column, make_column
from .front_model import axis_title, value_unit
from .history import figure_hv_history
from .grid import cell, panel_rows
from .html import esc, figure_div, page, table, write
from .numfmt import num
from .sample import sample

from .html import IMPORTANCE_HTML, importance_path  # noqa: E402,F401  (re-exported)
MIN_EVALUATIONS = 20  # fewer ok evaluations (with a finite value of the objective) say nothing about importance
MIN_R2 = 0.2  # out-of-fold R² below this: the genes explain little of the objective; the ranking is weak
FOLDS = 4
REPEATS = 5
TREES = 100
FIT_MAX = 2000  # a forest is fitted to at most this many evaluations; beyond, to a sample (module doc)
DRAW_MAX = 2000  # the slices draw at most this many ok evaluations; beyond, a sample (module doc)
SCALE = "Viridis"
LABEL = {"error": "error", "comm": "comm", "eps": "ε", "eps_paper": "ε (paper)"}


def label_of(data: Optional[RunData], key: str) -> str:
    """An objective's short label: error, comm, ε, ε (paper), else the run's objective label."""
    if key in LABEL or data is None or key not in data.objectives:
        return LABEL.get(key, key)
    return data.objectives.by_name(key).label


@dataclass(frozen=True)
class GeneImportance:
    gene: str
    mean: float  # rise of held-out MSE when the gene is shuffled / variance of the objective
    std: float  # over FOLDS × REPEATS shuffles


@dataclass(frozen=True)
class ObjectiveImportance:
    objective: str  # "error", "comm", "eps" or "eps_paper"
    transform: str  # "none" or "log10" (see the module doc)
    n: int  # evaluations the forest saw
    left_out: int  # ok evaluations left out (ε = ∞, NaN)
    r2: Optional[float]  # out-of-fold R² of the forest; None when not fitted
    genes: tuple[GeneImportance, ...]  # most important first; empty when not fitted
    note: str  # why there is no ranking, or why it is weak; "" otherwise
    label: str = ""  # the objective's short label (label_of)
    eligible: int = 0  # ok evaluations with a finite value: the forest saw all of them, or a sample of n (FIT_MAX)

    @property
    def sampled(self) -> bool:
        return self.eligible > self.n

    @property
    def basis(self) -> str:
        """What the numbers are computed from: "all 40 evaluations", "a sample of 2,000 of 10,000 evaluations"."""
        if self.sampled:
            return f"a sample of {self.n:,} of {self.eligible:,} evaluations"
        return f"all {self.n:,} evaluations"

    @property
    def title(self) -> str:
        return self.label or LABEL.get(self.objective, self.objective)

    @property
    def ranked(self) -> list[str]:
        return [g.gene for g in self.genes]


def gene_matrix(data: RunData, rows: Sequence[dict]) -> np.ndarray:
    """The genes of `rows` as numbers: log10 for log genes, the index for choices."""
    cols = []
    for g in data.gene_names:
        gene = data.problem.gene(g)
        if gene.type == "choice":
            idx = {str(c): i for i, c in enumerate(gene.choices)}
            cols.append([float(idx.get(str(r[g]), -1)) for r in rows])
        elif gene.log:
            cols.append([math.log10(float(r[g])) for r in rows])
        else:
            cols.append([float(r[g]) for r in rows])
    return np.array(cols, dtype=float).T.reshape(len(rows), len(data.gene_names))


def objective_values(key: str, rows: Sequence[dict], objective=None) -> tuple[list[int], np.ndarray, str]:
    """(indices of the rows used, their values transformed, the transform's name). `objective`: the run's
    Objective of that name (a log one is modelled as log10(max(v, floor)), as the search sees it)."""
    from ..searching.front_math import EPS_FLOOR

    vals = [r.get(key) for r in rows]
    keep = [i for i, v in enumerate(vals) if isinstance(v, (int, float)) and math.isfinite(v)]
    y = np.array([float(vals[i]) for i in keep])
    if key.startswith("eps"):
        return keep, np.log10(np.maximum(y, EPS_FLOOR)), "log10"
    if objective is not None and objective.log and key not in ("error", "comm"):
        return keep, np.log10(np.maximum(y, objective.floor)), "log10"
    if key == "comm" and len(y) and y.min() > 0 and y.max() / y.min() >= LOG_SPAN:
        return keep, np.log10(y), "log10"
    return keep, y, "none"


def objective_importance(data: RunData, key: str, *, seed: int = 0, folds: int = FOLDS, repeats: int = REPEATS,
                         trees: int = TREES, fit_max: Optional[int] = None) -> ObjectiveImportance:
    """Permutation importance of every gene for one objective (see the module doc), the forest fitted to at most
    `fit_max` (default FIT_MAX) evaluations (a sample beyond: fedevo.viz.sample, seeded with `seed`)."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance
    from sklearn.model_selection import KFold

    rows = data.ok_rows
    keep, y, transform = objective_values(key, rows, data.objectives.by_name(key) if key in data.objectives else None)
    n, left = len(keep), len(rows) - len(keep)
    lab = label_of(data, key)

    def bare(note: str) -> ObjectiveImportance:
        return ObjectiveImportance(key, transform, n, left, None, (), note, lab, eligible)

    eligible = n

    if n == 0 and len(rows) >= MIN_EVALUATIONS:  # enough evaluations, none with a value: not "too few"
        inf = all(r.get(key) == math.inf for r in rows)
        what = ("∞ (no privacy)" if key.startswith("eps") else "∞") if inf else "missing (not measured)"
        return bare(f"{lab} is {what} in every one of the {len(rows)} ok evaluations: no gene moves it")
    if n < MIN_EVALUATIONS:
        return bare(f"too few evaluations to say anything: {n} ok evaluation{'s' if n != 1 else ''} with a finite "
                    f"{lab}, at least {MIN_EVALUATIONS} needed")
    var = float(np.var(y))
    if not var > 1e-12 * max(1.0, float(np.mean(y)) ** 2):
        return bare(f"{lab} is the same for every evaluation: no gene moves it")
    fit_max = FIT_MAX if fit_max is None else fit_max
    if n > fit_max:  # the forest's cost grows faster than the evaluations: a bounded sample of them
        pick = sample([rows[i]["id"] for i in keep], fit_max, seed)
        keep, y, n = [keep[i] for i in pick], y[pick], len(pick)
        var = float(np.var(y))
        if not var > 0:
            return bare(f"{lab} is the same for each of the {n:,} evaluations sampled: no gene moves it")
    X = gene_matrix(data, [rows[i] for i in keep])
    scores = []  # (folds × repeats) × genes
    pred = np.empty(n)
    for k, (train, test) in enumerate(KFold(n_splits=folds, shuffle=True, random_state=seed).split(X)):
        rf = RandomForestRegressor(n_estimators=trees, min_samples_leaf=2, random_state=seed + k, n_jobs=1)
        rf.fit(X[train], y[train])
        pred[test] = rf.predict(X[test])
        res = permutation_importance(rf, X[test], y[test], scoring="neg_mean_squared_error", n_repeats=repeats,
                                     random_state=seed + k)
        scores.append(res.importances.T / var)
    imp = np.concatenate(scores, axis=0)
    r2 = 1.0 - float(np.mean((y - pred) ** 2)) / var
    genes = sorted((GeneImportance(g, float(imp[:, j].mean()), float(imp[:, j].std()))
                    for j, g in enumerate(data.gene_names)), key=lambda x: (-x.mean, x.gene))
    note = ""
    if r2 < MIN_R2:
        note = (f"the genes explain little of {lab} (out-of-fold R² {num(r2)} < {MIN_R2}): "
                "the ranking is weak")
    return ObjectiveImportance(key, transform, n, left, r2, tuple(genes), note, lab, eligible)


def objective_keys(data: RunData) -> list[str]:
    """The objectives the page ranks and slices: the run's objectives in order (by default error, comm and the
    run's ε) that its rows hold."""
    keys = [o.name for o in data.objectives if any(o.name in r for r in data.rows)]
    return keys or ["error", "comm", data.eps_key]


def importance(data: RunData, *, seed: int = 0, **kw) -> list[ObjectiveImportance]:
    """Importance of the genes for each objective of the run (`objective_keys`, in order)."""
    return [objective_importance(data, k, seed=seed, **kw) for k in objective_keys(data)]


# ============================================================================================ figures
BAR_ROW_GAP = 90  # px between two rows of importance panels: the x axis' ticks and title, then the next panel titles


def importance_grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the importance panels of n objectives: one row of up to three, 2 × 2 for four, rows of
    three for five (a row of five was 100–150 px a panel at 1,280–1,600 px, and the last panel's axis title, wider
    than its panel, ran past the figure's edge and was cut)."""
    ncol = n if n <= 3 else 2 if n == 4 else 3
    return -(-n // ncol), ncol


def figure_importance(result: Sequence[ObjectiveImportance]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    nrow, ncol = importance_grid(max(len(result), 1))
    n_genes = max([len(o.genes) for o in result] or [1])
    panel_h = max(190, 20 + 26 * n_genes)  # a row of bars (one row: the figure's height was max(300, 130 + 26·n))
    plot_h, spacing = panel_rows(nrow, panel_h, BAR_ROW_GAP)
    fig = make_subplots(rows=nrow, cols=ncol, horizontal_spacing=0.12, vertical_spacing=spacing,
                        subplot_titles=[_panel_title(o) for o in result])
    for c, o in enumerate(result, start=1):
        row, col = cell(c, ncol)
        if o.genes:
            shown = list(reversed(o.genes))  # most important on top
            fig.add_trace(go.Bar(
                x=[g.mean for g in shown], y=[g.gene for g in shown], orientation="h", name=o.title,
                meta="importance", showlegend=False, marker_color="#1f77b4",
                error_x=dict(type="data", array=[g.std for g in shown], visible=True, color="#444"),
                customdata=[[num(g.mean), num(g.std)] for g in shown],
                hovertemplate="%{y}: %{customdata[0]} ± %{customdata[1]}<extra></extra>"), row=row, col=col)
        else:
            xref = "x domain" if c == 1 else f"x{c} domain"
            yref = "y domain" if c == 1 else f"y{c} domain"
            fig.add_annotation(xref=xref, yref=yref, x=0.5, y=0.5, showarrow=False, text=_wrap(o.note),
                               font=dict(size=12, color="#a00"))
            fig.update_xaxes(visible=False, row=row, col=col)
            fig.update_yaxes(visible=False, row=row, col=col)
        fig.update_xaxes(title_text="share of variance lost when shuffled", row=row, col=col)
    fig.update_layout(height=110 + plot_h, margin=dict(l=90, r=20, t=60, b=50))
    return fig


def _panel_title(o: ObjectiveImportance) -> str:
    """ "error (R² 0.99)"; fitted to a sample: "error (R² 0.99; 2,000 of 10,000)"."""
    if o.r2 is None:
        return o.title
    return f"{o.title} (R² {num(o.r2)}" + (f"; {o.n:,} of {o.eligible:,})" if o.sampled else ")")


def _wrap(text: str, width: int = 38) -> str:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}".strip()
    return "<br>".join(lines + ([cur] if cur else []))


def slice_rows(data: RunData, *, seed: int = 0, draw_max: Optional[int] = None) -> list:
    """The ok evaluations the slices draw: all of them, or beyond `draw_max` (default DRAW_MAX) a sample
    (fedevo.viz.sample)."""
    rows = data.ok_rows
    return [rows[i] for i in sample([r["id"] for r in rows], DRAW_MAX if draw_max is None else draw_max, seed)]


def slice_columns(data: RunData, rows: Optional[Sequence[dict]] = None) -> tuple[dict[str, Column], dict[str, Column]]:
    """(gene columns, objective columns) of the ok evaluations (or `rows`), drawn as front.html draws them."""
    rows = data.ok_rows if rows is None else rows
    eps_log = data.meta.get("search_objectives", {}).get("eps_scale") == "log10"
    genes = {}
    for g in data.gene_names:
        gene = data.problem.gene(g)
        if gene.type == "choice":
            genes[g] = make_column(rows, g, g, kind="choice", choices=gene.choices)
        else:
            genes[g] = make_column(rows, g, g, kind=gene.type, log=bool(gene.log))
    objs = {}
    for k in objective_keys(data):
        o = data.objectives.by_name(k) if k in data.objectives else None
        pos = all(isinstance(r.get(k), (int, float)) and r[k] > 0 for r in rows)
        log = True if (o is not None and o.log and pos and not k.startswith("eps")) else None
        objs[k] = make_column(rows, k, label_of(data, k), eps_log=eps_log, log=log)
    return genes, objs


def slice_points(data: RunData, rows: Sequence[dict]) -> dict[str, Any]:
    """What the slices draw of `rows`, each value once (the page's window.FEDEVO_SLICES): ids, generations, per gene
    and per objective its drawn coordinates, hover values and label (HTML), per objective which points are capped
    (∞, drawn ×), and the panels in trace order as [gene, objective]."""
    genes, objs = slice_columns(data, rows)
    return {"ids": [r["id"] for r in rows], "generation": [r["generation"] for r in rows],
            "genes": {g: {"data": gc.data, "text": [_val(r[g]) for r in rows], "label": esc(g)}
                      for g, gc in genes.items()},
            "objectives": {k: {"data": oc.data, "text": [num(r[k]) for r in rows], "label": esc(oc.label),
                               "unit": _unit_after(data, k), "capped": [bool(c) for c in oc.capped]}
                           for k, oc in objs.items()},
            "panels": [[g, k] for g in genes for k in objs]}


def _unit_after(data: RunData, k: str) -> str:
    """What the hover writes after a value of objective k, once per objective (" ms", comm's " params/round/client
    slot"; "" for none), as front.html's hover."""
    unit = value_unit(k, data.objectives.by_name(k).unit if k in data.objectives else "")
    return esc(f" {unit}") if unit else ""


def slice_hover(points: dict[str, Any], g: str, k: str) -> list[str]:
    """The hover text of panel (gene g, objective k): what SLICES_JS writes from the same points."""
    G, O = points["genes"][g], points["objectives"][k]
    return [f"id {i} · generation {gen}<br>{G['label']} = {gt}<br>{O['label']} = {ot}{O['unit']}"
            for i, gen, gt, ot in zip(points["ids"], points["generation"], G["text"], O["text"])]


def figure_slices(data: RunData, rows: Optional[Sequence[dict]] = None, *, shared: bool = False):
    """The slices of `rows` (default: `slice_rows`). shared: the traces without their points (x, y, ids, hover
    text, colours, symbols), which the page fills in from `slice_points` (SLICES_JS)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = slice_rows(data) if rows is None else rows
    genes, objs = slice_columns(data, rows)
    points = slice_points(data, rows)
    n = len(genes)
    gen = points["generation"]
    fig = make_subplots(rows=n, cols=len(objs), horizontal_spacing=0.08,
                        vertical_spacing=min(0.08, 0.35 / max(n - 1, 1)),
                        subplot_titles=[f"{objs[k].label} vs {g}" for g in genes for k in objs])
    titles = {k: oc.label if k in ("error", "eps", "eps_paper") else axis_title(data.objectives, k, oc.label)
              for k, oc in objs.items()}  # with its unit: "latency (ms)", "comm (params/round/client slot)"
    gmin, gmax = min(gen), max(max(gen), min(gen) + 1)
    gticks = make_column(rows, "generation", "generation", kind="int", log=False).ticks()  # integers only
    for i, (g, gc) in enumerate(genes.items(), start=1):
        for j, (k, oc) in enumerate(objs.items(), start=1):
            each = {} if shared else dict(x=gc.data, y=oc.data, customdata=points["ids"],
                                          text=slice_hover(points, g, k))
            marker = {} if shared else dict(color=gen, symbol=["x" if c else "circle" for c in oc.capped])
            fig.add_trace(go.Scatter(
                **each, mode="markers", meta="slice", name=f"{g}/{k}", showlegend=False,
                hovertemplate="%{text}<extra></extra>",
                marker=dict(size=6, colorscale=SCALE, cmin=gmin, cmax=gmax, opacity=0.8, **marker,
                            showscale=i == 1 and j == len(objs),
                            colorbar=dict(title=dict(text="generation", side="right"), thickness=14, len=0.3,
                                          y=1.0, yanchor="top", tickvals=gticks[0], ticktext=gticks[1]))),
                row=i, col=j)
            fig.update_xaxes(**gc.axis_layout(g), row=i, col=j)
            fig.update_yaxes(**oc.axis_layout(titles[k]), row=i, col=j)
    fig.update_layout(height=80 + 250 * n, margin=dict(l=60, r=40, t=50, b=40), hovermode="closest")
    fig.update_annotations(font_size=12)
    return fig


# the slices' traces filled in from window.FEDEVO_SLICES (slice_points), then drawn: each point's values and hover
# parts are held once, its panels share them (the arrays themselves, not copies); the hover text as slice_hover
SLICES_JS = """
(function () {
  const P = window.FEDEVO_SLICES, f = window.FEDEVO_SLICES_FIG, el = document.getElementById('slices');
  let n = 0;
  f.data.forEach(t => {
    if (t.meta !== 'slice') return;
    const [g, k] = P.panels[n++], G = P.genes[g], O = P.objectives[k];
    t.x = G.data; t.y = O.data; t.customdata = P.ids;
    t.text = P.ids.map((id, i) => 'id ' + id + ' · generation ' + P.generation[i] + '<br>' + G.label + ' = ' +
                                  G.text[i] + '<br>' + O.label + ' = ' + O.text[i] + O.unit);
    t.marker.color = P.generation;
    t.marker.symbol = O.capped.map(c => c ? 'x' : 'circle');
  });
  const p = el.querySelector('.pending');
  if (p) p.remove();
  Plotly.newPlot(el, f.data, f.layout, f.config);
})();
"""


def slices_div(data: RunData, rows: Sequence[dict]) -> str:
    """The slices of `rows` as the page holds them: the figure without its points, the points once, SLICES_JS."""
    from plotly.io.json import to_json_plotly

    from .html import figure_deferred

    div, spec = figure_deferred(figure_slices(data, rows, shared=True), "slices")
    points = to_json_plotly(slice_points(data, rows))
    return (div + "<script>window.FEDEVO_SLICES = " + points.replace("</", "<\\/") + ";\nwindow.FEDEVO_SLICES_FIG = "
            + spec.replace("</", "<\\/") + ";" + SLICES_JS + "</script>")


def _val(v: Any) -> str:
    return num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else esc(v)


# ============================================================================================ page
def _method_note(result: Sequence[ObjectiveImportance], seed: int = 0) -> str:
    tr = ", ".join(f"{o.title}: {'log10' if o.transform == 'log10' else 'as it is'}" for o in result)
    left = [f"{o.left_out} with {o.title} = ∞ or undefined left out of its model"
            for o in result if o.left_out]
    basis = "; ".join(f"{o.title}: {o.basis}" for o in result)
    sampled = (f" (a sample: those whose ids hash lowest with seed {seed}, the same on every write; "
               "importance, whiskers and R² are the sample's)" if any(o.sampled for o in result) else "")
    return (f"Per objective, a random forest ({TREES} trees, scikit-learn) is fitted to the ok evaluations with a "
            f"finite value, at most {FIT_MAX:,} of them, genes → objective. Computed from {basis}{sampled}. "
            f"A gene's importance is its permutation importance on held-out evaluations: in each of "
            f"{FOLDS} cross-validation folds the gene's column is shuffled {REPEATS} times, and the rise of the "
            f"held-out mean squared error, divided by the objective's variance, is the share of that variance the "
            f"forest loses without the gene (0: the gene does not matter; a small negative value is noise; above 1: the forest's predictions with the gene shuffled are worse than predicting the mean). Bars: the "
            f"mean; whiskers: ± one standard deviation over the {FOLDS * REPEATS} shuffles. R²: how much of the "
            f"objective the forest predicts out of fold (below {MIN_R2}: the ranking is weak). Objectives as "
            f"modelled: {tr}; genes declared log as log10, choices by their index. At least {MIN_EVALUATIONS} ok "
            f"evaluations are needed per objective. Importance says which genes move an objective across this "
            f"run's evaluations — where the search looked — not why."
            + (" " + "; ".join(left) + "." if left else ""))


def _none_note(result: Sequence[ObjectiveImportance]) -> str:
    """Why no objective is ranked, once: too few evaluations (with the counts), or constant objectives."""
    few = [o for o in result if o.note.startswith("too few")]
    if len(few) == len(result):
        counts = ", ".join(f"{o.title} {o.n}" for o in result)
        return (f"Too few evaluations to rank the genes: at least {MIN_EVALUATIONS} ok evaluations with a finite "
                f"value are needed per objective; this run has {counts}. The slices below show every evaluation.")
    return "No gene ranking: " + "; ".join(f"{o.title}: {o.note}" for o in result) + "."


def _table(data: RunData, result: Sequence[ObjectiveImportance]) -> str:
    heads = ["gene", *(f"{o.title} importance" for o in result), *(f"{o.title} rank"
                                                                                for o in result)]
    body = []
    for g in data.gene_names:
        cells = [g]
        ranks = []
        for o in result:
            found = [(k, x) for k, x in enumerate(o.genes, start=1) if x.gene == g]
            cells.append(f"{num(found[0][1].mean)} ± {num(found[0][1].std)}" if found else "–")
            ranks.append(found[0][0] if found else "–")
        body.append(cells + ranks)
    return table(heads, body, left=(0,))


def objectives_text(data: RunData) -> str:
    """The run's objectives in order, each with its unit and direction: "error (1 − mean client accuracy)
    minimised, comm (params/round/client slot) minimised, ε (accountant) minimised, …"."""
    from .front_model import OBJECTIVE_LABELS

    return ", ".join(OBJECTIVE_LABELS.get(o.name, o.heading)
                     + (" maximised" if o.maximize else " minimised") for o in data.objectives)


def importance_html(data: RunData, *, seed: int = 0, plotly_src: Optional[str] = None,
                    front_name: Optional[str] = "front.html") -> str:
    from .front_model import hv_space

    p = data.problem
    n_ok, n = len(data.ok_rows), len(data.rows)
    link = (f' · <a href="{esc(front_name)}">the front page ({esc(front_name)})</a>' if front_name else "")
    note = data.budget_note()
    body = [f"<h1>fedevo search — {esc(p.name)} — which genes matter</h1>",
            f'<p class="meta">problem <b>{esc(p.name)}</b> · run {esc(data.meta.get("run_id", ""))} · '
            f'generations {data.generations_text()}'
            + (f' ({esc(note)})' if note else '') + f' · {n} evaluation{"s" if n != 1 else ""}, {n_ok} ok '
            f"(failed and diverged ones are left out of everything below){link}<br>"
            f"objectives: {esc(objectives_text(data))}</p>"]
    if n_ok:
        result = importance(data, seed=seed)
        ranked = [o for o in result if o.genes]
        unranked = [o for o in result if not o.genes]
        body += ["<h2>Importance of each gene, per objective</h2>"]
        if not ranked:  # one clear note, not a panel of notes per objective (a small run)
            body.append(f'<p class="note" id="importance-none"><b>{esc(_none_note(result))}</b></p>')
        else:
            if unranked:
                body.append('<p class="note"><b>' + esc("; ".join(f"{o.title}: {o.note}" for o in unranked))
                            + " (not drawn).</b></p>")
            body += [f'<p class="note" id="importance-method">{esc(_method_note(ranked, seed))}</p>',
                     *(f'<p class="note"><b>{esc(o.title)}: {esc(o.note)}</b></p>' for o in ranked if o.note),
                     f'<div class="fig">{figure_div(figure_importance(ranked), "importance")}</div>',
                     _table(data, ranked)]
        drawn = slice_rows(data, seed=seed)
        shown = ("Every ok evaluation" if len(drawn) == n_ok else
                 f"Showing {len(drawn):,} of {n_ok:,} ok evaluations: a sample (the {len(drawn):,} whose ids hash "
                 f"lowest with seed {seed}, the same on every write), drawn")
        body += [
                 "<h2>Slices: each objective against each gene</h2>",
                 f'<p class="note" id="slices-note">{shown}, coloured by generation. Log axes where the gene '
                 "is declared log, for ε, and for comm when its values span two decades; ε = ∞ (no privacy) is drawn "
                 "at a cap labelled ∞ (×). A slice shows one gene while the others vary: a trend is a hint, the "
                 "importance above weighs all genes together.</p>",
                 f'<div class="fig">{slices_div(data, drawn)}</div>']
    else:
        body.append('<p class="note"><b>No evaluation finished with status ok: nothing to say.</b></p>')
    hv = data.hypervolume()
    body += ["<h2>Hypervolume per generation</h2>",
             f'<p class="note" id="hypervolume-note">As on the front page: in {esc(hv_space(data)[0])}, normalised by '
             f"the first generation(s); reference point {esc(hv_space(data)[1])}; the axis spans the values, not 0 → "
             "max.</p>",
             f'<div class="fig">{figure_div(figure_hv_history({"hypervolume": hv}, title="hypervolume"), "hypervolume")}'
             "</div>"]
    blob = json.dumps({"run": str(data.run_dir), "n_ok": n_ok}).replace("</", "<\\/")
    return page(f"fedevo — {p.name} — importance — {data.meta.get('run_id', '')}",
                "\n".join(body) + f"<script>window.FEDEVO_IMPORTANCE = {blob};</script>", plotly_src=plotly_src)


def write_importance_html(run_dir: Path | str, out: Optional[Path | str] = None, *, plotly: Optional[str] = None,
                          data: Optional[RunData] = None, seed: int = 0,
                          front_name: Optional[str] = "front.html") -> Path:
    """Write RUN_DIR/importance.html (or `out`) atomically; returns its path. plotly: "shared" (default, also None), "embed" or "keep"
    (as `fedevo.viz.front.write_front_html`)."""
    from .html import plotly_src_for

    if data is None:
        data = load_run(run_dir, reading=True)
    path = Path(out) if out is not None else Path(run_dir) / IMPORTANCE_HTML
    src = plotly_src_for(path, plotly)
    write(path, importance_html(data, seed=seed, plotly_src=src, front_name=front_name))
    return path


__all__ = ["IMPORTANCE_HTML", "importance", "importance_html", "importance_path", "write_importance_html"]
