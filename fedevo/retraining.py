"""Retrain picked Pareto solutions for many rounds and compare them with the standard solution (seed 004 §4.3).

The search evaluates each individual for a few rounds only; seed 004 retrains the two lowest-error solutions and
the knee for 150 rounds and compares them with the *standard solution* — fully connected and without privacy —
in accuracy, communication (as % of the standard's) and ε (its Tables 5–6). Here:

* the picked solutions are trained with their genes (see :mod:`fedevo.picking` for the pick grammar);
* the standard solution is the problem's reference configuration: every gene at its default except that the
  model is dense (no SET: ``alpha`` unset, ``xi = 0``) and its privacy is the default privacy object (no
  mechanism: no clipping, no noise, no recall, plain aggregation; every privacy key the problem fixes or searches,
  a target ε, a budget, a preset or a trust model included, is dropped); participation, learning rate and architecture are the problem's defaults. Everything else (data,
  partition, clients, epochs, batch, upload loss) is the problem's, as in the search;
* every solution is trained on the same data with the same seed (default: the run's seed), for ``rounds`` rounds,
  with the accuracy measured after every round (``eval_every``), on Ray workers (``workers``; 0 = in-process).
  The search evaluated each solution with its own evaluation seed (``eval_seed(run seed, id)``, evaluations.csv's
  ``seed``): one pick retrained with that seed and the search's rounds gives the search's numbers again
  (report.csv's ``search_seed`` and ``search_rounds``).

The same run, picks, rounds and seed give the same numbers. Outputs, in ``RUN_DIR/retrain/`` (``retrain-2/``,
... when it exists: an earlier report is never overwritten; or ``out``, which must not hold anything), once
every training has finished; a stopped retrain keeps each finished training there and the same call continues it
(:mod:`fedevo.retrain_kept`):

* ``report.csv``  one row per solution (picked ones in pick order, then ``standard``), see `REPORT_COLUMNS`;
* ``report.md``   the same numbers as Markdown tables laid out like seed 004's Tables 5–6 (the cells are the
  very strings written to report.csv);
* ``curves.html`` accuracy (mean client and global) per round of every solution (self-contained page);
* ``results.json`` the full-precision results and curves.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

from .errors import FedevoError, arg
from .problem import Problem
from .result import EvaluationResult

STANDARD = "standard"
STANDARD_LABEL = "standard (dense, no privacy)"
OWN_STANDARD_LABEL = "standard (the problem's [standard] settings)"  # a problem with its own evaluator
_STANDARD_FLAG = "__fedevo_standard__"  # in a task's params: train the standard variant of the problem
SPARSITY_KEYS = ("alpha", "xi")  # the standard solution is dense: alpha unset, xi 0
# besides the [data] keys, what every solution shares (a --standard setting may not change them)
SHARED_SETTINGS = ("rounds", "upload_loss")
STANDARD_SETTINGS = {"alpha": None, "xi": 0.0}
DEFAULT_ROUNDS = 150  # seed 004 §4.3
DEFAULT_PICK = "lowest-error:2,knee"  # seed 004's solutions 1, 2 (lowest error) and 3 (knee)

REPORT_COLUMNS = ("solution", "label", "id", "status", "rounds", "seed", "accuracy", "accuracy_global",
                  "accuracy_pct_of_standard", "accuracy_global_pct_of_standard", "comm", "comm_pct_of_standard",
                  "eps", "eps_paper", "omega", "search_error", "search_comm", "search_eps", "search_rounds",
                  "search_seed", "wall_s")
# the Markdown main table: (column, header)
MD_MAIN = (("solution", "Solution"), ("label", "picked by"), ("id", "id"), ("accuracy", "accuracy (mean client)"),
           ("accuracy_global", "global accuracy"), ("accuracy_pct_of_standard", "accuracy % of standard"),
           ("accuracy_global_pct_of_standard", "global accuracy % of standard"), ("comm", "comm"),
           ("comm_pct_of_standard", "comm % of standard"), ("eps", "ε (accountant)"), ("eps_paper", "ε (paper)"),
           ("omega", "Ω"))
# what a picked solution's ε holds under, as its training's privacy summary records it: (key, name)
CLAIM_KEYS = (("trust", "trust"), ("neighbouring", "neighbouring"), ("amplification", "amplification"),
              ("accountant", "accountant"), ("delta", "δ"), ("population", "population N"),
              ("cohort", "cohort M"))


# ============================================================================================ the standard
def not_in_standard() -> tuple[str, ...]:
    """The settings the standard solution drops: sparsity, and every privacy key (the shared ones, each registered
    mechanism's own, a preset), so that its privacy is the default `PrivacyConfig()` (no mechanism) whatever
    the problem fixes: a target ε, a budget, a preset, a trust model, a clip rule."""
    from .problem import PRESET_KEY, privacy_keys

    return SPARSITY_KEYS + privacy_keys() + (PRESET_KEY,)


def standard_label(problem: Problem) -> str:
    """What the standard solution is, in the report's words."""
    return STANDARD_LABEL if problem.simulated else OWN_STANDARD_LABEL


def standard_problem(problem: Problem) -> Problem:
    """The problem's standard solution as a problem: dense, the default privacy object (no mechanism), other
    genes at their defaults. A problem with its own evaluator: its genes at their defaults overridden by its
    `[standard]` table (fedevo cannot know what "dense, no privacy" means for the user's training)."""
    if not problem.simulated:
        fixed = {**problem.fixed, **problem.defaults(), **problem.standard}
        return replace(problem, name=f"{problem.name} ({STANDARD})", genes=(), fixed=fixed)
    drop = set(not_in_standard())
    genes = tuple(g for g in problem.genes if g.name not in drop)
    fixed = {k: v for k, v in problem.fixed.items() if k not in drop}
    fixed.update(STANDARD_SETTINGS)
    return replace(problem, name=f"{problem.name} ({STANDARD})", genes=genes, fixed=fixed)


def retrain_evaluate(problem: Problem, params: Mapping[str, Any], *, seed: int, rounds: Optional[int] = None,
                     data_dir: Optional[str] = None, eval_every: int = 1, progress=None) -> EvaluationResult:
    """The runner's evaluation function: `evaluate` with accuracy curves; the flagged task is the standard. A
    problem with its own evaluator is trained by it (no curves unless it returns them)."""
    from .evaluation import evaluate

    params = dict(params)
    if params.pop(_STANDARD_FLAG, False):
        problem = standard_problem(problem)
    if not problem.simulated:
        from .searching.evaluator import ProblemEvaluator

        return ProblemEvaluator(problem.evaluator)(problem, params, seed=seed, rounds=rounds, data_dir=data_dir)
    return evaluate(problem, params, seed=seed, rounds=rounds, data_dir=data_dir, eval_every=eval_every,
                    progress=progress)


# ============================================================================================ plan
@dataclass(frozen=True)
class Solution:
    key: str  # "1", "2", ... in pick order, or "standard"
    label: str  # why it was picked ("lowest-error #1 + knee", "id 12") or the standard's label
    id: Optional[int]  # evaluation id in the run (None: the standard)
    params: Mapping[str, Any]  # genes (the standard: {})
    search: Optional[Mapping[str, Any]] = None  # the evaluation row of the search

    @property
    def is_standard(self) -> bool:
        return self.key == STANDARD


def plan(data, spec: str, standard: Optional[Mapping[str, Any]] = None) -> list[Solution]:
    """The solutions to retrain: the picks of `spec` in order, then the standard (with `standard` overriding
    its settings, e.g. {"participation": 1.0} for seed 004's standard solution, C = 1)."""
    if standard and data.problem.simulated:
        # the standard is dense, non-private FedAvg by definition (its label, the report's sentence, its α column):
        # a privacy or sparsity key would train another baseline under that name (or, as sigma alone, nothing)
        from .schema import data_keys

        # a [data] key the problem makes a gene is each pick's own, and the standard's is the gene's default: it may
        # be set (the pick's clients, say), as any gene
        fixed_data = set(data_keys()) - set(data.problem.gene_names)
        shared = sorted(set(standard) & (fixed_data | set(SHARED_SETTINGS)))
        if shared:  # every solution trains on the same data for the same rounds: the comparison's premise
            raise FedevoError(f"{arg('standard')}: {', '.join(shared)} cannot be set: every solution, the standard "
                              f"too, trains on the same data for the same rounds, with the same upload "
                              f"loss ({arg('rounds')} sets them)")
        kept_out = sorted(set(standard) & set(not_in_standard()))
        if kept_out:
            raise FedevoError(f"{arg('standard')}: {', '.join(kept_out)} cannot be set: the standard solution is "
                              "dense and non-private FedAvg (its other settings may be: participation, lr, layers, "
                              "...); to compare with a private or sparse configuration, retrain it as a pick "
                              f"({arg('pick', 'ID')})")
    picks = data.pick(spec)  # the one resolver (RunData.pick): the ids front, audit, plot and the API give
    sols = [Solution(key=str(n), label=p.label, id=p.id, params=data.params(p.row), search=p.row)
            for n, p in enumerate(picks, start=1)]
    return sols + [Solution(key=STANDARD, label=standard_label(data.problem), id=None, params=dict(standard or {}),
                            search=None)]


# ============================================================================================ report
def _read(objective, result) -> Optional[float]:
    """An objective's value of a retrained result; None where it cannot be read here (a user's objective that this
    process has not registered, or whose function fails)."""
    try:
        return objective.value(result)
    except Exception:  # noqa: BLE001 - the user's function: the report shows no value rather than failing
        return None


def _f(v: Any, digits: int) -> str:
    if v is None:
        return ""
    v = float(v)
    if math.isnan(v):
        return ""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.{digits}f}"


def _eps_cell(v: Any) -> str:
    """ε with 3 decimals, and at least 3 significant digits below 1 (0.00336, not 0.003; never 0.000 for an ε > 0)."""
    if v is not None and 0 < abs(float(v)) < 1:
        return _f(v, max(3, 2 - math.floor(math.log10(abs(float(v))))))
    return _f(v, 3)


def _pct(a: Any, b: Any) -> Optional[float]:
    if a is None or b is None:
        return None
    a, b = float(a), float(b)
    if not (math.isfinite(a) and math.isfinite(b)) or b == 0:
        return None
    return 100.0 * a / b


def _gene_cell(v: Any, typ: str) -> str:
    if v is None:
        return ""
    if typ == "real":
        return f"{float(v):.4g}"
    if typ == "int":
        return str(int(v))
    return str(v)


@dataclass
class RetrainReport:
    run_dir: Path
    out_dir: Path
    rounds: int
    seed: int
    solutions: list[Solution]
    results: dict[str, EvaluationResult]  # by solution key
    gene_names: tuple[str, ...] = ()
    gene_types: Mapping[str, str] = field(default_factory=dict)
    standard_params: Mapping[str, Any] = field(default_factory=dict)
    problem_name: str = ""
    wall_s: float = 0.0
    standard_label: str = STANDARD_LABEL
    ray_log: str = ""  # what Ray printed (written to ray.log beside the report)
    # per solution key: the deployment its ε is accounted for (trust, delta, population, cohort), read from its
    # configuration before training (`deployment_of`)
    deployments: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the run's objectives beyond error, comm and ε (e.g. worst_client_error): a column each, retrained and searched
    extra_objectives: tuple = ()
    pick: str = ""  # the pick spec the solutions came from
    data_dir: Optional[str] = None
    standard_overrides: Mapping[str, Any] = field(default_factory=dict)  # `standard=` / --standard, as given
    # the search's evaluator where it was not the problem's own (`--evaluator`): retraining does not use it
    search_evaluator: Optional[str] = None

    @property
    def standard(self) -> EvaluationResult:
        return self.results[STANDARD]

    def values(self, s: Solution) -> dict[str, Any]:
        """The raw numbers of one report row (what the cells are formatted from)."""
        r, std = self.results[s.key], self.standard
        ok = r.status == "ok"
        std_ok = std.status == "ok"
        acc = (1.0 - r.error) if ok and r.error is not None else None
        std_acc = (1.0 - std.error) if std_ok and std.error is not None else None
        srch = s.search or {}
        return {
            "solution": s.key, "label": s.label, "id": s.id, "status": r.status, "rounds": r.rounds or self.rounds,
            "seed": self.seed, "accuracy": acc, "accuracy_global": r.accuracy_global if ok else None,
            "accuracy_pct_of_standard": _pct(acc, std_acc) if std_ok else None,
            "accuracy_global_pct_of_standard": _pct(r.accuracy_global, std.accuracy_global) if ok and std_ok else None,
            "comm": r.comm if ok else None, "comm_pct_of_standard": _pct(r.comm, std.comm) if ok and std_ok else None,
            "eps": r.eps if ok else None, "eps_paper": r.eps_paper if ok else None, "omega": r.omega if ok else None,
            # the search's accountant ε beside the retrained one (a search that minimised the paper's ε: its
            # eps_paper is in results.json's `search`)
            "search_error": srch.get("error"), "search_comm": srch.get("comm"), "search_eps": srch.get("eps"),
            "search_rounds": srch.get("rounds_trained"), "search_seed": srch.get("seed"),
            "wall_s": r.wall_s,
            **{k: v for o in self.extra_objectives
               for k, v in ((o.name, _read(o, r) if ok else None), (f"search_{o.name}", srch.get(o.name)))},
        }

    def cells(self, s: Solution) -> dict[str, str]:
        """One report row as strings: report.csv and report.md both print exactly these."""
        v = self.values(s)
        out = {"solution": v["solution"], "label": v["label"], "id": "" if v["id"] is None else str(v["id"]),
               "status": v["status"], "rounds": str(v["rounds"]), "seed": str(v["seed"]),
               "omega": "" if v["omega"] is None else str(int(v["omega"]))}
        for k in ("search_rounds", "search_seed"):  # whole numbers; "" where the search has none (the standard)
            out[k] = "" if v[k] is None or v[k] != v[k] else str(int(v[k]))
        for k in ("accuracy", "accuracy_global", "search_error"):
            out[k] = _f(v[k], 4)
        for k in ("accuracy_pct_of_standard", "accuracy_global_pct_of_standard", "comm_pct_of_standard"):
            out[k] = _f(v[k], 2)
        for k in ("comm", "search_comm", "wall_s"):
            out[k] = _f(v[k], 1)
        for k in ("eps", "eps_paper", "search_eps"):
            out[k] = _eps_cell(v[k])
        for o in self.extra_objectives:
            for k in (o.name, f"search_{o.name}"):
                # six significant digits, as the table's other numbers show theirs (results.json keeps every digit)
                out[k] = "" if v[k] is None or math.isnan(v[k]) else f"{float(v[k]):.6g}"
        genes = self.standard_params if s.is_standard else s.params
        for g in self.gene_names:
            if s.is_standard and g == "alpha":
                out[g] = "dense"
            else:
                out[g] = _gene_cell(genes.get(g), self.gene_types.get(g, "real"))
        return out

    @property
    def columns(self) -> list[str]:
        extra = [k for o in self.extra_objectives for k in (o.name, f"search_{o.name}")]
        return list(REPORT_COLUMNS) + extra + list(self.gene_names)

    def csv_text(self) -> str:
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        for s in self.solutions:
            c = self.cells(s)
            w.writerow([c[k] for k in self.columns])
        return buf.getvalue()

    def markdown(self) -> str:
        def md(v: str) -> str:
            return v.replace("|", "\\|") if v else "–"

        cells = [self.cells(s) for s in self.solutions]
        recalibrated = " ".join(f"Solution {s.key}: {r}." for s in self.solutions if (r := self.recalibrated(s)))
        comm_note = self.comm_note()
        lines = [f"# Retraining: {self.problem_name}", "",
                 f"Run `{self.run_dir}` · {self.rounds} rounds · seed {self.seed} · every solution trained on the "
                 "same data with the same seed. " + (
                     "Standard solution: dense (no SET sparsity), no privacy (mechanism `none`), the problem's default "
                     "architecture, participation and learning rate" + (
                         " except " + ", ".join(f"{k} = {v}" for k, v in self.standard_overrides.items())
                         + f" (set by {arg('standard')})" if self.standard_overrides else "") + "."
                     if self.standard_label == STANDARD_LABEL else
                     f"Standard solution: {self.standard_label} (the problem's own evaluator trains every solution)."),
                 "",
                 *([f"The search evaluated with `{self.search_evaluator}` (--evaluator); this retraining trains "
                    "with the problem's own, so its numbers are not the search's.", ""]
                   if self.search_evaluator else []),
                 *([recalibrated, ""] if recalibrated else []),
                 *([comm_note, ""] if comm_note else []),
                 "accuracy = mean client test accuracy (1 − f1); comm = parameters uploaded per round per client "
                 "slot; ε at the problem's δ for the rounds retrained (`inf`: no privacy); Ω = active parameters; "
                 "% = of the standard solution. The numbers are those of report.csv.", "",
                 *(line[0].upper() + line[1:] + "." for line in self.privacy_claims()), "",
                 "| " + " | ".join(h for _, h in MD_MAIN) + " |",
                 "|" + "|".join("---" if k in ("solution", "label") else "---:" for k, _ in MD_MAIN) + "|"]
        main = list(MD_MAIN) + [(o.name, o.heading) for o in self.extra_objectives]
        lines[-2:] = ["| " + " | ".join(h for _, h in main) + " |",
                      "|" + "|".join("---" if k in ("solution", "label") else "---:" for k, _ in main) + "|"]
        for c in cells:
            lines.append("| " + " | ".join(md(c[k]) for k, _ in main) + " |")
        bad = [c for c in cells if c["status"] != "ok"]
        if bad:
            lines += ["", "Not ok: " + ", ".join(f"solution {c['solution']} ({c['status']})" for c in bad)
                      + " — see results.json for the message."]
        picked = [c for c in cells if c["solution"] != STANDARD and c["comm_pct_of_standard"]]
        if picked:
            lo = min(picked, key=lambda c: float(c["comm_pct_of_standard"]))["comm_pct_of_standard"]
            hi = max(picked, key=lambda c: float(c["comm_pct_of_standard"]))["comm_pct_of_standard"]
            accs = [c for c in picked if c["accuracy_pct_of_standard"]]
            cost = f"solution costs {lo}" if len(picked) == 1 else f"solutions cost {lo}–{hi}"
            lines += ["", f"The picked {cost} % of the standard solution's communication"
                      + (f" and {'reaches' if len(picked) == 1 else 'reach up to'} {max(accs, key=lambda c: float(c['accuracy_pct_of_standard']))['accuracy_pct_of_standard']} % "
                         "of its accuracy." if accs else ".")]
        lines += ["", "Genes and search-time objectives: the search trained each solution for a few rounds only, "
                  "with a seed of its own (its evaluation seed), where this report trains every solution with seed "
                  f"{self.seed}" + ("." if self.search_evaluator else
                                    "; `fedevo retrain RUN --pick ID --rounds R --seed S` with the search's rounds R "
                                    "and seed S gives the search's numbers again.")
                  + " The search ε is the accountant's, as the ε above.", "",
                  "| Solution | " + " | ".join(self.gene_names) + " | search error | search comm | search ε |"
                  + "".join(f" search {o.heading} |" for o in self.extra_objectives) + " search rounds | search seed |",
                  "|---|" + "---:|" * (len(self.gene_names) + 5 + len(self.extra_objectives))]
        for c in cells:
            lines.append(f"| {c['solution']} | " + " | ".join(md(c[g]) for g in self.gene_names)
                         + f" | {md(c['search_error'])} | {md(c['search_comm'])} | {md(c['search_eps'])} |"
                         + "".join(f" {md(c['search_' + o.name])} |" for o in self.extra_objectives)
                         + f" {md(c['search_rounds'])} | {md(c['search_seed'])} |")
        lines += ["", "Accuracy per round: curves.html.", ""]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        def clean(o):
            if isinstance(o, float) and not math.isfinite(o):
                return None if math.isnan(o) else ("inf" if o > 0 else "-inf")
            if isinstance(o, dict):
                return {str(k): clean(v) for k, v in o.items()}
            if isinstance(o, (list, tuple)):
                return [clean(v) for v in o]
            return o

        def solution(s: Solution) -> dict:
            v = self.values(s)  # once: it reads a user's objectives through their functions
            return {"solution": s.key, "label": s.label, "id": s.id, "params": dict(s.params),
                    # not ok: its measured values null (`reported`), never a diverged model's stand-ins (error 1,
                    # ε "inf", which reads as no privacy)
                    "result": self.results[s.key].reported().to_dict(),
                    # the run's objectives beyond error, comm and ε (a user's latency: not in the result),
                    # retrained and as the search measured them, every digit
                    "objectives": {o.name: v[o.name] for o in self.extra_objectives},
                    "search_objectives": {o.name: v[f"search_{o.name}"] for o in self.extra_objectives},
                    # what the search measured (report.md's search columns; null for the standard)
                    "search": None if s.search is None else {
                        "error": v["search_error"], "comm": v["search_comm"], "eps": v["search_eps"],
                        "eps_paper": s.search.get("eps_paper"), "rounds": v["search_rounds"],
                        "seed": v["search_seed"], "privacy": s.search.get("privacy")}}

        from . import __version__

        return clean({"run_dir": str(self.run_dir), "problem": self.problem_name, "rounds": self.rounds,
                      "seed": self.seed, "pick": self.pick, "data_dir": self.data_dir, "fedevo": __version__,
                      "search_evaluator": self.search_evaluator,
                      "standard_params": dict(self.standard_params),
                      "standard_overrides": dict(self.standard_overrides),
                      "solutions": [solution(s) for s in self.solutions]})

    def privacy_claims(self) -> list[str]:
        """What the picked solutions' ε hold under — trust model, neighbouring relation, amplification, accountant,
        δ, deployment — as each training recorded it (its privacy summary), one line per distinct claim, naming
        its solutions where they differ (report.md and the terminal)."""
        from .viz.html import fmt

        own = self.standard_label != STANDARD_LABEL  # the problem's own evaluator: its ε is its own
        claims: dict[str, list[str]] = {}
        for s in self.solutions:
            if s.is_standard:
                continue
            res = self.results[s.key]
            priv = dict(res.privacy or {})
            mech = priv.get("mechanism")
            if res.status != "ok":  # no training to speak of: no ε
                text = f"is not measured: its retraining {res.status}"
            elif own and mech is None:
                text = ("is as the problem's own evaluator computes it (fedevo does not know its trust model or "
                        "accountant)")
            elif mech is not None and not _claims_privacy(mech):
                text = "is ∞: no privacy"
            else:
                text = "holds under: " + (" · ".join(f"{name} {fmt(priv[k])}" for k, name in CLAIM_KEYS
                                                     if priv.get(k) is not None) or "nothing its training recorded")
                if priv.get("eps_conditional"):
                    text += (" · conditional: it holds given the data-dependent clip values used (not privatised), "
                             "not a DP guarantee alone")
                if priv.get("not_covered"):  # what the mechanism says its ε leaves out (local: the simulated
                    # clients' participations are what it counts, not a deployed user's)
                    text += f" · not covered: {priv['not_covered']}"
            claims.setdefault(text, []).append(s.key)
        if len(claims) == 1:
            return [f"every picked solution's ε {next(iter(claims))}"]
        return [f"solution{'s' if len(keys) > 1 else ''} {', '.join(keys)}: ε {text}" for text, keys in claims.items()]

    def recalibrated(self, s: Solution) -> str:
        """Where a target ε set the noise (`target_eps`), σ is calibrated for the rounds trained: the σ retrained
        and searched in words when they differ ("" where they do not, or nothing recorded σ)."""
        from .viz.numfmt import num

        here = (self.results[s.key].privacy or {}).get("sigma") if self.results[s.key].status == "ok" else None
        there = ((s.search or {}).get("privacy") or {}).get("sigma")
        if here is None or there is None or not all(isinstance(v, (int, float)) for v in (here, there)) \
                or math.isclose(float(here), float(there), rel_tol=1e-9):
            return ""
        return (f"σ {num(here)} here, {num(there)} in the search: the target ε sets the noise for the rounds "
                "trained")

    def comm_differs(self, s: Solution) -> tuple[str, bool]:
        """Where training decides comm (recalls, secure aggregation's protocol, the adaptive filter, a participation
        cap) it is measured per run: (this training's comm beside the search's in words, as report.csv writes them,
        with the recalls both recorded; whether both recorded recalls), ("", False) where they agree or the search
        recorded none."""
        r, srch = self.results[s.key], s.search or {}
        here, there = (r.comm if r.status == "ok" else None), srch.get("comm")
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (here, there)) \
                or math.isclose(float(here), float(there), rel_tol=1e-9):
            return "", False
        rounds, search_rounds = r.rounds or self.rounds, srch.get("rounds_trained")
        text = (f"solution {s.key}: {_f(here, 1)} at {rounds} rounds, {_f(there, 1)} in the search"
                + (f" at {search_rounds} rounds" if search_rounds is not None else ""))

        def recalled(priv) -> Optional[str]:
            n, up = (priv or {}).get("recalls"), (priv or {}).get("uploads")
            return f"{n} of {n + up}" if isinstance(n, int) and isinstance(up, int) and n + up else None

        a, b = recalled(r.privacy), recalled(srch.get("privacy"))
        return (text + f", updates recalled {a} here, {b} there", True) if a and b else (text, False)

    def comm_note(self) -> str:
        """report.md's one sentence on a comm that differs from the search's ("" where none does)."""
        differ = [d for s in self.solutions if (d := self.comm_differs(s))[0]]
        if not differ:
            return ""
        why = ("a recalled update costs one index instead of Ω parameters and a client's first upload has nothing "
               "to recall, so the more rounds, the larger the share recalled and the lower comm per round"
               if any(rec for _, rec in differ) else
               "secure aggregation's protocol, the adaptive filter's metadata or a participation cap depend on who "
               "is sampled and arrives, which differs with the rounds and the seed")
        return (f"Comm is measured per run where training decides it, so it differs from the search's: {why} ("
                + "; ".join(t for t, _ in differ) + ").")

    def privacy_rows(self) -> list[dict[str, Any]]:
        """Per solution what its ε is under and how it compares with the search's (curves.html): the trust model,
        δ, population and cohort as trained (recorded in its privacy summary, else its configuration), the rounds
        it ran, its ε and the search's at the search's rounds, with the recorded reason when they differ."""
        from .viz.curves import eps_comparison

        rows = []
        for s in self.solutions:
            r = self.results[s.key]
            priv, srch = dict(r.privacy or {}), dict(s.search or {})
            dep = dict(self.deployments.get(s.key, {}))
            if _claims_privacy(priv.get("mechanism")):  # what the training recorded wins
                dep.update({k: priv[k] for k in ("trust", "delta", "population", "cohort", "neighbouring",
                                                 "accountant") if k in priv})
            elif priv:  # no mechanism: its summary's trust and δ mean nothing
                dep.update(trust="no privacy", delta=None)
            rounds = r.rounds or self.rounds
            eps = r.eps if r.status == "ok" else None
            search_eps = srch.get("eps") if srch else None  # (the accountant's, as `eps`: like for like)
            changed = [f"{k} {priv[k]} here, {(srch.get('privacy') or {})[k]} in the search"
                       for k in ("participations_max", "recalls", "uploads")
                       if k in priv and k in (srch.get("privacy") or {}) and priv[k] != srch["privacy"][k]]
            rows.append({"solution": s.key if s.is_standard else f"{s.key} (id {s.id})", "standard": s.is_standard,
                         **dep, "rounds": rounds,
                         "eps_text": eps_comparison(eps, rounds, search_eps, srch.get("rounds_trained"),
                                                    changed=changed, noise=self.recalibrated(s))})
        return rows

    def curve_series(self) -> list[tuple[str, list]]:
        out = []
        for s in self.solutions:
            name = self.standard_label if s.is_standard else f"{s.key}: {s.label} (id {s.id})"
            out.append((name, list(self.results[s.key].accuracy_curve)))
        return out

    def write(self) -> dict[str, Path]:
        from .searching.log import atomic_write
        from .viz.curves import write_curves_html
        from .viz.html import esc

        self.out_dir.mkdir(parents=True, exist_ok=True)
        if any(p.name in ("report.csv", "report.md", "results.json", "curves.html") for p in self.out_dir.iterdir()):
            raise FedevoError(f"{self.out_dir} already holds a report (written meanwhile by another process?); "
                              "nothing was overwritten")
        paths = {"report.csv": self.out_dir / "report.csv", "report.md": self.out_dir / "report.md",
                 "results.json": self.out_dir / "results.json", "curves.html": self.out_dir / "curves.html"}
        atomic_write(paths["report.csv"], self.csv_text())
        atomic_write(paths["report.md"], self.markdown())
        atomic_write(paths["results.json"], json.dumps(self.to_json(), indent=2) + "\n")
        if self.ray_log:
            from .searching.ray_session import RAY_LOG, strip_ansi

            atomic_write(self.out_dir / RAY_LOG, strip_ansi(self.ray_log))
        from .viz.html import table

        from .viz.numfmt import num

        # the paper's ε where no picked solution has one (central / distributed trust: NaN) is left out of the page
        paper = any(self.values(s)["eps_paper"] is not None and math.isfinite(self.values(s)["eps_paper"])
                    for s in self.solutions if not s.is_standard)
        main = [(k, h) for k, h in MD_MAIN if paper or k != "eps_paper"]

        def html_cells(s):  # report.csv's strings, with ε, comm and Ω readable (12.3k, not 12345.678)
            c, v = self.cells(s), self.values(s)
            return [num(v[k]) if k in ("eps", "eps_paper", "comm", "omega") and v[k] is not None else c[k] or "–"
                    for k, _ in main]

        intro = (f'<p class="meta">run {esc(self.run_dir)} · {self.rounds} rounds · seed {self.seed} · same data '
                 'and seed for every solution; ' + esc(self.standard_label) + '.</p>'
                 + '<div class="scroll">' + table([h for _, h in main], [html_cells(s) for s in self.solutions],
                                                  left=(0, 1)) + "</div>"
                 + '<p class="note">comm: parameters uploaded per round per client slot; Ω: active parameters; ε '
                 "at the problem's δ (∞: no privacy); % of standard: of the standard solution's.</p>"
                 + ("" if paper else '<p class="note">ε (paper) is left out: the paper\'s closed form covers local '
                    "trust only (report.csv keeps its column).</p>"))
        write_curves_html(paths["curves.html"], self.curve_series(), standard=self.standard_label, intro_html=intro,
                          title=f"fedevo retrain — {self.problem_name}: accuracy per round",
                          privacy=self.privacy_rows())
        return paths


# ============================================================================================ retrain
def retrain(run_dir: Path | str, pick_spec: str = DEFAULT_PICK, *, rounds: int = DEFAULT_ROUNDS,
            workers: Union[int, str, None] = "auto", seed: Optional[int] = None, data_dir: Optional[str] = None,
            out: Optional[Path | str] = None, eval_every: int = 1, standard: Optional[Mapping[str, Any]] = None,
            progress: Optional[Callable[[int, int, str], None]] = None, write: bool = True,
            gpus_per_task: float = 0.0, ray_address: Optional[str] = None,
            cpus_per_task: float = 1.0) -> RetrainReport:
    """Retrain the picked solutions and the standard one; write the report (unless write=False).
    gpus_per_task, cpus_per_task: Ray resources reserved per training; ray_address: an existing Ray cluster (as
    `fedevo search --gpus-per-task / --cpus-per-task / --ray-address`).

    progress(rounds_done, rounds_total, note) is called as training goes: after every round in-process
    (workers=0), after every finished solution on Ray.
    """
    from .searching.inputs import check_inputs
    from .searching.runner import Task, _Abort, make_runner
    from .searching.rundata import load_run

    from .guards import check_evaluation_memory, check_rounds, check_seed, check_task_resources, check_workers

    if rounds is None:
        raise FedevoError(f"{arg('rounds')} must be >= 1, got None")
    check_rounds(rounds)
    from .searching.workers import AUTO, announce, decide, parse_workers

    if parse_workers(workers) != AUTO:
        check_workers(parse_workers(workers))
    check_seed(seed)
    check_task_resources(cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task, workers=parse_workers(workers),
                         ray_address=ray_address, verb="trains")
    if ray_address:  # as search: a cluster that is not there is named before anything is trained or written
        from .searching.runner import _check_reachable

        _check_reachable(ray_address, 5.0)
    if eval_every < 0:
        raise FedevoError(f"eval_every must be >= 0, got {eval_every}")
    data = load_run(run_dir)
    check_inputs(data.meta, Path(run_dir), action="retrain")  # its data and code files are those it searched
    seed = data.settings.seed if seed is None else seed
    data_dir = data_dir if data_dir is not None else data.settings.data_dir
    sols = plan(data, pick_spec, standard)
    from .searching.evaluator import DEFAULT_EVALUATOR

    search_evaluator = data.settings.evaluator if data.settings.evaluator != DEFAULT_EVALUATOR else None
    std = standard_problem(data.problem)
    deployments, device_settings = {}, set()
    for s in sols:  # invalid configurations fail now, before any training
        prob = std if s.is_standard else data.problem
        if not prob.simulated:  # the user's own evaluator: its settings are checked, its memory is its own
            prob.resolve(s.params)
            device_settings.add(("auto", None))  # (it sees the GPUs the training may use; its precision is its own)
            continue
        cfg = prob.sim_config(s.params, rounds=rounds, data_dir=data_dir)
        check_evaluation_memory(cfg, STANDARD if s.is_standard else f"solution {s.key} (id {s.id})")
        deployments[s.key] = deployment_of(cfg)
        device_settings.add((cfg.device, cfg.precision))
    from . import retrain_kept
    from .hardware import precision as precision_on, training_device
    from .searching.runner import cores

    # where the trainings run (in-process or Ray decides it for 'auto') and in which compute precision there
    # ('auto': bf16 where this CPU has native bf16), decided for the whole plan: a continuation trains where and as
    # the stopped retrain did, or takes a report directory of its own
    def where(w: int) -> tuple[str, Optional[str]]:
        on = {(training_device(d, in_process=w == 0, gpus_per_task=gpus_per_task), p) for d, p in device_settings}
        return (",".join(sorted({d for d, _ in on})),
                ",".join(sorted({precision_on(p, d).name for d, p in on if p is not None})) or None)

    whole, why = decide(workers, cores=cores(), pop=len(sols), address=ray_address)
    device, precision = where(whole)
    kept_plan = retrain_kept.plan_of(run_dir=run_dir, solutions=sols, rounds=rounds, seed=seed,
                                     eval_every=eval_every, standard=standard,
                                     data=data_read(data.problem, data_dir),
                                     data_sha256=data_content(data.problem, data_dir), device=device,
                                     precision=precision)
    out_dir = report_dir(run_dir, out, kept_plan) if write else Path(out or Path(run_dir) / "retrain")
    kept = retrain_kept.load(out_dir) if write else {}

    if search_evaluator:  # (once every input is checked: a refused call prints its one line only)
        print(f"fedevo: warning: the search evaluated with {search_evaluator} ({arg('evaluator')}); retraining "
              "trains with the problem's own, so its numbers are not the search's", file=sys.stderr)
    todo = [n for n, s in enumerate(sols) if s.key not in kept]
    if len(todo) < len(sols):  # a continuation: fewer trainings to run side by side, where the others ran
        fewer, why_fewer = decide(workers, cores=cores(), pop=max(len(todo), 1), address=ray_address)
        if where(fewer) == where(whole):
            whole, why = fewer, why_fewer
    workers = whole  # as the search decides: "auto" alike
    announce(why)
    if write and retrain_kept.continues(out_dir, kept_plan):  # a stopped retrain of this plan, even with none kept
        print(f"fedevo: continuing {out_dir}: {len(kept)} of {len(sols)} trainings were kept from the stopped retrain",
              file=sys.stderr)
    tasks = [Task(id=n, generation=0, index=n, seed=seed,
                  params={_STANDARD_FLAG: True, **sols[n].params} if sols[n].is_standard else dict(sols[n].params))
             for n in todo]
    results: dict[str, EvaluationResult] = {s.key: kept[s.key] for s in sols if s.key in kept}
    lock = retrain_kept.start(out_dir, kept_plan) if write else contextlib.nullcontext()
    with lock:  # held while this retrain writes out_dir (another retrain of the plan takes a directory of its own)
        t0 = time.monotonic()
        total = len(sols) * rounds
        name = lambda s: STANDARD if s.is_standard else f"solution {s.key} (id {s.id})"  # noqa: E731
        eval_kwargs: dict[str, Any] = {"rounds": rounds, "data_dir": data_dir, "eval_every": eval_every}
        if progress:
            progress(len(results) * rounds, total, f"{len(sols)} trainings")
            if workers == 0:  # in-process, one after the other: report every round of the current one
                eval_kwargs["progress"] = lambda t: progress(len(results) * rounds + t, total,
                                                             name(sols[todo[min(len(results) - len(kept),
                                                                                len(todo) - 1)]]))
        runner = make_runner(retrain_evaluate, data.problem, eval_kwargs, workers=workers, address=ray_address,
                             cpus_per_task=cpus_per_task, gpus_per_task=gpus_per_task)  # Ray's log: in memory
        try:
            def on_done(t: Task, r: EvaluationResult) -> None:
                results[sols[t.index].key] = r
                if write:
                    retrain_kept.keep(out_dir, sols[t.index].key, r)
                if progress:
                    progress(len(results) * rounds, total, f"{name(sols[t.index])} done")

            runner.run(tasks, on_done)
        except _Abort as e:
            raise FedevoError(str(e)) from None
        finally:
            runner.close()
        ray_log = getattr(getattr(runner, "log", None), "text", "")
        report = RetrainReport(run_dir=Path(run_dir), out_dir=out_dir,
                               rounds=rounds, seed=seed, solutions=sols, results=results,
                               gene_names=data.gene_names, gene_types=data.gene_types,
                               problem_name=data.problem.name,
                               standard_params={**standard_params(data.problem), **dict(standard or {})},
                               standard_label=standard_label(data.problem),
                               wall_s=time.monotonic() - t0, ray_log=ray_log, deployments=deployments,
                               extra_objectives=tuple(o for o in data.objectives
                                                      if o.name not in ("error", "comm", "eps", "eps_paper")),
                               pick=pick_spec, data_dir=data_dir, standard_overrides=dict(standard or {}),
                               search_evaluator=search_evaluator)
        if write:
            report.write()
            retrain_kept.drop(out_dir)
        return report


def data_read(problem: Problem, data_dir: Optional[str]) -> Optional[str]:
    """The dataset directory a problem's trainings read (resolved), or None where they read none there: a dataset
    made in memory (digits, synthetic) or the user's own [data] source (fingerprinted with the run). A problem
    with its own evaluator is handed the directory: it may read it."""
    from .data.datasets import FILE_BACKED

    if problem.simulated and (problem.data_source is not None or problem.dataset not in FILE_BACKED):
        return None
    return str(Path(data_dir).expanduser().resolve()) if data_dir else None


def data_content(problem: Problem, data_dir: Optional[str]) -> Optional[str]:
    """The SHA-256 of the bundled dataset's files a problem's trainings read (each file's name, size and SHA-256,
    in name order: datasets.files_read; Debian's Fashion-MNIST where no --data-dir is given), or None for a
    dataset made in memory, the user's own [data] source (fingerprinted with the run: check_inputs) and a problem
    with its own evaluator (what it reads is its own). Full hashes, not size and mtime: Fashion-MNIST's four
    files (30.9 MB) take 19-30 ms on a Zen 5 vCPU, nothing beside the trainings."""
    from .data.datasets import FILE_BACKED, files_read
    from .searching.inputs import digest

    if not problem.simulated or problem.data_source is not None or problem.dataset not in FILE_BACKED:
        return None
    h = hashlib.sha256()
    for p in files_read(problem.dataset, data_dir):
        sha, n = digest(p)
        h.update(f"{p.name}\0{n}\0{sha}\n".encode())
    return h.hexdigest()


def _claims_privacy(name: Optional[str]) -> bool:
    """A privacy summary's mechanism makes a privacy claim (the registry says which do; an evaluator's own name
    that fedevo does not know is taken at its word)."""
    from .privacy import registry

    return name is not None and (name not in registry.mechanisms() or registry.mechanism(name).private)


def deployment_of(cfg) -> dict[str, Any]:
    """The deployment a configuration's ε is accounted for: trust model, δ, population N (users; the simulated
    clients unless the problem sets a deployment) and cohort M (clients per round)."""
    from .privacy import registry

    private = registry.private(cfg.privacy)
    return {"trust": str(cfg.privacy.trust) if private else "no privacy", "delta": cfg.privacy.delta if private else None,
            "population": int(cfg.population), "cohort": int(cfg.cohort)}


def report_dir(run_dir: Path | str, out: Optional[Path | str], plan: Optional[Mapping[str, Any]] = None) -> Path:
    """Where the report goes, checked before any training: `out` (must not exist or be empty), else the first of
    RUN_DIR/retrain, retrain-2, retrain-3... that does not exist yet: an earlier report is never overwritten. A
    report directory holding only the kept trainings of a stopped retrain of the same `plan`
    (fedevo.retrain_kept) is continued: `out` if it is one, else the newest such RUN_DIR/retrain*."""
    from .guards import check_new_or_empty_dir, check_writable_dir
    from .retrain_kept import continuable, describe_kept, passed_over

    if out is not None:
        if plan is not None and continuable([Path(out)], plan):
            return Path(out)
        why = describe_kept(Path(out), plan) if Path(out).is_dir() else None
        if why:
            raise FedevoError(arg("out", why))
        return check_new_or_empty_dir(out)
    base = Path(run_dir) / "retrain"
    path, n, earlier = base, 1, []
    while path.exists():
        earlier.append(path)
        n += 1
        path = base.with_name(f"retrain-{n}")
    if plan is not None and (going_on := continuable(earlier, plan)):
        return going_on
    check_writable_dir(path, "the report directory")
    if plan is not None and (note := passed_over(earlier, plan)):
        print(f"fedevo: note: {note} in {path}", file=sys.stderr)
    return path


def standard_params(problem: Problem) -> dict[str, Any]:
    """The genes as the standard solution sets them (for the report): defaults, dense, xi 0, no privacy genes (a
    problem with its own evaluator: defaults, then its [standard] table)."""
    d = problem.defaults()
    if not problem.simulated:
        return {g: problem.standard.get(g, d.get(g)) for g in problem.gene_names}
    drop = set(not_in_standard())
    out = {}
    for g in problem.gene_names:
        if g == "alpha":
            out[g] = None
        elif g == "xi":
            out[g] = 0.0
        elif g in drop:
            out[g] = None
        else:
            out[g] = d.get(g)
    return out
