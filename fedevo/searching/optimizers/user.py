"""Your own optimiser: ``--optimizer python:path/to/file.py:Class`` or ``--optimizer package.module:Class``.

The class is an :class:`~fedevo.searching.optimizers.base.Optimizer` subclass (ask, tell, state, restore: the rules
in base.py), loaded as a problem file's evaluator is (fedevo.plugins: a ``python:`` file by its absolute path,
recorded in run.json and fingerprinted with the run's other inputs, so a resume uses the same code or refuses).
It runs in the search's own process (never on a Ray worker), so it is contained here, by :func:`contained`:

* what ``ask`` returns is checked before anything is evaluated — a list of at most n candidates, each a mapping
  of exactly the search space's genes to values inside their ranges (an int gene's an integer, a choice gene's
  one of its choices) — else one line naming the optimiser and the first fault;
* an exception (or ``sys.exit``) in its ``__init__``, ``ask``, ``tell``, ``state``, ``restore``, ``describe`` or
  ``warm_start_size`` ends the search with one line naming the optimiser and the method, not a traceback; the run
  stays resumable from its last checkpoint; what they print goes to stderr;
* ``state()`` must pickle (checkpoints hold it apart, with cloudpickle: run.py): said when it does not.

A Python user may instead ``register`` a class under its own name (fedevo.searching.optimizers.register) and pass
that name: the same checks do not apply to a registered class, which is taken as fedevo's own are.
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
from numbers import Integral, Real
from typing import Any, Mapping, Optional, Sequence

from ...errors import FedevoError, one_line
from ...plugins import on_reimport
from .base import Optimizer, takes_failed

_LOADED: dict[str, type[Optimizer]] = {}
_FOUND: dict[str, type] = {}  # spec -> the class the module held when loaded (its contained one is _LOADED's)
on_reimport(_LOADED.clear)  # (a module beside its file reloaded: the file is imported anew, its class with it)


def is_spec(name: str) -> bool:
    """Whether an --optimizer value names code ('python:FILE:Class' or 'module:Class') rather than a built-in."""
    return ":" in name


def label(name: str) -> str:
    """How lines and tables name an optimiser: a built-in's name, your own by its class (not its file's whole path:
    'python:/home/me/mine.py:SMSEMOA' is SMSEMOA)."""
    return name.rpartition(":")[2]


def loaded(spec: str) -> Optional[type[Optimizer]]:
    """The class `load` gave for `spec` in this process, else None (nothing is imported here)."""
    return _LOADED.get(spec)


def load(spec: str) -> type[Optimizer]:
    """The contained Optimizer class a (resolved) spec names, loaded once per process; FedevoError (one line) when
    it is missing or is not an Optimizer subclass."""
    from ...plugins import load_callable, reloaded_since

    cls = _LOADED.get(spec)
    if cls is not None and not reloaded_since(spec, _FOUND.get(spec)):  # (a module:Class its module reloaded since)
        return cls

    found = load_callable(spec, kind="optimizer")
    if not (isinstance(found, type) and issubclass(found, Optimizer)):
        raise FedevoError(f"optimizer {spec!r} names {found!r}, not a class derived from "
                          "fedevo.searching.optimizers.Optimizer (docs/search.md#your-own-optimiser)")
    missing = sorted(m for m in dir(found) if getattr(getattr(found, m, None), "__isabstractmethod__", False))
    if missing:
        raise FedevoError(f"optimizer {spec!r}: {found.__name__} does not implement {', '.join(missing)} "
                          "(docs/search.md#your-own-optimiser)")
    pop = getattr(found, "default_pop", None)
    if pop is not None and (isinstance(pop, bool) or not isinstance(pop, Integral) or pop < 1):
        raise FedevoError(f"optimizer {spec!r}: {found.__name__}.default_pop is {pop!r}; it must be None (one "
                          "candidate per parallel evaluation) or a batch size >= 1")
    _FOUND[spec] = found
    cls = _LOADED[spec] = contained(found, spec)
    return cls


def contained(cls: type[Optimizer], spec: str) -> type[Optimizer]:
    """`cls` with its calls contained and its candidates checked (the module's docstring)."""

    def call(self, method: str, *args, **kwargs):
        from ...usercode import UserExit, call_user, stdout_to_stderr

        try:
            with stdout_to_stderr():  # what it prints: stdout is fedevo's (its results, a JSON object)
                return call_user(getattr(super(Contained, self), method), *args, **kwargs)
        except FedevoError:
            raise
        except UserExit as e:
            raise FedevoError(f"optimizer {spec!r}: {e.what} in {method}()") from None
        except Exception as e:  # the user's code: any exception is its own failure, said in one line
            raise FedevoError(f"optimizer {spec!r}: {method}() raised {type(e).__name__}: {one_line(e)}") from None

    class Contained(cls):  # type: ignore[valid-type, misc]
        def __init__(self, *args, **kwargs):
            call(self, "__init__", *args, **kwargs)

        def ask(self, n: int) -> list[dict[str, Any]]:
            got = call(self, "ask", n)
            return check_candidates(got, self.space, int(n), spec)

        def tell(self, params: Sequence[Mapping[str, Any]], F, G=None, *, failed=None) -> None:
            if failed is not None and takes_failed(super().tell):  # (an OptunaOptimizer of yours: base.tell)
                call(self, "tell", params, F, G, failed=failed)
            else:
                call(self, "tell", params, F, G)

        def state(self) -> Any:
            return call(self, "state")  # (that it pickles: said where the checkpoint pickles it, run.py)

        def restore(self, state: Any) -> None:
            call(self, "restore", state)

        def describe(self) -> dict[str, Any]:
            got = call(self, "describe")
            if not isinstance(got, Mapping):
                raise FedevoError(f"optimizer {spec!r}: describe() returned {type(got).__name__}, not a dict")
            return dict(got)

        @classmethod
        def warm_start_size(klass, pop: int) -> int:
            got = call(klass, "warm_start_size", pop)
            if isinstance(got, bool) or not isinstance(got, Integral) or got < 0:
                raise FedevoError(f"optimizer {spec!r}: warm_start_size({pop}) returned {got!r}, not a count >= 0")
            return int(got)

    Contained.__name__ = Contained.__qualname__ = cls.__name__
    Contained.__module__ = cls.__module__
    Contained.name = getattr(cls, "name", "") or cls.__name__
    return Contained


def check_candidates(got: Any, space, n: int, spec: str) -> list[dict[str, Any]]:
    """`got` as a list of candidates of `space`, at most `n`; FedevoError naming the first fault."""
    where = f"optimizer {spec!r}: ask({n})"
    if not isinstance(got, (list, tuple)):
        raise FedevoError(f"{where} returned {type(got).__name__}, not a list of candidates")
    if len(got) > n:
        raise FedevoError(f"{where} returned {len(got)} candidates, more than the {n} asked")
    names = list(space.names)
    out = []
    for i, p in enumerate(got):
        if not isinstance(p, Mapping):
            raise FedevoError(f"{where}: candidate {i} is {type(p).__name__}, not a mapping of gene names to values")
        if set(p) != set(names):
            extra, lack = sorted(set(p) - set(names), key=str), [g for g in names if g not in p]
            raise FedevoError(f"{where}: candidate {i} " + "; ".join(
                [f"lacks {', '.join(lack)}"] * bool(lack) + [f"has unknown genes {', '.join(map(str, extra))}"]
                * bool(extra)) + f" (the genes: {', '.join(names)})")
        out.append({g.name: _value(g, p[g.name], f"{where}: candidate {i}") for g in space.genes})
    return out


def _value(g, v: Any, where: str) -> Any:
    if g.type == "choice":
        v = v.item() if hasattr(v, "item") and not isinstance(v, str) else v  # a numpy scalar: its Python value
        for c in g.choices:  # the choice itself: 32.0 or True is no choice 32 or 1
            if c == v and type(c) is type(v):
                return c
        raise FedevoError(f"{where}: {g.name} = {v!r} is not one of {list(g.choices)}")
    if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(float(v)):
        raise FedevoError(f"{where}: {g.name} = {v!r} is not a finite number")
    if g.type == "int":
        if not (isinstance(v, Integral) or float(v).is_integer()):
            raise FedevoError(f"{where}: {g.name} = {v!r} is not an integer")
        v = int(v)
    else:
        v = float(v)
    if not g.low <= v <= g.high:
        raise FedevoError(f"{where}: {g.name} = {v!r} is outside [{g.low:g}, {g.high:g}]")
    return v


@contextlib.contextmanager
def global_rngs_kept():
    """Inside, code may draw from (or reseed) Python's, numpy's and torch's global generators (torch's CUDA ones
    too, where CUDA is initialised in this process); after it they are as before (a second copy of an optimiser
    asked inside leaves the search's own draws alone)."""
    py = random.getstate()
    np = sys.modules.get("numpy")
    np_state = np.random.get_state() if np is not None else None
    torch = sys.modules.get("torch")
    torch_state = torch.random.get_rng_state() if torch is not None else None
    cuda_states = torch.cuda.get_rng_state_all() if torch is not None and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(py)
        if np_state is not None:
            np.random.set_state(np_state)
        if torch_state is not None:
            torch.random.set_rng_state(torch_state)
        if cuda_states is not None:
            torch.cuda.set_rng_state_all(cuda_states)


__all__ = ["check_candidates", "contained", "global_rngs_kept", "is_spec", "label", "load", "loaded"]
