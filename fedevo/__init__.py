"""fedevo: multi-objective search over private federated learning configurations.

The public Python API (docs/api.md) is exported here; it loads lazily, so `import fedevo` stays cheap and
importing a submodule does not load torch or Ray.
"""

import os as _os

# Torch's OpenMP pool and MKL's threads fight when neither has a wait policy: on a 2-core machine a 1 ms
# batched matmul followed by an elementwise op took 15 ms (see benchmarks/README.md). Must be set before torch loads.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

#: public name -> module that defines it (docs/api.md lists exactly these)
_PUBLIC = {
    "Problem": "problem", "EvaluationResult": "result", "FedevoError": "errors", "ChannelsLastWarning": "errors",
    "ArraySource": "data.sources",
    "EvaluationRecord": "searching.record",
    **dict.fromkeys(["Run", "audit", "evaluate", "hypervolume", "open_run", "pick", "plot", "problems", "resume",
                     "retrain", "search"], "api"),
}
__all__ = sorted(_PUBLIC) + ["__version__"]


def __getattr__(name: str):
    if name in _PUBLIC:
        from importlib import import_module

        value = getattr(import_module(f"{__name__}.{_PUBLIC[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return __all__
