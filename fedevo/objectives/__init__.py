"""The search's objectives as objects (issue #34): one :class:`Objective` per quantity a search can minimise
(or maximise), registered once by name, read from an evaluation, and seen by the optimiser through its own
transform (log10 for ε). A problem's ``objectives`` list is the only place that says which and in what order;
:class:`ObjectiveSet` is that list, and the one rule for the objective vector (worst values included).

Torch-free: problem files, run readers and pages load it without the simulator.
"""

from .objective import Objective, ObjectiveError
from .registry import get, names, register, registered, unregister
from .vector import MAX_OBJECTIVES, MIN_OBJECTIVES, ObjectiveSet, as_set, default_names

from . import builtin  # noqa: F401  (registers error, comm, eps, eps_paper and the others)

__all__ = ["MAX_OBJECTIVES", "MIN_OBJECTIVES", "Objective", "ObjectiveError", "ObjectiveSet", "as_set", "default_names", "get",
           "names", "register", "registered", "unregister"]
