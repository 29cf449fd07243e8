"""NSGA-III search over a problem's genes (seed 004 §2.4, §3.3-3.4, Algorithm 2).

Modules: ``space`` (genes <-> pymoo vectors, unbiased integer rounding), ``problem`` (the pymoo Problem: decode,
call the injected evaluator, F and G on the run's objectives: fedevo.objectives),
``algorithm`` (the NSGA3 configuration), ``evaluator`` (what evaluates an individual: fedevo's simulator, with
its memory check and cost model, or any function), ``runner`` (serial or Ray evaluation, each result reported
as it finishes), ``run`` (run directory, checkpoints, resume, front, hypervolume), ``rundata`` (the run
directory's reader: ``load_run``, ``RunData``), ``callbacks`` (what a running search reports to:
``SearchCallback``; the command line's progress display and live front.html are callbacks), ``fidelity`` (the
multi-fidelity rung ladder and promotion rule) and ``rungs`` (a generation trained rung by rung, states saved).

Command line::

    fedevo search [--problem NAME|FILE] [--pop N] [--gen N] [--workers N] [--seed S] [--out DIR]
                  [--rounds T] [--data-dir D] [--ray-address HOST:PORT] [--cpus-per-task C]
                  [--gpus-per-task G] [--partitions P] [--fidelity F] [--quiet]
    fedevo resume DIR [--workers N] [--ray-address HOST:PORT] [--data-dir D] [--quiet]

``--workers 0`` evaluates in-process (debugging); otherwise a local Ray with N workers is started (default:
one per core). A cluster started with ``ray start --head --port 6379`` is used with ``--ray-address
HOST:6379``; Ray >= 2.5x clusters use token authentication, which a driver given an explicit address only
uses with ``RAY_AUTH_MODE=token`` in its environment (token from ``RAY_AUTH_TOKEN`` or ``~/.ray/auth_token``).

Python API::

    from fedevo.searching import Runtime, SearchSettings, resume, search
    summary = search(SearchSettings(problem="digits_mlp", pop=12, gen=4, seed=0), "runs/demo", Runtime(workers=2))
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
