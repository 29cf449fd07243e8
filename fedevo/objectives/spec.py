"""A user's objective named in a problem file: a function of the evaluation and how to read its value.

    objectives = ["error", "comm", "eps", "latency"]

    [objective.latency]
    read = "python:my_objectives.py:latency"   # function(result) -> number or None (a path relative to the file)
    worst = 1e4                                  # required: stands in for None / NaN / inf, caps finite values
    label = "latency"                            # optional: default the name
    unit = "ms"                                  # optional
    direction = "minimize"                       # or "maximize"
    log = false                                  # true: the optimiser sees log10(max(value, floor))
    floor = 1.0                                  # required with log = true (> 0)
    lower = 0.0                                  # optional: the range a valid value lies in
    upper = 1e6
    description = "..."

The function is loaded on its first call (a run's readers never call it: the evaluation log holds its values),
and :func:`check_loadable` loads it when a search starts, so that a missing file or function is one line before
anything is written. Loading it runs that code with the user's rights, as any import does.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from ..errors import FedevoError
from ..plugins import load_callable, reimports, reloaded_since
from .objective import Objective

KEYS = {"read": str, "worst": float, "label": str, "unit": str, "direction": str, "log": bool, "floor": float,
        "lower": float, "upper": float, "description": str}


class FunctionRead:
    """`read` of an objective given as ``python:FILE.py:FUNC`` or ``package.module:FUNC``: loaded on first call, and
    again after a module beside a user's file was reloaded (plugins.reimports: its file is imported anew, and a
    Problem made before the reload would call the old function while the run records the new text)."""

    def __init__(self, spec: str, name: str):
        self.spec, self.name = spec, name
        self._fn = None

    def load(self):
        if self._fn is None or getattr(self, "_reimports", None) != reimports() or reloaded_since(self.spec, self._fn):
            self._reimports = reimports()
            self._fn = load_callable(self.spec, kind=f"objective {self.name!r}")
        return self._fn

    def __call__(self, result: Any) -> Optional[float]:
        v = self.load()(result)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise TypeError(f"returned {v!r}; expected a number or None")
        if v is not None and math.isnan(v):  # 0/0 in the user's code, most likely: said, not silently the worst
            raise ValueError("returned nan; expected a number or None (None: not measured)")
        return v

    def __getstate__(self):
        return {"spec": self.spec, "name": self.name, "_fn": None}

    def __eq__(self, other):
        return isinstance(other, FunctionRead) and (other.spec, other.name) == (self.spec, self.name)

    def __hash__(self):
        return hash((self.spec, self.name))


def from_table(name: str, table: Any, *, problem_path: Optional[str], where: str = "") -> Objective:
    """The Objective of a problem file's ``[objective.NAME]`` table; FedevoError (one line) for a mistake."""
    from .. import schema
    from ..plugins import resolve_spec

    at = f"{where}[objective.{name}]"
    if not isinstance(table, Mapping):
        raise FedevoError(f"{at}: expected a table (read = \"python:file.py:function\", worst = ...)")
    for k in table:
        if k not in KEYS:
            raise schema.unknown_key(f"{at} ", k, list(KEYS))
    for k in ("read", "worst"):
        if k not in table:
            raise FedevoError(f"{at}: missing required key {k!r}")
    vals = {k: schema.check_value(f"{at} {k}", KEYS[k], v) for k, v in table.items()}
    spec = resolve_spec(vals.pop("read"), problem_path, kind=f"{at} read")
    vals.setdefault("label", name)
    try:
        return Objective(name=name, read=FunctionRead(spec, name), **vals)
    except ValueError as e:
        raise FedevoError(f"{at}: {str(e).replace(f'objective {name!r}: ', '')}") from None


# what makes an objective's values and their order (its label, unit and description only name it)
DEFINING = ("worst", "direction", "log", "floor", "lower", "upper")


def check_loadable(objectives) -> None:
    """Every objective can read an evaluation in this process: a function-objective's function loads, a recorded
    one (a resumed run) is registered; FedevoError (one line) naming the first that cannot."""
    from .registry import ByName, builtin, registered

    for o in objectives:
        if isinstance(o.read, FunctionRead):
            o.read.load()
        elif isinstance(o.read, ByName):
            r = registered(o.name)
            if r is None or isinstance(r.read, ByName):
                raise FedevoError(f"objective {o.name!r} is not registered in this process: register it "
                                  "(fedevo.objectives.register) before searching or resuming")
            changed = [(k, v, getattr(r, k)) for k, v in o.record().items() if k in DEFINING and getattr(r, k) != v]
            # the run goes on with its recorded definition, the registered one ignored: refused (a built-in one's
            # record may be an older fedevo's, with its own definition)
            if changed and not builtin(o.name):
                k, was, now = changed[0]
                raise FedevoError(f"objective {o.name!r} is registered in this process with {k}={now!r}, but the run "
                                  f"was searched with {k}={was!r}: a run's objectives cannot change; register it as "
                                  "it was to go on, or search anew")
