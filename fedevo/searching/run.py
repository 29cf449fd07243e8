"""A search run on disk: the run directory, the generation loop, resume.

The pieces it uses, one module each: settings.py (SearchSettings, Runtime, evaluation seeds), log.py
(evaluations.csv, atomic writes), checkpoint.py (pymoo state per generation), front_math.py (the front, log-ε
search space, hypervolume), runner.py (Ray or serial evaluation).

Run directory::

    run.json            what was run: problem name + full problem-file text, settings, seed, encoding,
                        algorithm, package versions (fedevo's source hash too: provenance.py), and ``inputs``: the SHA-256 of every data and code file the
                        problem names (inputs.py; resume refuses a changed one) (written once, atomically; never
                        changed: its bytes start the log's hash chain)
    .lock               flock'ed by the process writing the run (never content)
    evaluations.csv     one row per evaluated individual, appended (and fsync'ed) the moment it finishes:
                        id (0, 1, ... in ask order), generation (1 = initial population), index (within
                        its generation), seed (the evaluation's), one column per gene (decoded values),
                        error, comm, eps, eps_paper, accuracy_global, omega, status (ok/diverged/failed),
                        wall_s, rounds_trained, privacy (JSON), message (traceback of a failure; newlines
                        written as \\n so that every row is one line), then one column per objective of the
                        run without one above (its raw value, e.g. worst_client_error). Floats are written with
                        repr(): exact; an empty cell is None (e.g. no ε for an unprivate run)
                        A multi-fidelity search (--fidelity, fidelity.py) adds the columns rung and fidelity:
                        one row per rung an individual reached (same id), its values after those rounds.
                        The last column, chain, is the hash chain over the rows (log.py, integrity.py: every
                        reader checks it to the last row); logs of earlier versions have none
    states/id-NNNN-rRRRR.pt
                        multi-fidelity only: the training state of an individual after RRRR rounds behind a header
                        with its id, rounds and SHA-256 (checked before it is continued), kept until its next rung
                        is logged or it is not promoted (rungs.py)
    checkpoints/gen-NNNN.pkl
                        the optimiser's state after batch (generation) NNNN (0000 = before the first): for NSGA-III
                        the pymoo algorithm (population, reference-point normalisation, RNG), for the others what
                        their next ask depends on (optimizers/); with a SHA-256 of its payload, the record of the
                        log it closes (count, a SHA-256 of all rows, its batch's rows' checksums: integrity.py),
                        the seconds of search so far and the hypervolume after each batch where it changed
                        (budgets.hv_steps; the budgets read them) -- a size that does not grow with the batches
                        (each batch's seconds are in batches.csv alone, whose lines it counts: batches_recorded)
    batches.csv         per batch: candidates asked, the optimiser's seconds (ask_s, tell_s, sampler_s) and the
                        evaluations' (eval_s); a line appended a batch (appended.py), a resume keeping the lines
                        of the batches its checkpoint closed (and saying in one warning how many it lost)
    stop.json           written when the search ends: which budget ended it (budgets.py), batches, evaluations,
                        seconds of search (over_time_budget_s: how far past --time-budget the last batch ran),
                        the budgets (gen_derived: --gen was not given, so it ended nothing) (removed while raised
                        budgets let the search go on)
    resumed_by.json     each other fedevo (version, source hash) a resume continued the run with, and the rows
                        logged before it (provenance.py), when one did
    budgets.json        the budgets in force once `fedevo resume --budget ...` raised them, with the history of
                        raises (budgets.py; read_run_json applies them: run.json's budgets until then)
    front.csv           non-dominated rows among all full-fidelity evaluations with status ok (and within the
                        problem's constraints), rewritten at the end of each generation that changed it (no chain
                        column)
    hypervolume.csv     hypervolume of that front after each generation (see `hypervolume_table`): a line appended
                        a generation, rewritten whole while the first generations still change its normalisation
    ray.log             Ray's own messages (a dead worker, retries), when the search ran on Ray
    user.log            what the user's model or evaluator code printed, per evaluation (containment.py), when
                        it printed anything
    front.html, front.stamp.js, importance.html
                        the pages (fedevo.viz), when written (`fedevo plot`, the live page)
    retrain/, retrain-N/, audit/, audit-N/
                        `fedevo retrain` and `fedevo audit` reports, when run (never overwritten)

Resume = load the newest checkpoint (generation g) and continue with generation g + 1. The optimiser's state
(pymoo's RNG; the told history and per-batch seeds of the others) is in the checkpoint, so it asks for exactly
the individuals the interrupted run had asked for; each one gets
the same id (ids are handed out in ask order) and an evaluation seed derived from (run seed, id). An
individual whose row is already in evaluations.csv (same id, generation, index, seed and genes) is
reused, never evaluated again; only the missing ones run. evaluations.csv is appended a whole line at a time and
flushed, and a torn last line (killed mid-write) is cut off when the run is opened again; batches.csv and
hypervolume.csv are appended a batch's lines at a time (searching/appended.py: rewritten whole, atomically, when
an earlier line changed), their lines past the checkpoint dropped on resume; every other file is written to a
temporary file and renamed.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import pickle
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import numpy as np

from ..dirlock import LOCK, hold, is_held
from ..errors import DiskFullError, FedevoError, RunInUseError, SearchStoppedError, arg, one_line, resume_call
from ..guards import check_workers, check_writable_dir
from ..problem import Problem, load_problem
from ..result import EvaluationResult
from . import batched
from . import evaluator as evaluators
from . import optimizers
from .optimizers.user import global_rngs_kept, is_spec, label
from .appended import GrowingCsv
from .budgets import (STOP_FILE, batch_size, describe_change, go_on, hv_steps, raised, read_stop, said, stop_in_force,
                      stop_record, write_raised)
from .callbacks import CallbackList, SearchCallback
from .checkpoint import dumps, earlier_checkpoints, keeping, latest_checkpoint, load_checkpoint, save_checkpoint
from .containment import sizing_output
from .evaluator import DEFAULT_EVALUATOR, Evaluator, evaluator_spec, for_problem
from .front_math import (HV_REF, HYPERVOLUME, SEARCH_OBJECTIVES, HvMemo, front_rows, hv_columns, hv_skips_unmeasured,
                         hypervolume_table, is_full, unmeasured_except)
from .inputs import check_inputs, code_digests, code_value_records, fingerprint, warn_changed_code
from .integrity import check_chain, check_log, checked_rows, log_record
from .log import EvalLog, atomic_write, check_objective_names, csv_text, row_key, unread_objectives
from .record import EvaluationRecord
from .optimizers.base import tell
from .problem import SearchProblem, status_of
from ..data.sources import facts_of
from .rundata import (RUN_FORMAT, RunData, batch_record, legacy_identity, read_run_json, run_data, run_identity,
                      run_objectives)
from .fidelity import PROMOTION, parse_ladder
from .rungs import RUNG_ROUNDS, RungScheduler, check_continues, check_ladder, remove_states
from .runner import Task, _Abort, cores, make_runner
from .settings import Runtime, SearchSettings, eval_seed, n_ref_dirs
from .space import SearchSpace
from .provenance import note_resume
from .versions import program, versions

# ============================================================================================ the run
# batches.csv: per batch, the candidates asked and the seconds the optimiser (ask, tell) and the evaluations took:
# the optimiser's own cost apart from the evaluations'
BATCH_COLUMNS = ["batch", "asked", "ask_s", "tell_s", "sampler_s", "eval_s"]


def read_batches(path: Path, upto: int) -> list[dict[str, Any]]:
    """batches.csv's records of batches 1..`upto` (a resume's: those its checkpoint closed; a batch written after it
    runs again), a line this cannot read left out; [] without the file."""
    import csv

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except OSError as e:
        raise FedevoError(f"cannot read {path}: {e.strerror}") from None
    out = []
    for rec in csv.DictReader(text.splitlines()):
        b = batch_record({c: rec.get(c) for c in BATCH_COLUMNS})  # (a column missing: None, not a number)
        if b is not None and b["batch"] <= upto:
            out.append(b)
    return out


def lost_batches(records: Sequence[Mapping[str, Any]], *, upto: int, recorded: Optional[int]) -> int:
    """How many of batches 1..`upto` lack the record batches.csv held for them (`records`: read_batches'), given
    `recorded`, the count the checkpoint says it held (None: a checkpoint made before it counted them, whose run
    may have begun before batches.csv existed: then only a gap after the first record the file holds counts)."""
    have = {b["batch"] for b in records}
    if recorded is not None:
        return max(recorded - len(have), 0)
    return upto - min(have) + 1 - len(have) if have else 0


def default_out(problem_name: str) -> Path:
    base = Path("runs") / f"{problem_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


@dataclass
class Summary:
    run_dir: Path
    generations: int
    n_gen: int
    evaluations: int
    reused: int
    failed: int
    front_size: int
    wall_s: float
    diverged: int = 0
    stopped_early: bool = False
    front: list = field(default_factory=list)
    stop: str = ""  # what ended the search (fedevo.searching.budgets.REASONS); "" while it is not finished
    first_failure: str = ""  # message of the first failed evaluation (first line), "" if none failed
    full_fidelity: Optional[int] = None  # a multi-fidelity search: evaluations that trained all rounds (None: plain)
    individuals: Optional[int] = None  # a multi-fidelity search: individuals (ids), what --budget counts; evaluations
    # counts their rung rows (None: plain, where the two are one)
    unread: tuple = ()  # (objective, evaluations it could not be read in, ok evaluations, the first note) for each
    # objective of its own whose value some ok evaluation could not read (log.unread_objectives: its worst stood in)

    @property
    def complete(self) -> bool:
        return self.generations >= self.n_gen or self.stopped_early or bool(self.stop)


def _lock(run_dir: Path):
    """An exclusive lock on the run directory (an open file; closing it releases the lock). RunInUseError if
    another fedevo process holds it."""
    return hold(run_dir, RunInUseError(f"run directory {run_dir} is in use by another fedevo process"))


def _content(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.iterdir() if p.name != LOCK]


def missing_folders(out: Path) -> list[Path]:
    """The folders that creating the directory `out` makes: it and its missing parents, innermost first ([] for
    one that exists)."""
    return [p for p in (out, *out.parents) if not p.exists()]


def take_back(run_dir: Path, made: Sequence[Path]) -> None:
    """What a search that never started wrote: its run directory's contents (its lock file too), and the folders
    it created (`made`, innermost first; each only while empty: another process may have written beside it).
    Only for a directory this process holds, in which nothing is another's."""
    import shutil

    for p in Path(run_dir).iterdir():
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
    for p in made:
        try:
            p.rmdir()
        except OSError:
            break


def _refuse_nonempty(out: Path, ident: str, legacy: Optional[str] = None) -> None:
    """The one line for a search whose --out is not empty: it holds this run (`ident`; or `legacy`, the identity
    an earlier fedevo gave the same command: `legacy_identity`), another run, or no run."""
    if (out / "run.json").exists():
        try:
            recorded = json.loads((out / "run.json").read_text())
            earlier = (legacy is not None and "gen_derived" not in (recorded.get("settings") or {})
                       and recorded.get("run_id") == legacy)
            same = recorded.get("run_id") == ident or earlier
        except (OSError, ValueError, AttributeError):
            same = earlier = False
        if same:
            # (made by a fedevo before gen_derived: its --gen, derived from the other budgets, ends it, as it did then)
            then = (f" (made by an earlier fedevo, in which {arg('gen')} derived from the other budgets ends the "
                    "search)") if earlier else ""
            if is_held(out):  # its search or a resume runs now: 'continue it with fedevo resume' would be refused
                raise RunInUseError(f"{arg('out', out)} holds this run, and another fedevo process is running it now; "
                                    "nothing was changed")
            stop = read_stop(out)
            if stop is None:
                raise FedevoError(f"{arg('out', out)} already holds this run{then}; continue it with "
                                  f"{resume_call(out)}")
            way = go_on(stop, out)
            way = f"; to search on, raise the budget that ended it: {way}" if way else ""
            raise FedevoError(f"{arg('out', out)} already holds this run{then}, finished "
                              f"({said(stop.get('reason', ''), stop.get('why', 'ended'))}); "
                              f"nothing was changed (see `fedevo front {out}`{way})")
        raise FedevoError(f"{arg('out', out)} holds a different run; choose another {arg('out')} (nothing was "
                          "overwritten)")
    raise FedevoError(f"{arg('out', out)} is not empty and holds no fedevo run; choose another {arg('out')} "
                      "(nothing was overwritten)")


def run_finished(run_dir: Path, settings: SearchSettings) -> bool:
    """Whether the search of `run_dir` has ended (nothing to resume): at its newest checkpoint a budget of
    `settings` (those in force: budgets.py) is reached, or the optimiser proposed nothing new. Reads only."""
    ck = latest_checkpoint(Path(run_dir))
    if ck is None:
        return False
    return stop_in_force(settings, load_checkpoint(ck)) is not None


class SearchRun:
    """One run directory and the search it holds (its optimiser: fedevo.searching.optimizers)."""

    _held = None  # the run directory's lock while this process writes it (taken by `create`, or by `run`)
    _raised: Optional[SearchSettings] = None  # budgets raised by `raise_budgets`, put in force by `run`
    _when_held: tuple = ()  # say_when_held's notes
    _resumed = False  # True once `run` took the lock of a run made earlier: its rows may be another fedevo's
    made: Optional[list[Path]] = None  # made by `create`: the folders it created (missing_folders); None: opened

    def __init__(self, run_dir: Path, meta: Mapping[str, Any], problem: Problem, settings: SearchSettings):
        self.run_dir = Path(run_dir)
        self.meta = dict(meta)
        self.problem = problem
        self.settings = settings
        self.space = SearchSpace.from_problem(problem)
        self.eps_key = problem.eps_objective
        self.objectives = run_objectives(self.meta, problem)
        self.constraints = dict(problem.constraints)
        self.log = EvalLog(self.run_dir / "evaluations.csv", self.space.genes, rungs=settings.multi_fidelity,
                           run_json=(self.run_dir / "run.json").read_bytes(), objectives=self.objectives)
        self.hv_memo = HvMemo()  # hypervolume.csv's generations computed so far (the log only grows)
        self.hv_csv = GrowingCsv(self.run_dir / "hypervolume.csv", hv_columns(self.objectives))
        self.batches_csv = GrowingCsv(self.run_dir / "batches.csv", BATCH_COLUMNS)
        self.batches: list[dict[str, Any]] = []  # batches.csv's records (the checkpoints hold none: _load_state)
        self._front_written = None  # the front front.csv holds, as the memo holds it (unchanged: not written again)
        self.digests: dict = {}  # each logged row's digest for the checkpoints (integrity.log_record)
        self._upto: Optional[dict] = None  # _rows_upto's rows so far

    # ------------------------------------------------------------------ creating / opening
    @classmethod
    def create(cls, settings: SearchSettings, out: Optional[Path] = None, runtime: Runtime = Runtime(), *,
               problem: Optional[Problem] = None) -> "SearchRun":
        """A new run directory for `settings` (its problem loaded from `settings.problem`, or `problem` as given:
        run.json records the problem's TOML text)."""
        if problem is None:
            problem = load_problem(settings.problem)
        objectives = problem.objective_set()  # unknown objectives: one line, before anything is written
        from ..finite_eps import search_objectives
        from ..objectives.spec import check_loadable

        # an ε no configuration makes finite (no privacy): left out of a default list, refused where named
        objectives, note = search_objectives(problem, objectives, simulator=settings.evaluator == DEFAULT_EVALUATOR)

        check_loadable(objectives)
        space = SearchSpace.from_problem(problem)  # genes must be searchable
        check_objective_names([g.name for g in space.genes], objectives)
        settings = settings.resolved(n_obj=len(objectives))
        text = problem.text if problem.text is not None else Path(problem.path).read_text() if problem.path else None
        if text is None:
            raise FedevoError(f"problem {settings.problem!r} has no file to record in run.json"
                              + ("; its data are in-memory arrays: save them with numpy.savez(path, x=..., y=..., "
                                 "client_id=...) and name the file in [data] (source = \"npz\", path = ...), so that "
                                 "the run records where its data are" if problem.data_source is not None else ""))
        evaluator = for_problem(settings.evaluator, problem)  # fail now, before creating anything
        settings = _with_fidelity(settings, problem, evaluator)  # --fidelity, else the problem file's `fidelity`
        if settings.init is not None:  # a warm start's genes must be this problem's, within its bounds
            from .warmstart import initial_population

            initial_population(space, settings.init, settings.pop, settings.seed)
        if runtime.ray_address:
            from .runner import _check_reachable

            _check_reachable(runtime.ray_address, 5.0)
        from .workers import AUTO, parse_workers

        if parse_workers(runtime.workers) != AUTO:
            check_workers(runtime.workers)
        out = Path(out) if out is not None else default_out(problem.name)
        ident = run_identity(text, settings)
        if out.exists() and not out.is_dir():
            raise FedevoError(f"{arg('out', out)} exists and is not a directory")
        check_writable_dir(out)
        evaluators.check(evaluator, problem, settings.rounds)  # the simulator's memory check; others: none
        batched.check(runtime, evaluator, multi_fidelity=settings.multi_fidelity)
        inputs = fingerprint(problem, settings)  # before anything is written: an unreadable file is one line
        vers = versions()  # so too a bad FEDEVO_NATIVE (versions reads native.status: a SetupError)
        if out.is_dir() and _content(out):
            _refuse_nonempty(out, ident, legacy_identity(text, settings))
        meta = {
            "format": RUN_FORMAT,
            "run_id": ident,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "problem": {"name": problem.name, "source": settings.problem, "path": problem.path,
                        "file_stem": Path(problem.path).stem if problem.path else problem.name, "text": text},
            "settings": asdict(settings),
            "objectives": list(objectives.names),
            "objective_specs": objectives.records(),  # what every reader needs of them (no code)
            **({"objectives_left_out": note} if note else {}),  # and why (finite_eps.search_objectives)
            "constraints": dict(problem.constraints),
            # the user's data as read now: what the run's readers need of it (classes, test rows) without it
            **({"data_facts": facts_of(problem.data_source)} if problem.data_source is not None else {}),
            "worst_objectives": {o.name: o.worst for o in objectives},
            **({"n_ref_dirs": n_ref_dirs(settings.partitions, len(objectives))}
               if settings.partitions is not None else {}),
            "offspring_per_generation": settings.pop,
            "expected_evaluations": settings.expected_evaluations,
            "encoding": space.describe(),
            "algorithm": optimizers.make(settings.optimizer, space, _search_problem(problem, space, objectives),
                                         pop=settings.pop, seed=settings.seed, settings=settings).describe(),
            "budgets": {"gen": settings.gen, "budget": settings.budget, "time_budget": settings.time_budget,
                        "patience": settings.patience, "stop": "the first reached; see stop.json"},
            "evaluation_seed": "numpy SeedSequence([seed, id]).generate_state(1)[0]",
            **({"fidelity": {"ladder": list(settings.fidelity), "rung_rounds": RUNG_ROUNDS, "same_rounds": True,
                             "promotion": PROMOTION}} if settings.multi_fidelity else {}),
            "search_objectives": SEARCH_OBJECTIVES,
            "hypervolume": {**HYPERVOLUME, "ref_point": [HV_REF] * len(objectives),
                            **({"unmeasured_except": ex} if (ex := unmeasured_except(
                                objectives, simulated=settings.evaluator == DEFAULT_EVALUATOR and problem.simulated))
                               else {})},
            "runtime_at_start": asdict(runtime),
            "host": {"cores": cores(), "platform": platform.platform()},
            "versions": vers,
            "command": " ".join(sys.argv),
            "inputs": inputs,  # the data and code files' SHA-256: resume checks them (inputs.py)
            "code": code_digests(objectives, evaluator),  # code without a file: resume compares it (inputs.py)
            "code_values": code_value_records(objectives, evaluator),  # its closure values and defaults: too
        }
        made = missing_folders(out)
        out.mkdir(parents=True, exist_ok=True)
        lock, ours = None, False  # ours: held, and it held nothing else then: what is in it since is this run's
        try:
            lock = _lock(out)  # before anything is written: a second search on this --out stops here
            ours = not _content(out)  # else written meanwhile by another process that has since let go
            if ours:
                atomic_write(out / "run.json", json.dumps(meta, indent=2, default=str) + "\n")
                run = cls(out, meta, problem, settings)
        except BaseException as e:  # Ctrl-C, SIGTERM, a full disk: the folders as they were; the same command works
            if lock is None and not isinstance(e, RunInUseError):  # stopped while it took the lock
                with contextlib.suppress(FedevoError):
                    lock = _lock(out)
                    ours = not _content(out)
            if ours:
                take_back(out, made)
            if lock is not None:
                lock.close()
            raise
        if not ours:
            lock.close()
            _refuse_nonempty(out, ident, legacy_identity(text, settings))
        run._held = lock  # kept until this process's run() ends: nobody else writes here meanwhile
        run.made = made
        if note:
            print(f"fedevo: note: {note}", file=sys.stderr)
        return run

    @classmethod
    def open(cls, run_dir: Path) -> "SearchRun":
        meta, problem, settings = read_run_json(Path(run_dir))
        return cls(Path(run_dir), meta, problem, settings)

    def release(self) -> None:
        """Let go of the run directory's lock (taken by `create` or `run`), if this process holds it."""
        if self._held is not None:
            self._held.close()
            self._held = None

    def use_data_dir(self, data_dir: Optional[str]) -> None:
        """Read the data from elsewhere (not part of the run's identity: results do not depend on it)."""
        self.settings = replace(self.settings, data_dir=data_dir)

    def finished(self) -> bool:
        """True when the newest checkpoint holds the last generation (or the search stopped early): nothing to
        resume. Reads only."""
        return run_finished(self.run_dir, self.settings)

    def raise_budgets(self, **given) -> str:
        """Raise the budgets (`given`: gen, budget, time_budget, patience; None: keep) for the rest of the search:
        checked now (budgets.py `raised`: FedevoError where one is bad or still reached), put in force by `run`
        once it holds the run directory and has checked its inputs — recorded in budgets.json, the stop.json of
        the stop they lift removed — so a resume refused for any reason changes nothing. Returns the change in
        words (to say once in force: `say_when_held`)."""
        # checked as every reader checks the budgets in force (read_run_json: resolved), so that none it accepts
        # leaves a run nobody can open (--gen 10**9: --pop × --gen too many for the front's memory)
        self._raised = raised(self.settings, self._newest_state(), given,
                              logged=self._logged_ids()).resolved(n_obj=len(self.objectives))
        return describe_change(self.settings, self._raised)

    def _logged_ids(self) -> int:
        """1 + the highest individual id evaluations.csv holds (0 without a row): reads only, the id column."""
        import csv

        try:
            text = self.log.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        except OSError as e:
            raise FedevoError(f"cannot read {self.log.path}: {e.strerror}") from None
        ids = [rec.get("id") for rec in csv.DictReader(text.splitlines())]
        return 1 + max((int(i) for i in ids if i and i.isdigit()), default=-1)

    def _newest_state(self) -> dict[str, Any]:
        ck = latest_checkpoint(self.run_dir)
        return load_checkpoint(ck) if ck is not None else {"generation": 0, "next_id": 0}

    def _put_raised(self) -> None:
        """The budgets `raise_budgets` checked, in force (this process holds the run directory)."""
        if self._raised is None:
            return
        write_raised(self.run_dir, self.settings, self._raised, self._newest_state())
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / STOP_FILE).unlink()
        self.settings, self._raised = self._raised, None

    def say_when_held(self, say: Callable[[], None]) -> None:
        """Call `say` once `run` holds the run directory and nothing can refuse the resume any more (inputs checked,
        raised budgets in force): a note that a refused resume must not print above its one error line."""
        self._when_held = (*self._when_held, say)

    def problem_file_changed(self) -> Optional[str]:
        """The problem file's path when it now differs from the text the run was made with (run.json keeps that
        text, and a resume searches it, not the file); None when it is unchanged, gone or unreadable."""
        path = self.meta.get("problem", {}).get("path")
        try:
            now = Path(path).read_text(encoding="utf-8") if path else None
        except (OSError, UnicodeDecodeError):
            return None
        return path if now is not None and now != self.meta["problem"]["text"] else None

    def check_log(self) -> None:
        """FedevoError naming the damage if evaluations.csv lost or altered rows the newest checkpoint counts."""
        from .rundata import read_rows

        checked_rows(self.run_dir, lambda: read_rows(self.log, self.log.path))

    def is_empty(self) -> bool:
        """True while no evaluation has been logged."""
        p = self.run_dir / "evaluations.csv"
        return not p.exists() or len(p.read_bytes().splitlines()) <= 1

    # ------------------------------------------------------------------ optimiser
    def new_optimizer(self) -> optimizers.Optimizer:
        s = self.settings
        return optimizers.make(s.optimizer, self.space, self._search_problem(), pop=s.pop, seed=s.seed, settings=s)

    def _optimizer(self, state: Mapping[str, Any]) -> optimizers.Optimizer:
        s = self.settings
        name = state.get("optimizer", optimizers.DEFAULT)  # checkpoints made before the seam: NSGA-III
        optimizers.get(name)  # your own: its code loaded before its state is unpickled
        algorithm = state["algorithm"]
        if isinstance(algorithm, bytes):  # (checkpoints made before the state was kept apart: the object itself)
            try:
                algorithm = pickle.loads(algorithm)
            except Exception as e:  # noqa: BLE001 - unpickling runs the optimiser's own code
                raise FedevoError(f"the optimiser's state in {self.run_dir / 'checkpoints'} cannot be restored "
                                  f"({type(e).__name__}: {one_line(e)}): is {name!r}'s code, as it "
                                  "was when the search began, importable here?") from None
        return optimizers.from_state(name, algorithm, self.space, self._search_problem(), pop=s.pop, seed=s.seed,
                                     settings=s)

    def _state_blob(self, opt: optimizers.Optimizer) -> bytes:
        """The optimiser's state as a checkpoint keeps it: pickled apart (cloudpickle), so that a reader of the
        checkpoint (its log record, its budgets) never unpickles it and so never imports the optimiser's code."""
        try:
            return dumps(opt.state())
        except FedevoError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever pickling raises
            raise FedevoError(f"optimizer {self.settings.optimizer!r}: state() returned what cannot be checkpointed "
                              f"({type(e).__name__}: {one_line(e)})") from None

    def _search_problem(self) -> SearchProblem:
        return _search_problem(self.problem, self.space, self.objectives)

    # ------------------------------------------------------------------ outputs
    def write_outputs(self, rows: Sequence[Mapping[str, Any]],
                      generations: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """front.csv and hypervolume.csv of these rows; returns (front, hypervolume table)."""
        table = hypervolume_table(rows, generations, self.objectives, self.constraints, self.hv_memo,
                                  skip_unmeasured=hv_skips_unmeasured(self.meta))
        steps = self.hv_memo.steps[:generations]
        held = None
        if steps and steps[-1][0] == (len(rows) if not self.settings.multi_fidelity else sum(map(is_full, rows))):
            # the last generation's front holds every row: the same set, not sorted again (a copy: the memo's own
            # list is where the next generation's front grows from, and callbacks get this one)
            held = steps[-1][1]
            front = list(held)
        else:
            front = front_rows(rows, self.objectives, self.constraints)
        if held is None or held is not self._front_written or not (self.run_dir / "front.csv").exists():
            # (a batch that left the front as it was: as written, unless the file went meanwhile)
            self._front_written = None
            atomic_write(self.run_dir / "front.csv", csv_text(self.log.columns, (self.log.row_cells(r) for r in front)))
            self._front_written = held
        self.hv_csv.write(table, self.hv_memo.unchanged)
        return front, table

    def data(self, rows: list[EvaluationRecord], *, front: Optional[list[dict[str, Any]]] = None,
             hypervolume: Optional[list[dict[str, Any]]] = None) -> RunData:
        """The run as :func:`~fedevo.searching.rundata.load_run` reads it, from rows held in memory."""
        return run_data(self.run_dir, self.meta, self.problem, self.settings, self.space, rows, front=front,
                        hypervolume=hypervolume)

    # ------------------------------------------------------------------ the loop
    def run(self, runtime: Runtime = Runtime(), *, evaluator: Optional[Evaluator] = None,
            callbacks: Iterable[SearchCallback] = ()) -> Summary:
        """Run (or continue) the search to its last generation. Ctrl-C stops it resumable.

        evaluator: what evaluates an individual (default: the one run.json names, see fedevo.searching.evaluator);
        callbacks: what the search reports to (fedevo.searching.callbacks), in this order."""
        t0 = time.monotonic()
        s = self.settings
        evaluator = for_problem(s.evaluator, self.problem) if evaluator is None else evaluators.resolve(evaluator)
        if s.multi_fidelity:
            check_continues(evaluator, s.fidelity)
        from ..objectives.spec import check_loadable

        check_loadable(self.objectives)  # an objective this process cannot read: one line, nothing evaluated
        batched.check(runtime, evaluator, multi_fidelity=s.multi_fidelity)  # before raised budgets are put in force
        callback = CallbackList(callbacks)
        summary: Optional[Summary] = None
        try:
            if self._held is None:  # opened, not created here: continuing a run made earlier
                self._held = _lock(self.run_dir)
                self._resumed = True
                check_inputs(self.meta, self.run_dir)  # its data and code files are what it was made with
                warn_changed_code(self.meta, self.objectives, evaluator, self.run_dir)
            self._put_raised()  # `fedevo resume --budget ...`: now that nothing else can refuse the resume
            for say in self._when_held:
                say()
            for p in [*self.run_dir.glob(".*.tmp"), *(self.run_dir / "checkpoints").glob(".*.tmp")]:
                with contextlib.suppress(OSError):  # leftovers of a write killed before its rename (ours: locked)
                    p.unlink()
            try:
                rows = self.log.open()
                try:
                    with keeping(self.run_dir):  # its checkpoints listed once (checkpoint.keep_within)
                        summary = self._run(rows, runtime, evaluator, callback, t0)
                finally:
                    self.log.close()
            except DiskFullError as e:  # every finished evaluation is in the log, which is whole: resumable
                raise DiskFullError(f"{e}; free space and continue with `fedevo resume {self.run_dir}`") from None
            return summary
        finally:
            self.release()
            callback.on_finish(summary)  # None: stopped on an error or Ctrl-C

    def _load_state(self) -> dict[str, Any]:
        ck = latest_checkpoint(self.run_dir)
        if ck is None:
            opt = self.new_optimizer()
            state = {"run_id": self.meta["run_id"], "generation": 0, "next_id": 0, "stopped_early": False,
                     "optimizer": self.settings.optimizer, "algorithm": self._state_blob(opt), "log": log_record([]),
                     "search_s": 0.0, "hypervolume_steps": [], "batches_recorded": 0}
            save_checkpoint(self.run_dir, state)
            return state
        state = load_checkpoint(ck)
        if state.get("run_id") != self.meta["run_id"]:
            raise FedevoError(f"checkpoint {ck} belongs to a different run than {self.run_dir / 'run.json'}")
        if f"gen-{state['generation']:04d}.pkl" != ck.name:
            raise FedevoError(f"corrupt checkpoint {ck}: it holds generation {state['generation']}")
        state["stop"] = stop_in_force(self.settings, state) or ""  # a budget raised since lifts the stop it made
        # checkpoints made before the per-batch lists left them: every batch's hypervolume, every batch's seconds
        if "hypervolumes" in state:
            state["hypervolume_steps"] = hv_steps(state.pop("hypervolumes"))
        if "batches" in state:
            self.batches = [dict(b) for b in state.pop("batches")]
        else:
            path, g = self.run_dir / "batches.csv", state["generation"]
            self.batches = read_batches(path, upto=g)
            n = lost_batches(self.batches, upto=g, recorded=state.get("batches_recorded"))
            if n:  # said once: the next checkpoint counts only the records kept (_save)
                print(f"fedevo: warning: {path} has lost the records of {n} of its {g} batches so far (lines missing "
                      "or unreadable): their seconds are gone, the search itself is whole", file=sys.stderr)
        return state

    def _run(self, rows, runtime: Runtime, evaluator: Evaluator, callback: SearchCallback, t0: float) -> Summary:
        s = self.settings
        state = self._load_state()
        opt = self._optimizer(state)
        problem = opt.problem  # the objective vector as this optimiser sees it (n_obj, objectives_of, constraints_of)
        by_id: dict[tuple[int, int], EvaluationRecord] = {}  # (id, rung) -> record; a plain search's rung is 0
        for r in rows:
            by_id.setdefault(row_key(r), r)
        check_chain(self.log.path, self.run_dir / "run.json")  # every row to the last, before any is trusted
        ck = self.run_dir / "checkpoints" / f"gen-{state['generation']:04d}.pkl"
        check_log(rows, state, log=self.log.path, checkpoint=ck.stem, earlier=earlier_checkpoints(ck))  # lost/altered
        counters = {"reused": 0}
        search_s0 = float(state.get("search_s", 0.0))  # seconds of search before this process (resumes add up)
        g0 = state["generation"]
        elapsed = lambda: search_s0 + time.monotonic() - t0  # noqa: E731
        runner = None
        twin_of = None  # the checkpointed state a restored copy of your own optimiser is asked from (_check_restored)
        # the seconds of search at the checkpoint, not this process's start-up: the batch after a checkpoint always
        # runs (a time budget is checked between batches; one shorter than the start-up evaluated nothing and
        # recorded no stop)
        if not self._stopped(state, search_s0):
            if self._resumed:  # another fedevo than the rows' so far: one line, and resumed_by.json records it
                note = note_resume(self.run_dir, self.meta, len(rows), program())
                if note:
                    print(f"fedevo: warning: resuming {self.run_dir}: {note}", file=sys.stderr)
            eval_kwargs = {"rounds": s.rounds, "data_dir": s.data_dir}
            runner = make_runner(evaluator, self.problem, eval_kwargs, workers=runtime.workers,
                                 address=runtime.ray_address, cpus_per_task=runtime.cpus_per_task,
                                 gpus_per_task=runtime.gpus_per_task, log_dir=self.run_dir, pop=s.pop,
                                 timeout=runtime.eval_timeout or self.problem.eval_timeout,
                                 known_digests={e["path"]: e["sha256"] for e in self.meta.get("inputs") or ()})
            runner = batched.batched(runner, runtime, evaluator, self.problem, eval_kwargs,
                                     multi_fidelity=s.multi_fidelity)
        try:
            if runner is not None:
                callback.on_start(n_gen=s.gen, generation=state["generation"] + 1, total=s.expected_evaluations,
                                  done=len(by_id), rows=[by_id[k] for k in sorted(by_id)], runner=runner.describe,
                                  run_dir=self.run_dir, eps_key=self.eps_key, objectives=self.objectives,
                                  time_left=None if s.time_budget is None else s.time_budget - elapsed())
            while runner is not None and not self._stopped(state, elapsed() if state["generation"] > g0 else search_s0):
                g = state["generation"] + 1
                callback.on_generation_start(g)
                t_ask = time.perf_counter()
                n_ask = batch_size(s, state["next_id"])
                params = opt.ask(n_ask)
                ask_s = time.perf_counter() - t_ask
                if twin_of is not None:  # your own optimiser, at its second batch here: asked once more, restored
                    self._check_restored(twin_of, params, n_ask, g)
                    twin_of = None
                if not params:  # the optimiser found no new candidates (NSGA-III: no non-duplicate offspring)
                    state = {**state, "stopped_early": True, "stop": "exhausted", "search_s": elapsed()}
                    self._save(state)
                    break
                t_eval = time.perf_counter()
                results = self._batch_evaluator(g, state["next_id"], by_id, runner, evaluator, callback,
                                                counters)(params)
                eval_s = time.perf_counter() - t_eval
                if len(results) != len(params):
                    raise RuntimeError(f"evaluator returned {len(results)} results for {len(params)} individuals")
                F = np.array([problem.objectives_of(r) for r in results], dtype=float).reshape(len(params), -1)
                G = np.array([problem.constraints_of(f, r) for f, r in zip(F, results)],
                             dtype=float).reshape(len(params), -1)
                t_tell = time.perf_counter()
                tell(opt, params, F, G, [status_of(r) != "ok" for r in results])
                tell_s = time.perf_counter() - t_tell
                done_rows = self._rows_upto(by_id, state["next_id"] + len(params))
                front, table = self.write_outputs(done_rows, g)
                timing = {"batch": g, "asked": len(params), "ask_s": round(ask_s, 6), "tell_s": round(tell_s, 6),
                          "eval_s": round(eval_s, 6), "sampler_s": round(ask_s + tell_s, 6)}
                since = state["next_id"]  # the ids before this batch: the previous checkpoint counts them
                same = self.hv_memo.unchanged  # the first batches' hypervolumes, as the checkpoint holds them
                state = {**state, "generation": g, "next_id": state["next_id"] + len(params),
                         "optimizer": s.optimizer, "algorithm": self._state_blob(opt), "search_s": elapsed(),
                         "hypervolume_steps": hv_steps([t["hypervolume"] for t in table[same:]],
                                                       [st for st in state.get("hypervolume_steps") or () if st[0] <= same],
                                                       since=same)}
                # what the log holds now: readers check it (integrity.py)
                state["log"] = log_record(done_rows, self.digests, since=since)
                reason = stop_in_force(s, state)
                if reason:
                    state["stop"] = reason
                self.batches.append(timing)
                self.batches_csv.write(self.batches, len(self.batches) - 1)
                self._save(state)
                if g == g0 + 1 and is_spec(s.optimizer):  # the first checkpoint this process wrote after a tell
                    twin_of = state
                if s.multi_fidelity:  # the generation is done: no training state of it is needed any more
                    remove_states(self.run_dir, range(state["next_id"] - len(params), state["next_id"]))
                callback.on_generation(g, self.data(done_rows, front=front, hypervolume=table))
            if runner is not None and not state.get("stop"):  # a time budget found between batches
                reason = stop_in_force(s, {**state, "search_s": elapsed()})
                if reason:
                    state = {**state, "stop": reason, "search_s": elapsed()}
                    self._save(state)
        except _Abort as e:
            raise SearchStoppedError(str(e), self.run_dir, runtime.resume_options()) from None
        finally:
            if runner is not None:
                runner.close()
        if state.get("stop"):
            self._write_stop(state)
        done_rows = self._rows_upto(by_id, state["next_id"])
        front, _ = self.write_outputs(done_rows, state["generation"])
        # a derived --gen (budgets.gen_derived) ended nothing: what ran where it was more, or without --budget
        n_gen = (s.gen if not s.gen_derived else max(s.gen, state["generation"]) if s.budget is not None
                 else state["generation"])
        return Summary(run_dir=self.run_dir, generations=state["generation"], n_gen=n_gen,
                       evaluations=len(done_rows), reused=counters["reused"],
                       failed=sum(r["status"] == "failed" for r in done_rows), front_size=len(front),
                       diverged=sum(r["status"] == "diverged" for r in done_rows),
                       wall_s=time.monotonic() - t0, stopped_early=bool(state.get("stopped_early")), front=front,
                       stop=state.get("stop") or ("gen" if state["generation"] >= s.gen and not s.gen_derived
                                                  else ""),
                       full_fidelity=sum(map(is_full, done_rows)) if s.multi_fidelity else None,
                       individuals=len({r["id"] for r in done_rows}) if s.multi_fidelity else None,
                       first_failure=next((r["message"].strip().splitlines()[0] for r in done_rows
                                           if r["status"] == "failed" and r["message"].strip()), ""),
                       unread=tuple(unread_objectives(done_rows, [o.name for o in self.log.objectives])))

    def _check_restored(self, state: Mapping[str, Any], params: list, n: int, g: int) -> None:
        """Your own optimiser (once per process, at its second batch here): a copy restored from the state
        checkpointed before batch g, as a resume would restore it, is asked for batch g too; when it asks other
        candidates than the running one just did (`params`), one line on stderr says so: a resume would not continue
        the search as it goes on (its state() lacks something ask() depends on). A warning, not a refusal: the
        search itself is sound, and an optimiser may legitimately differ run to run (a model trained on a GPU); a
        resume that meets logged rows asking otherwise is refused (_batch_evaluator). The copy's draws from the
        global generators (Python's, numpy's, torch's, CUDA's where initialised) are put back, so the check leaves
        the search's own asks alone. Its cost: one more copy of the optimiser, built from its checkpoint, whose
        ``__init__``, ``restore`` and ``ask`` run once per process (external state they touch, files or an RDB study,
        is touched once more; what they print goes to stderr)."""
        with global_rngs_kept():
            try:
                copy = self._optimizer(state)
            except FedevoError as e:
                why = f"restoring it from the checkpoint of batch {g - 1} failed ({e})"
            else:
                try:
                    again = copy.ask(n)
                except FedevoError as e:
                    why = f"restored from its checkpoint of batch {g - 1}, its ask() for batch {g} raised ({e})"
                else:
                    why = None if again == params else (
                        f"restored from its checkpoint of batch {g - 1}, it asks other candidates for batch {g} than "
                        "it did running on (its state() and restore() miss something its ask() depends on)")
        if why is None:
            return
        print(f"fedevo: warning: optimizer {label(self.settings.optimizer)!r}: {why}: a resume of this run will not "
              "continue it as it goes on (docs/search.md#your-own-optimiser)", file=sys.stderr)

    def _save(self, state: Mapping[str, Any]) -> None:
        """Checkpoint the state; one that ends the search writes stop.json first, so that no kill leaves a finished
        run (which resume refuses) without it."""
        if state.get("stop"):
            self._write_stop(state)
        save_checkpoint(self.run_dir, {**state, "batches_recorded": len(self.batches)})  # (for lost_batches)

    def _write_stop(self, state: Mapping[str, Any]) -> None:
        atomic_write(self.run_dir / STOP_FILE, json.dumps(stop_record(state["stop"], state, self.settings), indent=2)
                     + "\n")

    def _stopped(self, state: Mapping[str, Any], search_s: float) -> bool:
        """Whether the search is over: a stop recorded (by this process, or at the checkpoint under the budgets in
        force), or a budget reached (those in force, so resume honours them)."""
        return bool(state.get("stop") or stop_in_force(self.settings, {**state, "search_s": search_s}))

    def _rows_upto(self, by_id, next_id: int) -> list[EvaluationRecord]:
        """The rows of `by_id` ((id, rung) -> row, only ever added to) of ids below `next_id`, in key order. Kept
        between calls: the keys added since the last call (a batch's, whose ids are above every id below the last
        call's next id) are sorted and appended, not every key sorted and looked up again after each batch."""
        c = self._upto
        if c is None or c["by_id"] is not by_id or len(by_id) < c["seen"] or next_id < c["next_id"]:
            c = self._upto = {"by_id": by_id, "seen": 0, "next_id": 0, "rows": [], "last": None, "ahead": []}
        keys = sorted(c["ahead"] + list(itertools.islice(by_id, c["seen"], None)))
        cut = bisect.bisect_left(keys, (next_id,))  # the first key of an id >= next_id
        if c["last"] is not None and cut and keys[0] <= c["last"]:  # a key among those kept: all sorted afresh
            self._upto = None
            return self._rows_upto(by_id, next_id)
        c["rows"] += [by_id[k] for k in keys[:cut]]
        c.update(seen=len(by_id), next_id=next_id, ahead=keys[cut:], last=keys[cut - 1] if cut else c["last"])
        return list(c["rows"])

    def _batch_evaluator(self, g: int, first_id: int, by_id, runner, evaluator: Evaluator, callback: SearchCallback,
                         counters) -> Callable:
        seed, rounds = self.settings.seed, self.settings.rounds
        if self.settings.multi_fidelity:
            rungs = RungScheduler(run_dir=self.run_dir, problem=self.problem, ladder=self.settings.fidelity,
                                  rounds=rounds, evaluator=evaluator, eps_key=self.eps_key, log=self.log, seed=seed,
                                  objectives=self.objectives,
                                  # a run made before: each individual's own fraction of its T (its log's rungs)
                                  equal_rounds=bool(self.meta.get("fidelity", {}).get("same_rounds")))
            tick = lambda: callback.on_tick(runner.stats.running, runner.stats.queued)  # noqa: E731
            return lambda params_list: rungs.evaluate(g, first_id, params_list, by_id, runner, callback.on_evaluation,
                                                      counters, tick)

        def batch_evaluate(params_list: list[dict[str, Any]]) -> list[EvaluationRecord]:
            with sizing_output(self.run_dir, f"generation {g}: its models sized, before they are evaluated"):
                costs = [evaluators.cost(evaluator, self.problem, p, rounds) for p in params_list]  # Ray: longest first
            tasks = [Task(first_id + i, g, i, p, eval_seed(seed, first_id + i), costs[i])
                     for i, p in enumerate(params_list)]
            rows: list[Optional[EvaluationRecord]] = [None] * len(tasks)
            todo = []
            for t in tasks:
                row = by_id.get((t.id, 0))
                if row is None:
                    todo.append(t)
                elif self.log.matches(row, t):
                    rows[t.index] = row
                    counters["reused"] += 1
                elif is_spec(self.settings.optimizer):  # your own optimiser: its state is what went astray
                    raise FedevoError(f"optimizer {self.settings.optimizer!r} asked other genes for individual {t.id} "
                                      f"after the resume than before ({self.log.path} holds them): its state() and "
                                      "restore() miss something its ask() depends on (docs/search.md, your own "
                                      "optimiser)")
                else:
                    raise FedevoError(f"{self.log.path}: the row of individual {t.id} does not match the resumed "
                                      "search (different genes or seed); the run directory is inconsistent")

            def on_done(t: Task, result: EvaluationResult) -> None:
                row = self.log.append(t, result)
                by_id[(t.id, 0)] = rows[t.index] = row
                callback.on_evaluation(row)

            runner.run(todo, on_done, tick=lambda: callback.on_tick(runner.stats.running, runner.stats.queued))
            return list(rows)  # the logged records: the problem reads rec[name] (fedevo.objectives)

        return batch_evaluate


def _search_problem(problem: Problem, space: SearchSpace, objectives=None) -> SearchProblem:
    """The objective vector (and constraints) an optimiser sees for this problem (objectives: the run's
    ObjectiveSet; None: the problem file's)."""
    return SearchProblem(space, eps_key=problem.eps_objective, constraints=dict(problem.constraints),
                         objectives=problem.objective_set() if objectives is None else objectives)


def _with_fidelity(settings: SearchSettings, problem: Problem, evaluator: Evaluator) -> SearchSettings:
    """The settings with their rung ladder: --fidelity, else the problem file's top-level `fidelity`; checked
    against the planned rounds and the evaluator (FedevoError, one line, before anything is written)."""
    key = arg("fidelity")
    if settings.fidelity is None and getattr(problem, "fidelity", None) is not None:
        key = f"problem {problem.name!r}: fidelity"
        settings = replace(settings, fidelity=parse_ladder(problem.fidelity, key))
    if settings.multi_fidelity:
        check_continues(evaluator, settings.fidelity, "" if key == arg("fidelity") else key)
        check_ladder(problem, settings.fidelity, settings.rounds, key)
    return settings


# ============================================================================================ API
def search(settings: SearchSettings, out: Optional[Path] = None, runtime: Runtime = Runtime(), *,
           evaluator: Optional[Evaluator] = None, callbacks: Iterable[SearchCallback] = ()) -> Summary:
    """Start a new search in `out` (must not hold another run) and run it to the end."""
    if evaluator is not None and settings.evaluator == DEFAULT_EVALUATOR:
        settings = replace(settings, evaluator=evaluator_spec(evaluator))
    run = SearchRun.create(settings, out, runtime)
    return run.run(runtime, evaluator=evaluator, callbacks=callbacks)


def resume(run_dir: Path, runtime: Runtime = Runtime(), *, evaluator: Optional[Evaluator] = None,
           callbacks: Iterable[SearchCallback] = ()) -> Summary:
    """Continue the search in `run_dir` from its newest checkpoint, reusing every logged evaluation."""
    run = SearchRun.open(run_dir)
    return run.run(runtime, evaluator=evaluator, callbacks=callbacks)
