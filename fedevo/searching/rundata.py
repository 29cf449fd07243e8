"""The run directory's reader: a search run read back for display, picking, retraining and auditing (read-only;
safe while the search runs), and the in-memory view of a running search that its callbacks get.

`read_run_json` validates run.json and rebuilds the problem and the settings (the search opens a run with it
too), the run's :class:`~fedevo.searching.log.EvalLog` parses evaluations.csv rows, ``front_rows`` /
``hypervolume_table`` give the Pareto front and the hypervolume per generation exactly as the search computes
them. Nothing is written: a torn last line (a search writing right now) is left out, not repaired.

Plots (fedevo.viz), retrain, the audit, ``fedevo front`` read runs through :func:`load_run`; a running search hands
its callbacks the same :class:`RunData`, built from the rows it holds (:meth:`fedevo.searching.run.SearchRun.data`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Optional

from .. import _toml
from ..errors import FedevoError
from ..problem import Problem, parse_problem
from .budgets import in_force
from .front_math import front_rows, hv_skips_unmeasured, hypervolume_table, is_full
from .integrity import checked_rows
from .log import EvalLog, row_key
from .record import EvaluationRecord
from .settings import SearchSettings
from .space import SearchSpace

RUN_FORMAT = "fedevo-search-run/1"

# classes of each dataset (the chance level of the error objective: 1 − 1/classes)
DATASET_CLASSES = {"digits": 10, "fashion": 10, "mnist": 10, "cifar10": 10, "synthetic": 10}


def run_identity(problem_text: str, settings: SearchSettings) -> str:
    s = asdict(settings)
    s.pop("data_dir")  # where the data lives does not change the results
    if s.get("fidelity") is None:  # runs made before multi-fidelity (and plain ones) keep their identity
        s.pop("fidelity", None)
    else:
        s["fidelity"] = list(s["fidelity"])
    for key in ("init", "init_from"):  # runs without a warm start (and those made before it) keep theirs
        if s.get(key) is None:
            s.pop(key, None)
    if s.get("optimizer") == "nsga3":  # NSGA-III runs (and those made before the optimiser seam) keep theirs
        s.pop("optimizer")
    if not s.get("gen_derived"):  # runs with --gen given (and those made before the field) keep theirs
        s.pop("gen_derived", None)
    for key in ("budget", "time_budget", "patience"):  # so do runs without these budgets
        if s.get(key) is None:
            s.pop(key, None)
    return hashlib.sha256(json.dumps({"problem": problem_text, "settings": s}, sort_keys=True).encode()).hexdigest()[:16]


def legacy_identity(problem_text: str, settings: SearchSettings) -> Optional[str]:
    """The identity a fedevo from before settings.gen_derived gave the same command, where it differs from
    `run_identity`'s: a --gen derived from --budget, --time-budget or --patience (gen_derived, in the identity
    since) — so that the same command on a run directory made then is known as this run, not as another. None
    where the two agree."""
    return run_identity(problem_text, replace(settings, gen_derived=False)) if settings.gen_derived else None


def read_run_json(run_dir: Path, *, reading: bool = False) -> tuple[dict[str, Any], Problem, SearchSettings]:
    """run.json of a run directory, checked: (meta, the problem rebuilt from its recorded text, the settings
    resolved, with the budgets in force: budgets.json's where `fedevo resume` raised them); FedevoError if
    `run_dir` is not a run or run.json (or budgets.json) is corrupt. reading: for a reader (front, plot, pick):
    the problem needs none of the user's files and runs none of its code where run.json records its data's facts
    (`parse_problem`'s reading; resume and retrain read and check them)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FedevoError(f"run directory {run_dir} "
                          + ("is a file, not a directory" if run_dir.exists() else "does not exist"))
    path = run_dir / "run.json"
    if not path.exists():
        raise FedevoError(f"{run_dir} is not a fedevo search run (no run.json)")
    try:
        meta = json.loads(path.read_text())
        if meta.get("format") != RUN_FORMAT:
            raise FedevoError(f"{path}: unknown format {meta.get('format')!r} (expected {RUN_FORMAT})")
        settings = SearchSettings(**meta["settings"])
        p = meta["problem"]
        doc = _toml.loads(p["text"])
        facts = meta.get("data_facts") if reading else None
        user_data = isinstance(doc.get("data"), dict) and "source" in doc["data"]  # read only where facts stand in
        problem = parse_problem(doc, name=p["file_stem"], path=p["path"],
                                registered_only=False,  # run.json records the objectives: no user code needed
                                reading=reading and (facts is not None or not user_data), facts=facts)
    except FedevoError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise FedevoError(f"{path} is corrupt ({type(e).__name__}: {e})") from None
    if run_identity(p["text"], settings) != meta.get("run_id"):
        raise FedevoError(f"{path} is corrupt (its run_id does not match its content)")
    settings = in_force(settings, run_dir)  # budgets raised by `fedevo resume --budget ...` (budgets.json)
    return meta, problem, settings.resolved(n_obj=len(meta.get("objectives") or (0, 0, 0)))


def batch_record(rec: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
    """One line of batches.csv (csv.DictReader's) as numbers: `batch` and `asked` whole, the seconds floats; None for
    a line this cannot parse (written by hand, torn)."""
    try:
        return {k: (int(v) if k in ("batch", "asked") else float(v)) for k, v in (rec or {}).items()} or None
    except (TypeError, ValueError):
        return None


LAST_BATCH_BYTES = 8192  # how much of batches.csv's end RunData.last_batch reads (its lines are ~40-80 B)


@dataclass
class RunData:
    run_dir: Path
    meta: Mapping[str, Any]
    problem: Problem
    settings: SearchSettings
    gene_names: tuple[str, ...]
    gene_types: Mapping[str, str]
    eps_key: str  # the ε the search minimised: "eps" or "eps_paper"
    constraints: Mapping[str, float]
    rows: list[EvaluationRecord]  # every evaluation's record (fedevo.searching.record), in id order (a multi-fidelity search's: each rung's row, with
    # `rung` and `fidelity` < 1 below the full rounds; only full-fidelity rows make the front: `full_rows`)
    front: list[EvaluationRecord] = field(default_factory=list)  # Pareto set (status ok, feasible), id order
    hv_table: Optional[list[dict[str, Any]]] = None  # hypervolume per generation, when already computed

    @cached_property
    def objectives(self):
        """The run's objectives in order (:class:`fedevo.objectives.ObjectiveSet`): run.json's record of them
        (``objective_specs``; a run made before it: its ``objectives`` names), else error, comm and the problem's ε.
        Each reads ``row[name]`` of a row: no user code is needed to read a run."""
        return run_objectives(self.meta, self.problem)

    @property
    def ok_rows(self) -> list[EvaluationRecord]:
        """Full-fidelity evaluations with status ok (a multi-fidelity search's lower rungs: `lower_rows`)."""
        return [r for r in self.rows if r["status"] == "ok" and is_full(r)]

    @property
    def lower_rows(self) -> list[EvaluationRecord]:
        """A multi-fidelity search's lower-rung evaluations with status ok (`rung`, `fidelity` < 1,
        `rounds_trained`): never in the front; a page may show them greyed. Empty for a plain search."""
        return [r for r in self.rows if r["status"] == "ok" and not is_full(r)]

    @property
    def full_rows(self) -> list[EvaluationRecord]:
        """The full-fidelity evaluations (all rows of a plain search; see fedevo.searching.fidelity)."""
        return [r for r in self.rows if is_full(r)]

    @property
    def bad_rows(self) -> list[EvaluationRecord]:
        return [r for r in self.rows if r["status"] != "ok"]

    @cached_property
    def front_ids(self) -> frozenset[int]:
        return frozenset(r["id"] for r in self.front)

    @cached_property
    def by_id(self) -> dict[int, EvaluationRecord]:
        return {r["id"]: r for r in self.rows}

    @property
    def num_classes(self) -> Optional[int]:
        source = getattr(self.problem, "data_source", None)  # the user's data knows its classes
        n = source.num_classes if source is not None else self.problem.fixed.get(
            "num_classes", DATASET_CLASSES.get(self.problem.dataset))
        return int(n) if n else None

    @property
    def chance_error(self) -> Optional[float]:
        """Error of guessing at random (1 − 1/classes): solutions at or above it are never the knee."""
        from ..picking import chance_error

        return chance_error(self.num_classes)

    @property
    def n_test(self) -> Optional[int]:
        """Test examples the error is measured on (the bundled dataset's test set, or the user's test rows)."""
        from ..data.catalog import N_TEST

        source = getattr(self.problem, "data_source", None)
        n = getattr(source, "n_test", None) if source is not None else N_TEST.get(self.problem.dataset)
        return int(n) if n else None

    @property
    def knee_bar(self) -> Optional[float]:
        """The error a knee candidate must stay below: chance minus the margin for the test set's size
        (fedevo.picking.knee_bar)."""
        from ..picking import knee_bar

        return knee_bar(self.chance_error, self.n_test)

    def marks(self) -> dict[int, list[str]]:
        """The knee (clearly better than chance) and the two lowest-error solutions of the front."""
        from ..picking import marks

        return marks(self.front, self.objectives, chance=self.knee_bar)

    def pick(self, spec: str):
        """THE pick resolver: the solutions `spec` selects (fedevo.picking grammar), the knee below
        :attr:`knee_bar`. `fedevo front --pick`, retrain, audit, plot, the Python API and the page all go through it
        (tests/test_pick_agreement.py), so one spec names the same ids everywhere."""
        from ..picking import pick

        return pick(spec, self.rows, self.front, objectives=self.objectives, chance=self.knee_bar)

    @property
    def generations(self) -> int:
        return max((r["generation"] for r in self.rows), default=0)

    def hypervolume(self) -> list[dict[str, Any]]:
        """Hypervolume of the front after each generation (the search's own definition; recomputed unless the
        running search handed its table over)."""
        if self.hv_table is not None:
            return self.hv_table
        return hypervolume_table(self.rows, self.generations, self.objectives, self.constraints,
                                 skip_unmeasured=hv_skips_unmeasured(self.meta))

    def stop(self) -> Optional[dict[str, Any]]:
        """stop.json (what ended the search: `reason`, `why`, `batches`, `evaluations`, `search_s`, `budgets`), or
        None while the search has not ended (or one that cannot be read)."""
        from .budgets import read_stop

        return read_stop(self.run_dir)

    def generations_text(self) -> str:
        """'done/planned' generations for a display: '3/4'; a --gen derived from --budget (budgets.gen_derived, which
        a short batch may outrun) at least what ran; without --budget, the count alone ('1200': only a time budget
        or patience ends that search: budgets.OPEN_GEN, 1000, is not a cap since settings.gen_derived; a run made
        before it, without the key, still stops at its recorded --gen)."""
        s, g = self.settings, self.generations
        if not getattr(s, "gen_derived", False):
            return f"{g}/{s.gen}"
        return f"{g}/{max(s.gen, g)}" if s.budget is not None else str(g)

    def budget_note(self) -> str:
        """What a display of `generations g/N` or `n of M evaluations` leaves out, in words: what ended the search
        (stop.json's words, as the search recorded them), unless it was --gen itself; else the budgets that may end
        it before N ("may end sooner: ..." (--time-budget, --patience, spelled as the caller spells them:
        errors.arg; with only these, N is no count at all: generations_text); "" when neither."""
        from ..errors import arg

        stop = self.stop()
        if stop is not None:
            return "" if stop.get("reason") == "gen" else f"ended: {stop.get('why', stop.get('reason'))}"
        s = self.settings
        sooner = ([f"{arg('time_budget', f'{s.time_budget:g}')} s"] if s.time_budget is not None else []) + \
            ([arg("patience", s.patience)] if s.patience is not None else [])
        return f"may end sooner: {', '.join(sooner)}" if sooner else ""

    def batches(self) -> list[dict[str, Any]]:
        """batches.csv, one dict per batch: `batch`, `asked` (candidates), `ask_s`, `tell_s`, `sampler_s` (the
        optimiser's own seconds: ask + tell) and `eval_s` (the batch's evaluations, wall clock); [] before the first
        batch ends (or for a run made before the file). Read from the run directory: a running search writes it
        before its callbacks' `on_generation`; a last line without its newline (being written) is not read."""
        import csv

        try:
            text = (Path(self.run_dir) / "batches.csv").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except OSError as e:
            raise FedevoError(f"cannot read {Path(self.run_dir) / 'batches.csv'}: {e.strerror}") from None
        whole = text[: text.rfind("\n") + 1]  # (a last line without its newline is still being written)
        return [b for b in map(batch_record, csv.DictReader(whole.splitlines())) if b is not None]

    def last_batch(self) -> Optional[dict[str, Any]]:
        """batches.csv's last record as `batches()` reads it (None before the first batch ends), reading the file's
        header and its last few kB only: a display asks after every batch, and the file grows with the batches."""
        import csv

        path = Path(self.run_dir) / "batches.csv"
        try:
            with open(path, "rb") as fh:
                header = fh.readline()
                size = fh.seek(0, 2)
                start = max(len(header), size - LAST_BATCH_BYTES)
                fh.seek(start)
                tail = fh.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise FedevoError(f"cannot read {path}: {e.strerror}") from None
        lines = tail.split(b"\n")[:-1]  # (after the last newline: nothing, or a line still being written)
        if start > len(header):
            lines = lines[1:]  # the window began inside a line
        for raw in reversed(lines):
            rec = next(csv.DictReader((header + raw).decode("utf-8", errors="replace").splitlines()), None)
            b = batch_record(rec) if rec is not None and raw.strip() else None
            if b is not None:  # (as batches(): a line this reader cannot parse is left out)
                return b
        return None if start == len(header) else (self.batches() or [None])[-1]

    def sources_note(self) -> Optional[str]:
        """One line where the rows come from more than one fedevo source (a resume by another: resumed_by.json,
        provenance.sources_line), else None; where resumed_by.json is unreadable, the line saying so."""
        from .provenance import sources_line, writers

        try:
            return sources_line(writers(self.run_dir, self.meta), len(self.rows))
        except FedevoError as e:
            return str(e)

    def params(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The genes of an evaluated row (what `evaluate` takes)."""
        return {g: row[g] for g in self.gene_names}


def read_rows(log, path: Path) -> list[EvaluationRecord]:
    """evaluations.csv's records (one per (id, rung), in that order) parsed by the run's EvalLog, without touching
    the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise FedevoError(f"cannot read {path}: {e.strerror}") from None
    data = data[: data.rfind(b"\n") + 1]  # a line being written right now is not an evaluation yet
    lines = data.decode("utf-8", errors="replace").split("\n")[:-1]  # "\n" alone ends a row (not \x0c, \x1e...)
    if not lines:
        return []
    rows = log.rows_of(lines, header_error="its header does not match the genes in run.json")
    seen: dict[tuple[int, int], EvaluationRecord] = {}
    for r in rows:  # one row per individual (and per rung of a multi-fidelity search)
        seen.setdefault(row_key(r), r)
    return [seen[k] for k in sorted(seen)]


def run_data(run_dir: Path, meta: Mapping[str, Any], problem: Problem, settings: SearchSettings,
             space: SearchSpace, rows: list[dict[str, Any]], *, front: Optional[list[dict[str, Any]]] = None,
             hypervolume: Optional[list[dict[str, Any]]] = None) -> RunData:
    """A RunData of these rows (the front computed unless given)."""
    eps_key, constraints = problem.eps_objective, dict(problem.constraints)
    data = RunData(run_dir=Path(run_dir), meta=meta, problem=problem, settings=settings,
                   gene_names=tuple(g.name for g in space.genes), gene_types={g.name: g.type for g in space.genes},
                   eps_key=eps_key, constraints=constraints, rows=rows, hv_table=hypervolume)
    data.front = front_rows(rows, data.objectives, constraints) if front is None else front
    return data


def run_objectives(meta: Mapping[str, Any], problem: Problem):
    """A run's ObjectiveSet from its run.json: the recorded objectives (``objective_specs``), else the names
    (``objectives``: runs made before the record), else the problem's default three."""
    from ..objectives import ObjectiveSet, default_names

    own = {o.name: o for o in getattr(problem, "objective_defs", ())}  # the problem file's (read loads lazily)
    specs = meta.get("objective_specs")
    if specs:
        return ObjectiveSet.of(own.get(r["name"], r) for r in specs)
    return ObjectiveSet.of(meta.get("objectives") or default_names(problem.eps_objective))


def load_run(run_dir: Path | str, *, require_evaluations: bool = True, reading: bool = False) -> RunData:
    """Open a run directory; FedevoError if it is not a run or (by default) holds no evaluation yet. reading: to
    read its results only (`read_run_json`: none of the user's data or code needed)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise FedevoError(f"{run_dir} is not a directory (expected a run directory made by `fedevo search`)")
    meta, problem, settings = read_run_json(run_dir, reading=reading)
    space = SearchSpace.from_problem(problem)
    log = EvalLog(run_dir / "evaluations.csv", space.genes, rungs=settings.multi_fidelity,
                  objectives=run_objectives(meta, problem))
    # a log that lost or altered rows its checkpoints count: one line, never a front
    rows = checked_rows(run_dir, lambda: read_rows(log, log.path))
    if require_evaluations and not rows:
        raise FedevoError(f"{run_dir} holds no evaluations yet (evaluations.csv is missing or empty); "
                          f"run or resume the search first (`fedevo resume {run_dir}`)")
    return run_data(run_dir, meta, problem, settings, space, rows)


def finite(v: Optional[float]) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
