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
* ``hypervolume``  hypervolume of the front after each generation (in the search's (error, comm, log10 ε) space)
                   and the front size.
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
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from itertools import combinations
from typing import Any, Mapping, Optional, Sequence

from ..searching.rundata import RunData, load_run
from .axes import EPS_FLOOR, Column, finite, linear_ticks, make_column
from .history import value_range
from .html import esc, figure_deferred, figure_div, kv_list, page, table, write
from .numfmt import JS_NUM, num

from .html import FRONT_HTML, importance_path  # noqa: E402  (FRONT_HTML re-exported)
STAMP_SUFFIX = ".stamp.js"  # front.html -> front.stamp.js beside it
FRONT_COLOR = "#d62728"
DOMINATED_OPACITY = 0.3
CHOSEN_COLOR = "#2ca02c"  # the solution chosen within the caps (knee or lowest NAME)
LOWER_COLOR = "#9a9a9a"  # a multi-fidelity search's lower-rung evaluations: grey, never in the front
SCALE = "Viridis"
SHORT = {"error": "error", "comm": "comm", "eps": "ε", "eps_paper": "ε (paper)", "accuracy_global": "global acc",
         "generation": "generation"}
OBJECTIVE_LABELS = {"error": "error (1 − mean client accuracy)", "comm": "comm (params / round / client slot)",
                    "eps": "ε (accountant)", "eps_paper": "ε (paper formula)"}
EPS_NAME = {"eps": "ε (accountant)", "eps_paper": "ε (paper)"}
AXIS_TITLE = {"error": "error", "comm": "comm (params/round)", "eps": "ε", "eps_paper": "ε (paper)"}
# keys of a per-evaluation privacy summary worth showing on hover (those present are shown)
PRIVACY_SHOW = ("mechanism", "trust", "population", "cohort", "sampling", "accountant", "delta", "unit",
                "eps_conditional", "sigma")
# settings shown once in the header as privacy / deployment (besides fedevo.problem.PRIVACY_KEYS)
DEPLOYMENT_KEYS = ("trust", "population", "cohort", "sampling", "accountant", "noise_cohort", "delta")


def _fmt_any(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) and abs(v) < 1000:
        return str(v)
    return num(v)


HOVER_LINE = 64  # characters per hover line at most (a long line widens the label beyond a 1,000 px scene)


def _wrap(items: Sequence[str], first: str = "", width: int = HOVER_LINE) -> list[str]:
    """Items joined by " · " into lines of at most `width` characters (an item longer than that: its own line)."""
    lines, cur = [], first
    for it in items:
        if cur not in ("", first) and len(cur) + 3 + len(it) > width:
            lines.append(cur)
            cur = ""
        cur += (" · " if cur not in ("", first) else "") + it
    if cur not in ("", first):
        lines.append(cur)
    return lines


# ============================================================================================ model
class Model:
    """The ok rows of a run with every drawn column, marks and hover texts (shared by all views)."""

    def __init__(self, data: RunData):
        self.data = data
        self.rows = data.ok_rows
        self.marks = data.marks()
        self.chance = data.knee_bar  # chance minus the test-set margin: at or above it, never the knee
        self.eps_log = data.meta.get("search_objectives", {}).get("eps_scale") == "log10"
        self.on_front = [r["id"] in data.front_ids for r in self.rows]
        cols: dict[str, Column] = {}
        cols["generation"] = make_column(self.rows, "generation", "generation", kind="int", log=False)
        for k in ("error", "comm", "eps", "eps_paper"):
            cols[k] = make_column(self.rows, k, SHORT[k], eps_log=self.eps_log)
        # the run's objectives (RunData.objectives, 2 to 5 of them) in order: the 3D view shows the first three,
        # the projections every pair, the parallel coordinates and the caps every one
        self.objective_names = [o.name for o in data.objectives if any(o.name in r for r in self.rows)] or \
            ["error", "comm", data.eps_key]
        for o in data.objectives:
            if o.name in self.objective_names and o.name not in cols:
                pos = all(finite(r.get(o.name)) and r[o.name] > 0 for r in self.rows)
                cols[o.name] = make_column(self.rows, o.name, o.label, log=True if (o.log and pos) else None)
        self.keys = tuple((self.objective_names + ["generation"])[:3]) if len(self.objective_names) < 3 else \
            tuple(self.objective_names[:3])
        self.pairs = list(combinations(self.objective_names, 2))
        cols["accuracy_global"] = make_column(self.rows, "accuracy_global", "global acc", log=False)
        for g in data.gene_names:
            gene = data.problem.gene(g)
            if gene.type == "choice":
                cols[g] = make_column(self.rows, g, g, kind="choice", choices=gene.choices)
            else:
                cols[g] = make_column(self.rows, g, g, kind=gene.type, log=bool(gene.log))
        self.cols = cols
        # an ε that is not the search's objective and has no finite value anywhere (ε paper under central or
        # distributed trust: NaN, the paper's formula covers local trust only; any ε with no privacy: ∞) says
        # nothing: it is left out of the hover, the parallel axes, the colour choices and the table
        self.undefined = tuple(k for k in ("eps", "eps_paper") if k != data.eps_key
                               and not any(finite(r.get(k)) for r in self.rows))
        self.text = [self.hover(r, f) for r, f in zip(self.rows, self.on_front)]
        self.excluded = [r["id"] for r in self.rows if self.chance is not None and finite(r["error"])
                         and r["error"] >= self.chance]
        # a multi-fidelity search's lower rungs (finite objectives): drawn grey beneath, not evaluations of the
        # front (no selection, no colour, no knee); their values are those measured after the rung's rounds
        self.lower = [r for r in data.lower_rows if all(finite(r.get(k)) for k in self.keys)]

    def lower_col(self, key: str) -> list[float]:
        """A lower-rung column in the data space of the same axis (ε floored as the column floors it)."""
        floor = self.cols[key].log and key.startswith("eps")
        return [max(float(r[key]), EPS_FLOOR) if floor else float(r[key]) for r in self.lower]

    def lower_hover(self, r: Mapping[str, Any]) -> str:
        planned = planned_rounds(self.data) if "rounds" not in self.data.gene_names else None
        of = f"of the {planned} planned rounds" if planned is not None else "of the planned rounds"
        return "<br>".join([
            f"<b>id {r['id']}</b> · generation {r['generation']} · rung {r['rung']}: "
            f"{r['rounds_trained']} {of}",
            "a lower-fidelity evaluation: not in the front (measured after these rounds)",
            f"error {num(r['error'])} · comm {num(r['comm'])} · {EPS_NAME[self.data.eps_key]} "
            f"{num(r[self.data.eps_key])}"])

    def idx(self, front: bool) -> list[int]:
        return [i for i, f in enumerate(self.on_front) if f == front]

    def col(self, key: str, idx: Sequence[int]) -> list[float]:
        vals = self.cols[key].data
        return [vals[i] for i in idx]

    def capped(self, idx: Sequence[int]) -> list[bool]:
        return [any(self.cols[k].capped[i] for k in self.keys) for i in idx]

    def hover(self, r: Mapping[str, Any], on_front: bool) -> str:
        data = self.data
        where = "Pareto front" if on_front else "dominated"
        head = [f"<b>id {r['id']}</b>", f"generation {r['generation']}", where]
        ms = self.marks.get(r["id"], ())
        if ms:
            head.append(", ".join(ms))
        if self.chance is not None and finite(r["error"]) and r["error"] >= self.chance:
            head.append("no better than chance")
        acc = num(1 - r["error"]) if finite(r["error"]) else "–"
        lines = [*_wrap(head, width=HOVER_LINE + 7),  # + 7: <b></b>
                 f"error {num(r['error'])} (mean client accuracy {acc}, global accuracy {num(r['accuracy_global'])})",
                 f"comm {num(r['comm'])} params/round/client slot · Ω {num(r['omega'])}",
                 " · ".join(f"{EPS_NAME[k]} {num(r[k])}" for k in ("eps", "eps_paper") if k not in self.undefined)]
        lines += _wrap([f"{self.cols[k].label} {num(r.get(k))}" for k in self.objective_names
                        if k not in ("error", "comm", "eps", "eps_paper")])
        priv = r.get("privacy") or {}
        shown = [f"{k} {_fmt_any(priv[k])}" for k in PRIVACY_SHOW
                 if k in priv and not isinstance(priv[k], (dict, list))]
        lines += _wrap(shown, "privacy: ")
        lines += _wrap([f"{g} = {_fmt_any(r[g])}" for g in data.gene_names])
        return "<br>".join(lines)

    def objectives(self) -> list[dict]:
        """The run's objectives (RunData.objectives, in order) that the rows hold and that say something: what the
        caps inputs, the "lowest NAME" choices and the knee (fedevo.viz.knee_js) work on."""
        out = []
        for o in self.data.objectives:
            if o.name in self.undefined or not any(o.name in r for r in self.rows):
                continue
            if o.name not in self.objective_names:
                continue
            out.append({"name": o.name, "label": SHORT.get(o.name, o.label), "unit": o.unit,
                        "worst": o.worst, "maximize": o.maximize, "log": bool(o.log)})
        return out

    # ---------------------------------------------------------------- the page's data (for its script)
    def colour_options(self) -> list[tuple[str, str]]:
        opts = [("generation", "generation"), ("error", "error"), ("comm", "comm"), ("eps", "ε (accountant)"),
                ("eps_paper", "ε (paper)"), ("accuracy_global", "global accuracy")]
        opts += [(k, self.cols[k].label) for k in self.objective_names if k not in dict(opts)]
        return [o for o in opts if o[0] not in self.undefined] + [(g, f"gene {g}") for g in self.data.gene_names]

    def script_data(self, stamp: str, complete: bool, stamp_file: str) -> dict:
        data = self.data
        cols = {}
        for key, label in self.colour_options():
            c = self.cols[key]
            tv, tt = c.ticks()
            cols[key] = {"label": label + (" (log)" if c.log else ""), "draw": c.draw, "tickvals": tv, "ticktext": tt}
        rows = []
        for r, f in zip(self.rows, self.on_front):
            rows.append({"id": r["id"], "generation": r["generation"], "front": f,
                         "marks": list(self.marks.get(r["id"], ())),
                         **{k: r[k] for k in ("error", "comm", "eps", "eps_paper", "accuracy_global")},
                         **{k: r.get(k) for k in self.objective_names},
                         **{g: r[g] for g in data.gene_names}})
        knee = [i for i, ms in self.marks.items() if "knee" in ms]
        # the knee's inputs (fedevo.viz.knee_js re-picks it within caps): the Pareto set in front.csv's order
        # (ties go to the first), the bar a candidate's error must stay below, Python's knee
        from ..retraining import DEFAULT_ROUNDS

        return {"run": str(Path(data.run_dir).resolve()), "run_id": str(data.meta.get("run_id", "")),
                "eps_key": data.eps_key, "objectives": self.objectives(), "retrain_rounds": DEFAULT_ROUNDS,
                "scale": _scale_stops(), "int_axes": [k for k, c in self.cols.items() if c.kind == "int"],
                "log_axes": [k for k, c in self.cols.items() if c.log], "parallel": parallel_meta(self),
                "genes": list(data.gene_names), "rows": rows, "front_ids": [r["id"] for r in data.front],
                "knee_bar": self.chance, "knee": knee[0] if knee else None, "undefined": list(self.undefined),
                "colour": cols, "colour_default": "generation", "stamp": stamp, "complete": complete,
                "stamp_file": stamp_file}


# ============================================================================================ figures
def _scale_stops() -> list[list]:
    """The colour scale (SCALE) as [fraction, colour] stops, for the page's script (dimming outside the caps)."""
    import plotly.colors as pc

    cols = pc.get_colorscale(SCALE)
    return [[float(f), c] for f, c in cols]


def _marker(m: Model, idx, front: bool, *, size: float, showscale: bool, three_d: bool) -> dict:
    capped = m.capped(idx)
    base = "diamond" if front else "circle"
    cap_symbol = "square" if three_d else "x"  # gl3d draws symbols as font glyphs: ■ is in every font, ✖ is not
    c = m.cols["generation"]
    tv, tt = c.ticks()
    d = dict(color=[c.draw[i] for i in idx], colorscale=SCALE, cmin=min(c.draw), cmax=max(max(c.draw), min(c.draw) + 1),
             size=size, symbol=[cap_symbol if x else base for x in capped])
    if showscale:
        d.update(showscale=True, colorbar=dict(title=dict(text="generation", side="right"), thickness=14, len=0.6,
                                               tickvals=tv, ticktext=tt, x=1.02))
    if front:
        d["line"] = dict(color="black", width=1 if three_d else 1.2)
    return d


def figure_3d(m: Model):
    import plotly.graph_objects as go

    fig = go.Figure()
    kx, ky, kz = m.keys
    if m.lower:
        fig.add_trace(go.Scatter3d(
            x=m.lower_col(kx), y=m.lower_col(ky), z=m.lower_col(kz), mode="markers", meta="lower-rung",
            name=f"lower rungs ({len(m.lower)}; not in the front)", text=[m.lower_hover(r) for r in m.lower],
            hovertemplate="%{text}<extra></extra>", opacity=0.45,
            marker=dict(size=3, color=LOWER_COLOR, symbol="circle")))
    for front in (False, True):
        idx = m.idx(front)
        if not idx:
            continue
        fig.add_trace(go.Scatter3d(
            x=m.col(kx, idx), y=m.col(ky, idx), z=m.col(kz, idx), mode="markers",
            name="Pareto front" if front else "dominated", meta="evaluations",
            customdata=[m.rows[i]["id"] for i in idx], text=[m.text[i] for i in idx],
            hovertemplate="%{text}<extra></extra>", opacity=1.0 if front else DOMINATED_OPACITY,
            marker=_marker(m, idx, front, size=6 if front else 4, showscale=front or not m.idx(True),
                           three_d=True)))
    _add_marks(fig, m, three_d=True)
    fig.add_trace(go.Scatter3d(x=[], y=[], z=[], mode="markers", name="selected", meta="selection",
                               customdata=[], hoverinfo="skip",
                               marker=dict(size=15, color="#ff7f0e", symbol="circle-open")))
    scene = {f"{a}axis": m.cols[k].axis_layout(_title(m, k)) for a, k in zip("xyz", m.keys)}
    for a in "xyz":
        scene[f"{a}axis"]["title"]["font"] = dict(size=12)
    # WebGL draws the vertical axis' title along the axis, read top to bottom from the default camera: it is left
    # out and written level, as a scene annotation at the top of that axis (where the camera shows its ticks)
    z_title = scene["zaxis"]["title"]["text"]
    scene["zaxis"]["title"]["text"] = ""
    xs, ys, zs = (m.cols[k].draw for k in m.keys)  # a scene annotation on a log axis takes log10 of the value
    top = dict(x=max(xs), y=min(ys), z=max(zs)) if m.rows else dict(x=0, y=0, z=0)
    fig.update_layout(
        height=660, margin=dict(l=10, r=10, t=64, b=10), legend=dict(x=0.01, y=0.98),
        hoverlabel=dict(font=dict(size=11), align="left"),
        scene=dict(**scene, camera=dict(eye=dict(x=1.7, y=1.7, z=0.9)), domain=dict(x=[0.0, 0.93], y=[0, 1]),
                   annotations=[dict(**top, text=z_title, showarrow=False, yshift=22, font=dict(size=12),
                                     name="z-title")]),
        # below the modebar (top right, about 30 px high), so that neither covers the other at any width
        title=dict(text="every evaluation (status ok) in objective space — click a point to select it", x=0.5,
                   xanchor="center", yref="container", y=1 - 36 / 660, yanchor="top", font=dict(size=14)))
    return fig


def _add_marks(fig, m: Model, *, three_d: bool, row=None, col=None, pair=None, showlegend=True) -> None:
    """Rings around the knee, the lowest-error solutions and the solution chosen within the caps (not counted as
    evaluations: meta='mark'). Each trace is there even when empty: the page's caps move the rings (or drop them)."""
    import plotly.graph_objects as go

    pos = {r["id"]: i for i, r in enumerate(m.rows)}
    groups = {"knee": [], "lowest error ×2": []}
    for rid, ms in m.marks.items():
        if rid not in pos:
            continue
        if "knee" in ms:
            groups["knee"].append(pos[rid])
        if any(x.startswith("lowest-error") for x in ms):
            groups["lowest error ×2"].append(pos[rid])
    style = {"knee": dict(color="black", size=13 if three_d else 16, symbol="circle-open"),
             "lowest error ×2": dict(color=FRONT_COLOR, size=12 if three_d else 15, symbol="diamond-open")}
    groups["chosen"] = list(groups["knee"])  # the page's default choice: the knee without caps
    style["chosen"] = dict(color=CHOSEN_COLOR, size=19 if three_d else 23, symbol="circle-open")
    for name, idx in groups.items():
        kw = dict(mode="markers", name=name, meta="mark", legendgroup=name, showlegend=showlegend,
                  customdata=[m.rows[i]["id"] for i in idx], text=[m.text[i] for i in idx],
                  hovertemplate="%{text}<extra></extra>", marker=dict(**style[name]))
        if three_d:
            kx, ky, kz = m.keys
            fig.add_trace(go.Scatter3d(x=m.col(kx, idx), y=m.col(ky, idx), z=m.col(kz, idx), **kw))
        else:
            kw["marker"] = dict(**style[name], line=dict(width=2, color=style[name]["color"]))
            a, b = pair
            fig.add_trace(go.Scatter(x=m.col(a, idx), y=m.col(b, idx), **kw), row=row, col=col)


def figure_projections(m: Model):
    """Every pair of the run's objectives (three panels for three objectives; rows of three for more)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pairs = m.pairs
    ncol = min(3, len(pairs))
    nrow = -(-len(pairs) // ncol)
    fig = make_subplots(rows=nrow, cols=ncol, horizontal_spacing=0.08, vertical_spacing=0.16 if nrow > 1 else 0.1,
                        subplot_titles=[f"{_short(m, a)} vs {_short(m, b)}" for a, b in pairs])
    for c, (a, b) in enumerate(pairs, start=1):
        row, col = (c - 1) // ncol + 1, (c - 1) % ncol + 1
        if m.lower:
            fig.add_trace(go.Scatter(
                x=m.lower_col(a), y=m.lower_col(b), mode="markers", meta="lower-rung",
                name=f"lower rungs ({len(m.lower)}; not in the front)", legendgroup="lower", showlegend=c == 1,
                text=[m.lower_hover(r) for r in m.lower], hovertemplate="%{text}<extra></extra>", opacity=0.5,
                marker=dict(size=5, color=LOWER_COLOR, symbol="circle")), row=row, col=col)
        for front in (False, True):
            idx = m.idx(front)
            if not idx:
                continue
            fig.add_trace(go.Scatter(
                x=m.col(a, idx), y=m.col(b, idx), mode="markers",
                name="Pareto front" if front else "dominated", legendgroup="front" if front else "dominated",
                showlegend=c == 1, meta="evaluations", customdata=[m.rows[i]["id"] for i in idx],
                text=[m.text[i] for i in idx], hovertemplate="%{text}<extra></extra>",
                opacity=1.0 if front else DOMINATED_OPACITY + 0.15,
                unselected=dict(marker=dict(opacity=0.12)),
                marker=_marker(m, idx, front, size=10 if front else 7,
                               showscale=c == ncol and (front or not m.idx(True)), three_d=False)),
                row=row, col=col)
        _add_marks(fig, m, three_d=False, row=row, col=col, pair=(a, b), showlegend=c == 1)
        fig.update_xaxes(**m.cols[a].axis_layout(_title(m, a)), row=row, col=col)
        fig.update_yaxes(**m.cols[b].axis_layout(_title(m, b)), row=row, col=col)
        if a == "error" and m.excluded:
            _shade_chance(fig, m, c)
    fig.update_layout(height=470 + 400 * (nrow - 1), margin=dict(l=60, r=20, t=64, b=60), hovermode="closest",
                      dragmode="lasso", legend=dict(orientation="h", y=-0.28 / nrow),
                      hoverlabel=dict(font=dict(size=11), align="left"))
    return fig


def _short(m: Model, k: str) -> str:
    return SHORT.get(k, m.cols[k].label)


def _title(m: Model, k: str) -> str:
    return AXIS_TITLE.get(k, m.cols[k].label)


def _shade_chance(fig, m: Model, c: int) -> None:
    """The region no better than chance (never the knee), shaded in a panel whose x axis is the error."""
    ax = m.cols["error"]
    hi = max(max(ax.data), m.chance) * (1.02 if not ax.log else 1.1)
    xref = "x" if c == 1 else f"x{c}"
    yref = ("y" if c == 1 else f"y{c}") + " domain"
    fig.add_shape(type="rect", xref=xref, yref=yref, x0=m.chance, x1=hi, y0=0, y1=1, layer="below",
                  fillcolor="rgba(120,120,120,0.16)", line=dict(width=0))
    fig.add_annotation(xref=xref, yref=yref, x=m.chance, y=1.0, xanchor="left", yanchor="top", showarrow=False,
                       text=f"≥ {num(m.chance)}: not clearly<br>better than chance,<br>never the knee", font=dict(size=10, color="#555"),
                       align="left")


def _dim(c: Column, label: Optional[str] = None) -> dict:
    # plotly treats any dimension with tickvals as ordinal and snaps brushes to the ticks (issue #28), so
    # continuous axes get no tickvals: a log axis draws log10 of the value and the page's script labels its ticks
    # in the quantity's units (front_js relabelParallel); its range spans every decade the values reach into
    extra = [x for x, on in (("log", c.log), ("∞ on top", c.cap is not None)) if on]
    lab = (label or c.label) + (f" ({', '.join(extra)})" if extra else "")
    d = dict(label=lab, values=c.draw)
    if c.kind == "choice":
        d["tickvals"], d["ticktext"] = c.ticks()
    fin = [v for v in c.draw if math.isfinite(v)]
    if fin and c.kind != "choice":
        lo, hi = c.log_range() if c.log else (min(fin), max(fin))
        if hi > lo:
            d["range"] = [lo, hi]
        # tick and range labels in three significant digits (plotly's default wrote the range ends as "0.072479");
        # a format is not tick values: brushing stays continuous
        big = max(abs(lo), abs(hi)) >= 1000
        # (not "d" on integer genes: plotly's own ticks may fall between integers, and "d" wrote 1.2 and 1.4 as "1";
        # the page's script leaves those unlabelled)
        d["tickformat"] = ".2~f" if c.log else ".3~s" if big else "~g" if c.kind == "int" else ".3~g"
    return d


def _parallel_keys(m: Model) -> list[str]:
    """The parallel coordinates' columns in order: the genes, the objectives and other numbers, Pareto, id."""
    keys = list(m.data.gene_names) + list(m.objective_names)
    keys += [k for k in ("eps", "eps_paper", "accuracy_global", "generation") if k not in m.undefined and k not in keys]
    return keys + ["pareto", "id"]


def parallel_meta(m: Model) -> list[dict]:
    """What the page's script needs of each parallel axis (in order): its key, label, log, kind and the drawn
    value of ∞ (its cap)."""
    out = []
    for k in _parallel_keys(m):
        c = m.cols.get(k)
        if c is None:
            out.append({"key": k, "label": k, "log": False, "kind": "int" if k == "id" else "choice", "cap": None})
        else:
            cap = None if c.cap is None else (math.log10(c.cap) if c.log else c.cap)
            out.append({"key": k, "label": c.label, "log": c.log, "kind": c.kind, "cap": cap})
    return out


def ranges_html(m: Model) -> str:
    """Typed ranges for the parallel coordinates: from–to inputs per continuous axis (in the quantity's units)."""
    items = []
    for i, p in enumerate(parallel_meta(m)):
        if p["kind"] == "choice" or p["key"] in ("pareto", "id"):
            continue
        lab = {"eps": "ε", "eps_paper": "ε paper", "generation": "gen"}.get(p["key"], p["label"])
        items.append(f'<span class="nb"><label for="range-{i}-lo">{esc(lab)}</label> '
                     f'<input id="range-{i}-lo" data-dim="{i}" data-end="lo" type="text" inputmode="decimal" size="6" '
                     f'placeholder="from"> – <input id="range-{i}-hi" data-dim="{i}" data-end="hi" type="text" '
                     f'inputmode="decimal" size="6" placeholder="to"></span>')
    return ('<p class="controls" id="parallel-ranges">Type a range (Enter or leave the box; empty: the axis\' end; '
            'both empty: none): ' + " ".join(items) + '</p>')


HALO = "0 0 2px #fff, 0 0 3px #fff, 0 0 4px #fff, 1px 1px 1px #fff, -1px -1px 1px #fff"  # CSS text-shadow


def figure_parallel(m: Model):
    import plotly.graph_objects as go

    data = m.data
    dims = [_dim(m.cols[g]) for g in data.gene_names]
    for key in _parallel_keys(m)[len(data.gene_names):-2]:
        dims.append(_dim(m.cols[key], {"eps": "ε", "eps_paper": "ε paper", "generation": "gen"}.get(key)))
    dims.append(dict(label="Pareto", values=[1 if f else 0 for f in m.on_front], tickvals=[0, 1],
                     ticktext=["dominated", "front"], range=[-0.1, 1.1]))
    ids = [r["id"] for r in m.rows]
    dims.append(dict(label="id", values=ids, range=[min(ids) - 0.5, max(ids) + 0.5], tickformat="~g"))
    c = m.cols["generation"]
    tv, tt = c.ticks()
    fig = go.Figure(go.Parcoords(
        dimensions=dims, meta="evaluations", labelangle=-30, labelside="top",
        # ticks large enough to read, with a white outline so that they stay readable over the lines
        tickfont=dict(size=12, shadow=HALO), labelfont=dict(size=13), rangefont=dict(size=10, shadow=HALO),
        unselected=dict(line=dict(color="#bbb", opacity=0.25)),
        line=dict(color=c.draw, colorscale=SCALE, cmin=min(c.draw), cmax=max(max(c.draw), min(c.draw) + 1),
                  showscale=True, colorbar=dict(title=dict(text="generation", side="right"), thickness=14,
                                                tickvals=tv, ticktext=tt))))
    fig.update_layout(height=500, margin=dict(l=60, r=90, t=110, b=30))
    return fig


def figure_hypervolume(table_rows: Sequence[Mapping[str, Any]]):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(specs=[[{"secondary_y": True}]])
    g = [t["generation"] for t in table_rows]
    fig.add_trace(go.Bar(x=g, y=[t["front_size"] for t in table_rows], name="front size",
                         marker_color="rgba(100,100,200,0.25)",
                         hovertemplate="generation %{x}: front of %{y}<extra></extra>"), secondary_y=True)
    fig.add_trace(go.Scatter(x=g, y=[t["hypervolume"] for t in table_rows], mode="lines+markers",
                             name="hypervolume", line=dict(color=FRONT_COLOR, width=3),
                             customdata=[[num(t["hypervolume"]), t["evaluations"]] for t in table_rows],
                             hovertemplate="generation %{x}: HV %{customdata[0]} (%{customdata[1]} evaluations)"
                                           "<extra></extra>"),
                  secondary_y=False)
    fig.update_xaxes(title_text="generation", dtick=1)
    # the scale spans the values (not 0 → max, where a rise from 1.196 to 1.298 looks flat)
    rng = value_range([t["hypervolume"] for t in table_rows])
    fig.update_yaxes(title_text="hypervolume (error, comm, log10 ε; normalised)", secondary_y=False,
                     **({"range": rng} if rng else {}))
    top = max([t["front_size"] for t in table_rows] or [1])
    fig.update_yaxes(title_text="Pareto front size", secondary_y=True, rangemode="tozero", showgrid=False,
                     tickvals=sorted({int(v) for v in linear_ticks(0, top) if v == int(v)}))
    fig.update_layout(height=360, margin=dict(l=60, r=60, t=30, b=50), legend=dict(orientation="h", y=1.12))
    return fig


# ============================================================================================ page
def privacy_settings(data: RunData) -> tuple[dict, list[str], dict]:
    """(the problem's fixed settings with privacy / deployment defaults filled in, the privacy / deployment keys
    among them in display order, and what the evaluations' accountants were): what every ε of the run is under."""
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
    accountants = sorted({str((r.get("privacy") or {}).get("accountant")) for r in data.ok_rows
                          if (r.get("privacy") or {}).get("accountant")})
    seen = {"accountant": "; ".join(accountants)} if accountants else {}
    return fixed, priv_keys, seen


def _settings_html(data: RunData) -> str:
    """The problem's fixed settings once (privacy / deployment first), and which settings are genes."""
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
    if seen:
        lines.append(f"accountant (from the evaluations): <b>{esc(seen['accountant'])}</b>")
    if gene_settings:
        lines.append("privacy settings that are genes (they vary per point; see the hover text and colour by): "
                     + ", ".join(f"<b>{esc(g)}</b>" for g in gene_settings))
    lines.append(f"simulation (fixed): {kv(other) or '–'}")
    return '<p class="meta">' + "<br>".join(lines) + "</p>"


def planned_rounds(data: RunData) -> Optional[int]:
    """The rounds a full evaluation trains: --rounds (which overrides the problem file's), else the problem's."""
    s, p = data.settings, data.problem
    planned = s.rounds if s.rounds is not None else p.fixed.get("rounds")
    if planned is None and p.simulated:
        planned = p.sim_config(None).rounds
    return planned


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
        counted = f"{len(data.rows)} evaluations ({n_ok} ok, {bad_s})"
    else:  # a multi-fidelity search: an evaluation (an individual) has one row per rung it reached
        ids = {r["id"] for r in data.rows}
        at_full = {r["id"] for r in full}
        low_bad = sum(1 for r in data.rows if r["status"] != "ok" and r["id"] not in at_full)
        counted = (f"{len(ids)} evaluations: {len(at_full)} trained the full rounds ({n_ok} ok, {bad_s}), "
                   f"{len(ids) - len(at_full)} stopped at a lower rung"
                   + (f" ({low_bad} of them failed or diverged)" if low_bad else "")
                   + f" · {len(data.rows)} rung trainings in all")
    p = data.problem
    cons = ", ".join(f"{k} ≤ {num(v)}" for k, v in data.constraints.items())
    eps_scale = "log10 ε" if m.eps_log else "ε (linear: a run made before log-ε search)"
    what = f"{esc(p.dataset)}, {esc(p.model)}" if p.simulated else "trained by its own evaluator"
    return (f'<p class="meta">problem <b>{esc(p.name)}</b> ({what}) · run '
            f'{esc(data.meta.get("run_id", ""))} · created {esc(data.meta.get("created", ""))}<br>'
            f'population {s.pop} · generations {data.generations}/{s.gen} · seed {s.seed} · {rounds_text(data)} · '
            f'{counted} · '
            f'Pareto front of {len(data.front)}{" · constraints " + esc(cons) if cons else ""}<br>objectives: '
            f'{esc(_objectives_text(m))}; the search saw ε as {esc(eps_scale)}</p>'
            + _settings_html(data))


def _objectives_text(m: Model) -> str:
    """The run's objectives in order, each with its direction: "error (1 − mean client accuracy) ↓, …"."""
    out = []
    for o in m.data.objectives:
        if o.name in m.objective_names:
            lab = OBJECTIVE_LABELS.get(o.name, o.label + (f" ({o.unit})" if o.unit else ""))
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


def _front_table(data: RunData, marks: Mapping[int, Sequence[str]], skip: Sequence[str] = ()) -> str:
    rows = sorted(data.front, key=lambda r: (r["error"], r["comm"], r["id"]))
    cols = [(h, k) for h, k in (("id", "id"), ("gen", "generation"), ("mark", None), ("error", "error"),
                                ("global acc", "accuracy_global"), ("comm", "comm"), ("ε", "eps"),
                                ("ε paper", "eps_paper"), ("Ω", "omega"), *((g, g) for g in data.gene_names))
            if k not in skip]
    head, keys = [h for h, _ in cols], [k for _, k in cols]
    cells = [[_fmt_any(r[k]) if k not in (None, "id", "generation") else
              (", ".join(marks.get(r["id"], ())) if k is None else r[k]) for k in keys] for r in rows]
    raws = [[r[k] if k else ", ".join(marks.get(r["id"], ())) for k in keys] for r in rows]
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
    if not knee:
        s += " No Pareto solution is better than chance: no knee is marked."
    return s


def _caps_html(m: Model) -> str:
    """Caps on any objective of the run and what to choose within them (the knee, or the lowest value of one
    objective: the highest of a maximised one). The page's script (fedevo.viz.front_js, fedevo.viz.knee_js) picks with the rule of
    `--pick knee:eps<=X:comm<=Y` / `--pick eps<=X,comm<=Y,lowest-error`, rings the choice, dims every solution
    outside the caps and writes what it chose, and why, into #knee-note."""
    tip = "empty: no cap"
    inputs = []
    for o in m.objectives():
        op = "≥" if o["maximize"] else "≤"
        inputs.append(f'<span class="nb"><label for="cap-{esc(o["name"])}">{esc(o["label"])} {op} </label>'
                      f'<input id="cap-{esc(o["name"])}" class="cap" data-key="{esc(o["name"])}" type="text" '
                      f'inputmode="decimal" size="7" placeholder="no cap" title="{esc(tip)}"></span>')
    opts = ['<option value="knee">the knee</option>'] + [  # a maximised objective's best is its highest
        f'<option value="{way}-{esc(o["name"])}">the {way} {esc(o["label"])}</option>'
        for o in m.objectives() for way in [("highest" if o["maximize"] else "lowest")]]
    return ('<div class="controls" id="knee-caps"><p><b>Choose a solution to deploy.</b> Caps: '
            + " ".join(inputs) + ' · choose <select id="choose-by">' + "".join(opts) + '</select> within them. '
            '<span class="note">Solutions outside the caps are dimmed (grey) in every view and the tables; the '
            'choice is ringed green.</span></p><p id="knee-note" class="note"></p></div>')


def stamp_of(data: RunData) -> str:
    last = data.rows[-1]["id"] if data.rows else -1
    return f"{data.meta.get('run_id', '')}-{len(data.rows)}-{last}-{data.generations}"


def is_complete(data: RunData) -> bool:
    return len(data.rows) >= data.settings.expected_evaluations


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


def front_html(data: RunData, *, plotly_src: Optional[str] = None, page_name: str = FRONT_HTML) -> str:
    m = Model(data)
    notes = [c.note for k, c in m.cols.items() if k in (*m.keys, "eps_paper") and k not in m.undefined and c.note]
    notes += [_undefined_note(m, k) for k in m.undefined]
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
    live = ("" if complete else '<p class="note live" id="live-note">The search is still running: this page '
            'reloads itself when a newer one is written (after every generation; every evaluation with '
            '<code>fedevo plot --watch</code>).</p>')
    options = "".join(f'<option value="{esc(k)}">{esc(lab)}</option>' for k, lab in m.colour_options())
    imp = importance_path(page_name).name
    more = (f'<p class="note"><a href="{esc(imp)}">Which genes matter: importance and slices ({esc(imp)})</a></p>'
            if complete else f'<p class="note">{esc(imp)} (which genes matter) is written when the search ends.</p>')
    figs: dict[str, str] = {}  # div id -> the figure's JSON: drawn by the page's script, the first screen first

    def fig_div(fig, div_id: str, what: str) -> str:
        if not m.rows:
            return figure_div(fig, div_id)
        div, figs[div_id] = figure_deferred(fig, div_id, f"drawing the {what}…")
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
    body += ["<h2>Hypervolume per generation</h2>",
             '<p class="note">Measured where the search works: (error, comm, log10 ε), each normalised by the ideal '
             'point and range of generation 1 (finite ε); reference point (1.1, 1.1, 1.1); pymoo\'s HV indicator '
             '(as in hypervolume.csv). ε = ∞ (no privacy) adds nothing.</p>',
             f'<div class="fig">{fig_div(figure_hypervolume(data.hypervolume()), "hypervolume", "hypervolume")}</div>',
             f"<h2>Pareto set ({len(data.front)})</h2>",
             '<p class="note">Click a header to sort, a row to add it to (or drop it from) the selection.</p>',
             f'<div class="scroll">{_front_table(data, m.marks, m.undefined)}</div>',
             f"<h2>Not plotted: failed or diverged ({n_bad})</h2>", _bad_table(data)]
    script = ""
    if m.rows:
        from .front_js import FRONT_JS
        from .knee_js import KNEE_JS

        blob = json.dumps(m.script_data(stamp, complete, stamp_name(page_name)), ensure_ascii=False).replace("</", "<\\/")
        figs_js = ("{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in figs.items()) + "}").replace("</", "<\\/")
        script = (f"<script>window.FEDEVO = {blob};\nwindow.FEDEVO_FIGS = {figs_js};\n{JS_NUM}\n{KNEE_JS}\n"
                  f"{FRONT_JS}</script>")
    return page(f"fedevo — {data.problem.name} — {data.meta.get('run_id', '')}", "\n".join(body) + script,
                plotly_src=plotly_src, defer=bool(m.rows))


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
        data = load_run(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / FRONT_HTML
    src = plotly_src_for(path, plotly)
    write(path, front_html(data, plotly_src=src, page_name=path.name))
    write(path.parent / stamp_name(path.name),
          f"window.fedevoStamp && window.fedevoStamp({json.dumps(stamp_of(data))});\n")
    return path
