"""`fedevo audit`: run a configuration with audit canaries and set the empirical ε beside the accountant's."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer

from .app import app

EXIT_VIOLATION = 3


@app.command()
def audit(
    run_dir: Optional[Path] = typer.Argument(None, help="Run directory of `fedevo search` (with --pick)."),
    pick: Optional[str] = typer.Option(None, "--pick", "-p", help="Evaluations of RUN_DIR to audit (the grammar of `front`/`retrain --pick`)."),
    problem: Optional[str] = typer.Option(None, "--problem", help="Audit one configuration of this problem instead of a run's picks."),
    params: Optional[str] = typer.Option(None, help="With --problem: JSON gene/setting overrides."),
    seed: int = typer.Option(0, help="With --problem: the training seed (a run's picks use their evaluation's seed)."),
    rounds: Optional[int] = typer.Option(None, min=1, help="With --problem: override the problem's rounds."),
    canaries: Optional[int] = typer.Option(None, help="Canary users (default: min(2000, Ω active parameters))."),
    confidence: float = typer.Option(0.95, help="Confidence of the lower bound."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Where audit.json/audit.html go (default: RUN_DIR/audit[-N], or runs/audit-PROBLEM-TIME)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object per audited configuration on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar, no table."),
) -> None:
    """Audit privacy: train each configuration once with canary users inserted where its trust model's observer
    looks; report the accountant's ε (eps_upper), an empirical estimate and a lower bound at --confidence.
    Exit code 3 if a lower bound exceeds its upper bound (VIOLATION)."""
    from ..auditing import report, targets
    from ..auditing.run import audit_config, check_canaries
    from ..errors import FedevoError
    from ..guards import check_evaluation_memory, check_rounds, check_seed, check_writable_dir
    from ..problem import parse_params

    check_seed(seed)
    check_rounds(rounds)
    if (run_dir is None) == (problem is None):
        raise FedevoError("give either RUN_DIR --pick SPEC or --problem NAME (not both)")
    if run_dir is not None:
        if not pick:
            raise FedevoError("auditing a run needs --pick (e.g. --pick knee)")
        if params is not None or rounds is not None:
            raise FedevoError("--params and --rounds go with --problem; a run's picks are audited as searched")
        todo = targets.from_run(run_dir, pick)
    else:
        if pick:
            raise FedevoError("--pick needs a RUN_DIR")
        todo = targets.from_problem(problem, parse_params(params), seed=seed, rounds=rounds)
    for t in todo:  # bad confidence / too few canaries / too large: before any training
        check_canaries(canaries, confidence=confidence, delta=t.cfg.privacy.delta)
        check_evaluation_memory(t.cfg, t.label)
    check_writable_dir(out if out is not None else run_dir if run_dir is not None else Path("runs"),
                       "--out" if out is not None else "RUN_DIR" if run_dir is not None else "runs/")
    results = []
    if quiet or as_json:
        for t in todo:
            results.append(audit_config(t.cfg, seed=t.seed, canaries=canaries, confidence=confidence,
                                        label=t.label, params=t.params, eps_search=t.eps_search))
    else:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"),
                      TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
            for n, t in enumerate(todo, start=1):
                task = bar.add_task(f"canary run {n}/{len(todo)}: {t.label}", total=t.cfg.rounds)
                results.append(audit_config(t.cfg, seed=t.seed, canaries=canaries, confidence=confidence,
                                            label=t.label, params=t.params, eps_search=t.eps_search,
                                            on_round=lambda r, task=task: bar.update(task, completed=r)))
    if out is not None:
        dest = report.next_audit_dir(Path(out).parent, Path(out).name)
    elif run_dir is not None:
        dest = report.next_audit_dir(Path(run_dir))
    else:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
        dest = report.next_audit_dir(Path("runs"), f"audit-{todo[0].label}-{stamp}")
    context = {"run_dir": str(run_dir) if run_dir is not None else None, "pick": pick, "problem": problem,
               "confidence": confidence}
    report.write_json(dest / "audit.json", results, context)
    title = f"fedevo audit — {run_dir if run_dir is not None else problem}"
    report.write_html(dest / "audit.html", results, title=title,
                      intro=f"{len(results)} configuration(s); lower bounds at {confidence:g} confidence")
    if as_json:
        for r in results:
            print(json.dumps(report.jsonable(r.summary())))
    elif not quiet:
        from .plot import _console

        report.print_table(results, _console())
    if not as_json:
        print(f"wrote {dest}/ (audit.json, audit.html)")
    if any(r.verdict == "VIOLATION" for r in results):
        sys.exit(EXIT_VIOLATION)
