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
    """The class a registered name names, or the user's class a 'python:FILE.py:Class' / 'module:Class' spec names
    (optimizers/user.py: loaded once, contained)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        pass
    from .user import is_spec, load

    if is_spec(name):
        return load(name)
    raise FedevoError(f"{arg('optimizer', repr(name))}: unknown optimiser; choose one of {', '.join(_REGISTRY)}, or "
                      "your own as 'python:FILE.py:Class' or 'module:Class'") from None


def check_name(name: Any) -> str:
    """`name` when it is a registered name or a well-formed spec of the user's class (not loaded here: readers of a
    run directory check its settings without running its code; the search loads it, `get`)."""
    if not isinstance(name, str):
        raise FedevoError(f"{arg('optimizer')} must be a name ({', '.join(names())}) or 'python:FILE.py:Class', "
                          f"got {name!r}")
    from .user import is_spec

    if is_spec(name):
        from ...plugins import split_spec

        split_spec(name, kind="optimizer")
    else:
        get(name)
    return name


def spec_of(optimizer: Any) -> str:
    """What run.json records for an `optimizer=` given in Python: a name or a spec as it is (a `python:` file's path
    made absolute, so that a resume finds it from anywhere), a registered class by its name, another Optimizer
    class by 'module:Class'."""
    from ...plugins import USER_MODULE_PREFIX, resolve_spec
    from .user import is_spec

    if isinstance(optimizer, str):
        return resolve_spec(optimizer, None, kind="optimizer") if is_spec(optimizer) else optimizer
    if isinstance(optimizer, type) and issubclass(optimizer, Optimizer):
        if _REGISTRY.get(getattr(optimizer, "name", "")) is optimizer:
            return optimizer.name
        module: Optional[str] = getattr(optimizer, "__module__", None)
        if module and module.startswith(USER_MODULE_PREFIX):  # a python: file's class, as fedevo imported it
            import sys

            file = getattr(sys.modules.get(module), "__file__", None)
            if file:
                return f"python:{file}:{optimizer.__qualname__}"
        if module and module != "__main__" and "<locals>" not in optimizer.__qualname__:
            return f"{module}:{optimizer.__qualname__}"
        raise FedevoError(f"optimizer {optimizer.__name__} is defined where run.json cannot name it for a resume "
                          f"({module}:{optimizer.__qualname__}); put it in a module or file ('python:FILE.py:"
                          f"{optimizer.__name__}'), or register it (fedevo.searching.optimizers.register) and pass "
                          "its name")
    raise FedevoError(f"optimizer must be a name, 'python:FILE.py:Class', 'module:Class' or an Optimizer "
                      f"subclass, got {optimizer!r}")


def uses_reference_directions(name: str) -> Optional[bool]:
    """Whether the optimiser takes NSGA-III's reference directions (--partitions): NSGA-III's own and your
    subclasses of it; None for your own class when this process has not loaded it (a reader of a run directory,
    which does not run its code)."""
    from .user import is_spec, loaded

    cls = loaded(name) if is_spec(name) else get(name)
    return None if cls is None else bool(cls.uses_reference_directions)


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


__all__ = ["DEFAULT", "DEFAULT_EVALUATIONS", "DEFAULT_POP", "check_name", "default_pop", "from_state", "get", "make",
           "names", "register", "spec_of", "uses_reference_directions"]
