"""front.html's plotly figures (fedevo/viz/front.py), each drawn from the page's Model (fedevo.viz.front_model):
the 3D front, the 2D projections of every pair of objectives (the region no better than chance shaded), the
parallel coordinates of genes and objectives, and the hypervolume per generation."""

from __future__ import annotations

import math
import re
from typing import Any, Mapping, Optional, Sequence

from .axes import Column, finite, linear_ticks
from .front_model import (CHOSEN_COLOR, COMM_LABEL, DOMINATED_OPACITY, ERROR_MAX, FRONT_COLOR, axis_title,
                          LOWER_COLOR, SCALE, SHORT, Model, unit_words)
from .grid import cell, panel_rows, rows_of_three
from .history import value_range
from .html import esc
from .numfmt import num

def _scale_stops() -> list[list]:
    """The colour scale (SCALE) as [fraction, colour] stops, for the page's script (dimming outside the caps)."""
    import plotly.colors as pc

    cols = pc.get_colorscale(SCALE)
    return [[float(f), c] for f, c in cols]


def _marker(m: Model, idx, front: bool, *, size: float, showscale: bool, three_d: bool, pair=None) -> dict:
    capped = m.capped(idx, pair)  # × (■ in 3D) where the point stands at a cap on one of this view's axes
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
            name="Pareto front" if front else m.off_front_name, meta="evaluations",
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
    if m.rows and len(set(zip(xs, ys, zs))) == 1:
        # every point at one place (a run of one evaluation): plotly's WebGL then draws no marker at all where a
        # scene annotation lies on them; the title goes to the top of the z axis' range instead (one set for it)
        za = scene["zaxis"]
        if "range" not in za:
            pad = abs(zs[0]) * 0.1 or 1.0
            za["range"] = [zs[0] - pad, zs[0] + pad]
        top["z"] = za["range"][1]
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
    nrow, ncol = rows_of_three(len(pairs))
    plot_h, spacing = panel_rows(nrow, PANEL_H, ROW_GAP)  # rows a fixed number of pixels apart, however many
    fig = make_subplots(rows=nrow, cols=ncol, horizontal_spacing=0.08, vertical_spacing=spacing,
                        subplot_titles=[f"{_short(m, a)} vs {_short(m, b)}" for a, b in pairs])
    for c, (a, b) in enumerate(pairs, start=1):
        row, col = cell(c, ncol)
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
                name="Pareto front" if front else m.off_front_name, legendgroup="front" if front else "dominated",
                showlegend=c == 1, meta="evaluations", customdata=[m.rows[i]["id"] for i in idx],
                text=[m.text[i] for i in idx], hovertemplate="%{text}<extra></extra>",
                opacity=1.0 if front else DOMINATED_OPACITY + 0.15,
                unselected=dict(marker=dict(opacity=0.12)),
                marker=_marker(m, idx, front, size=10 if front else 7,
                               showscale=c == ncol and (front or not m.idx(True)), three_d=False, pair=(a, b))),
                row=row, col=col)
        _add_marks(fig, m, three_d=False, row=row, col=col, pair=(a, b), showlegend=c == 1)
        fig.update_xaxes(**_axis(m, a), row=row, col=col)
        fig.update_yaxes(**_axis(m, b), row=row, col=col)
        if a == "error" and m.excluded:
            _shade_chance(fig, m, c)
    # the colour bar beside the first row, as long as with one row (it spanned all four rows of five objectives);
    # set on the trace that shows it only (a colour bar's keys switch plotly's showscale on)
    fig.update_traces(marker_colorbar=dict(len=0.6 * PANEL_H / plot_h, y=1 - 0.2 * PANEL_H / plot_h, yanchor="top"),
                      selector=lambda t: t.meta == "evaluations" and t.marker.showscale)
    fig.update_layout(height=PROJ_T + PROJ_B + plot_h, margin=dict(l=60, r=20, t=PROJ_T, b=PROJ_B),
                      hovermode="closest", dragmode="lasso", legend=dict(orientation="h", y=-LEGEND_DROP / plot_h),
                      hoverlabel=dict(font=dict(size=11), align="left"))
    return fig


# the projections' geometry in pixels: a panel's height, the gap between two rows (the x axis' ticks and title,
# then the next row's panel titles), the margins and the legend's drop below the last row. The gap was 16 % of the
# figure: with five objectives (ten panels, four rows) 250 px of gap around panels 200 px high.
PANEL_H, ROW_GAP, PROJ_T, PROJ_B, LEGEND_DROP = 346, 100, 64, 60, 97


def _short(m: Model, k: str) -> str:
    return SHORT.get(k, m.cols[k].label)


def _title(m: Model, k: str) -> str:
    return axis_title(m.data.objectives, k, m.cols[k].label)


def _axis(m: Model, k: str) -> dict:
    """A projection's axis of objective `k`; the error's linear axis spans its values and never runs past what an
    error can be (ERROR_MAX = 1: plotly's autorange made room for the chance note and ran to 1.2)."""
    d = m.cols[k].axis_layout(_title(m, k))
    if k == "error" and not m.cols[k].log:
        d["range"] = error_range(m)
    return d


def error_range(m: Model) -> list[float]:
    """The error axis' range (linear): the drawn errors (lower rungs and a shaded chance bar included) with 6 % of
    their span beyond each end, clamped to [0, ERROR_MAX] (a hair beyond an error of exactly 0 or 1, so that its
    marker shows whole)."""
    vals = [v for v in m.cols["error"].data if math.isfinite(v)]
    vals += [float(r["error"]) for r in m.lower if finite(r.get("error"))]
    if m.chance is not None and m.excluded:  # the shaded band's start (drawn only where a point is at chance)
        vals.append(m.chance)
    if not vals:
        return [0.0, ERROR_MAX]
    lo, hi = min(vals), max(vals)
    pad = 0.06 * ((hi - lo) or 1.0)
    return [max(lo - pad, min(0.0, lo - 0.01)), min(hi + pad, max(ERROR_MAX, hi + 0.01))]


def _shade_chance(fig, m: Model, c: int) -> None:
    """The region no better than chance (never the knee), shaded in a panel whose x axis is the error: from the
    knee bar to the axis' end; the note left of it, inside the panel."""
    ax = m.cols["error"]
    if ax.log:
        hi = 10 ** ax.axis_layout()["range"][1]
    else:
        hi = error_range(m)[1]
    xref = "x" if c == 1 else f"x{c}"
    yref = ("y" if c == 1 else f"y{c}") + " domain"
    fig.add_shape(type="rect", xref=xref, yref=yref, x0=m.chance, x1=hi, y0=0, y1=1, layer="below",
                  fillcolor="rgba(120,120,120,0.16)", line=dict(width=0), name="chance")
    fig.add_annotation(xref=xref, yref=yref, x=m.chance, y=1.0, xanchor="right", yanchor="top", showarrow=False,
                       text=f"≥ {num(m.chance)}: not clearly<br>better than chance,<br>never the knee",
                       font=dict(size=10, color="#555"), align="right", bgcolor="rgba(255,255,255,0.6)",
                       name="chance")


def _dim(c: Column, label: Optional[str] = None) -> dict:
    # plotly treats any dimension with tickvals as ordinal and snaps brushes to the ticks (issue #28), so
    # continuous axes get no tickvals: a log axis draws log10 of the value and the page's script labels its ticks
    # in the quantity's units (front_js relabelParallel); its range spans every decade the values reach into
    extra = [x for x, on in (("log", c.log), (f"{c.cap_label} on top", c.cap is not None)) if on]
    lab = (label or c.label) + (f" ({', '.join(extra)})" if extra else "")
    d = dict(label=lab, values=c.draw)
    if c.kind == "choice":
        d["tickvals"], d["ticktext"] = c.ticks()
    fin = [v for v in c.draw if math.isfinite(v)]
    if fin and c.kind != "choice":
        lo, hi = c.log_range() if c.log else (min(fin), max(fin))
        if hi > lo:
            d["range"] = [lo, hi]
        else:  # one value (a run of one evaluation): plotly pads it by ±10 % of itself, upside down when negative
            pad = 0.5 if c.log else abs(lo) * 0.1 or 1.0  # (a log axis' log10 of a value below 1: ε 0.03)
            d["range"] = [lo - pad, hi + pad]
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
            out.append({"key": k, "label": k, "log": False, "kind": "int" if k == "id" else "choice", "cap": None,
                        "units": []})
        else:
            cap = None if c.cap is None else (math.log10(c.cap) if c.log else c.cap)
            o = m.data.objectives.by_name(k) if k in m.data.objectives else None
            units = unit_words(k, o.unit if o is not None else "") if k in m.objective_names or k == "comm" else []
            out.append({"key": k, "label": c.label, "log": c.log, "kind": c.kind, "cap": cap, "units": units,
                        "cap_label": c.cap_label})
    return out


def ranges_html(m: Model) -> str:
    """Typed ranges for the parallel coordinates: from–to inputs per continuous axis (in the quantity's units)."""
    items = []
    for i, p in enumerate(parallel_meta(m)):
        if p["kind"] == "choice" or p["key"] in ("pareto", "id"):
            continue
        lab = {"eps": "ε", "eps_paper": "ε paper", "generation": "gen"}.get(p["key"], p["label"])
        items.append(f'<span class="nb"><label for="range-{i}-lo">{esc(lab)}</label> '
                     f'<input id="range-{i}-lo" data-dim="{i}" data-end="lo" type="text" size="6" '
                     f'placeholder="from"> – <input id="range-{i}-hi" data-dim="{i}" data-end="hi" type="text" '
                     f'size="6" placeholder="to"></span>')
    return ('<p class="controls" id="parallel-ranges">Type a range (Enter or leave the box; numbers as the page '
            'writes them: 0.05, 1000, 1k, 1.3k, 1,000, 1000 params, inf; empty: the axis\' end; both empty: none): '
            + " ".join(items) + ' <span id="parallel-ranges-note" class="note" role="status"></span></p>')


# the parallel axes' titles: comm with its unit as everywhere (on two lines: the titles stand 50 px apart at 1,000 px)
PARALLEL_LABEL = {"eps": "ε", "eps_paper": "ε paper", "generation": "gen", "comm": COMM_LABEL}

HALO = "0 0 2px #fff, 0 0 3px #fff, 0 0 4px #fff, 1px 1px 1px #fff, -1px -1px 1px #fff"  # CSS text-shadow


def figure_parallel(m: Model):
    import plotly.graph_objects as go

    data = m.data
    dims = [_dim(m.cols[g]) for g in data.gene_names]
    for key in _parallel_keys(m)[len(data.gene_names):-2]:  # an objective with its unit, as on the other axes
        dims.append(_dim(m.cols[key], PARALLEL_LABEL.get(key) or (_title(m, key) if key in m.objective_names else None)))
    dims.append(dict(label="Pareto", values=[1 if f else 0 for f in m.on_front], tickvals=[0, 1],
                     ticktext=["off front" if m.outside else "dominated", "front"], range=[-0.1, 1.1]))
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
    # room above for the titles (written at 30°: a long one, "comm (params/round/client slot)", rises about 3.6 px per
    # character; plotly clips what leaves the figure)
    longest = max(len(re.sub("<[^>]+>", "", d["label"])) for d in dims)
    top = max(110, int(40 + 3.6 * longest))
    fig.update_layout(height=390 + top, margin=dict(l=60, r=90, t=top, b=30))
    return fig


def figure_hypervolume(table_rows: Sequence[Mapping[str, Any]], space: str = "(error, comm, log10 ε)"):
    """Hypervolume and front size per generation; `space`: the objectives it is measured in (front_model.hv_space)."""
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
    lines = space_lines(space)
    fig.update_yaxes(title_text="hypervolume (normalised)<br>" + "<br>".join(lines), secondary_y=False,
                     **({"range": rng} if rng else {}))
    top = max([t["front_size"] for t in table_rows] or [1])
    fig.update_yaxes(title_text="Pareto front size", secondary_y=True, rangemode="tozero", showgrid=False,
                     tickvals=sorted({int(v) for v in linear_ticks(0, top) if v == int(v)}))
    fig.update_layout(height=360, margin=dict(l=60 + 16 * (len(lines) - 1), r=60, t=30, b=50),
                      legend=dict(orientation="h", y=1.12))
    return fig


HV_TITLE_LINE = 34  # characters per line of the hypervolume axis' title: its 280 px of height hold about 40


def space_lines(space: str, width: int = HV_TITLE_LINE) -> list[str]:
    """"in (error, comm, log10 ε)" on as many lines as it needs (five objectives with their labels ran past the
    axis' height and were cut), never breaking inside an objective's label."""
    parts = space.strip("()").split(", ")
    lines = [f"in ({parts[0]}"]
    for p in parts[1:]:
        if len(lines[-1]) + 2 + len(p) > width:
            lines[-1] += ","
            lines.append(p)
        else:
            lines[-1] += f", {p}"
    lines[-1] += ")"
    return lines
