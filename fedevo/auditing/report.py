"""Where an audit's files go, and what they say: audit.json, audit.html (plotly, offline) and the terminal table.

Audits of a run go to RUN_DIR/audit/, then audit-2/, audit-3/ ...: an earlier audit is never overwritten and
nothing else in the run directory is touched.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import FedevoError


def next_audit_dir(base: Path, name: str = "audit") -> Path:
    """base/audit, or base/audit-2, audit-3 ... the first that does not exist (created here, atomically)."""
    base = Path(base)
    for n in range(1, 10_000):
        d = base / (name if n == 1 else f"{name}-{n}")
        try:
            d.mkdir(parents=True, exist_ok=False)
            return d
        except FileExistsError:
            continue
        except OSError as e:
            raise FedevoError(f"cannot create {d}: {e.strerror}") from None
    raise FedevoError(f"{base} holds too many audits")


def jsonable(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, (np.floating, np.integer)):
        return jsonable(o.item())
    if isinstance(o, dict):
        return {str(k): jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [jsonable(v) for v in o]
    return o


def write_json(path: Path, results: Sequence, context: dict) -> Path:
    from ..searching.log import atomic_write

    doc = {**context, "audits": [dict(r.summary(), statistic=r.statistic.tolist(), score=r.scores.tolist(),
                                      included=r.included_mask.astype(int).tolist(),
                                      joined=r.joined.tolist()) for r in results]}
    atomic_write(Path(path), json.dumps(jsonable(doc)) + "\n")
    return Path(path)


def _gauss(x, m, s):
    return np.exp(-0.5 * ((x - m) / s) ** 2) / (s * math.sqrt(2 * math.pi))


def figure(r):
    """Histogram of the canary statistic, inserted vs held-out, with the fitted Gaussians; and the attack's
    scores in rank order, coloured by the truth."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    st, inc = r.statistic, r.included_mask
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=[
        # two short lines each: one line each overlapped the other panel's title at a 1,000 px window
        "canary statistic Σ z / √rounds<br>(z: projection on the canary, in accounted noise std)",
        "attack score (log-likelihood ratio),<br>canaries by rank"])
    lo, hi = float(np.min(st)), float(np.max(st))
    span = hi - lo or 1.0
    xbins = dict(start=lo - 0.01 * span, end=hi + 0.01 * span, size=span / 60)
    for mask, name, color in ((inc, "inserted (included)", "#d62728"), (~inc, "held out (not included)", "#1f77b4")):
        fig.add_trace(go.Histogram(x=st[mask], name=f"{name}: {int(mask.sum())}", xbins=xbins, opacity=0.55,
                                   histnorm="probability density", marker_color=color, legendgroup=name),
                      row=1, col=1)
    f = r.fit
    xs = np.linspace(lo - 0.05 * span, hi + 0.05 * span, 400)
    for m, s, name, color in ((f.mean_in, f.std_in, "fit inserted", "#d62728"),
                              (f.mean_out, f.std_out, "fit held out", "#1f77b4")):
        if s > 0:
            fig.add_trace(go.Scatter(x=xs, y=_gauss(xs, m, s), mode="lines", name=f"{name} N({m:.3g}, {s:.3g}²)",
                                     line=dict(color=color, width=2)), row=1, col=1)
    order = np.argsort(-r.scores, kind="stable")
    rank = np.arange(1, len(order) + 1)
    for mask, name, color in ((inc[order], "inserted", "#d62728"), (~inc[order], "held out", "#1f77b4")):
        fig.add_trace(go.Scatter(x=rank[mask], y=r.scores[order][mask], mode="markers", name=f"score: {name}",
                                 marker=dict(color=color, size=4)), row=1, col=2)
    fig.update_annotations(font_size=13)
    fig.update_layout(barmode="overlay", height=480, margin=dict(l=60, r=20, t=80, b=50),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title_text="statistic", row=1, col=1)
    fig.update_xaxes(title_text="rank (highest score first)", row=1, col=2)
    fig.update_yaxes(title_text="density", row=1, col=1)
    fig.update_yaxes(title_text="score", row=1, col=2)
    return fig


def _fmt(v) -> str:
    from ..viz.html import fmt

    return fmt(v)


def _estimate(r) -> str:
    lo, hi = r.estimate_interval
    return f"{_fmt(r.eps_estimate)} [{_fmt(lo)}, {_fmt(hi)}]"


def _reaches_zero(r) -> bool:
    """The estimate's interval reaches 0: the canaries' separation is not told apart from none (an estimate above
    the accountant's ε then is the bootstrap's noise, not a sign of leakage)."""
    return not r.estimate_interval[0] > 0


def _deployment_keys() -> tuple:
    """What an audit's ε is under (AuditResult.deployment): the retrain page's keys, then sampling and rounds."""
    from ..viz.curves import PRIVACY_KEYS

    return (*PRIVACY_KEYS, ("sampling", "sampling"), ("rounds", "rounds"))


def context_items(r) -> list[tuple[str, str]]:
    """(name, value) of the deployment the audit's ε is accounted for (sampling where the mechanism's trust model
    names how cohorts are drawn; the accounted rounds when a participation cap makes them fewer than the rounds)."""
    d = r.deployment or {}
    out = [(name, _fmt(d[k])) for k, name in _deployment_keys() if d.get(k) is not None]
    if d.get("rounds") is not None and r.exposure is not None and r.exposure.rounds != d["rounds"]:
        out.append(("rounds a user can join (accounted)", _fmt(r.exposure.rounds)))
    if r.exposure is not None:
        out.append(("neighbouring", r.exposure.relation))
    if r.accountant:
        out.append(("accountant", r.accountant))
    return out


def eps_text(r) -> str:
    """The accountant's ε at the rounds the audit ran, beside the search's (a run's picks are audited as searched:
    same rounds and seed), and why they differ when they do."""
    from ..viz.curves import eps_comparison, same_eps

    rounds = (r.deployment or {}).get("rounds")
    changed = []
    if r.eps_search is not None and not same_eps(r.eps_upper, r.eps_search):
        if not same_eps(r.eps_upper, r.eps_reported):
            e = r.exposure
            changed.append(f"the audited ε is the accountant's for the canaries' own exposure ({e.relation}, joining "
                           f"each of {e.rounds} rounds with probability {e.rate:.3g}); the audit run's accountant "
                           f"gives {_fmt(r.eps_reported)} for the configuration")
        else:
            changed.append(f"the audit run's accountant gives {_fmt(r.eps_reported)}")
    return eps_comparison(r.eps_upper, rounds, r.eps_search, rounds if r.eps_search is not None else None,
                          changed=changed)


def context_html(results: Sequence) -> str:
    """The deployment every audit shares, said once (empty when they differ: each section says its own)."""
    from ..viz.html import kv_list

    items = [context_items(r) for r in results]
    if not items or any(i != items[0] for i in items) or not items[0]:
        return ""
    return '<p class="meta">every ε here is under: ' + kv_list(items[0]) + "</p>"


def _bound_text(b) -> str:
    """The one-run lower bound's guess rule in words; a bound from no guess says so (not "0 of 0 guesses right")."""
    if not b.guesses:
        return (f"none of the {b.tests} guess rules tried (each at level {b.level:.3g}, Bonferroni) got enough guesses "
                "right to bound ε above 0: ε lower 0")
    return (f"{b.correct} of {b.guesses} guesses right ({b.strategy} rule, {b.k_in} in / {b.k_out} out), best of "
            f"{b.tests} rules each at level {b.level:.3g} (Bonferroni)")


def write_html(path: Path, results: Sequence, *, title: str, intro: str = "") -> Path:
    from ..viz.html import esc, figure_div, kv_list, page, table, write

    parts = [f"<h1>{esc(title)}</h1>", f'<p class="meta">{esc(intro)}</p>' if intro else "", context_html(results),
             '<div class="scroll">' +
             table(["configuration", "trust", "rounds", "ε upper (accountant)", "ε estimate [interval]", "ε lower",
                    "verdict", "canaries", "confidence"],
                   [[r.label, r.trust, _fmt((r.deployment or {}).get("rounds")), _fmt(r.eps_upper), _estimate(r),
                     _fmt(r.eps_lower), r.verdict, r.canaries, r.confidence] for r in results], left=(0, 1, 6))
             + "</div>"]
    for n, r in enumerate(results):
        b, e = r.bound, r.exposure
        parts.append(f"<h2>{esc(r.label)}: {esc(r.verdict)}</h2>")
        ctx = kv_list(context_items(r))
        parts.append(f'<p class="meta">{ctx + " — " if ctx else ""}{esc(eps_text(r))}</p>')
        parts.append(f'<p class="note"><b>Verdict: {esc(r.verdict)}</b> — {esc(r.why)}. ε estimate '
                     f"{esc(_estimate(r))} (bootstrap over canaries, {r.confidence:g} interval)"
                     + (" — <b>the whole interval lies above the accountant's ε</b>: a hint of a violation (the "
                        "estimate is not a bound)" if r.estimate_above_bound else
                        " — its interval reaches 0: not told apart from no leakage" if _reaches_zero(r) else "")
                     + ".</p>")
        parts.append(f'<p class="note">observer: {esc(r.observer)} · level: {esc(r.level)} · neighbours: '
                     f"{esc(e.relation)} · each canary joins each of {e.rounds} accounted rounds with probability "
                     f"{e.rate:.3g} (mean joined {float(r.joined.mean()):.3g}) · δ = {r.delta:g} · seed {r.seed}. "
                     f"Lower bound: {esc(_bound_text(b))}. Estimate: Gaussian fit, separation μ = "
                     f"{r.fit.separation:.3g}.</p>")
        parts.append(f'<div class="fig">{figure_div(figure(r), f"audit{n}")}</div>')
    parts.append(f'<p class="note">{esc(results[0].method if results else "")}. A lower bound below the '
                 "accountant's ε is what a correct mechanism gives; it never proves privacy (docs/privacy.md, "
                 "Auditing).</p>")
    return write(Path(path), page(title, "\n".join(parts)))


def print_table(results: Sequence, console) -> None:
    from rich.table import Table

    t = Table(title="privacy audit: accountant's ε (upper) vs empirical ε (lower bound, estimate)")
    for col in ("configuration", "trust", "ε upper", "ε estimate [interval]", "ε lower", "verdict", "canaries",
                "guesses"):
        t.add_column(col, justify="left" if col in ("configuration", "trust", "verdict") else "right")
    for r in results:
        t.add_row(r.label, r.trust, _fmt(r.eps_upper), _estimate(r), _fmt(r.eps_lower),
                  {"VIOLATION": "[bold red]VIOLATION[/]", "inconclusive": "[yellow]inconclusive[/]"}.get(
                      r.verdict, r.verdict), str(r.canaries), f"{r.bound.correct}/{r.bound.guesses}")
    console.print(t)
    for r in results:
        ctx = " · ".join(f"{k} {v}" for k, v in context_items(r))
        console.print(f"{r.label}: {ctx + ' — ' if ctx else ''}{eps_text(r)}", highlight=False, markup=False,
                      soft_wrap=True)
    for r in results:
        console.print(f"{r.label}: {r.verdict} — {r.why}"
                      + ("; the ε estimate's whole interval lies above the accountant's ε (a hint, not a proof)"
                         if r.estimate_above_bound else
                         "; the ε estimate's interval reaches 0: not told apart from no leakage"
                         if _reaches_zero(r) else ""), highlight=False, markup=False, soft_wrap=True)
    if results:
        console.print(f"lower bound at {results[0].confidence:g} confidence; {results[0].method}", highlight=False,
                      markup=False, soft_wrap=True)


__all__ = ["context_items", "eps_text", "next_audit_dir", "print_table", "write_html", "write_json"]
