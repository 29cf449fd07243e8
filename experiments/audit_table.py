"""The numbers of docs/privacy.md "Auditing": accountant ε, empirical estimate and 95 % lower bound (issue #17).

Audits each configuration below with `fedevo.auditing.audit_config` for every seed and writes
results/audit/README.md (a table: ranges over the seeds) and results.json (every audit's summary). σ is set on
the configuration directly where it lies outside a problem's gene bounds (the power rows), as the tests do.

    python experiments/audit_table.py [--seeds 0 1 2 3 4] [--out experiments/results] [--quick]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from common import cpu, provenance

from fedevo.auditing import audit_config
from fedevo.auditing.report import jsonable
from fedevo.problem import load_problem
from fedevo.viz.numfmt import num

STEP = {"mechanism": "step", "clip": 1.0}
CASES = [  # (label, problem, overrides, σ set on the configuration or None)
    ("default: central, σ = 1, q = 1 %", "digits_mlp", {}, None),
    ("central, no sampling, σ = 1", "digits_mlp", {"sampling": "none"}, None),
    ("secagg, σ = 1", "digits_mlp", {"trust": "secagg"}, None),
    ("local update, σ = 0.05 (δ = 1e-4)", "digits_mlp_local", {}, None),
    ("local step, σ = 3 (record level)", "digits_mlp_local", STEP, 3.0),
    ("local step, σ = 1", "digits_mlp_local", STEP, 1.0),
    ("power: central, σ = 0.1", "digits_mlp", {"sigma": 0.1}, None),
    ("power: secagg, σ = 0.3", "digits_mlp", {"trust": "secagg", "sigma": 0.3}, None),
    ("power: local update, σ = 0.3", "digits_mlp_local", {"sigma": 0.3}, None),
    ("power: local step, σ = 0.08", "digits_mlp_local", STEP, 0.08),
]


def span(values, fmt=None) -> str:
    """min–max over the seeds (one value when they agree), in the plots' number format or `fmt`."""
    show = num if fmt is None else fmt.format
    lo, hi = show(min(values)), show(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--out", default="experiments/results")
    ap.add_argument("--quick", action="store_true", help="seed 0 and the first two configurations (the tests)")
    a = ap.parse_args(argv)
    cases = CASES[:2] if a.quick else CASES
    if a.quick:
        a.seeds = [0]
    rows, md = [], ["# Privacy audits of the digits problems", "",
                    f"Command: `python experiments/audit_table.py --seeds {' '.join(map(str, a.seeds))}`; "
                    f"CPU: {cpu()}; {provenance()}. Lower bounds at 95 % confidence (Steinke et al. one-run), "
                    "estimates by the Gaussian fit (Andrew et al.); ranges over the seeds; 'right guesses' of the "
                    "first seed.", "",
                    "| configuration | problem, `--params` | ε upper (accountant) | ε estimate | ε lower | right guesses "
                    "| verdicts |", "|---|---|---|---|---|---|---|"]
    for label, problem, params, sigma in cases:
        cfg = load_problem(problem).sim_config(params)
        if sigma is not None:
            cfg = replace(cfg, privacy=replace(cfg.privacy, sigma=sigma))
        res = [audit_config(cfg, seed=s, label=label, params=dict(params, **({"sigma": sigma} if sigma else {})))
               for s in a.seeds]
        rows += [dict(r.summary(), problem=problem) for r in res]
        b = res[0].bound
        verdicts = sorted({r.verdict for r in res})
        shown = dict(params, **({"sigma": sigma} if sigma else {}))
        md.append(f"| {label} | {problem} `{json.dumps(shown, ensure_ascii=False)}` | "
                  f"{span([r.eps_upper for r in res])} | {span([r.eps_estimate for r in res])} | "
                  f"{span([r.eps_lower for r in res], '{:.2f}')} | {b.correct} / {b.guesses} | "
                  f"{', '.join(verdicts)} |")
        print(md[-1])
    out = Path(a.out) / "audit"
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(jsonable(rows), indent=1) + "\n")
    (out / "README.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out}/README.md")


if __name__ == "__main__":
    main()
