"""`fedevo search` and `fedevo resume`: the search over a problem's genes (NSGA-III or another --optimizer)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app, run_dir_path
from .evaluate import EVAL_TIMEOUT_HELP

_EVALUATOR_HELP = ("Your own evaluation function, 'package.module:function' or 'python:file.py:function', instead of "
                   "fedevo's simulator (usually named in the problem file: `evaluator = ...`; docs/api.md).")


_WORKERS_HELP = ("auto (default): in-process on a machine of 2 cores or fewer or for batches of one (Ray's start-up "
                 "would cost more than it saves; one line says why), else a local Ray with one worker per core; N: "
                 "a local Ray with N workers; 0: in-process.")


_GPUS_HELP = ("Ray GPUs reserved per evaluation (a batch, with --batch-generation): each then trains on its GPU "
              "(device = \"auto\") and plans for that share of its memory; 0.25 puts four on a GPU; 0: on the CPU.")
_BATCH_HELP = ("Evaluate each generation a batch at a time, as one program on one device (fl/population.py: "
               "MLPs' local training stacked; the others alone): one Ray task per batch, reserving --gpus-per-task. "
               "Default: on where the evaluations train on a GPU (--gpus-per-task > 0, or in-process with a GPU), "
               "off on the CPU.")
_BATCH_SIZE_HELP = ("At most N evaluations in one batch (default: the generation split evenly over the GPUs, or "
                    "slots, the runner has: one batch on one GPU).")


_IMPORTANCE_HELP = ("Also write importance.html at the end (a random forest per objective: seconds, more than the "
                    "search itself on a fast problem; `fedevo plot DIR` writes it any time).")


def _execute(start, quiet: bool) -> None:
    """Run `start(callbacks)` (fedevo.api's search or resume) with the progress display; print the summary."""
    from rich.console import Console

    from ..errors import SearchFailedError
    from .stopped import how_stopped
    from ..viz.progress import RichReporter

    callbacks = [] if quiet else [RichReporter(console=Console(stderr=True))]
    try:
        run = start(callbacks)
    except SearchFailedError as e:  # the summary first, then the one-line error
        _print_summary(e.run.summary, e.run, quiet)
        raise
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM (fedevo.errors.Terminated): exit 130 / 143
        where = getattr(e, "run_dir", None)
        how, code = how_stopped(e)
        print(f"fedevo: {how} after the search finished, writing its pages; its results are in {where} (pages: "
              f"fedevo plot {where})" if getattr(e, "finished", False) else
              f"fedevo: {how}; every finished evaluation is saved in {where}. Continue with: fedevo resume {where}"
              f"{getattr(e, 'resume_options', '')}"
              if where else f"fedevo: {how} before the search began: nothing was evaluated; run the command again",
              file=sys.stderr)
        raise typer.Exit(code)
    _print_summary(run.summary, run, quiet)
    pages = [p.name for p in (run.path / "front.html", run.path / "importance.html") if p.exists()]
    print(f"results in {run.path}/ (front.csv, evaluations.csv, hypervolume.csv, run.json, checkpoints/"
          + "".join(f", {name}" for name in pages) + ")")


def _print_summary(summary, run, quiet: bool) -> None:
    """The closing line and (unless quiet) the front's first rows; `run` is a fedevo.Run."""
    from ..searching.budgets import REASONS

    stop = getattr(summary, "stop", "")
    state = ("finished" if stop == "gen" or (not stop and summary.generations >= summary.n_gen) else
             "stopped early (no new offspring)" if summary.stopped_early else
             f"finished ({REASONS[stop]}{_past_time_budget(run) if stop == 'time_budget' else ''})"
             if stop in REASONS else "stopped")
    # a multi-fidelity search: --budget counts individuals, each trained at one or more rungs (a row each)
    individuals = getattr(summary, "individuals", None)
    counted = (f"{summary.evaluations} evaluations (" if individuals is None else
               f"{individuals} individuals ({summary.evaluations} rung evaluations, {summary.full_fidelity} at full "
               "fidelity, ")
    print(f"search {state}: {summary.generations}/{summary.n_gen} generations, {counted}{summary.failed} failed, "
          f"{summary.diverged} diverged, {summary.reused} reused from the log), Pareto front of {summary.front_size}, "
          f"{summary.wall_s:.0f} s")
    first_failure = getattr(summary, "first_failure", "")
    # why, in one line: the count alone sent one to evaluations.csv (where all failed, the error's line says it)
    if summary.failed and first_failure and summary.failed != summary.evaluations:
        print(f"{summary.failed} evaluation(s) failed; the first: {first_failure} (each evaluation's message in "
              "evaluations.csv)", file=sys.stderr)
    for name, n, ok, first in getattr(summary, "unread", ()):  # its worst value stood in: the front never saw it
        print(f"objective {name}: not read in {n} of {ok} ok evaluations (its worst value stood in; the first: "
              f"{first}; each evaluation's message in evaluations.csv)", file=sys.stderr)
    timing = _timing(run)
    if timing:
        print(timing)
    if not quiet and summary.front:
        from rich.console import Console
        from rich.table import Table

        data = run.data
        names, genes = data.objectives.names, data.gene_names
        from ..picking import lowest
        from ..viz.numfmt import num

        fmt = lambda v: "–" if v is None else num(v) if isinstance(v, float) else str(v)  # noqa: E731
        first = names[0]
        t = Table("id", *names, "genes", title=f"Pareto front ({'lowest' if not data.objectives[0].maximize else 'highest'}"
                                                f" {first} first; all in front.csv)")
        for r in lowest(summary.front, first, 10, data.objectives, highest=data.objectives[0].maximize):
            t.add_row(str(r["id"]), *(fmt(r[n]) for n in names), " ".join(f"{g}={fmt(r[g])}" for g in genes))
        Console(highlight=False).print(t)


def _past_time_budget(run) -> str:
    """'; its last batch ran 6.0 s past --time-budget 1 s' where the search ran 0.1 s or more past its time budget
    (stop.json's over_time_budget_s: checked between batches, the batch that had started was finished); else ""."""
    from ..searching.budgets import read_stop

    stop = read_stop(run.path) or {}
    over, budget = stop.get("over_time_budget_s") or 0.0, (stop.get("budgets") or {}).get("time_budget")
    if over < 0.1 or budget is None:
        return ""
    return f"; its last batch ran {over:.1f} s past --time-budget {budget:g} s"


def _timing(run) -> str:
    """Where the time went, in one line: each evaluation's seconds (median, max), the optimiser's seconds per
    proposal (the mean over batches.csv's batches, and the last batch's) and the seconds of search in all, across resumes (stop.json's
    search_s; the closing line's seconds are this process's): what decides whether a model-based optimiser's
    seconds pay for themselves. "" when nothing was evaluated."""
    import math
    import statistics

    from ..viz.numfmt import num

    data = run.data
    walls = [float(r["wall_s"]) for r in data.rows if r.get("wall_s") is not None and math.isfinite(r["wall_s"])]
    if not walls:
        return ""
    parts = [f"evaluations {num(statistics.median(walls))} s median, {num(max(walls))} s max"]
    batches = [b for b in data.batches() if b["asked"]]
    if batches:  # the mean and the last: a GP's proposals cost more as evaluations accumulate (its first are random)
        mean = sum(b["sampler_s"] for b in batches) / sum(b["asked"] for b in batches)
        from ..searching.optimizers.user import label

        name = label(data.settings.optimizer)
        last = num(batches[-1]['sampler_s'] / batches[-1]['asked'])
        parts.append(f"{name} {num(mean)} s per proposal ({last} s in the last batch; batches.csv)")
    search_s = (data.stop() or {}).get("search_s")
    if isinstance(search_s, (int, float)):
        parts.append(f"{search_s:.0f} s of search in all")
    return "seconds: " + " · ".join(parts)


@app.command()
def search(
    problem: str = typer.Option("digits_mlp", "--problem", "-p", help="Bundled problem name or path to a .toml file."),
    pop: Optional[int] = typer.Option(None, "--pop", help="Batch size: NSGA-III's population M (>= number of reference directions; paper: 20; default 12, also for random); gp and tpe: default one per parallel evaluation (1 in-process; at least 3 under --fidelity), then 48 evaluations unless --gen or a budget is given."),
    gen: Optional[int] = typer.Option(None, "--gen", help="At most N batches of --pop (NSGA-III: generations, the initial population included; paper: 20). Default: 4 when no other budget is given; with --budget, --time-budget or --patience and no --gen, those end the search (no batch cap)."),
    workers: str = typer.Option("auto", "--workers", "-w", help=_WORKERS_HELP),
    seed: int = typer.Option(0, "--seed", help="Run seed in 0..2**32-1: the same seed gives the same front."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: runs/<problem>-<timestamp>)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Override the problem's rounds per evaluation."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root for MNIST/Fashion-MNIST/CIFAR-10."),
    download: bool = typer.Option(False, "--download", help="Fetch the problem's dataset into --data-dir with torchvision first, once, before the search starts."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Use a running Ray cluster (HOST:PORT, e.g. from `ray start --head`)."),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs reserved per evaluation."),
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help=_GPUS_HELP),
    partitions: Optional[int] = typer.Option(None, "--partitions", help="Das–Dennis partitions (default: the most whose directions fit in --pop)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress display (logs, CI)."),
    evaluator: Optional[str] = typer.Option(None, "--evaluator", help=_EVALUATOR_HELP),
    fidelity: Optional[str] = typer.Option(None, "--fidelity", help="Multi-fidelity search: offspring train first for this fraction of the rounds (0.33), or a rung ladder ending at 1 (1/9,1/3,1); a third of each rung continues to the next (default: the problem file's `fidelity`, else 1: every evaluation trains all rounds)."),
    init_from: Optional[Path] = typer.Option(None, "--init-from", parser=run_dir_path, help="Warm start: an earlier run directory on the same problem; its front, evaluated afresh, comes first (nsga3: up to --pop of it begins the initial population; gp, tpe, random: up to 10 are the first candidates)."),
    eval_timeout: Optional[float] = typer.Option(None, "--eval-timeout", help=EVAL_TIMEOUT_HELP),
    optimizer: str = typer.Option("nsga3", "--optimizer", help="What proposes the candidates, --pop at a time: nsga3 (NSGA-III, the default), random (uniform sampling, the baseline), gp (Optuna's Gaussian-process sampler: fewest evaluations, seconds of its own per proposal; for expensive evaluations), tpe (Optuna's multivariate TPE); or your own Optimizer subclass: python:FILE.py:Class or module:Class (docs/search.md)."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Stop after N evaluations (the first budget reached ends the search; stop.json says which)."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Stop after S seconds of search (counted across resumes; a batch that has started is finished)."),
    patience: Optional[int] = typer.Option(None, "--patience", help="Stop when the hypervolume has not grown for K batches."),
    importance: bool = typer.Option(False, "--importance", help=_IMPORTANCE_HELP),
    batch_generation: Optional[bool] = typer.Option(None, "--batch-generation/--no-batch-generation", help=_BATCH_HELP),
    batch_size_per_gpu: Optional[int] = typer.Option(None, "--batch-size-per-gpu", help=_BATCH_SIZE_HELP),
) -> None:
    """Search a problem's genes for the Pareto front of its objectives (NSGA-III, or another --optimizer)."""
    from .. import api

    _execute(lambda callbacks: api.search(
        problem, pop=pop, gen=gen, workers=workers, seed=seed, out=out, rounds=rounds, data_dir=data_dir,
        partitions=partitions, evaluator=evaluator, ray_address=ray_address, cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task, fidelity=fidelity, init_from=init_from, eval_timeout=eval_timeout,
        callbacks=callbacks, optimizer=optimizer, budget=budget, time_budget=time_budget, patience=patience,
        progress=False, importance=importance, batch_generation=batch_generation,
        batch_size_per_gpu=batch_size_per_gpu, download=download), quiet)


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., parser=run_dir_path, metavar="RUN_DIR", help="Run directory of a stopped search."),
    workers: str = typer.Option("auto", "--workers", "-w", help=_WORKERS_HELP),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Use a running Ray cluster (HOST:PORT)."),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs reserved per evaluation."),
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help=_GPUS_HELP),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root, if it moved since the search started."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress display (logs, CI)."),
    eval_timeout: Optional[float] = typer.Option(None, "--eval-timeout", help=EVAL_TIMEOUT_HELP),
    importance: bool = typer.Option(False, "--importance", help=_IMPORTANCE_HELP),
    batch_generation: Optional[bool] = typer.Option(None, "--batch-generation/--no-batch-generation", help=_BATCH_HELP),
    batch_size_per_gpu: Optional[int] = typer.Option(None, "--batch-size-per-gpu", help=_BATCH_SIZE_HELP),
    gen: Optional[int] = typer.Option(None, "--gen", help="Raise the batches to N in all (unless given, --gen no longer ends the search: the other budgets do)."),
    budget: Optional[int] = typer.Option(None, "--budget", help="Raise the budget to N evaluations in all: a search a budget ended goes on."),
    time_budget: Optional[float] = typer.Option(None, "--time-budget", help="Raise the time budget to S seconds of search in all (counted since the search began)."),
    patience: Optional[int] = typer.Option(None, "--patience", help="Set --patience to K batches without hypervolume growth."),
) -> None:
    """Continue a stopped search (killed, interrupted) from its last checkpoint; finished evaluations are reused.
    With --budget/--gen/--time-budget/--patience, a finished search goes on under the raised budgets."""
    from .. import api

    _execute(lambda callbacks: api.resume(
        run_dir, workers=workers, data_dir=data_dir, ray_address=ray_address, cpus_per_task=cpus_per_task,
        gpus_per_task=gpus_per_task, eval_timeout=eval_timeout, callbacks=callbacks, progress=False,
        importance=importance, batch_generation=batch_generation, batch_size_per_gpu=batch_size_per_gpu,
        gen=gen, budget=budget, time_budget=time_budget, patience=patience), quiet)
