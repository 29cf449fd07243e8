"""`fedevo search` and `fedevo resume`: the NSGA-III search over a problem's genes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app

_EVALUATOR_HELP = "Evaluation function 'module:function' (testing hook; default: fedevo's simulator)."


def _runtime(workers, ray_address, cpus_per_task, gpus_per_task):
    from ..search.run import Runtime

    return Runtime(workers=workers, ray_address=ray_address, cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task)


def _execute(run, runtime, quiet: bool, created: bool = False) -> None:
    from rich.console import Console

    from ..errors import FedevoError
    from ..viz.live import LivePage
    from .progress import RichReporter

    # what the search reports to: the progress display (front size and HV after each generation), then the live
    # front.html (rewritten after each generation, --quiet too)
    callbacks = [] if quiet else [RichReporter(eps_key=run.eps_key, console=Console(stderr=True), run_dir=run.run_dir)]
    callbacks.append(LivePage())
    try:
        summary = run.run(runtime, callbacks=callbacks)
    except FedevoError:
        if created and run.is_empty():  # e.g. the Ray cluster refused us: leave no half-made run behind
            import shutil

            shutil.rmtree(run.run_dir, ignore_errors=True)
        raise
    except KeyboardInterrupt:
        print(f"fedevo: interrupted; every finished evaluation is saved in {run.run_dir}. "
              f"Continue with: fedevo resume {run.run_dir}", file=sys.stderr)
        raise typer.Exit(130)
    _print_summary(summary, run, quiet)
    if summary.evaluations and summary.failed == summary.evaluations:
        raise FedevoError(f"every evaluation failed ({summary.failed}); the first: "
                          f"{summary.first_failure or 'no message'} (log: {run.run_dir / 'evaluations.csv'})")
    plot = _write_plot(run.run_dir)
    print(f"results in {summary.run_dir}/ (front.csv, evaluations.csv, hypervolume.csv, run.json, checkpoints/"
          + (f", {plot.name}" if plot else "") + ")")


def _write_plot(run_dir):
    """front.html beside the CSVs (fedevo.viz, as `fedevo plot` writes it); the search's results stand without it."""
    try:
        from ..viz import write_front_html
    except ImportError:
        return None
    try:
        return write_front_html(run_dir)
    except Exception as e:  # noqa: BLE001 - a plotting problem must not turn a finished search into a failure
        print(f"fedevo: warning: could not write front.html ({type(e).__name__}: {e}); try `fedevo plot {run_dir}`",
              file=sys.stderr)
        return None


def _print_summary(summary, run, quiet: bool) -> None:
    state = ("finished" if summary.generations >= summary.n_gen else
             "stopped early (no new offspring)" if summary.stopped_early else "stopped")
    print(f"search {state}: {summary.generations}/{summary.n_gen} generations, {summary.evaluations} evaluations "
          f"({summary.failed} failed, {summary.diverged} diverged, {summary.reused} reused from the log), Pareto front of {summary.front_size}, "
          f"{summary.wall_s:.0f} s")
    if not quiet and summary.front:
        from rich.console import Console
        from rich.table import Table

        eps = run.eps_key
        from ..viz.numfmt import num

        fmt = lambda v: "–" if v is None else num(v) if isinstance(v, float) else str(v)  # noqa: E731
        t = Table("id", "error", "comm", eps, "genes", title="Pareto front (lowest error first; all in front.csv)")
        for r in sorted(summary.front, key=lambda r: (r["error"], r["comm"]))[:10]:
            t.add_row(str(r["id"]), fmt(r["error"]), fmt(r["comm"]), fmt(r[eps]),
                      " ".join(f"{g.name}={fmt(r[g.name])}" for g in run.space.genes))
        Console(highlight=False).print(t)


@app.command()
def search(
    problem: str = typer.Option("digits_mlp", "--problem", "-p", help="Bundled problem name or path to a .toml file."),
    pop: int = typer.Option(12, "--pop", help="Population size M (>= number of reference directions; paper: 20)."),
    gen: int = typer.Option(4, "--gen", help="Generations N, the initial population included (paper: 20)."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Parallel evaluations on a local Ray (default: number of cores; 0: serial, in-process)."),
    seed: int = typer.Option(0, "--seed", help="Run seed in 0..2**32-1: the same seed gives the same front."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Run directory (default: runs/<problem>-<timestamp>)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Override the problem's rounds per evaluation."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root for MNIST/Fashion-MNIST/CIFAR-10."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Use a running Ray cluster (HOST:PORT, e.g. from `ray start --head`)."),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs reserved per evaluation."),
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help="Ray GPUs reserved per evaluation: each then trains on its GPU (device = \"auto\"); 0.25 puts four on a GPU; 0: on the CPU."),
    partitions: Optional[int] = typer.Option(None, "--partitions", help="Das–Dennis partitions (default: the most whose directions fit in --pop)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress display (logs, CI)."),
    evaluator: Optional[str] = typer.Option(None, "--evaluator", hidden=True, help=_EVALUATOR_HELP),
) -> None:
    """Search a problem's genes with NSGA-III for the (error, communication, ε) Pareto front."""
    from ..search.evaluator import DEFAULT_EVALUATOR
    from ..search.run import SearchRun, SearchSettings

    settings = SearchSettings(problem=problem, pop=pop, gen=gen, seed=seed, partitions=partitions, rounds=rounds,
                              data_dir=data_dir, evaluator=evaluator or DEFAULT_EVALUATOR)
    runtime = _runtime(workers, ray_address, cpus_per_task, gpus_per_task)
    created = out is None or not out.exists() or (out.is_dir() and not any(out.iterdir()))
    run = SearchRun.create(settings, out, runtime)
    _execute(run, runtime, quiet, created=created)


@app.command()
def resume(
    run_dir: Path = typer.Argument(..., help="Run directory of a stopped search."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Parallel evaluations on a local Ray (default: number of cores; 0: serial)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Use a running Ray cluster (HOST:PORT)."),
    cpus_per_task: float = typer.Option(1.0, "--cpus-per-task", help="Ray CPUs reserved per evaluation."),
    gpus_per_task: float = typer.Option(0.0, "--gpus-per-task", help="Ray GPUs reserved per evaluation: each then trains on its GPU (device = \"auto\"); 0.25 puts four on a GPU; 0: on the CPU."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root, if it moved since the search started."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No live progress display (logs, CI)."),
) -> None:
    """Continue a stopped search (killed, interrupted) from its last checkpoint; finished evaluations are reused."""
    from ..errors import FedevoError
    from ..search.run import SearchRun

    run = SearchRun.open(run_dir)
    if run.finished():  # refuse before opening anything for writing: a finished run's results stay as they are
        raise FedevoError(f"{run_dir} holds a finished search ({run.settings.gen} generations); nothing to resume "
                          f"and nothing was changed (see `fedevo front {run_dir}`)")
    if data_dir is not None:
        run.use_data_dir(data_dir)
    _execute(run, _runtime(workers, ray_address, cpus_per_task, gpus_per_task), quiet)
