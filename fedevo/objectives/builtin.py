"""The built-in objectives: today's three (error, comm, ε; the ε of the paper's closed form as an alternative), the
worst-served clients' error, the model's size and a client's training compute (docs/problems.md lists them)."""

from __future__ import annotations

from .objective import Objective
from .registry import names, register, seal

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

WORST_CLIENT_ERROR = register(Objective(
    name="worst_client_error", label="worst-10 % client error", unit="", worst=1.0, lower=0.0, upper=1.0,
    read=lambda r: getattr(r, "worst_client_error", None),
    description="mean test error of the worst-served 10 % of clients (at least one client), from the same "
                "per-client test accuracies as error (the simulator measures it: fedevo.fl.simulate.worst_client_error)"))

MODEL_SIZE = register(Objective(
    name="model_size", label="model size Ω", unit="parameters", worst=1e12, lower=0.0,
    read=lambda r: getattr(r, "omega", None) or None,  # 0: the evaluator did not say (a user's evaluator)
    description="parameters a client uploads with a full update: Ω, the global model's active (nonzero-mask) "
                "parameters"))

TRAIN_MACS = register(Objective(
    name="train_macs", label="training compute", unit="multiply-adds per client per round", worst=1e18,
    lower=0.0, log=True, floor=1.0,
    read=lambda r: getattr(r, "train_macs", None),
    description="multiply-adds a participating client spends on local training in one round: 3 x (one "
                "example's forward pass over the active weights) x (its mean training examples) x (local epochs)"))

BUILTIN = names()  # the objectives registered above (a problem file cannot redefine them, nor register() replace them)
seal()
