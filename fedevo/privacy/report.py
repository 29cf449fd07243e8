"""Joins a finished run with the accountants: both ε values and what the mechanism spent.

`eps` is a valid bound for the mechanism as implemented, against the server (which knows whom it sampled, so no
amplification by client sampling is claimed); `eps_paper` is the published closed form, for comparison with the
papers' tables. docs/privacy.md explains why they differ.
"""

from __future__ import annotations

import math


from . import accounting as acc
from .mechanisms import clip_stats


def privacy_report(cfg, out, part) -> dict:
    pc = cfg.privacy
    rep: dict = {"mechanism": pc.mechanism, "delta": pc.delta}
    if pc.mechanism == "none":
        rep.update(eps=math.inf, eps_paper=math.inf, level="none")
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
        rep.update(level="record (replace-one, per client's data)", rounds_max=rounds_max, **clip_stats(clips))
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
        rep.update(level="user (replace-one user)", sigma=pc.sigma,
                   participations_mean=float(joined[joined > 0].mean()) if joined.any() else 0.0, **up.summary())
    rep.update(eps=eps, eps_paper=eps_paper)
    return rep


__all__ = ["privacy_report"]
