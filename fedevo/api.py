"""fedevo from Python: the functions the command line calls (docs/api.md).

    import fedevo
    problem = fedevo.Problem.from_file("digits_mlp")          # a bundled name, a .toml path, or Problem.from_dict
    result = fedevo.evaluate(problem, {"lr": 0.1}, seed=0)     # one configuration: error, comm, ε
    run = fedevo.search(problem, pop=12, gen=4, workers=2, out="runs/demo")
    run.front                                                  # the Pareto set as records (run.front_df(): pandas)
    fedevo.retrain(run, "knee", rounds=150)

Every function validates its input first (a FedevoError with one line naming the problem, nothing written) and
takes a seed: the same seed gives the same numbers. Runs on disk are the same as the command line's, so
`fedevo front`, `fedevo plot` and `fedevo resume` work on a run made from Python and `fedevo.open_run` on one
made by the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Union

from .argcheck import checked
from .errors import FedevoError, arg
from .problem import Problem, load_problem
from .result import EvaluationResult

if TYPE_CHECKING:
    from .searching.record import EvaluationRecord

ProblemLike = Union[Problem, str, Path, Mapping[str, Any]]
RunLike = Union["Run", str, Path]


# ============================================================================================ problems
def _as_problem(source: ProblemLike, *, name: Optional[str] = None) -> Problem:
    """A Problem from a bundled name ("digits_mlp"), a .toml path, a dict shaped like a problem file, or itself."""
    if isinstance(source, Problem):
        _check_code_current(source)
        return source
    if isinstance(source, Mapping):
        return Problem.from_dict(source, name=name)
    if isinstance(source, (str, Path)):
        return load_problem(str(source))
    raise FedevoError(f"a problem is a bundled name, a .toml path, a dict or a fedevo.Problem, got "
                      f"{type(source).__name__}")


def _check_code_current(prob: Problem) -> None:
    """FedevoError where a `python:` file of a Problem made earlier (its model, evaluator or objective) changed since
    this process imported it (the problem would run the file's old text), or its ArraySource's arrays changed in
    place (it would train on the old data or the new, as the cache has it): parsing a problem checks the same."""
    from .plugins import check_current

    check_current(prob.model_ref, kind="model")
    check_current(prob.evaluator, kind="evaluator")
    for o in prob.objective_defs:
        check_current(getattr(o.read, "spec", None), kind=f"[objective.{o.name}] read")
    check_unchanged = getattr(getattr(prob.data_source, "spec", None), "check_unchanged", None)
    if check_unchanged is not None:  # an ArraySource whose arrays changed in place since
        check_unchanged()


def _text(path: Optional[Union[str, Path]]) -> Optional[str]:
    """A directory argument as the text the configs record (a Path is welcome)."""
    return None if path is None else str(path)


@checked
def problems() -> list[str]:
    """Names of the bundled problems."""
    from .problem import list_problems

    return list_problems()


# ============================================================================================ one evaluation
@checked
def evaluate(problem: ProblemLike, params: Optional[Mapping[str, Any]] = None, *, seed: int = 0,
             rounds: Optional[int] = None, data_dir: Optional[Union[str, Path]] = None, download: bool = False,
             eval_every: int = 0, progress: Optional[Callable[[int], None]] = None, until: Optional[int] = None,
             resume_from: Optional[bytes] = None, eval_timeout: Optional[float] = None) -> EvaluationResult:
    """Train one configuration (gene defaults overridden by `params`) and return its objectives.

    Checked before any training (FedevoError): the parameters, the seed, the rounds, the memory the run needs
    and the device. progress(t) is called with 0 once these checks passed (training starts), then after every
    round t (a problem's own evaluator reports no rounds; with a time limit, the training runs in another process
    and reports none either).

    User code (a problem's own evaluator, a user model) runs contained: what it prints goes to stderr, and an
    exception, sys.exit or a result out of range raises FedevoError with one line. eval_timeout: seconds the
    evaluation may take (None: the problem file's `eval_timeout`, else no limit); past it, FedevoError.

    until / resume_from (fedevo's simulator only): train the first `until` of the planned rounds and return a
    result whose `state` continues that training exactly (`evaluate(..., resume_from=result.state)`); see
    fedevo.evaluation.evaluate and docs/privacy.md "Continuing a training"."""
    from .evaluation import evaluate as _evaluate
    from .guards import check_eval_timeout, check_evaluation_memory, check_rounds, check_seed
    from .hardware import device

    prob = _as_problem(problem)
    data_dir = _text(data_dir)
    check_seed(seed)
    check_rounds(rounds)
    timeout = check_eval_timeout(eval_timeout) or prob.eval_timeout
    if not prob.simulated:  # the problem file's own evaluator (its genes checked here, its code run there)
        from .searching.evaluator import ProblemEvaluator

        if until is not None or resume_from is not None:
            raise FedevoError(f"problem {prob.name!r} has its own evaluator, which cannot stop and continue a "
                              f"training (until / resume_from are for fedevo's simulator)")
        prob.resolve(params)
        if progress is not None:
            progress(0)
        return _contained(ProblemEvaluator(prob.evaluator), prob, params, seed,
                          {"rounds": rounds, "data_dir": data_dir}, timeout)
    cfg = prob.sim_config(params, rounds=rounds, data_dir=data_dir, download=download)
    check_evaluation_memory(cfg)
    device(cfg.device)  # device = 'cuda' without a GPU: one line, before any data is read
    if progress is not None:
        progress(0)
    kwargs = dict(rounds=rounds, data_dir=data_dir, download=download, eval_every=eval_every, until=until,
                  resume_from=resume_from)
    if timeout is not None or prob.user_model:  # the user's code trains: contained
        from .searching.evaluator import SIMULATOR

        return _contained(SIMULATOR, prob, params, seed, kwargs if timeout else {**kwargs, "progress": progress},
                          timeout)
    return _evaluate(prob, params, seed=seed, progress=progress, **kwargs)


def _contained(evaluator, prob: Problem, params, seed: int, kwargs: Mapping[str, Any],
               timeout: Optional[float]) -> EvaluationResult:
    """One evaluation run as the search runs it (fedevo.searching.containment): its output to stderr (what it writes
    below Python too: fd 1 points there while it runs in this process), its failure a FedevoError with one line (a
    diverged training is a result)."""
    import sys

    from .searching.containment import stdout_to_stderr, watch_interrupts
    from .searching.runner import run_one

    with watch_interrupts(), stdout_to_stderr():
        kind, value, out = run_one(evaluator, prob, dict(params or {}), seed, kwargs, timeout)
    if out:
        sys.stderr.write(out)
    if kind == "abort":
        raise FedevoError(value)
    if value.status == "failed":
        first = (value.message.strip().splitlines() or ["no message"])[0].removeprefix("FedevoError: ")
        raise FedevoError(f"problem {prob.name!r}: the evaluation failed: {first}")
    return value


# ============================================================================================ runs
@dataclass(frozen=True)
class Run:
    """A search run directory (what `fedevo search` writes), read on demand: every access reads the directory
    as it is now, so a run still being searched shows what has finished so far."""

    path: Path
    summary: Any = None  # the search's Summary when this object came from `search`/`resume`

    @property
    def data(self):
        """The run as read now (fedevo's RunData: problem, settings, rows, front): from the run directory alone (its
        data's facts from run.json; the user's files are read, and its code run, only if its problem trains)."""
        from .searching.rundata import load_run

        return load_run(self.path, reading=True)

    @property
    def problem(self) -> Problem:
        return self.data.problem

    @property
    def evaluations(self) -> list[EvaluationRecord]:
        """Every evaluation, in id order (a multi-fidelity search's: a record per rung reached): frozen
        :class:`~fedevo.EvaluationRecord` objects — ``.id``, ``.generation``, ``.seed``, ``.params``, ``.result``,
        ``.status`` — that also read as mappings of evaluations.csv's columns (``r["error"]``, ``r["lr"]``,
        ``r[objective name]``; ``dict(r)`` for a plain dict)."""
        return list(self.data.rows)

    @property
    def front(self) -> list[EvaluationRecord]:
        """The Pareto set (status ok, within the problem's constraints), in id order: records as `evaluations`."""
        return list(self.data.front)

    def evaluations_df(self):
        """`evaluations` as a pandas DataFrame (needs pandas)."""
        return _frame(self.evaluations)

    def front_df(self):
        """`front` as a pandas DataFrame (needs pandas)."""
        return _frame(self.front)

    @checked
    def pick(self, spec: str) -> list[dict[str, Any]]:
        """The solutions a pick spec selects ("knee", "lowest-error:2", "12", "front,eps<=8", ...; docs/plots.md),
        each record with a `picked_by` field."""
        return [{**dict(p.row), "picked_by": p.label} for p in self.data.pick(spec)]

    def hypervolume(self) -> list[dict[str, Any]]:
        """The hypervolume of the front after each generation, normalised by this run's own first generation(s) (its
        hypervolume.csv): not comparable with another run's; `fedevo.hypervolume([run, other])` is."""
        return self.data.hypervolume()

    @property
    def objectives(self):
        """The run's objectives in order (fedevo.objectives.ObjectiveSet: `.names`, each one's label, unit,
        direction, worst value); every record holds each one's raw value under its name."""
        return self.data.objectives

    def __fspath__(self) -> str:
        return str(self.path)


def _frame(records: Sequence[Mapping[str, Any]]):
    try:
        import pandas as pd
    except ImportError:
        raise FedevoError("DataFrames need pandas (`pip install pandas`); the records are in .evaluations / "
                          ".front") from None
    return pd.DataFrame.from_records([dict(r) for r in records])


def hypervolume(runs: Sequence[RunLike], at: Optional[Sequence[int]] = None) -> list[dict[str, Any]]:
    """The hypervolume of several runs under ONE normalisation, so that their numbers compare (compare.html's).

    Each run's front (its ok, feasible, non-dominated full-fidelity evaluations) after each generation (`at` None)
    or after its first n evaluations for each n in `at` (e.g. ``at=[48, 96, 192]``; a run with fewer: all of
    them), in the search space the runs share (their objectives as the optimiser sees them: log10 ε, a maximised
    objective negated), normalised by the minimum and range of the ok evaluations of all the runs together whose
    objectives are all finite (an objective none of them measured, ε = ∞ in every one, by its own best and worst
    values); reference point 1.1 in every objective (pymoo's HV). The runs must have the same
    objectives. Returns a record per run and point: run (its path), generation (None with `at`), evaluations,
    front_size, hypervolume, and lo_NAME / scale_NAME (the shared normalisation)."""
    from .searching.front_math import common_hypervolume

    if isinstance(runs, (str, Path, Run)) or not isinstance(runs, Sequence) or not runs:
        raise FedevoError(f"hypervolume: runs must be a non-empty list of run directories, got {runs!r}")
    if at is not None and (isinstance(at, (str, bytes)) or not isinstance(at, Sequence) or not at
                           or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in at)):
        raise FedevoError(f"hypervolume: at must be a list of evaluation counts >= 1, got {at!r}")
    datas = [open_run(r).data for r in runs]
    objs = datas[0].objectives
    for d in datas[1:]:
        if d.objectives.names != objs.names:
            raise FedevoError(f"hypervolume: {datas[0].run_dir} has objectives {', '.join(objs.names)} and "
                              f"{d.run_dir} {', '.join(d.objectives.names)}: runs compare only on the same objectives")
    tables, lo, scale = common_hypervolume([(d.rows, d.constraints) for d in datas], objs, at)
    norm = {**{f"lo_{k}": float(lo[j]) for j, k in enumerate(objs.names)},
            **{f"scale_{k}": float(scale[j]) for j, k in enumerate(objs.names)}}
    return [{"run": str(d.run_dir), **rec, **norm} for d, recs in zip(datas, tables) for rec in recs]


def _run_path(run: RunLike) -> Path:
    """The directory of a Run or a path (not opened: the caller's own code reads run.json)."""
    return Path(run.path if isinstance(run, Run) else run)


@checked
def open_run(path: RunLike) -> Run:
    """A run directory made by `fedevo search` (or `fedevo.search`); FedevoError if it is not one."""
    if isinstance(path, Run):
        return path
    from .searching.rundata import read_run_json

    read_run_json(Path(path), reading=True)  # validates run.json (none of the user's files needed to read a run)
    return Run(Path(path))


def _runtime(workers, ray_address, cpus_per_task, gpus_per_task, eval_timeout=None, batch_generation=None,
             batch_size_per_gpu=None):
    from .guards import check_eval_timeout
    from .searching.settings import Runtime
    from .searching.workers import parse_workers

    return Runtime(workers=parse_workers(workers), ray_address=ray_address, cpus_per_task=cpus_per_task,
                   gpus_per_task=gpus_per_task, eval_timeout=check_eval_timeout(eval_timeout),
                   batch_generation=batch_generation, batch_size_per_gpu=batch_size_per_gpu)


def _check_callbacks(callbacks: Sequence, where: str) -> None:
    from .searching.callbacks import SearchCallback

    for i, cb in enumerate(callbacks):
        if not isinstance(cb, SearchCallback):
            raise FedevoError(f"{where}(): callbacks[{i}] must be a fedevo.searching.SearchCallback, got "
                              f"{type(cb).__name__}")


@checked
def search(problem: ProblemLike = "digits_mlp", *, pop: Optional[int] = None, gen: Optional[int] = None,
           workers: Union[int, str, None] = "auto",
           seed: int = 0, out: Optional[Union[str, Path]] = None, rounds: Optional[int] = None,
           data_dir: Optional[Union[str, Path]] = None, partitions: Optional[int] = None,
           evaluator: Optional[Union[str, Callable]] = None, ray_address: Optional[str] = None,
           cpus_per_task: float = 1.0, gpus_per_task: float = 0.0, callbacks: Sequence = (),
           page: bool = True, fidelity: Union[None, float, str, Sequence[float]] = None,
           init_from: Optional[RunLike] = None, eval_timeout: Optional[float] = None,
           optimizer: Union[str, type] = "nsga3",
           budget: Optional[int] = None, time_budget: Optional[float] = None, patience: Optional[int] = None,
           progress: Optional[bool] = None, importance: bool = False, batch_generation: Optional[bool] = None,
           batch_size_per_gpu: Optional[int] = None, download: bool = False) -> Run:
    """Search the problem's genes for the Pareto front of its objectives; returns the finished Run.

    optimizer: what proposes the candidates, `pop` at a time ("nsga3": NSGA-III, the default; "random": uniform
    sampling; "gp": Optuna's Gaussian-process sampler, for expensive evaluations; "tpe": Optuna's multivariate TPE;
    fedevo.searching.optimizers; or your own Optimizer subclass: the class, "python:FILE.py:Class" or
    "module:Class", docs/search.md "Your own optimiser"). pop: the batch size (None: 12 for nsga3 and random;
    for gp and tpe one candidate per parallel evaluation — 1 in-process, at least 3 under a rung ladder — and then
    48 evaluations unless `gen` or a budget says otherwise; fedevo.searching.optimizers.registry.default_pop). The
    search ends at the first budget reached: `gen` batches (without it: 4 when no other budget is given, else
    no limit), `budget` evaluations, `time_budget`
    seconds of search (across resumes), `patience` batches without hypervolume growth (stop.json says which).
    out: the run directory (must not exist or be empty; default runs/<problem>-<timestamp>); workers: "auto"
    (default: in-process on a machine of 2 cores or fewer, or for batches of one; else a local Ray, one worker per
    core), N: a local Ray with N workers, 0: in-process; ray_address: an existing Ray cluster; progress: a live
    progress display on stderr (None: when stderr is a terminal); importance: also write importance.html at the
    end (a random forest per objective: seconds; `fedevo.plot(run)` writes it later);
    evaluator: 'module:function' or a function `f(problem, params, *, seed, rounds, data_dir)` replacing
    fedevo's simulator for this search (a problem file's own `evaluator` is used without it); callbacks:
    `fedevo.searching.SearchCallback` objects told of every evaluation and generation; page: keep RUN/front.html
    current after every generation and write it at the end; fidelity: a multi-fidelity search's low fidelity
    (0.33: a third of the rounds) or rung ladder ((1/9, 1/3, 1) or "1/9,1/3,1"; None: the problem file's
    `fidelity`, else every evaluation trains all rounds; docs/search.md "Multi-fidelity search"); init_from: an earlier
    run on the same problem whose front, evaluated afresh, comes first (nsga3: the start of its initial population;
    gp, tpe, random: up to 10 first candidates; fedevo.searching.warmstart); eval_timeout:
    seconds one evaluation may take before it is stopped and marked failed (None: the problem file's
    `eval_timeout`, else no limit); batch_generation: evaluate each generation a batch at a time as one program
    on one device (True; False: one evaluation a task; None: where the evaluations train on a GPU;
    fedevo.searching.batched), in batches of at most batch_size_per_gpu (None: one batch per GPU, or slot).
    download: fetch the problem's dataset (mnist, fashion, cifar10) into data_dir with torchvision first, once,
    before the run directory exists (without it, missing data is refused then too).
    Raises FedevoError if every evaluation failed (the run directory keeps them all)."""
    from .data.catalog import check_data_dir
    from .searching.evaluator import DEFAULT_EVALUATOR, evaluator_spec, load_evaluator
    from .searching.optimizers.registry import get as optimizer_class, spec_of
    from .searching.run import SearchRun
    from .searching.settings import SearchSettings

    prob = _as_problem(problem)
    data_dir = _text(data_dir)
    _check_callbacks(callbacks, "search")
    optimizer = spec_of(optimizer)  # a name, or your own class as run.json records it
    optimizer_class(optimizer)  # your own: loaded (one line if it cannot be) before the run directory exists
    from .searching.fidelity import ETA, n_promoted, parse_ladder

    pop_given = pop is not None
    if pop is None:
        ladder = parse_ladder(fidelity) if fidelity is not None else parse_ladder(getattr(prob, "fidelity", None),
                                                                               f"problem {prob.name!r}: fidelity")
        pop, gen = _default_pop(optimizer, workers, ray_address, gen, budget, time_budget, patience,
                                fidelity=ladder is not None and len(ladder) > 1)
    check_data_dir(data_dir, download)  # a mistyped --data-dir: one line before the run directory exists
    fn = None
    if callable(evaluator):
        from .plugins import check_evaluator_signature

        fn, spec = evaluator, evaluator_spec(evaluator)
        check_evaluator_signature(fn)  # one that cannot take fedevo's call: one line, before the run directory
    else:
        from .plugins import resolve_spec

        # a python: file is recorded with its absolute path, so that resume finds it from anywhere
        spec = resolve_spec(evaluator, None, kind="evaluator") if evaluator else DEFAULT_EVALUATOR
        load_evaluator(spec)
    _locate_data(prob, data_dir, spec, download, cluster=ray_address is not None)
    source = str(problem) if isinstance(problem, (str, Path)) else prob.path or prob.name  # as run.json records it
    init = init_path = None
    if init_from is not None:
        from .searching.warmstart import front_params

        earlier = _run_path(init_from).resolve()
        init, _ = front_params(earlier, prob, optimizer_class(optimizer).warm_start_size(pop))
        init_path = str(earlier)
    from .searching.budgets import default_gen, gen_derived

    settings = SearchSettings(problem=source, pop=pop, gen=default_gen(gen, pop, budget, time_budget, patience),
                              gen_derived=gen_derived(gen, budget, time_budget, patience),
                              seed=seed, partitions=partitions, rounds=rounds, data_dir=data_dir, evaluator=spec,
                              fidelity=parse_ladder(fidelity), init=init, init_from=init_path, optimizer=optimizer,
                              budget=budget, time_budget=time_budget, patience=patience)
    runtime = _runtime(workers, ray_address, cpus_per_task, gpus_per_task, eval_timeout, batch_generation,
                       batch_size_per_gpu)
    run = SearchRun.create(settings, Path(out) if out is not None else None, runtime, problem=prob)
    # ⌈pop/3⌉ = pop (a batch of one): every rung promotes its individual (a batch of two promotes one: it prunes)
    if run.settings.multi_fidelity and pop_given and n_promoted(pop) >= pop:
        import sys

        print(f"fedevo: warning: {arg('fidelity')} with batches of {pop} ({arg('pop', pop)}) promotes every "
              f"individual: its rungs cost time and prune nothing; give {arg('pop')} {ETA} or more", file=sys.stderr)
    _warn_patience_in_startup(optimizer, pop, patience)
    return _run(run, runtime, fn, callbacks, page, fresh=run.made, progress=progress, importance=importance)


def _warn_patience_in_startup(optimizer: str, pop: int, patience: Optional[int]) -> None:
    """gp and tpe draw their first STARTUP evaluations at random (Optuna's start-up): a --patience of no more batches
    than those (`--optimizer gp --patience 3`: batches of one) can end the search before the model has proposed
    anything, as a random search; docs/search.md says to give a K above them, and nothing said so."""
    from .searching.optimizers.optuna_samplers import STARTUP

    if optimizer in ("gp", "tpe") and patience is not None and patience * pop <= STARTUP:
        import sys

        print(f"fedevo: warning: {arg('patience', patience)} with {arg('optimizer', optimizer)} in batches of {pop}: "
              f"its first {STARTUP} evaluations are random (Optuna's start-up), so the search may end before its "
              f"model proposes; give {arg('patience', STARTUP // pop + 1)} or more", file=sys.stderr)


def _locate_data(prob, data_dir: Optional[str], evaluator_spec: str, download: bool = False,
                 cluster: bool = False) -> None:
    """The simulator's bundled dataset found (fetched first with `download`, once, in this process) before a
    search starts: missing data is one line and no run directory, not a search stopped at its first evaluation.
    Not for a user's evaluator or the user's own data (their loaders run in the evaluations), nor on a Ray
    cluster without `download` (its nodes read the data, which this machine may not hold)."""
    from .searching.evaluator import DEFAULT_EVALUATOR

    if cluster and not download:
        return
    if evaluator_spec == DEFAULT_EVALUATOR and prob.simulated and prob.data_source is None:
        from .data.datasets import locate

        locate(prob.dataset, data_dir, download)
    elif download:
        raise FedevoError(f"{arg('download', True)} fetches a bundled dataset (mnist, fashion, cifar10) for "
                          "fedevo's simulator; this search's data is read by the user's own code")


def _default_pop(optimizer, workers, ray_address, gen, budget, time_budget, patience, *,
                 fidelity: bool = False) -> tuple[int, Optional[int]]:
    """(pop, gen) when `pop` is not given: the optimiser's default batch (registry.default_pop, said on stderr
    where it depends on the workers) — under a rung ladder (`fidelity`) at least ETA, so that a rung has
    individuals to prune — and for a model-based optimiser's batches enough of them for the default 48
    evaluations when nothing else bounds the search."""
    import sys

    from .searching.optimizers.registry import DEFAULT_EVALUATIONS, check_name, default_pop, get
    from .searching.runner import cores

    from .searching.fidelity import ETA

    check_name(optimizer)
    pop, why = default_pop(optimizer, workers=workers, cores=cores(), address=ray_address)
    if fidelity and pop < ETA:
        pop, why = ETA, (f"{arg('optimizer', optimizer)}: batches of {ETA} under {arg('fidelity')} (a rung promotes "
                         f"a third of its batch: batches of one would prune nothing; {arg('pop', 'N')} to change)")
    if why:
        print(f"fedevo: {why}", file=sys.stderr)
    if get(optimizer).default_pop is None and gen is None and budget is None and time_budget is None \
            and patience is None:
        gen = -(-DEFAULT_EVALUATIONS // pop)
    return pop, gen


@checked
def resume(run: RunLike, *, workers: Union[int, str, None] = "auto", data_dir: Optional[Union[str, Path]] = None,
           ray_address: Optional[str] = None, cpus_per_task: float = 1.0, gpus_per_task: float = 0.0,
           evaluator: Optional[Callable] = None, callbacks: Sequence = (), page: bool = True,
           eval_timeout: Optional[float] = None, progress: Optional[bool] = None, importance: bool = False,
           batch_generation: Optional[bool] = None, batch_size_per_gpu: Optional[int] = None,
           gen: Optional[int] = None, budget: Optional[int] = None, time_budget: Optional[float] = None,
           patience: Optional[int] = None) -> Run:
    """Continue a stopped (or killed) search from its newest checkpoint, exactly: finished evaluations are
    reused, and the budgets in force still hold (run.json's, or those raised since). gen, budget, time_budget,
    patience: new budgets for the rest of the search (totals since it began; each replaces the run's, and gen,
    unless given, no longer ends it first; kept in RUN/budgets.json), so that a finished search goes on from
    where its budget ended it, as if it had been started with them. FedevoError if the run is finished and no
    budget is raised, or a budget in force is reached already (nothing is changed then)."""
    from .searching.run import SearchRun

    _check_callbacks(callbacks, "resume")
    runtime = _runtime(workers, ray_address, cpus_per_task, gpus_per_task, eval_timeout, batch_generation,
                       batch_size_per_gpu)  # bad options first, as search's
    path = _run_path(run)
    sr = SearchRun.open(path)
    sr.check_log()  # a damaged log is named, never "nothing to resume" or a silently different front
    # (your own optimiser is loaded once the search holds the run and has checked its files: a changed one is
    # refused as changed, before its new code runs)
    new_budgets = {"gen": gen, "budget": budget, "time_budget": time_budget, "patience": patience}
    if all(v is None for v in new_budgets.values()) and sr.finished():  # refuse before writing anything
        from .searching.budgets import go_on, read_stop

        reason, why = _ended(sr)
        way = go_on(read_stop(sr.run_dir) or {"reason": reason}, path)
        way = f"; to search on, raise the budget that ended it: {way}" if way else ""
        raise FedevoError(f"{path} holds a finished search ({why}); nothing to resume "
                          f"and nothing was changed (see `fedevo front {path}`{way})")
    if data_dir is not None:
        from .data.catalog import check_data_dir

        check_data_dir(_text(data_dir))
        sr.use_data_dir(_text(data_dir))
    if evaluator is None:  # the data still there: one line, and the run as it was
        _locate_data(sr.problem, sr.settings.data_dir, sr.settings.evaluator, cluster=ray_address is not None)
    if ray_address:  # as search checks it: before anything of the run is opened (an empty ray.log was left)
        from .searching.runner import _check_reachable

        _check_reachable(ray_address, 5.0)
    import sys

    if any(v is not None for v in new_budgets.values()):  # checked now; in force once the search holds the run
        change = sr.raise_budgets(**new_budgets)
        sr.say_when_held(lambda: print(f"fedevo: budgets raised: {change} (kept in {sr.run_dir / 'budgets.json'})",
                                       file=sys.stderr))
    contained = runtime.eval_timeout is not None or getattr(sr.problem, "eval_timeout", None) is not None
    sr.say_when_held(lambda: _say_died_in(sr.run_dir, contained, budget=sr.settings.budget))
    changed = sr.problem_file_changed()
    if changed:  # it is not what this resume searches: say so, once, before the search takes over the terminal
        sr.say_when_held(lambda: print(f"fedevo: note: {changed} changed since this search began; the search goes on "
                                       f"with the problem as {sr.run_dir / 'run.json'} recorded it (start a new "
                                       "search to search the changed file)", file=sys.stderr))
    return _run(sr, runtime, evaluator, callbacks, page, progress=progress, importance=importance)


def _say_died_in(run_dir: Path, contained: bool, budget: Optional[int] = None) -> None:
    """The note of a resume whose run's last process died inside an in-process evaluation (searching.inflight);
    `budget`: the --budget in force, beyond which that evaluation is not run again."""
    import re
    import sys

    from .searching.inflight import left_behind

    label = left_behind(run_dir)
    if label is None:
        return
    died = re.match(r"evaluation (\d+) ", label)
    if budget is not None and died and int(died.group(1)) >= budget:  # lowered to the rows logged before it
        print(f"fedevo: note: this search's last process ended during {label}, evaluated in-process (a crash in "
              f"native code, or the process was killed); it lies beyond {arg('budget', budget)} and is not "
              "evaluated again", file=sys.stderr)
        return
    how = ("it is evaluated again now, in a child process (eval_timeout)" if contained else
           "it is evaluated again now; with --eval-timeout S (eval_timeout=) each evaluation runs in a child "
           "process, whose crash ends only that evaluation")
    print(f"fedevo: note: this search's last process ended during {label}, evaluated in-process (a crash in native "
          f"code, or the process was killed: see that process's stderr and {run_dir / 'user.log'}); {how}",
          file=sys.stderr)


def _ended(sr) -> tuple[str, str]:
    """What ended a finished search: (stop.json's reason, in words), else ("gen", its generations)."""
    from .searching.budgets import read_stop, said

    rec = read_stop(sr.run_dir) or {}
    if "reason" in rec and "why" in rec:
        return rec["reason"], said(rec["reason"], rec["why"])
    return "gen", f"{sr.settings.gen} generations"


def _run(sr, runtime, evaluator, callbacks, page: bool, fresh: Optional[list] = None,
         progress: Optional[bool] = None, importance: bool = False) -> Run:
    """Run a SearchRun to its end with the callbacks (and the live page). A new run directory that no evaluation
    reached, when the search cannot start (Ray refused, ...), is taken back: `fresh` lists the folders it
    created, removed again; [] an empty folder that existed, emptied again and kept; never one that another
    process holds."""
    from .errors import RunInUseError

    try:
        summary = sr.run(runtime, evaluator=evaluator, callbacks=_callbacks(callbacks, progress, page))
    except RunInUseError:
        raise
    except KeyboardInterrupt as e:  # the run stays resumable; tell the caller where it is, and on which cluster
        e.run_dir, e.resume_options = sr.run_dir, runtime.resume_options()
        raise
    except FedevoError as e:
        if fresh is not None and sr.is_empty():
            from .errors import SearchStoppedError
            from .searching.run import take_back

            take_back(sr.run_dir, fresh)
            if isinstance(e, SearchStoppedError):  # nothing left to resume: say so instead
                gone = "was removed" if fresh else "was emptied again"
                raise FedevoError(f"{e.cause} (the search stopped before any evaluation; its run directory "
                                  f"{sr.run_dir} {gone}: nothing was kept)") from None
        raise
    finally:  # stopped before sr.run took over the lock `create` took (Ctrl-C among the callbacks): let it go
        sr.release()
    if page:
        try:
            _final_page(sr.run_dir, importance=importance)
        except KeyboardInterrupt as e:  # the search is over: say where it is, and that nothing is left to resume
            e.run_dir, e.finished = sr.run_dir, True
            raise
    run = Run(summary.run_dir, summary)
    if summary.evaluations and summary.failed + summary.diverged == summary.evaluations:  # no result at all
        from .errors import SearchFailedError

        log = summary.run_dir / "evaluations.csv"
        if summary.failed == summary.evaluations:
            raise SearchFailedError(f"every evaluation failed ({summary.failed}); the first: "
                                    f"{summary.first_failure or 'no message'} (log: {log})", run)
        # as when every evaluation failed: a model whose outputs are never finite, say (its front of 0 looked like
        # a result, exit 0)
        raise SearchFailedError(f"no evaluation gave a result: {summary.diverged} diverged (their training went "
                                "non-finite: check that the model's outputs are finite, or lower the learning rate's "
                                f"range){f' and {summary.failed} failed' if summary.failed else ''} (log: {log})", run)
    return run


def _callbacks(callbacks: Sequence, progress: Optional[bool], page: bool) -> list:
    """The caller's callbacks, then the progress display (None: when stderr is a terminal) and the live page."""
    import sys

    cbs = list(callbacks)
    if progress is None:
        progress = sys.stderr.isatty()
    if progress:
        from .viz.progress import RichReporter

        cbs.append(RichReporter())
    if page:
        from .searching.callbacks import Throttled
        from .viz.live import LivePage

        cbs.append(Throttled(LivePage(), seconds=PAGE_SECONDS, rest=PAGE_REST))
    return cbs


PAGE_SECONDS = 10.0  # the live front.html is rewritten at most this often while a search runs (and at its end)
PAGE_REST = 4.0  # ... and, after a write that took t seconds, not before PAGE_REST · t more (≤ 1/5 of the time)


def _final_page(run_dir: Path, importance: bool = True) -> Optional[Path]:
    """front.html (and, with `importance`, importance.html) beside the CSVs; the search's results stand without
    them (a warning, never an error)."""
    from .viz.front import write_front_html
    from .viz.importance import write_importance_html

    path = _page_or_warning(write_front_html, run_dir, "front.html")
    if importance:
        _page_or_warning(write_importance_html, run_dir, "importance.html")
    return path


def _page_or_warning(write: Callable[[Path], Path], run_dir: Path, name: str) -> Optional[Path]:
    import sys

    try:
        return write(run_dir)
    except Exception as e:  # noqa: BLE001 - a plotting problem must not turn a finished search into a failure
        print(f"fedevo: warning: could not write {name} ({type(e).__name__}: {e}); try `fedevo plot {run_dir}`",
              file=sys.stderr)
        return None


@checked
def pick(run: RunLike, spec: str) -> list[dict[str, Any]]:
    """The evaluations of `run` that a pick spec selects (see `Run.pick`)."""
    return open_run(run).pick(spec)


# ============================================================================================ after a search
@checked
def plot(run: Union[RunLike, Sequence[RunLike]], *, out: Optional[Union[str, Path]] = None,
         plotly_js: str = "shared", watch: bool = False, interval: Optional[float] = None, importance: bool = True,
         on_write: Optional[Callable[[Path, Any], None]] = None) -> Path:
    """Write the run's interactive front page (RUN/front.html, or `out`) and, with `importance`, its importance
    page beside it (RUN/importance.html; NAME-importance.html beside an `out` NAME.html: which genes drive each
    objective, slices, hypervolume); returns the front page's path. plotly_js: "shared" (plotly.js written once
    beside the pages, which load it from there) or "embed" (one self-contained offline file per page). watch: keep rewriting the front page whenever the
    run changes (every `interval` s) until the run is complete (the importance page is written once, at the
    end); on_write(path, data) after each write.

    Several runs (a list of two or more): write the comparison page `out` (required) instead — their Pareto
    fronts and hypervolume histories, with one normalisation and reference point shared by all runs; they must
    have searched the same problem. `out` never replaces an existing file that is not a fedevo page."""
    from .viz.front import write_front_html

    paths, path = _plot_checks(run, out, plotly_js, interval, watch, importance)
    interval = WATCH_INTERVAL if interval is None else interval
    mode = plotly_js
    if len(paths) > 1:
        from .viz.compare import write_compare_html

        return write_compare_html(paths, path, plotly=mode)
    if watch:
        from .viz.live import watch as do_watch

        front = do_watch(paths[0], out=out, plotly=mode, interval=interval, on_write=on_write)
        if not front.exists():  # no evaluation was ever seen: nothing to weigh either
            return front
    else:
        front = write_front_html(paths[0], out, plotly=mode)
    if importance:
        from .viz.importance import importance_path, write_importance_html

        write_importance_html(paths[0], importance_path(front), plotly=mode, front_name=front.name)
    return front


WATCH_INTERVAL = 2.0  # seconds between a watched run's checks (plot(watch=True, interval=None))


def _plot_checks(run, out, plotly_js: str, interval: Optional[float], watch: bool,
                 importance: bool = True) -> tuple[list[Path], Path]:
    """`plot`'s input checked before any work (the command line calls it before saying it watches): (the run
    directories, the page to write)."""
    import math

    from .guards import check_writable_file

    if plotly_js not in ("embed", "shared"):
        raise FedevoError(f"{arg('plotly_js')} must be embed or shared, got {plotly_js!r}")
    if interval is not None and not (math.isfinite(interval) and interval > 0):
        raise FedevoError(f"{arg('interval')} must be a positive finite number of seconds, got {interval:g}")
    if interval is not None and not watch:
        raise FedevoError(f"{arg('interval')} is the seconds between {arg('watch', True)}'s checks; without it the "
                          f"page is written once: drop {arg('interval')} or add {arg('watch', True)}")
    runs = list(run) if isinstance(run, (list, tuple)) else [run]
    if not runs:
        raise FedevoError("give a run directory to plot")
    paths = [_run_path(r) for r in runs]
    if len(paths) > 1:
        if watch:
            raise FedevoError(f"{arg('watch', True)} follows one run; {len(paths)} were given")
        if out is None:
            raise FedevoError(f"comparing {len(paths)} runs writes one page: give its name with {arg('out')} "
                              f"(e.g. {arg('out', 'compare.html')})")
        targets = [Path(out)]
    else:
        targets = [Path(out) if out is not None else paths[0] / "front.html"]
        if importance:
            from .viz.importance import importance_path

            targets.append(importance_path(targets[0]))
    for t in targets:
        check_writable_file(t)
        _check_not_foreign(t)
        _check_not_other_run(t, paths)
    return paths, targets[0]


def _check_not_other_run(path: Path, runs: Sequence[Path]) -> None:
    """A page is never written into a run directory other than the ones plotted: it would replace that run's own
    page (RUN/front.html) with another run's front."""
    home = path.absolute().parent
    if (home / "run.json").is_file() and not any(home.resolve() == Path(r).resolve() for r in runs):
        raise FedevoError(f"{arg('out', path)} is in another run directory ({home}); its pages are that run's own "
                          f"(`fedevo plot {home}`). Nothing was written: choose a file outside it")


def _check_not_foreign(path: Path) -> None:
    """An existing file at `path` is replaced only when it is a page fedevo wrote (its <title> starts with
    "fedevo — "); anything else is refused, so that --out never silently destroys another file."""
    MAX = 64 * 1024**2
    try:
        if not path.is_file():
            return
        size = path.stat().st_size
        text = path.read_bytes() if size <= MAX else b""
    except OSError:
        return  # check_writable_file has said what can be said
    if size and "<title>fedevo — ".encode() not in text:
        raise FedevoError(f"{arg('out', path)} exists and is not a page fedevo wrote; nothing was written (remove it "
                          "or choose another name)")


@checked
def retrain(run: RunLike, pick: str = "lowest-error:2,knee", *, rounds: int = 150,
            workers: Union[int, str, None] = "auto",
            seed: Optional[int] = None, data_dir: Optional[Union[str, Path]] = None, out: Optional[Union[str, Path]] = None,
            standard: Optional[Mapping[str, Any]] = None, gpus_per_task: float = 0.0,
            progress: Optional[Callable[[int, int, str], None]] = None, ray_address: Optional[str] = None,
            cpus_per_task: float = 1.0):
    """Retrain the picked solutions and the standard one (dense, no privacy; `standard` overrides its settings,
    e.g. {"participation": 1.0}) for `rounds` rounds; writes RUN/retrain[-N]/ (report.md, report.csv,
    curves.html, results.json) and returns the report. progress(done, total, note) as rounds finish. Each
    finished training is kept (REPORT_DIR/.kept/) until the report is written: the same call continues a retrain
    stopped before (fedevo.retrain_kept). Raises RetrainFailedError (a FedevoError; `.report`, written) where no
    picked solution's retraining gave a result, as `search` raises SearchFailedError where no evaluation did."""
    from .retraining import retrain as _retrain

    report = _retrain(_run_path(run), pick, rounds=rounds, workers=workers,
                      seed=seed, data_dir=_text(data_dir), out=out, standard=standard, gpus_per_task=gpus_per_task,
                      progress=progress, ray_address=ray_address, cpus_per_task=cpus_per_task)
    picked = [s for s in report.solutions if not s.is_standard]
    if picked and all(report.results[s.key].status != "ok" for s in picked):  # a failure never looks like a result
        from .errors import RetrainFailedError

        how = ", ".join(f"{s.key} (id {s.id}) {report.results[s.key].status}" for s in picked)
        raise RetrainFailedError(f"no picked solution's retraining gave a result ({how}); see "
                                 f"{report.out_dir}/report.md", report)
    return report


@checked
def audit(run: Optional[RunLike] = None, pick: Optional[str] = None, *, problem: Optional[ProblemLike] = None,
          params: Optional[Mapping[str, Any]] = None, seed: Optional[int] = None, rounds: Optional[int] = None,
          canaries: Optional[int] = None, confidence: float = 0.95, out: Optional[Union[str, Path]] = None,
          write: bool = True, on_start: Optional[Callable[[int, int, Any], Any]] = None,
          data_dir: Optional[Union[str, Path]] = None) -> list:
    """Audit privacy empirically: train each configuration once with canaries where its trust model's observer
    looks; each AuditResult has the accountant's ε (eps_upper), an estimate and a lower bound at `confidence`,
    and a verdict. Either `run` + `pick` (a run's evaluations, as searched; `rounds`: at that many rounds, as
    `retrain` trains them) or `problem` (+ params, seed, rounds). write: audit.json and audit.html into `out` (new
    or empty; default RUN/audit[-N] or runs/audit-PROBLEM-TIME). data_dir: the dataset root (a run's: where its
    data are now, if they moved). on_start(n, total, target) may return a per-round callback (progress)."""
    from .auditing import report, targets
    from .auditing.run import audit_config, check_canaries
    from .guards import check_evaluation_memory, check_new_or_empty_dir, check_rounds, check_seed, check_writable_dir

    from .data.catalog import check_data_dir

    if seed is not None:
        check_seed(seed)
    check_rounds(rounds)
    data_dir = _text(data_dir)
    check_data_dir(data_dir)
    run_arg, pick_arg, problem_arg = arg("run", cli="RUN_DIR"), arg("pick", "SPEC"), arg("problem", "NAME")
    if run is not None and problem is not None:
        raise FedevoError(f"give either {run_arg} {pick_arg} or {problem_arg}, not both")
    if run is None and problem is None:
        raise FedevoError(f"give {run_arg} {pick_arg} (a run's evaluations) or {problem_arg} (one configuration)")
    if run is not None:
        if pick is None:
            raise FedevoError(f"auditing a run needs {arg('pick')} (e.g. {arg('pick', 'knee')})")
        if params is not None or seed is not None:
            raise FedevoError(f"{arg('params')} and {arg('seed')} go with {arg('problem')}; a run's picks are audited "
                              f"with their genes and each with its evaluation's seed ({arg('rounds', 'R')}: at R "
                              "rounds, as retrained)")
        run_dir = Path(open_run(run).path)
        todo = targets.from_run(run_dir, pick, data_dir, rounds=rounds)
    else:
        if pick:
            raise FedevoError(f"{arg('pick')} needs {arg('run', cli='a RUN_DIR')}")
        run_dir = None
        todo = targets.from_problem(_as_problem(problem), dict(params or {}), seed=seed or 0, rounds=rounds,
                                    data_dir=data_dir)
    for t in todo:  # bad confidence / too few canaries / too large: before any training
        check_canaries(canaries, confidence=confidence, delta=t.cfg.privacy.delta, cfg=t.cfg)
        check_evaluation_memory(t.cfg, t.label)
    if write and out is not None:  # new or empty, as retrain's (it used to go to OUT-2 beside it)
        check_new_or_empty_dir(out)
    elif write:
        check_writable_dir(run_dir if run_dir is not None else Path("runs"),
                           "RUN_DIR" if run_dir is not None else "runs/")
    results = []
    for n, t in enumerate(todo, start=1):
        on_round = on_start(n, len(todo), t) if on_start is not None else None
        results.append(audit_config(t.cfg, seed=t.seed, canaries=canaries, confidence=confidence, label=t.label,
                                    params=t.params, eps_search=t.eps_search, on_round=on_round))
    if write:
        dest = audit_dir(run_dir, out, todo[0].label)
        context = {"run_dir": str(run_dir) if run_dir is not None else None, "pick": pick,
                   "problem": None if run_dir is not None else todo[0].label, "confidence": confidence}
        report.write_json(dest / "audit.json", results, context)
        report.write_html(dest / "audit.html", results,
                          title=f"fedevo audit — {run_dir if run_dir is not None else todo[0].label}",
                          intro=f"{len(results)} configuration(s); lower bounds at {confidence:g} confidence")
        for r in results:
            r.written_to = dest
    return results


def audit_dir(run_dir: Optional[Path], out: Optional[Union[str, Path]], label: str) -> Path:
    """Where an audit's files go: `out` (new or empty), else RUN_DIR/audit[-N], else runs/audit-LABEL-TIME (never
    overwritten)."""
    from datetime import datetime, timezone

    from .auditing.report import next_audit_dir

    if out is not None:  # new or empty (checked before any training)
        Path(out).mkdir(parents=True, exist_ok=True)
        return Path(out)
    if run_dir is not None:
        return next_audit_dir(Path(run_dir))
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    return next_audit_dir(Path("runs"), f"audit-{label}-{stamp}")


__all__ = ["Problem", "Run", "audit", "evaluate", "open_run", "pick", "plot", "problems", "resume",
           "retrain", "search"]
