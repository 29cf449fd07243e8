"""The optimiser registry: name -> Optimizer class (``--optimizer NAME``)."""

from __future__ import annotations

from typing import Any, Optional

from ...errors import FedevoError, arg
from .base import Optimizer

DEFAULT = "nsga3"
_REGISTRY: dict[str, type[Optimizer]] = {}


def register(cls: type[Optimizer]) -> type[Optimizer]:
    """Register an Optimizer subclass under ``cls.name`` (a class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def get(name: str) -> type[Optimizer]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise FedevoError(f"--optimizer: unknown optimiser {name!r}; choose one of {', '.join(_REGISTRY)}") from None


def check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise FedevoError(f"{arg('optimizer')} must be a name ({', '.join(names())}), got {name!r}")
    get(name)
    return name


DEFAULT_POP = 12  # --pop when neither it nor the optimiser says otherwise
DEFAULT_EVALUATIONS = 48  # what a search evaluates when no --gen or budget is given (4 batches of 12)


def default_pop(name: str, *, workers: Any = "auto", cores: int, address: Optional[str] = None) -> tuple[int, str]:
    """(the batch size --pop when it is not given, why). NSGA-III and random: DEFAULT_POP. A model-based optimiser
    (``default_pop = None``: gp, tpe): as many candidates as evaluations run at once — the workers
    (fedevo.searching.workers.decide; in-process: 1), and DEFAULT_POP on a Ray cluster (its size is not known
    before it is joined; give --pop to match it)."""
    fixed = get(name).default_pop
    if fixed is not None:
        return int(fixed), ""
    if address:
        return DEFAULT_POP, (f"{arg('optimizer', name)}: batches of {DEFAULT_POP} on the cluster ({arg('pop', 'N')} "
                             "to match its parallel evaluations)")
    from ..workers import decide

    slots, _ = decide(workers, cores=cores, pop=None, address=None)
    n = max(1, int(slots))
    return n, (f"{arg('optimizer', name)}: batches of {n} (one per parallel evaluation"
               f"{'; in-process' if slots == 0 else ''}; the model learns from every result before its next "
               f"proposal; {arg('pop', 'N')} to change)")


def make(name: str, space, problem, *, pop: int, seed: int, settings=None) -> Optimizer:
    """A new optimiser (nothing told yet)."""
    return get(name)(space, problem, pop=pop, seed=seed, settings=settings)


def from_state(name: str, state: Any, space, problem, *, pop: int, seed: int, settings=None) -> Optimizer:
    """An optimiser continuing from a checkpointed `state`."""
    opt = get(name)(space, problem, pop=pop, seed=seed, settings=settings)
    opt.restore(state)
    return opt


__all__ = ["DEFAULT", "DEFAULT_EVALUATIONS", "DEFAULT_POP", "check_name", "default_pop", "from_state", "get", "make", "names", "register"]
