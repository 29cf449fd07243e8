"""What one evaluation returns: the three objectives plus what a user needs to trust them."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

STATUSES = ("ok", "diverged", "failed")


@dataclass(frozen=True)
class EvaluationResult:
    error: float  # f1: 1 - mean per-client test accuracy
    comm: float  # f2: parameters uploaded per round per client slot (Ω·C for full uploads)
    eps: Optional[float]  # f3: accountant's bound for the mechanism as implemented (inf: no privacy)
    eps_paper: Optional[float]  # the paper's closed form, for comparison with the published tables
    accuracy_global: float  # accuracy of the global model on the whole test set
    omega: int  # active parameters of the global model
    status: str = "ok"
    wall_s: float = 0.0
    rounds: int = 0
    accuracy_curve: tuple = ()  # mean client accuracy after each evaluated round (retrain curves)
    privacy: dict = field(default_factory=dict)  # recalls, clip thresholds, budgets, accounting level...
    message: str = ""
    engine: dict = field(default_factory=dict)  # compute precision and why, CPU, kernels (fedevo.hardware)

    def __post_init__(self):
        assert self.status in STATUSES, self.status

    def objectives(self, eps_key: str = "eps") -> tuple[float, float, float]:
        """(error, comm, ε) with None/NaN/inf mapped to +inf so a minimiser ranks them worst."""
        def clean(v):
            return math.inf if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        return clean(self.error), clean(self.comm), clean(getattr(self, eps_key))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["accuracy_curve"] = list(self.accuracy_curve)
        return d
