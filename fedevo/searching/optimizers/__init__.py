"""Optimisers behind one small interface (ask / tell / state), registered once by name: ``--optimizer NAME``.

Built in: ``nsga3`` (the default; pymoo's NSGA-III, seed 004), ``random`` (uniform sampling of the search space,
the baseline), ``gp`` (Optuna's GPSampler: a Gaussian process with log expected hypervolume improvement, batches
of running trials; for expensive evaluations) and ``tpe`` (Optuna's multivariate TPE sampler). See
:mod:`.base` for the interface and its rules; :func:`register` adds another by name, and ``--optimizer
python:FILE.py:Class`` (or ``module:Class``) takes your own Optimizer subclass without registering it (:mod:`.user`:
loaded, recorded in run.json, its file fingerprinted, its calls contained); :class:`OptunaOptimizer` makes any
Optuna sampler one, :class:`PymooOptimizer` any pymoo algorithm.
"""

from __future__ import annotations

from .base import Optimizer
from .registry import DEFAULT, check_name, from_state, get, make, names, register
from . import nsga3, optuna_samplers, random_sampling  # noqa: E402,F401  (the built-in ones register themselves)
from .optuna_samplers import OptunaOptimizer  # noqa: E402  (bases for your own: any Optuna sampler,
from .pymoo_base import PymooOptimizer  # noqa: E402  any pymoo algorithm)

__all__ = ["DEFAULT", "Optimizer", "OptunaOptimizer", "PymooOptimizer", "check_name", "from_state", "get", "make",
           "names", "register"]
