"""Shared plumbing for the experiment scripts: run labelled configurations with per-round curves, and write
CSV + a self-contained plotly HTML + a markdown page with the command, machine and wall time."""

from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional, Sequence

import fedevo  # noqa: F401  (OpenMP wait policy before torch loads)
from fedevo.config import SimConfig
from fedevo.fl.simulate import simulate
from fedevo.result import EvaluationResult
from fedevo.viz.curves import write_curves_html


def machine() -> str:
    import torch

    return (f"{cpu()}, Python {platform.python_version()}, torch {torch.__version__}, fedevo {fedevo.__version__}"
            f" at {commit()}")


def commit() -> str:
    """The checkout's commit (`git rev-parse --short HEAD`), '+ uncommitted changes' beside it when fedevo/ or
    experiments/ differ from it; '?' outside a git checkout. Every result names the code that made it."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "fedevo", "experiments"], cwd=root,
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return f"{head} + uncommitted changes" if dirty else head


def provenance() -> str:
    """When, at what code and under what load a result was made: 'fedevo 78ceae8, 2026-11-28 09:40 UTC, load
    average 0.5' (the 1-minute load average as the run starts: the machines here are shared)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"fedevo {commit()}, {when}, load average {load:.1f}"


def cpu() -> str:
    """lscpu's model name, family and model, and the logical CPUs (benchmarks/machine.py's, one rule for both:
    every published number names it)."""
    bench = str(Path(__file__).resolve().parents[1] / "benchmarks")
    if bench not in sys.path:
        sys.path.append(bench)
    from machine import cpu as machine_cpu

    return machine_cpu()


def command() -> str:
    return "python " + " ".join([sys.argv[0].split("/work/main/")[-1]] + sys.argv[1:])


def run_series(configs: Sequence[tuple[str, SimConfig]], *, seed: int, log: Callable[[str], None] = print,
               eval_every: int = 1) -> list[tuple[str, SimConfig, EvaluationResult]]:
    out = []
    for label, cfg in configs:
        t = time.perf_counter()
        res = simulate(cfg, seed=seed, eval_every=eval_every,
                       progress=lambda r, label=label, n=cfg.rounds: (r % 10 == 0 or r == n) and
                       log(f"  {label}: round {r}/{n} ({time.perf_counter() - t:.0f} s)"))
        log(f"{label}: status {res.status}, final client acc {1 - res.error:.4f}, global acc "
            f"{res.accuracy_global:.4f}, eps {res.eps}, eps_paper {res.eps_paper}, {res.wall_s:.0f} s")
        out.append((label, cfg, res))
    return out


def rounds_to(curve: Sequence[Sequence[float]], target: float, col: int = 2) -> Optional[int]:
    """First round whose accuracy (global by default) reaches `target`; None if never."""
    for row in curve:
        if row[col] >= target:
            return int(row[0])
    return None


def write_curves(out: Path, results, *, title: str, intro: str = "", standard: Optional[str] = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "curves.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "round", "mean_client_accuracy", "global_accuracy"])
        for label, _, res in results:
            for r, a, g in res.accuracy_curve:
                w.writerow([label, r, f"{a:.6f}", f"{g:.6f}"])
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["label", "status", "final_client_accuracy", "final_global_accuracy", "eps", "eps_paper", "comm",
                    "omega", "wall_s", "config"])
        for label, cfg, res in results:
            w.writerow([label, res.status, f"{1 - res.error:.6f}", f"{res.accuracy_global:.6f}", res.eps,
                        res.eps_paper, f"{res.comm:.2f}", res.omega, f"{res.wall_s:.1f}",
                        json.dumps(asdict(cfg), default=str)])
    write_curves_html(out / "curves.html", [(label, res.accuracy_curve) for label, _, res in results], title=title,
                      intro_html=intro, standard=standard)
