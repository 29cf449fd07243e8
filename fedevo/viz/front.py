"""front.html: the whole search on one self-contained page (plotly.js embedded; opens offline).

Sections (each a plotly graph div with a fixed id, so scripts and tests can find it):

* ``front3d``      3D scatter of (error, comm, ε) of every evaluation with status ok: the Pareto front opaque
                   (diamonds), dominated points faded (circles), colour = generation; the knee and the two
                   lowest-error solutions ringed. Hover: id, generation, every gene, every objective (both ε).
* ``projections``  the three 2D projections (error–comm, error–ε, comm–ε) with the same styling.
* ``parallel``     parallel coordinates of the genes and objectives (drag along an axis to brush/filter);
                   Pareto solutions in colour, dominated ones grey.
* ``hypervolume``  hypervolume of the front after each generation (and the front size).

ε is the problem's ``eps_objective`` (the one the search minimised). ε = ∞ (no privacy) and other non-finite
values cannot be drawn: such points are put at a cap just beyond the largest finite value, drawn as ×, and a note
says so; their hover text shows ∞. An axis whose values span two decades or more is logarithmic. Evaluations
that failed or diverged are not plotted; they are listed in a table below the plots.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .html import esc, figure_div, fmt, page, table, write
from .rundata import OBJECTIVE_LABELS, RunData, load_run

FRONT_HTML = "front.html"
FRONT_COLOR = "#d62728"
DOMINATED_OPACITY = 0.3
SCALE = "Viridis"
SHORT = {"error": "error", "comm": "comm", "eps": "ε", "eps_paper": "ε (paper)"}


@dataclass
class Axis:
    key: str
    title: str
    values: list[float]  # what is drawn (non-finite values replaced by `cap`)
    capped: list[bool]
    log: bool
    cap: Optional[float]

    @property
    def note(self) -> str:
        n = sum(self.capped)
        if not n:
            return ""
        what = "∞ (no privacy) or undefined" if self.key.startswith("eps") else "non-finite"
        return (f"{n} point{'s' if n != 1 else ''} with {self.title} {what} drawn at the cap "
                f"{self.title} = {fmt(self.cap)} (marked × in 2D, ■ in 3D; the hover text shows the true value).")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _tick(v: float) -> str:
    """A short tick label: 0.05, 3.2, 250, 12k, 3.5M."""
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}" if abs(v) >= 1 else f"{v:.2g}"


def make_axis(rows: Sequence[Mapping[str, Any]], key: str, title: Optional[str] = None) -> Axis:
    raw = [r.get(key) for r in rows]
    fin = [float(v) for v in raw if _finite(v)]
    log = bool(fin) and min(fin) > 0 and max(fin) / min(fin) >= 100
    cap = None
    if len(fin) < len(raw):
        if not fin:
            cap = 1.0
        elif log:
            cap = max(fin) * 3
        else:
            hi, lo = max(fin), min(fin)
            cap = hi + 0.15 * (hi - lo) if hi > lo else (abs(hi) * 1.5 or 1.0)
    vals = [float(v) if _finite(v) else cap for v in raw]
    return Axis(key=key, title=title or OBJECTIVE_LABELS.get(key, key), values=vals,
                capped=[not _finite(v) for v in raw], log=log, cap=cap)


def hover_text(r: Mapping[str, Any], data: RunData, on_front: bool, marks: Sequence[str] = ()) -> str:
    where = "Pareto front" if on_front else "dominated"
    head = f"<b>id {r['id']}</b> · generation {r['generation']} · {where}"
    if marks:
        head += " · " + ", ".join(marks)
    lines = [head,
             f"error {fmt(r['error'])} (mean client accuracy {fmt(1 - r['error']) if _finite(r['error']) else '–'}, "
             f"global accuracy {fmt(r['accuracy_global'])})",
             f"comm {fmt(r['comm'])} params/round/client slot · Ω {r['omega']}",
             f"ε (accountant) {fmt(r['eps'])} · ε (paper) {fmt(r['eps_paper'])}"]
    genes = [f"{g} = {fmt(r[g])}" for g in data.gene_names]
    for i in range(0, len(genes), 3):
        lines.append(" · ".join(genes[i:i + 3]))
    return "<br>".join(lines)


class _Parts:
    """The ok rows split into front / dominated, with their drawn coordinates and hover texts."""

    def __init__(self, data: RunData, marks: Mapping[int, Sequence[str]]):
        self.data = data
        self.rows = data.ok_rows
        self.keys = ("error", "comm", data.eps_key)
        self.axes = {k: make_axis(self.rows, k) for k in self.keys}
        self.on_front = [r["id"] in data.front_ids for r in self.rows]
        self.text = [hover_text(r, data, f, marks.get(r["id"], ())) for r, f in zip(self.rows, self.on_front)]
        self.gmax = max(2, data.generations)
        self.marks = marks

    def idx(self, front: bool) -> list[int]:
        return [i for i, f in enumerate(self.on_front) if f == front]

    def col(self, key: str, idx: Sequence[int]) -> list[float]:
        vals = self.axes[key].values
        return [vals[i] for i in idx]

    def capped(self, idx: Sequence[int]) -> list[bool]:
        return [any(self.axes[k].capped[i] for k in self.keys) for i in idx]


def _marker(parts: _Parts, idx, front: bool, *, size: float, showscale: bool, three_d: bool) -> dict:
    capped = parts.capped(idx)
    base = "diamond" if front else "circle"
    cap_symbol = "square" if three_d else "x"  # gl3d draws symbols as font glyphs: ■ is in every font, ✖ is not
    m = dict(color=[parts.rows[i]["generation"] for i in idx], colorscale=SCALE, cmin=1, cmax=parts.gmax,
             size=size, symbol=[cap_symbol if c else base for c in capped])
    if showscale:
        m.update(showscale=True, colorbar=dict(title=dict(text="generation"), thickness=14, len=0.6, dtick=1))
    if front:
        m["line"] = dict(color="black", width=1 if three_d else 1.2)
    return m


def figure_3d(parts: _Parts):
    import plotly.graph_objects as go

    fig = go.Figure()
    kx, ky, kz = parts.keys
    for front in (False, True):
        idx = parts.idx(front)
        if not idx:
            continue
        fig.add_trace(go.Scatter3d(
            x=parts.col(kx, idx), y=parts.col(ky, idx), z=parts.col(kz, idx), mode="markers",
            name="Pareto front" if front else "dominated", meta="evaluations",
            customdata=[parts.rows[i]["id"] for i in idx], text=[parts.text[i] for i in idx],
            hovertemplate="%{text}<extra></extra>", opacity=1.0 if front else DOMINATED_OPACITY,
            marker=_marker(parts, idx, front, size=6 if front else 4, showscale=front or not parts.idx(True),
                           three_d=True)))
    _add_marks(fig, parts, three_d=True)
    fig.update_layout(
        height=640, margin=dict(l=0, r=0, t=30, b=0), legend=dict(x=0.01, y=0.98),
        scene=dict(xaxis=_axis_layout(parts.axes[kx]), yaxis=_axis_layout(parts.axes[ky]),
                   zaxis=_axis_layout(parts.axes[kz]), camera=dict(eye=dict(x=1.6, y=1.6, z=1.0))),
        title=dict(text="every evaluation (status ok) in objective space", x=0.5, font=dict(size=14)))
    return fig


def _axis_layout(ax: Axis) -> dict:
    d = dict(title=dict(text=ax.title + (" (log)" if ax.log else "")))
    if ax.log:
        d.update(type="log", dtick="D2")  # 1, 2, 5, 10, ...: every digit crowds a 3D axis
    return d


def _add_marks(fig, parts: _Parts, *, three_d: bool, row=None, col=None, pair=None, showlegend=True) -> None:
    """Rings around the knee and the lowest-error solutions (not counted as evaluations: meta='mark')."""
    import plotly.graph_objects as go

    pos = {r["id"]: i for i, r in enumerate(parts.rows)}
    groups = {"knee": [], "lowest error ×2": []}
    for rid, ms in parts.marks.items():
        if rid not in pos:
            continue
        if "knee" in ms:
            groups["knee"].append(pos[rid])
        if any(m.startswith("lowest-error") for m in ms):
            groups["lowest error ×2"].append(pos[rid])
    style = {"knee": dict(color="black", size=13 if three_d else 16, symbol="circle-open"),
             "lowest error ×2": dict(color=FRONT_COLOR, size=12 if three_d else 15, symbol="diamond-open")}
    for name, idx in groups.items():
        if not idx:
            continue
        kw = dict(mode="markers", name=name, meta="mark", legendgroup=name, showlegend=showlegend,
                  customdata=[parts.rows[i]["id"] for i in idx], text=[parts.text[i] for i in idx],
                  hovertemplate="%{text}<extra></extra>", marker=dict(**style[name]))
        if not three_d:
            style[name]["line"] = dict(width=2, color=style[name]["color"])
            kw["marker"] = style[name]
        if three_d:
            kx, ky, kz = parts.keys
            fig.add_trace(go.Scatter3d(x=parts.col(kx, idx), y=parts.col(ky, idx), z=parts.col(kz, idx), **kw))
        else:
            a, b = pair
            fig.add_trace(go.Scatter(x=parts.col(a, idx), y=parts.col(b, idx), **kw), row=row, col=col)


def figure_projections(parts: _Parts):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    kx, ky, kz = parts.keys
    pairs = [(kx, ky), (kx, kz), (ky, kz)]
    ax = parts.axes
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07,
                        subplot_titles=[f"{SHORT[a]} vs {SHORT[b]}" for a, b in pairs])
    for c, (a, b) in enumerate(pairs, start=1):
        for front in (False, True):
            idx = parts.idx(front)
            if not idx:
                continue
            fig.add_trace(go.Scatter(
                x=parts.col(a, idx), y=parts.col(b, idx), mode="markers",
                name="Pareto front" if front else "dominated", legendgroup="front" if front else "dominated",
                showlegend=c == 1, meta="evaluations", customdata=[parts.rows[i]["id"] for i in idx],
                text=[parts.text[i] for i in idx], hovertemplate="%{text}<extra></extra>",
                opacity=1.0 if front else DOMINATED_OPACITY + 0.15,
                marker=_marker(parts, idx, front, size=10 if front else 7,
                               showscale=c == 3 and (front or not parts.idx(True)), three_d=False)),
                row=1, col=c)
        _add_marks(fig, parts, three_d=False, row=1, col=c, pair=(a, b), showlegend=c == 1)
        fig.update_xaxes(title_text=ax[a].title, type="log" if ax[a].log else None, row=1, col=c)
        fig.update_yaxes(title_text=ax[b].title, type="log" if ax[b].log else None, row=1, col=c)
    fig.update_layout(height=430, margin=dict(l=50, r=20, t=40, b=50), hovermode="closest",
                      legend=dict(orientation="h", y=-0.25))
    return fig


def figure_parallel(parts: _Parts):
    import plotly.graph_objects as go

    data = parts.data
    rows = parts.rows
    dims = []
    for g in data.gene_names:
        vals = [r[g] for r in rows]
        if data.gene_types.get(g) == "choice":
            choices = list(data.problem.gene(g).choices)
            dims.append(dict(label=g, values=[choices.index(v) if v in choices else -1 for v in vals],
                             tickvals=list(range(len(choices))), ticktext=[str(c) for c in choices]))
        elif data.gene_types.get(g) == "int" and vals and max(vals) - min(vals) <= 10:
            dims.append(dict(label=g, values=[int(v) for v in vals], tickvals=list(range(min(vals), max(vals) + 1))))
        else:
            dims.append(dict(label=g, values=[float(v) for v in vals]))
    for key in ("error", "comm", "eps", "eps_paper"):
        axis = parts.axes[key] if key in parts.axes else make_axis(rows, key)
        label = {"eps": "ε", "eps_paper": "ε paper"}.get(key, key)
        if axis.cap is not None:
            label += " (∞ on top)"
        if axis.log:  # parcoords has no log axes: draw log10 with ticks at the decades
            logs = [math.log10(v) for v in axis.values]
            lo, hi = min(logs), max(logs)
            decades = [k for k in range(math.floor(lo), math.ceil(hi) + 1) if lo - 1e-9 <= k <= hi + 1e-9]
            ends = [e for e in (lo, hi) if all(abs(e - k) > 0.2 for k in decades)]  # labels must not overlap
            ticks = sorted({*ends, *decades})
            dims.append(dict(label=label + " (log)", values=logs, range=[lo, hi], tickvals=ticks,
                             ticktext=[_tick(10.0 ** k) for k in ticks]))
        else:
            dims.append(dict(label=label, values=axis.values))
    dims.append(dict(label="global acc", values=[float(r["accuracy_global"]) for r in rows]))
    dims.append(dict(label="generation", values=[r["generation"] for r in rows],
                     tickvals=list(range(1, data.generations + 1)) if data.generations <= 30 else None))
    dims.append(dict(label="Pareto", values=[1 if f else 0 for f in parts.on_front], tickvals=[0, 1],
                     ticktext=["dominated", "front"], range=[-0.1, 1.1]))
    fig = go.Figure(go.Parcoords(
        dimensions=dims, meta="evaluations", labelangle=-20, labelside="top",
        line=dict(color=[1 if f else 0 for f in parts.on_front], cmin=0, cmax=1,
                  colorscale=[[0, "rgba(150,150,150,0.35)"], [1, FRONT_COLOR]])))
    fig.update_layout(height=480, margin=dict(l=60, r=60, t=90, b=30))
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
                             customdata=[t["evaluations"] for t in table_rows],
                             hovertemplate="generation %{x}: HV %{y:.4f} (%{customdata} evaluations)<extra></extra>"),
                  secondary_y=False)
    fig.update_xaxes(title_text="generation", dtick=1)
    fig.update_yaxes(title_text="hypervolume (normalised objectives)", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(title_text="Pareto front size", secondary_y=True, rangemode="tozero", showgrid=False,
                     tickformat="d")
    fig.update_layout(height=360, margin=dict(l=60, r=60, t=30, b=50), legend=dict(orientation="h", y=1.12))
    return fig


# ============================================================================================ page
def _summary(data: RunData) -> str:
    s = data.settings
    n_ok = len(data.ok_rows)
    bad = {}
    for r in data.bad_rows:
        bad[r["status"]] = bad.get(r["status"], 0) + 1
    bad_s = ", ".join(f"{v} {k}" for k, v in sorted(bad.items())) or "none failed"
    p = data.problem
    cons = ", ".join(f"{k} ≤ {v:g}" for k, v in data.constraints.items())
    return (f'<p class="meta">problem <b>{esc(p.name)}</b> ({esc(p.dataset)}, {esc(p.model)}, mechanism '
            f'{esc(p.fixed.get("mechanism", "none"))}) · run {esc(data.meta.get("run_id", ""))} · created '
            f'{esc(data.meta.get("created", ""))}<br>population {s.pop} · generations {data.generations}/{s.gen} · '
            f'seed {s.seed} · rounds per evaluation {s.rounds or p.fixed.get("rounds", "default")} · '
            f'{len(data.rows)} evaluations ({n_ok} ok, {bad_s}) · Pareto front of {len(data.front)}'
            f'{" · constraints " + esc(cons) if cons else ""}<br>objectives (all minimised): '
            f'{esc(OBJECTIVE_LABELS["error"])}, {esc(OBJECTIVE_LABELS["comm"])}, '
            f'{esc(OBJECTIVE_LABELS[data.eps_key])} at δ = {fmt(p.fixed.get("delta", 1e-4))}</p>')


def _front_table(data: RunData, marks: Mapping[int, Sequence[str]]) -> str:
    rows = sorted(data.front, key=lambda r: (r["error"], r["comm"], r["id"]))
    head = ["id", "gen", "mark", "error", "global acc", "comm", "ε", "ε paper", "Ω", *data.gene_names]
    body = [[r["id"], r["generation"], ", ".join(marks.get(r["id"], ())), fmt(r["error"]), fmt(r["accuracy_global"]),
             fmt(r["comm"]), fmt(r["eps"]), fmt(r["eps_paper"]), r["omega"], *(fmt(r[g]) for g in data.gene_names)]
            for r in rows]
    return table(head, body, left=(2,))


def _bad_table(data: RunData) -> str:
    bad = data.bad_rows
    if not bad:
        return "<p class=\"note\">Every evaluation finished with status ok.</p>"
    body = [[r["id"], r["generation"], r["status"], _first_line(r["message"]), *(fmt(r[g]) for g in data.gene_names)]
            for r in bad]
    return table(["id", "gen", "status", "message", *data.gene_names], body, left=(2, 3))


def _first_line(msg: Optional[str], n: int = 200) -> str:
    lines = [x for x in (msg or "").strip().splitlines() if x.strip()]
    return lines[0][:n] if lines else ""


def front_html(data: RunData) -> str:
    from ..pick import marks as pick_marks

    marks = pick_marks(data.front, data.eps_key)
    parts = _Parts(data, marks)
    notes = [a.note for a in parts.axes.values() if a.note]
    logs = [a.title for a in parts.axes.values() if a.log]
    if logs:
        notes.append("Logarithmic axes (values span two decades or more): " + ", ".join(logs) + ".")
    n_bad = len(data.bad_rows)
    if n_bad:
        notes.append(f"{n_bad} evaluation{'s' if n_bad != 1 else ''} that failed or diverged "
                     f"{'are' if n_bad != 1 else 'is'} not plotted (listed at the bottom).")
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    body = [f"<h1>fedevo search — {esc(data.problem.name)}</h1>", _summary(data), note_html]
    if parts.rows:
        body += [f'<div class="fig">{figure_div(figure_3d(parts), "front3d")}</div>',
                 "<h2>2D projections</h2>",
                 f'<div class="fig">{figure_div(figure_projections(parts), "projections")}</div>',
                 "<h2>Genes and objectives</h2>",
                 '<p class="note">Drag along an axis to select a range (brushing); click the range to clear it. '
                 'Pareto solutions in red, dominated ones grey.</p>',
                 f'<div class="fig">{figure_div(figure_parallel(parts), "parallel")}</div>']
    else:
        body.append('<p class="note"><b>No evaluation finished with status ok: nothing to plot.</b></p>')
    body += ["<h2>Hypervolume per generation</h2>",
             '<p class="note">Objectives normalised by the ideal point and range of generation 1; reference point '
             '(1.1, 1.1, 1.1); pymoo\'s HV indicator (as in hypervolume.csv).</p>',
             f'<div class="fig">{figure_div(figure_hypervolume(data.hypervolume()), "hypervolume")}</div>',
             f"<h2>Pareto set ({len(data.front)})</h2>", _front_table(data, marks),
             f"<h2>Not plotted: failed or diverged ({n_bad})</h2>", _bad_table(data)]
    return page(f"fedevo — {data.problem.name} — {data.meta.get('run_id', '')}", "\n".join(body))


def write_front_html(run_dir: Path | str, out: Optional[Path | str] = None) -> Path:
    """Write RUN_DIR/front.html (or `out`) for the run in `run_dir`; returns its path.

    Called by `fedevo plot` and at the end of `fedevo search`. FedevoError if `run_dir` is not a run or holds
    no evaluation.
    """
    data = load_run(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / FRONT_HTML
    return write(path, front_html(data))
