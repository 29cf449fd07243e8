"""Hypervolume per generation as a line chart whose y axis spans the values (not 0 → max), so that a rise from
1.196 to 1.298 is visible; used by importance.html (one run) and compare.html (several runs, one colour each)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from .numfmt import num

PAD = 0.08  # share of the values' span added below and above


def value_range(values: Sequence[float]) -> Optional[list[float]]:
    """[lo, hi] around the finite values with a margin of PAD × their span (a tenth of the value, or 0.05, when all
    are equal), never below 0 when no value is (a hypervolume: every 0 of a run with no ok evaluation was drawn on
    an axis from −0.004); None when there is nothing to draw."""
    v = [float(x) for x in values if x is not None and x == x and abs(x) != float("inf")]
    if not v:
        return None
    lo, hi = min(v), max(v)
    span = hi - lo if hi > lo else (abs(hi) * 0.1 or 0.05)
    return [max(lo - PAD * span, 0.0) if lo >= 0 else lo - PAD * span, hi + PAD * span]


def figure_hv_history(series: Mapping[str, Sequence[Mapping[str, Any]]], *, colours: Optional[Mapping[str, str]] = None,
                      title: str = "hypervolume", height: int = 360):
    """One line per entry of `series` (label → rows with generation, hypervolume, evaluations); the y axis spans
    the hypervolumes of every series (see `value_range`)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    every = []
    for label, rows in series.items():
        g = [r["generation"] for r in rows]
        hv = [r["hypervolume"] for r in rows]
        every += hv
        fig.add_trace(go.Scatter(
            x=g, y=hv, mode="lines+markers", name=label, meta="hypervolume",
            line=dict(width=3, **({"color": colours[label]} if colours and label in colours else {})),
            customdata=[[num(h), r.get("evaluations", "")] for h, r in zip(hv, rows)],
            hovertemplate=f"{label}<br>generation %{{x}}: HV %{{customdata[0]}} (%{{customdata[1]}} evaluations)"
                          "<extra></extra>"))
    rng = value_range(every)
    fig.update_xaxes(title_text="generation", dtick=1)
    fig.update_yaxes(title_text=title, **({"range": rng} if rng else {}))
    fig.update_layout(height=height, margin=dict(l=70, r=30, t=30, b=50), legend=dict(orientation="h", y=1.12),
                      hovermode="closest")
    return fig
