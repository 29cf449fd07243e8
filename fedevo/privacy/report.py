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
        used = up.participations + up.recalls  # the recall decision reads a fresh noisy update: count it too
        n_max = int(used.max(initial=0))
        eps = acc.eps_update(sigma=pc.sigma, participations=n_max, delta=pc.delta) if n_max else 0.0
        q = cfg.sampled_per_round / cfg.data.clients
        eps_paper = acc.eps_paper_update(sigma=pc.sigma, sample_rate=q,
                                         max_participations=pc.max_participations or cfg.rounds, delta=pc.delta)
        rep.update(level="user (replace-one user)", participations_max=n_max,
                   participations_mean=float(used[used > 0].mean()) if n_max else 0.0, **up.summary())
    rep.update(eps=eps, eps_paper=eps_paper)
    return rep


__all__ = ["privacy_report"]
