"""The search over a problem's genes: NSGA-III by default (seed 004 §2.4, §3.3-3.4, Algorithm 2), or another
optimiser behind the same ask/tell seam.

Modules: ``optimizers`` (what proposes the candidates: ``nsga3``, ``random``, ``gp``, ``tpe``; one class each behind
ask / tell / state, registered by name), ``budgets`` (when the search stops: --gen, --budget, --time-budget,
--patience), ``workers`` (--workers auto), ``space`` (genes <-> pymoo vectors, unbiased integer rounding),
``problem`` (the pymoo Problem: decode, call the injected evaluator, F and G on the run's objectives:
fedevo.objectives),
``algorithm`` (the NSGA3 configuration), ``evaluator`` (what evaluates an individual: fedevo's simulator, with
its memory check and cost model, or any function), ``runner`` (serial or Ray evaluation, each result reported
as it finishes), ``run`` (run directory, checkpoints, resume, front, hypervolume), ``rundata`` (the run
directory's reader: ``load_run``, ``RunData``), ``callbacks`` (what a running search reports to:
``SearchCallback``; the command line's progress display and live front.html are callbacks), ``fidelity`` (the
multi-fidelity rung ladder and promotion rule) and ``rungs`` (a generation trained rung by rung, states saved).

Command line::

    fedevo search [--problem NAME|FILE] [--optimizer nsga3|random|gp|tpe] [--pop N] [--gen N] [--budget N]
                  [--time-budget S] [--patience K] [--workers auto|N] [--seed S] [--out DIR]
                  [--rounds T] [--data-dir D] [--ray-address HOST:PORT] [--cpus-per-task C]
                  [--gpus-per-task G] [--partitions P] [--fidelity F] [--importance] [--quiet]
    fedevo resume DIR [--workers auto|N] [--ray-address HOST:PORT] [--data-dir D] [--importance] [--quiet]

``--optimizer`` asks for ``--pop`` candidates at a time: ``nsga3`` (default), ``random`` (uniform sampling), ``gp``
(Optuna's GPSampler, for expensive evaluations), ``tpe`` (Optuna's multivariate TPE). The search ends at the first
budget reached: ``--gen`` batches, ``--budget`` evaluations, ``--time-budget`` seconds (across resumes),
``--patience`` batches without hypervolume growth; stop.json says which, and resume honours them.
``--workers auto`` (default) evaluates in-process on a machine of 2 cores or fewer or for batches of one, else on a
local Ray with one worker per core; ``--workers 0`` evaluates in-process; ``--workers N`` starts a local Ray with N
workers. A cluster started with ``ray start --head --port 6379`` is used with ``--ray-address
HOST:6379``; Ray >= 2.5x clusters use token authentication, which a driver given an explicit address only
uses with ``RAY_AUTH_MODE=token`` in its environment (token from ``RAY_AUTH_TOKEN`` or ``~/.ray/auth_token``).

Python API::

    from fedevo.searching import Runtime, SearchSettings, resume, search
    summary = search(SearchSettings(problem="digits_mlp", pop=12, gen=4, seed=0), "runs/demo", Runtime(workers=2))
    summary = search(SearchSettings(problem="digits_mlp", optimizer="gp", pop=8, gen=100, budget=48), "runs/gp")
    summary = resume("runs/demo", Runtime(workers=0), evaluator=my_evaluate)   # any evaluate-like callable
    summary = search(settings, "runs/b", callbacks=[MyCallback()])   # a SearchCallback subclass
    data = load_run("runs/demo")   # RunData: rows, front, hypervolume(), problem, settings
"""

from .callbacks import SearchCallback
from .run import Runtime, SearchRun, SearchSettings, Summary, resume, search
from .rundata import RunData, load_run
from .space import SearchSpace

__all__ = ["RunData", "Runtime", "SearchCallback", "SearchRun", "SearchSettings", "SearchSpace", "Summary",
           "load_run", "resume", "search"]
