"""The same digits configuration under each trust model: error and ε side by side (issue #15).

Evaluates `digits_mlp` (central trust, N = 100,000, M = 1,000, T = 10, δ = 1e-6) at its gene defaults with a few
privacy overrides, and writes results/trust_models/README.md (a table), results.json and engine.json (the engine
signature the errors were made on: tests/experiments/test_smoke.py compares the first seed's errors exactly on a
machine with the same signature, so a change that moves a published error fails there until this is rerun).

    python experiments/trust_models.py [--seeds 0 1 2] [--out experiments/results]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from common import cpu, provenance

from fedevo.engine_signature import engine_signature
from fedevo.evaluation import evaluate
from fedevo.problem import load_problem

CASES = [
    ("no privacy (FedAvg)", {"preset": "fedavg"}),
    ("central σ=2", {"sigma": 2.0}),
    ("central σ=1", {"sigma": 1.0}),
    ("central σ=0.5", {"sigma": 0.5}),
    ("central, target ε=1", {"target_eps": 1.0}),
    ("central, fixed-size cohort σ=1", {"sampling": "fixed", "sigma": 1.0}),
    ("secagg σ=7", {"trust": "secagg", "sigma": 7.0}),
    ("secagg σ=3", {"trust": "secagg", "sigma": 3.0}),
    ("secagg, target ε=2", {"trust": "secagg", "target_eps": 2.0}),
    ("local σ=1 (client noise in full)", {"trust": "local", "sigma": 1.0}),
]


def _finite(eps):
    """An ε as JSON holds it: None for none (no privacy, ∞)."""
    return None if eps is None or not math.isfinite(eps) else eps


def _seed_note(seed, eps, participations) -> str:
    shown = "∞" if eps is None else f"{eps:.3g}"
    return f"seed {seed} ε {shown}" + ("" if participations is None else f" ({participations} participations)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default="experiments/results")
    a = ap.parse_args(argv)
    prob = load_problem("digits_mlp")
    made, t0 = provenance(), time.perf_counter()
    rows = []
    for label, params in CASES:
        res = [evaluate(prob, params, seed=s) for s in a.seeds]
        eps = res[0].eps
        rows.append({"case": label, "params": params, "error_mean": float(np.mean([r.error for r in res])),
                     "error_std": float(np.std([r.error for r in res])), "errors": [r.error for r in res],
                     "eps": _finite(eps), "seeds": list(a.seeds), "eps_per_seed": [_finite(r.eps) for r in res],
                     "participations_max_per_seed": [r.privacy.get("participations_max") for r in res],
                     "sigma": res[0].privacy.get("sigma"), "trust": res[0].privacy.get("trust", "local"),
                     "accountant": res[0].privacy.get("accountant", "")})
        print(f"{label:38s} error {rows[-1]['error_mean']:.3f} ± {rows[-1]['error_std']:.3f}  ε {eps}")
    out = Path(a.out) / "trust_models"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    (out / "engine.json").write_text(json.dumps({"signature": engine_signature("digits_mlp"), "made": made},
                                                indent=1) + "\n")
    base = rows[0]["error_mean"]
    md = ["# digits_mlp under each trust model", "",
          f"Command: `python experiments/trust_models.py --seeds {' '.join(map(str, a.seeds))}`; CPU: {cpu()}; "
          f"{made}; {time.perf_counter() - t0:.0f} s wall.",
          "Deployment N = 100,000, M = 1,000, T = 10, δ = 1e-6; gene defaults (1×64 MLP, α = 8, lr 0.1, "
          "participation 0.5, clip 1); error = 1 − mean client accuracy, mean ± std over the seeds.", "",
          "| case | `--params` | trust | σ | error | vs FedAvg (points) | ε |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        sigma = "–" if r["sigma"] is None else f"{r['sigma']:.3g}"
        eps = "∞" if r["eps"] is None else f"{r['eps']:.3g}"
        md.append(f"| {r['case']} | `{json.dumps(r['params'])}` | {r['trust']} | {sigma} | "
                  f"{r['error_mean']:.3f} ± {r['error_std']:.3f} | {100 * (r['error_mean'] - base):+.1f} | {eps} |")
    md += ["", f"The table's ε is the first seed's (seed {a.seeds[0]}). Per seed, with the participations of the "
           "most-exposed of the simulation's clients, which set ε under local trust (no sampling amplifies against "
           "the server); central and secagg ε are the deployment's (N, M, T), whatever the simulation drew:", ""]
    md += [f"- {r['case']}: " + ", ".join(map(_seed_note, r["seeds"], r["eps_per_seed"],
                                               r["participations_max_per_seed"])) for r in rows]
    (out / "README.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out}/README.md")


if __name__ == "__main__":
    main()
