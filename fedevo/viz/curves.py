"""curves.html: accuracy per round of each retrained solution (self-contained page, plotly.js embedded).

The accuracy at the last round is one noisy evaluation; the page also shows the mean (± standard deviation) of
the last `tail_rounds(T)` evaluations — a dashed segment over those rounds in the plot and a table — which is the
number to compare solutions by. The y axis spans the curves after their first rounds (not 0 to 1); a button switches
to error = 1 − accuracy on a log axis, which separates curves that all end near accuracy 1.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Optional, Sequence

from .html import esc, figure_div, kv_list, page, table, write
from .numfmt import num

STANDARD_STYLE = dict(color="black", dash="dash", width=3)
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]


def tail_rounds(n: int) -> int:
    """How many last evaluations the tail mean averages: a tenth of them, at least 3 and at most 10 (≤ n)."""
    return max(1, min(n, max(3, min(10, n // 10))))


def tail_stats(values: Sequence[float]) -> tuple[float, float, int]:
    """(mean, standard deviation, k) of the last k = tail_rounds(len) finite values."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return math.nan, math.nan, 0
    k = tail_rounds(len(vals))
    last = vals[-k:]
    return statistics.fmean(last), (statistics.stdev(last) if k > 1 else 0.0), k


def y_range(series: Sequence[tuple[str, Sequence[Sequence[float]]]], j: int) -> Optional[list[float]]:
    """[lo, hi] covering column j of every curve after its first fifth of rounds (at least the first round
    dropped), padded by 10 % of the span (≥ 0.01), clipped to [0, 1]."""
    vals = []
    for _, curve in series:
        skip = max(1, len(curve) // 5) if len(curve) > 1 else 0
        vals += [float(c[j]) for c in curve[skip:] if c[j] is not None and math.isfinite(float(c[j]))]
    if not vals:
        return None
    lo, hi = min(vals), max(vals)
    pad = max(0.1 * (hi - lo), 0.01)
    return [max(0.0, lo - pad), min(1.0, hi + pad)]


def curves_figure(series: Sequence[tuple[str, Sequence[Sequence[float]]]], *, standard: Optional[str] = None):
    """series: (label, [(round, mean client accuracy, global accuracy), ...]) per solution.

    Two panels sharing the round axis: mean client accuracy (1 − f1) and global test accuracy; per curve a
    dashed segment at the mean of its last evaluations (meta 'tail'). `standard` names the reference series
    (dashed black).
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.08, subplot_titles=list(TITLES["accuracy"]))
    n = 0
    hover: list[dict[str, tuple]] = []  # per trace: view -> (hovertemplate, customdata)
    for label, curve in series:
        rounds = [int(c[0]) for c in curve]
        line = STANDARD_STYLE if label == standard else dict(color=PALETTE[n % len(PALETTE)], width=2)
        if label != standard:
            n += 1
        for col, j in ((1, 1), (2, 2)):
            ys = [float(c[j]) for c in curve]
            views = {v: (f"{esc(label)}<br>round %{{x}}: {v} %{{customdata}}<extra></extra>",
                         [num(x if v == "accuracy" else 1.0 - x) for x in ys]) for v in VIEWS}
            hover.append(views)
            fig.add_trace(go.Scatter(x=rounds, y=ys, mode="lines", name=label, legendgroup=label,
                                     showlegend=col == 1, line=line, meta="curve",
                                     customdata=views["accuracy"][1], hovertemplate=views["accuracy"][0]),
                          row=1, col=col)
            mean, sd, k = tail_stats(ys)
            if k:
                xs = rounds[-k:]
                views = {v: (f"{esc(label)}<br>mean of the last {k} rounds: {v} "
                             f"{num(mean if v == 'accuracy' else 1.0 - mean)} ± {num(sd)}<extra></extra>", None)
                         for v in VIEWS}
                hover.append(views)
                fig.add_trace(go.Scatter(
                    x=[xs[0], xs[-1]], y=[mean, mean], mode="lines", name=f"{label}: mean of last {k}",
                    legendgroup=label, showlegend=False, meta="tail",
                    line=dict(color=line["color"], width=5, dash="dot"), opacity=0.6,
                    hovertemplate=views["accuracy"][0]), row=1, col=col)
    fig.update_xaxes(title_text="round")
    for col, j in ((1, 1), (2, 2)):
        fig.update_yaxes(title_text="accuracy", range=y_range(series, j), row=1, col=col)
    fig.update_layout(height=480, margin=dict(l=60, r=20, t=90, b=50), hovermode="closest",
                      legend=dict(orientation="h", y=-0.18), updatemenus=[_scale_buttons(fig, series, hover)])
    return fig


VIEWS = ("accuracy", "error")
# the panels' titles in each view (the error view's button rewrites them with the axes and the hover texts)
TITLES = {"accuracy": ("mean client accuracy (1 − error)", "global test accuracy"),
          "error": ("mean client error (1 − accuracy), log scale", "global test error (1 − accuracy), log scale")}


def _scale_buttons(fig, series, hover: Sequence[dict]) -> dict:
    """Two views of the same curves: accuracy (linear, range from the curves) or error = 1 − accuracy on a log
    axis, which separates curves that all end near accuracy 1; the hover texts and panel titles say which."""
    acc_y = [list(t.y) for t in fig.data]
    err_y = [[None if v is None else max(1.0 - float(v), 1e-4) for v in ys] for ys in acc_y]
    lay_acc = {f"annotations[{i}].text": t for i, t in enumerate(TITLES["accuracy"])}
    lay_err = {f"annotations[{i}].text": t for i, t in enumerate(TITLES["error"])}
    for n, j in (("", 1), ("2", 2)):
        lay_acc.update({f"yaxis{n}.type": "linear", f"yaxis{n}.range": y_range(series, j),
                        f"yaxis{n}.title.text": "accuracy", f"yaxis{n}.tickvals": None,
                        f"yaxis{n}.ticktext": None})
        errs = [v for ys in err_y for v in ys if v is not None]
        lo, hi = (min(errs), max(errs)) if errs else (1e-3, 1.0)
        ticks = [m * 10 ** e for e in range(-4, 1) for m in (1, 2, 5) if lo / 1.3 <= m * 10 ** e <= min(hi, 1.0) * 1.2]
        rng = [math.log10(lo) - 0.1, math.log10(min(hi, 1.0)) + 0.05]
        lay_err.update({f"yaxis{n}.type": "log", f"yaxis{n}.range": rng,
                        f"yaxis{n}.title.text": "error = 1 − accuracy (log)",
                        f"yaxis{n}.tickvals": ticks, f"yaxis{n}.ticktext": [num(v) for v in ticks]})
    return dict(type="buttons", direction="right", x=0.0, xanchor="left", y=1.25, yanchor="top", showactive=True,
                buttons=[dict(label=lab, method="update", args=[{"y": ys, **_hover_args(hover, v)}, lay])
                         for lab, v, ys, lay in (("accuracy", "accuracy", acc_y, lay_acc),
                                                 ("error, log scale", "error", err_y, lay_err))])


def _hover_args(hover: Sequence[dict], view: str) -> dict:
    """restyle arguments giving every trace its hover text in `view` (customdata only where a trace has one)."""
    return {"hovertemplate": [h[view][0] for h in hover],
            "customdata": [h[view][1] if h[view][1] is not None else [] for h in hover]}


# ============================================================================================ privacy context
def same_eps(a, b) -> bool:
    """Two recorded ε the same: equal (∞ and None included), or finite and within 1e-9 of each other (what one
    accountant gives twice for the same configuration)."""
    return a == b or (a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
                      and math.isclose(a, b, rel_tol=1e-9))


def eps_comparison(eps, rounds, search_eps, search_rounds, *, changed: Sequence[str] = (), noise: str = "") -> str:
    """ε at the rounds retrained beside the search's, and why they differ when they do (from what both recorded):
    e.g. "ε 0.015 at 20 rounds; the search's 0.01 was at 5 rounds". changed: recorded privacy quantities that
    differ between the two trainings ("participations_max 3 here, 2 in the search"); noise: the noise itself
    differs (a target ε calibrated σ for each one's rounds), said first."""
    def val(v):
        return "–" if v is None else num(v)

    here = f"ε {val(eps)} at {rounds} round{'s' if rounds != 1 else ''}" + (" (no privacy)" if eps == math.inf else "")
    if search_eps is None:
        return here
    if noise:
        return here + f"; the search's {val(search_eps)} at {search_rounds} round{'s' if search_rounds != 1 else ''}" \
            f" ({noise})"
    if same_eps(eps, search_eps):
        return here + (" (the search's too)" if rounds == search_rounds
                       else f"; the search's was the same at {search_rounds} rounds")
    if rounds != search_rounds:
        grew = eps is not None and search_eps is not None and eps > search_eps
        why = ("ε grows with the rounds a user can join" if grew else  # else: what both recorded, where it fell
               "; ".join(changed) if changed else "its accounting differs with the rounds")
        return (here + f"; the search's {val(search_eps)} was at {search_rounds} round"
                f"{'s' if search_rounds != 1 else ''} ({why})")
    why = ("; ".join(changed) if changed else "the same rounds; the seed differs (retraining uses one seed for "
           "every solution, the search each evaluation's own)")
    return here + f"; the search's {val(search_eps)} at the same rounds: {why}"


# what an ε is accounted for, in the order a reader needs it (the audit's report adds sampling and rounds)
PRIVACY_KEYS = (("trust", "trust"), ("delta", "δ"), ("population", "population N"),
                ("cohort", "cohort M (clients per round)"), ("neighbouring", "neighbouring"),
                ("accountant", "accountant"))


def _setting(key: str, v) -> str:
    if v is None:
        return "–"
    return num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def privacy_html(rows: Sequence[dict]) -> str:
    """What every ε of the page is under: per solution its trust model, δ, population N, cohort M (clients per
    round), neighbouring relation and accountant, the rounds it was retrained for and its ε there beside the search's (rows:
    `fedevo.retraining.RetrainReport.privacy_rows`). The settings every picked solution shares are said once above
    the table."""
    if not rows:
        return ""
    picked = [r for r in rows if not r.get("standard")]
    shared = [(k, name) for k, name in PRIVACY_KEYS
              if picked and len({_setting(k, r.get(k)) for r in picked}) == 1 and picked[0].get(k) is not None]
    head = ('<p class="meta">privacy of the picked solutions: '
            + kv_list((name, _setting(k, picked[0][k])) for k, name in shared) + "</p>") if shared else ""
    body = [[r["solution"], *(_setting(k, r.get(k)) for k, _ in PRIVACY_KEYS), r["rounds"], r["eps_text"]]
            for r in rows]
    headers = ["solution", *(name for _, name in PRIVACY_KEYS), "rounds run", "ε (accountant) at those rounds, "
               "and the search's"]
    prose = [0, 1] + [i + 1 for i, (k, _) in enumerate(PRIVACY_KEYS) if k in ("neighbouring", "accountant")]
    return head + '<div class="scroll">' + table(headers, body, left=(*prose, len(headers) - 1)) + "</div>"


def tail_table(series: Sequence[tuple[str, Sequence[Sequence[float]]]]) -> str:
    rows = []
    for label, curve in series:
        acc, glob = [c[1] for c in curve], [c[2] for c in curve]
        m1, s1, k = tail_stats(acc)
        m2, s2, _ = tail_stats(glob)
        rows.append([label, num(acc[-1]) if acc else "–", f"{num(m1)} ± {num(s1)}",
                     num(glob[-1]) if glob else "–", f"{num(m2)} ± {num(s2)}", k])
    return table(["solution", "accuracy, last round", "accuracy, mean of last k ± sd", "global accuracy, last round",
                  "global accuracy, mean of last k ± sd", "k"], rows, left=(0,))


def write_curves_html(path: Path | str, series: Sequence[tuple[str, Sequence[Sequence[float]]]], *,
                      title: str, intro_html: str = "", standard: Optional[str] = None,
                      privacy: Sequence[dict] = ()) -> Path:
    """privacy: per solution, what its ε is under (see `privacy_html`), shown above the curves."""
    body = (f"<h1>{esc(title)}</h1>\n{privacy_html(privacy)}\n{intro_html}\n"
            f"<div class=\"fig\">{figure_div(curves_figure(series, standard=standard), 'curves')}</div>\n"
            "<h2>Final accuracy: last round and the mean of the last rounds</h2>\n"
            '<p class="note">One round\'s accuracy is noisy (the sampled clients, lost uploads, privacy noise): '
            "compare solutions by the mean of their last k evaluations (dotted segments in the plot).</p>\n"
            + '<div class="scroll">' + tail_table(series) + "</div>")
    return write(Path(path), page(title, body))
