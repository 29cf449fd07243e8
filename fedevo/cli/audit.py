"""`fedevo audit`: run a configuration with audit canaries and set the empirical ε beside the accountant's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from .app import app, run_dir_path, stderr_is_terminal
from .stopped import stopped

EXIT_VIOLATION = 3


@app.command()
def audit(
    run_dir: Optional[Path] = typer.Argument(None, parser=run_dir_path, metavar="RUN_DIR", help="Run directory of `fedevo search` (with --pick)."),
    pick: Optional[str] = typer.Option(None, "--pick", "-p", help="Evaluations of RUN_DIR to audit (the grammar of `front`/`retrain --pick`)."),
    problem: Optional[str] = typer.Option(None, "--problem", help="Audit one configuration of this problem instead of a run's picks."),
    params: Optional[str] = typer.Option(None, help="With --problem: JSON gene/setting overrides."),
    seed: Optional[int] = typer.Option(None, help="With --problem: the training seed (default 0; a run's picks use their evaluation's seed)."),
    rounds: Optional[int] = typer.Option(None, min=1, help="With --problem: override the problem's rounds; with RUN_DIR: audit the picks at this many rounds (as `fedevo retrain --rounds` trains them)."),
    canaries: Optional[int] = typer.Option(None, help="Canary users (default: min(2000, Ω active parameters))."),
    confidence: float = typer.Option(0.95, help="Confidence of the lower bound."),
    data_dir: Optional[str] = typer.Option(None, "--data-dir", help="Dataset root for MNIST/Fashion-MNIST/CIFAR-10 (a run's: if its data moved)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where audit.json/audit.html go, a new or empty folder (default: RUN_DIR/audit[-N], or runs/audit-PROBLEM-TIME)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per audited configuration on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no table."),
) -> None:
    """Audit privacy: train each configuration once with canary users inserted where its trust model's observer
    looks; report the accountant's ε (eps_upper), an empirical estimate and a lower bound at --confidence.
    Exit code 3 if a lower bound exceeds its upper bound (VIOLATION)."""
    from .. import api
    from ..auditing import report
    from ..problem import parse_params

    kwargs = dict(problem=problem, params=None if params is None else parse_params(params), seed=seed, rounds=rounds,
                  canaries=canaries, confidence=confidence, out=out, data_dir=data_dir)
    try:
        results = api.audit(run_dir, pick, **kwargs) if quiet or as_json or not stderr_is_terminal() \
            else _audit_with_bar(run_dir, pick, kwargs)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: audit.json and audit.html are all or nothing
        raise stopped(e, "nothing was written (audit.json and audit.html are written once every configuration "
                         "is audited); run the same command again to audit") from None
    dest = results[0].written_to
    if as_json:
        for r in results:
            print(json.dumps(report.jsonable(r.summary())))
    elif not quiet:
        from .plot import _console

        report.print_table(results, _console())
    # with --json stdout holds the JSON alone: where the files went goes to stderr
    print(f"wrote {dest}/ (audit.json, audit.html)", file=sys.stderr if as_json else sys.stdout)
    if any(r.verdict == "VIOLATION" for r in results):
        sys.exit(EXIT_VIOLATION)


def _audit_with_bar(run_dir, pick, kwargs):
    """api.audit with a progress bar per configuration on stderr (from the first training: an error before it is
    one line, no bar)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .. import api

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"),
                   TimeElapsedColumn(), console=Console(stderr=True), transient=True)

    def on_start(n, total, target):  # called once every input is checked: a bad one stays one line
        if n == 1:
            bar.start()
        task = bar.add_task(f"canary run {n}/{total}: {target.label}", total=target.cfg.rounds)
        return lambda r: bar.update(task, completed=r)
    try:
        return api.audit(run_dir, pick, on_start=on_start, **kwargs)
    finally:
        if bar.live.is_started:
            bar.stop()
