"""Local trust's accounting: joins a finished run with the accountants: both ε values and what was spent.

`eps` is a valid bound for the mechanism as implemented, against the server (which knows whom it sampled, so no
amplification by client sampling is claimed); `eps_paper` is the published closed form, for comparison with the
papers' tables. docs/privacy.md explains why they differ.
"""

from __future__ import annotations

import math


from . import accounting as acc
from .mechanisms import clip_stats


EXACT = "analytic Gaussian (dp-accounting; exact for the composed Gaussians)"


def local_report(cfg, out, part) -> dict:
    pc = cfg.privacy
    rep: dict = {"mechanism": pc.mechanism, "trust": "local", "delta": pc.delta,
                 "observer": "the server (sees every upload, knows the cohort)", "amplification": "none",
                 "eps_conditional": False}
    if getattr(out, "secagg", None) is not None:  # secure aggregation: what the protocol cost (no DP by itself)
        rep.update(aggregation="secagg", secagg=out.secagg.summary())
    if pc.mechanism == "none":
        rep.update(eps=math.inf, eps_paper=math.inf, level="none")
        return rep
    if pc.mechanism == "signds":
        from .signds import eps_signds

        up = out.upload
        m = int(up.joined.max(initial=0))  # ε-LDP uploads of the most exposed user
        rep.update(level="user (replace-one user; pure ε-LDP per upload)", neighbouring="replace one user",
                   accountant="pure ε-LDP per upload, PLD composition (dp-accounting)",
                   eps=eps_signds(eps_round=pc.signds_eps, participations=m, delta=pc.delta),
                   eps_paper=m * pc.signds_eps, **up.summary())  # eps_paper: basic composition m·ε
        return rep
    trained = out.arrivals  # rounds whose upload reached the server, per client
    if pc.mechanism == "step":
        clips = out.step_hook.clips or [pc.clip or 1.0]
        rounds_max = int(trained.max(initial=0))
        eps = acc.eps_step(sigma=pc.sigma, lr=cfg.lr, clip=clips, epochs=cfg.epochs, participation=1.0,
                           rounds=rounds_max, delta=pc.delta) if rounds_max else 0.0
        eps_paper = acc.eps_paper_step(clip=max(clips), min_local_size=int(part.sizes.min()),
                                       participation=cfg.participation, rounds=cfg.rounds, sigma=pc.sigma,
                                       delta=pc.delta)
        rep.update(level="record (replace-one, per client's data)", neighbouring="replace one record",
                   accountant=EXACT, rounds_max=rounds_max, clip_rule=pc.clip_rule, **clip_stats(clips))
        if pc.clip_rule == "median":
            rep.update(eps_conditional=True, eps_condition="given the unprivatised median clip S of each round "
                       "(clip_rule = 'median'); not a DP guarantee on its own")
    else:
        up = out.upload
        # every participation counts, recalled ones too: the recall decision reads a fresh noisy update
        z = up.effective_sigma()
        eps = acc.eps_update_varying(noise_multipliers=[z], delta=pc.delta) if z else 0.0
        q = cfg.sampled_per_round / cfg.data.clients
        r = pc.max_participations or cfg.rounds
        if pc.eps_budget is not None:
            eps_paper = pc.eps_budget  # the ledger spends at most the budget, by the paper's own accounting
        else:
            eps_paper = acc.eps_paper_update(sigma=pc.sigma, sample_rate=q, max_participations=r, delta=pc.delta)
        joined = up.joined
        rep.update(level="user (replace-one user)", neighbouring="replace one user", accountant=EXACT,
                   sigma=pc.sigma,
                   participations_mean=float(joined[joined > 0].mean()) if joined.any() else 0.0, **up.summary())
        ctl = getattr(out, "controller", None)
        if ctl is not None:  # adaptive (seed 003): per-client budgets, filtering, and the level reports' ε
            eps, extra = _adaptive_eps(pc, up, ctl, eps)
            rep.update(adaptive=extra, eps_conditional=True,
                       eps_condition="the per-client noise depends on released non-IID levels; ε sums the "
                       "Gaussian part as if that noise were fixed in advance (no privacy filter), so it is not a "
                       "valid fully-adaptive composition")
    rep.update(eps=eps, eps_paper=eps_paper)
    return rep


def _adaptive_eps(pc, up, ctl, eps_gauss: float) -> tuple[float, dict]:
    """ε of the adaptive mechanism: the Gaussian part (per-client noise actually added) plus the randomized-
    response level reports (pure ε_L each, basic composition); the per-client spread shows the budget split."""
    import numpy as np

    ex = ctl.summary()
    per = [acc.eps_update_varying(noise_multipliers=[1.0 / math.sqrt(v)], delta=pc.delta)
           for v in np.unique(np.round(up.inv_sq[up.inv_sq > 0], 12))]
    ex.update(eps_gaussian=eps_gauss, eps_client_min=min(per, default=0.0), eps_client_max=max(per, default=0.0))
    if pc.adaptive_level_eps is None:
        ex.update(level_release="in the clear (as in the patent): not covered by eps")
        return eps_gauss, ex
    eps_rr = pc.adaptive_level_eps * ex["level_releases_max"]
    ex.update(level_release="randomized response", eps_levels=eps_rr)
    return eps_gauss + eps_rr, ex


__all__ = ["local_report"]
