"""`fedevo problems` and `fedevo evaluate`."""

from __future__ import annotations

import json
import math
from typing import Optional

import typer

from .app import app


def _jsonable(obj):
    """JSON has no inf/NaN: write them as null so every consumer can parse the output."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


@app.command()
def problems() -> None:
    """List the bundled problem files."""
    from rich.console import Console
    from rich.table import Table

    from ..problem import list_problems, load_problem

    table = Table("name", "dataset", "model", "mechanism", "genes", "description")
    for name in list_problems():
        p = load_problem(name)
        table.add_row(name, p.dataset, p.model, str(p.fixed.get("mechanism", "none")), ", ".join(p.gene_names),
                      p.description)
    Console().print(table)


@app.command()
def evaluate(
    problem: str = typer.Option("digits_mlp", "--problem", "-p", help="Bundled problem name or path to a .toml file."),
    params: Optional[str] = typer.Option(None, help="JSON object (or file) of gene/setting overrides, e.g. '{\"lr\": 0.1}'."),
    rounds: Optional[int] = typer.Option(None, min=1, help="Override the problem's number of rounds."),
    seed: int = typer.Option(0, help="Random seed: the same seed gives the same numbers."),
    data_dir: Optional[str] = typer.Option(None, help="Dataset root (torchvision layout) for MNIST/CIFAR-10/Fashion-MNIST."),
    download: bool = typer.Option(False, help="Let torchvision download the dataset into --data-dir."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
) -> None:
    """Train one configuration of a problem and print its objectives (error, comm, ε)."""
    from ..evaluate import evaluate as run_eval
    from ..problem import load_problem, parse_params

    prob = load_problem(problem)
    overrides = parse_params(params)
    cfg = prob.sim_config(overrides, rounds=rounds, data_dir=data_dir, download=download)  # validate before work
    if quiet or as_json:
        res = run_eval(prob, overrides, seed=seed, rounds=rounds, data_dir=data_dir, download=download)
    else:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"{prob.name}: training", total=cfg.rounds)
            res = run_eval(prob, overrides, seed=seed, rounds=rounds, data_dir=data_dir, download=download,
                           progress=lambda t: bar.update(task, completed=t))
    out = {"problem": prob.name, "seed": seed, "params": prob.resolve(overrides), **res.to_dict()}
    if "sigma" in res.privacy:  # target-ε mode: the σ that was used (calibrated), not the problem's default
        out["params"]["sigma"] = res.privacy["sigma"]
    if as_json:
        print(json.dumps(_jsonable(out)))
        return
    from rich.console import Console

    c = Console()
    c.print(f"[bold]{prob.name}[/] seed={seed} status={res.status} ({res.wall_s:.1f} s, {res.rounds} rounds)")
    c.print(f"  error (1 - mean client acc) {res.error:.4f}   global accuracy {res.accuracy_global:.4f}")
    c.print(f"  comm (params/round/client slot) {res.comm:.1f}   Ω {res.omega}")
    c.print(f"  ε (accountant) {res.eps}   ε (paper formula) {res.eps_paper}   δ {cfg.privacy.delta}")
    if res.message:
        c.print(f"  {res.message}")
