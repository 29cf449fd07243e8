"""curves.html: accuracy per round of each retrained solution (self-contained page, plotly.js embedded)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from .html import esc, figure_div, page, write

STANDARD_STYLE = dict(color="black", dash="dash", width=3)


def curves_figure(series: Sequence[tuple[str, Sequence[Sequence[float]]]], *, standard: Optional[str] = None):
    """series: (label, [(round, mean client accuracy, global accuracy), ...]) per solution.

    Two panels sharing the round axis: mean client accuracy (1 − f1) and global test accuracy.
    `standard` names the series drawn as the reference (dashed black).
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08,
                        subplot_titles=["mean client accuracy (1 − error)", "global test accuracy"])
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
    n = 0
    for label, curve in series:
        rounds = [int(c[0]) for c in curve]
        line = STANDARD_STYLE if label == standard else dict(color=palette[n % len(palette)], width=2)
        if label != standard:
            n += 1
        for col, j in ((1, 1), (2, 2)):
            fig.add_trace(go.Scatter(x=rounds, y=[float(c[j]) for c in curve], mode="lines", name=label,
                                     legendgroup=label, showlegend=col == 1, line=line, meta="curve",
                                     hovertemplate=f"{esc(label)}<br>round %{{x}}: %{{y:.4f}}<extra></extra>"),
                          row=1, col=col)
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="accuracy", rangemode="tozero")
    fig.update_layout(height=480, margin=dict(l=60, r=20, t=40, b=50), hovermode="x unified",
                      legend=dict(orientation="h", y=-0.18))
    return fig


def write_curves_html(path: Path | str, series: Sequence[tuple[str, Sequence[Sequence[float]]]], *,
                      title: str, intro_html: str = "", standard: Optional[str] = None) -> Path:
    body = f"<h1>{esc(title)}</h1>\n{intro_html}\n<div class=\"fig\">{figure_div(curves_figure(series, standard=standard), 'curves')}</div>"
    return write(Path(path), page(title, body))
