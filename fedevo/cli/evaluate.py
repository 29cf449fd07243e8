"""`fedevo problems`, `fedevo examples` and `fedevo evaluate`."""

from __future__ import annotations

import json
import math
from typing import Optional

import typer

from .app import app, stderr_is_terminal

EVAL_TIMEOUT_HELP = ("Seconds one evaluation may take; a longer one is stopped and marked failed (default: the "
                     "problem file's `eval_timeout`, else no limit).")


def _jsonable(obj):
    """JSON has no inf/NaN: write them as null so every consumer can parse the output."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def _readable(v) -> str:
    """A number for people: 4 significant digits, ∞ for no privacy, – for none."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float) and math.isinf(v):
        return "∞" if v > 0 else "-∞"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@app.command()
def problems() -> None:
    """List the bundled problem files."""
    from rich.console import Console
    from rich.table import Table

    from ..privacy import registry
    from ..problem import list_problems, load_problem

    names = list_problems()
    table = Table()
    # nothing a user types (problem and gene names) is ever cut with "…": names keep their full width, long
    # cells wrap (fold) instead; output that is not a terminal is not limited to 80 columns
    table.add_column("name", no_wrap=True, min_width=max(map(len, names), default=4))
    for col in ("dataset", "model", "mechanism", "genes", "description"):
        table.add_column(col, overflow="fold")
    for name in names:
        p = load_problem(name)
        table.add_row(name, p.dataset, p.model, str(p.fixed.get("mechanism", registry.default_mechanism())), ", ".join(p.gene_names),
                      p.description)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)


def _docs_links_as_text(text: str) -> str:
    """examples/README.md's links to the source tree's docs (`[docs/api.md](../../docs/api.md)`) as text naming
    where they are (`docs/api.md in fedevo's source`, an anchor kept): the package holds no docs/, so beside a
    copy they lead nowhere."""
    import re

    def said(m):
        label, target = m.group(1), m.group(2)
        return f"{target} in fedevo's source" if target.split("#")[0] == label else \
            f"{label} ({target} in fedevo's source)"
    return re.sub(r"\[([^\]]+)\]\(\.\./\.\./(docs/[^)\s]+)\)", said, text)


@app.command()
def examples(
    out: str = typer.Argument("examples", help="The folder to write them to (made if needed; a file already there "
                                               "is never overwritten)."),
) -> None:
    """Copy the examples (your own data, model and training loop, to edit; examples/README.md) out of the installed
    package, so that examples/README.md's commands run as written from the folder holding OUT."""
    from pathlib import Path

    from ..errors import FedevoError
    from ..problem import example_files

    dest = Path(out)
    files = example_files()
    there = sorted(f.name for f in files if (dest / f.name).exists())
    if there:
        raise FedevoError(f"{dest} already holds {', '.join(there)}: nothing was written (a file is never "
                          "overwritten; give another folder, or move them)")
    if dest.exists() and not dest.is_dir():
        raise FedevoError(f"{dest} exists and is not a folder")
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        data = f.read_bytes()
        if f.name == "README.md":  # its links into the source tree's docs/ lead nowhere beside a copy
            data = _docs_links_as_text(data.decode("utf-8")).encode("utf-8")
        (dest / f.name).write_bytes(data)
    where = dest.resolve()
    said = f"its commands run from {where.parent}" if where.name == "examples" else \
        f"its commands name the folder examples/: run them from {where.parent} with {where.name}/ in its place"
    print(f"wrote {len(files)} files to {dest}/ ({', '.join(f.name for f in files)}); start with "
          f"{dest / 'README.md'} ({said})")


@app.command()
def evaluate(
    problem: str = typer.Option("digits_mlp", "--problem", "-p", help="Bundled problem name or path to a .toml file."),
    params: Optional[str] = typer.Option(None, help="JSON object (or file) of gene/setting overrides, e.g. '{\"lr\": 0.1}'."),
    rounds: Optional[int] = typer.Option(None, min=1, help="Override the problem's number of rounds."),
    seed: int = typer.Option(0, help="Random seed in 0..2**32-1: the same seed gives the same numbers."),
    data_dir: Optional[str] = typer.Option(None, help="Dataset root (torchvision layout) for MNIST/CIFAR-10/Fashion-MNIST."),
    download: bool = typer.Option(False, help="Let torchvision download the dataset into --data-dir."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    eval_timeout: Optional[float] = typer.Option(None, "--eval-timeout", help=EVAL_TIMEOUT_HELP),
) -> None:
    """Train one configuration of a problem and print its objectives (error, comm, ε)."""
    from .. import api
    from ..problem import load_problem, parse_params

    if as_json:  # stdout holds the one JSON object: whatever else is written there (user code, C) goes to stderr
        from ..searching.containment import stdout_to_stderr

        with stdout_to_stderr():
            prob = load_problem(problem)
    else:
        prob = load_problem(problem)
    overrides = parse_params(params)
    kwargs = dict(seed=seed, rounds=rounds, data_dir=data_dir, download=download, eval_timeout=eval_timeout)
    if as_json:  # stdout holds the one JSON object: whatever else is written there (user code, C) goes to stderr
        from ..searching.containment import stdout_to_stderr

        with stdout_to_stderr():
            res = api.evaluate(prob, overrides, **kwargs)
    elif quiet or not stderr_is_terminal():  # a log or a pipe: a transient bar ends with an empty line there
        res = api.evaluate(prob, overrides, **kwargs)
    else:  # the bar appears once every check has passed (progress(0)), so a bad input stays one line
        from rich.console import Console
        from rich.progress import Progress

        bar = Progress(transient=True, console=Console(stderr=True))  # stdout: the result alone
        total = rounds or prob.resolve(overrides).get("rounds")

        def progress(t: int) -> None:
            if t == 0:
                bar.start()
                bar.add_task(f"{prob.name}: training", total=total)
            else:
                bar.update(bar.task_ids[0], completed=t)
        try:
            res = api.evaluate(prob, overrides, progress=progress, **kwargs)
        finally:
            if bar.live.is_started:
                bar.stop()
    resolved = prob.resolve(overrides)
    if rounds is not None:
        resolved["rounds"] = rounds  # what was trained
    if "sigma" in res.privacy:  # target-ε mode: the σ that was used (calibrated), not the problem's default
        resolved["sigma"] = res.privacy["sigma"]
    res = res.reported()  # not ok: no error, comm or ε to show (the log's rule: fedevo.result)
    out = {"problem": prob.name, "seed": seed, "params": resolved, **res.to_dict()}
    if as_json:
        print(json.dumps(_jsonable(out)))
        return
    from rich.console import Console

    c = Console(soft_wrap=True)  # one line per line, whatever the terminal's (or a pipe's 80) columns
    c.print(f"[bold]{prob.name}[/] seed={seed} status={res.status} ({res.wall_s:.1f} s, {res.rounds} rounds)")
    fixed = lambda v, d: "–" if v is None or math.isnan(v) else f"{v:.{d}f}"  # noqa: E731 - not ok: NaN, '–'
    c.print(f"  error (1 - mean client acc) {fixed(res.error, 4)}   global accuracy {fixed(res.accuracy_global, 4)}")
    c.print(f"  comm (params/round/client slot) {fixed(res.comm, 1)}   Ω {res.omega}")
    c.print(f"  ε (accountant) {_readable(res.eps)}   ε (paper formula) {_readable(res.eps_paper)}   "
            f"δ {_readable(res.privacy.get('delta'))}   (full precision: --json)")
    p = res.privacy
    if p.get("trust"):
        deploy = (f"   population {p['population']:,}   cohort {p['cohort']:,}   sampling {p.get('sampling', '–')}"
                  if "population" in p else "")
        c.print(f"  trust {p['trust']}{deploy}   neighbouring {p.get('neighbouring', '–')}   "
                f"accountant {p.get('accountant', '–')}")
    if res.message:
        c.print(f"  {res.message}")
