"""The built-in objectives: today's three (error, comm, ε; the ε of the paper's closed form as an alternative)."""

from __future__ import annotations

from .objective import Objective
from .registry import register

EPS_FLOOR = 1e-3  # ε at or below this counts as this (log10 = -3): below it no privacy difference matters here

ERROR = register(Objective(
    name="error", label="error", unit="", worst=1.0, lower=0.0, upper=1.0,
    read=lambda r: r.error,
    description="1 - mean per-client test accuracy (seed 004 eq. 5-6)"))

COMM = register(Objective(
    name="comm", label="comm", unit="parameters per round per client", worst=1e9, lower=0.0,
    read=lambda r: r.comm,
    description="parameters uploaded per round per client slot (Ω·C for full uploads; seed 004 eq. 7)"))

EPS = register(Objective(
    name="eps", label="ε", unit="", worst=1e9, lower=0.0, log=True, floor=EPS_FLOOR,
    read=lambda r: r.eps,
    description="the accountant's ε at the problem's δ for the mechanism as implemented (inf: no privacy)"))

EPS_PAPER = register(Objective(
    name="eps_paper", label="ε (paper)", unit="", worst=1e9, lower=0.0, log=True, floor=EPS_FLOOR,
    read=lambda r: r.eps_paper,
    description="the paper's closed-form ε (for comparison with the published tables)"))
