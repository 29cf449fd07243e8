"""Checks of user input made before any work: seeds, output paths, and sizes bounded by what can be allocated.

Each check raises :class:`~fedevo.errors.FedevoError` (one line on stderr, exit code 2) and creates nothing.
"""

from __future__ import annotations

import errno
import math
import os
import tempfile
from pathlib import Path
from typing import Optional

from .data.catalog import N_TRAIN  # training samples per dataset, for the memory estimate
from .errors import FedevoError, arg

# Every seeded generator fedevo feeds accepts this range: numpy's SeedSequence / default_rng (any int >= 0),
# torch.Generator.manual_seed (< 2**64, fedevo adds small offsets), numpy's legacy RandomState (< 2**32).
SEED_MAX = 2**32 - 1
MAX_ROUNDS = 1_000_000  # rounds per evaluation / retraining (each round trains clients: beyond any experiment)
GIB = 1024**3

# Bytes per pair of individuals held at once by pymoo NSGA-III's survival (non-dominated sorting and niching of
# parents + offspring, 2·pop, against ≤ pop reference directions: O(pop^2)); and per evaluation, held by a search
# for its whole log (its rows, the front's, the checkpoints' digests: about 17 kB, from a peak RSS of 267 MiB at
# 2,000 and 400 MiB at 10,000 evaluations of a six-gene problem, `benchmarks/results-2026-11-27-search-scale.txt`;
# the front itself is computed in memory linear in the evaluations, fedevo.searching.front_math.non_dominated).
POP_PAIR_BYTES = 64
EVAL_BYTES = 64 * 1024
SCHEDULE_BYTES = 64  # per scheduled sample slot of a chunk: positions, weights, rows, labels and their copies
CLIENT_BYTES = 256  # per client: partition indices, participation counts, budget ledger, arrivals...
MODEL_COPIES = 8  # fp32 copies of the dense weights per trained client (weights, grads, masks, update, noise...)
UPDATE_COPIES = 2  # fp32 dense updates per client sampled in a round, held until its aggregate (each chunk's, then
# joined): measured +0.73 GiB at 1,000 and +2.85 GiB at 3,000 clients over 100 (fashion_mlp_dp, participation 1,
# ~199k dense weights: 0.8 MB a copy; tests/cli/test_bad_input.py)


def check_seed(seed: Optional[int]) -> None:
    """A seed in 0..2**32 - 1 (None: none given); the message names it as the caller does (--seed or seed=)."""
    if seed is None:
        return
    if not 0 <= seed <= SEED_MAX:
        raise FedevoError(f"{arg('seed')} must be in 0..{SEED_MAX} (2**32 - 1), got {seed}")


def check_rounds(rounds: Optional[int]) -> None:
    """Rounds in 1..MAX_ROUNDS (None: the problem's); the message names them as the caller does (--rounds or
    rounds=)."""
    if rounds is None:
        return
    if rounds < 1:
        raise FedevoError(f"{arg('rounds')} must be >= 1, got {rounds}")
    if rounds > MAX_ROUNDS:
        raise FedevoError(f"{arg('rounds', rounds)} is above the limit of {MAX_ROUNDS} rounds (each round trains "
                          "clients: such a run would never finish)")


def available_memory() -> int:
    """Bytes of memory this process may still use: MemAvailable of /proc/meminfo, else the physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):  # pragma: no cover - not Linux
        return 16 * GIB


def check_search_sizes(pop: int, gen: int, memory: Optional[int] = None) -> None:
    """pop and gen bounded by the memory the search's pairwise steps need (before anything loops on them)."""
    memory = available_memory() if memory is None else memory
    max_pop = math.isqrt(memory // POP_PAIR_BYTES)
    if pop > max_pop:
        raise FedevoError(f"{arg('pop', pop)} is too large: NSGA-III compares every pair of individuals, and this "
                          f"machine's {memory / GIB:.1f} GiB of available memory allows {arg('pop', max_pop)} at most")
    if gen < 1:
        return  # SearchSettings.resolved says why
    max_evals = memory // EVAL_BYTES
    if pop * gen > max_evals:
        raise FedevoError(f"{arg('pop', pop)} × {arg('gen', gen)} = {pop * gen} evaluations is too many: the search "
                          f"holds every evaluation in memory, and this machine's {memory / GIB:.1f} GiB of available "
                          f"memory allows at most {max_evals} (e.g. {arg('gen', max(1, max_evals // pop))} or fewer)")


def evaluation_memory(config) -> dict[str, float]:
    """Estimated peak bytes of one evaluation of `config` (a SimConfig): the batch schedule of a chunk of clients
    (∝ epochs × samples per client), the stacked model copies (∝ dense parameters) and per-client state."""
    from .fl.cost import macs_and_params

    d = config.data
    n_train = d.source.n_train if d.source is not None else N_TRAIN.get(d.dataset, 60000)
    if d.partition == "natural":
        per_client = d.source.max_client  # the largest client of the user's data
    elif d.partition == "dirichlet":
        per_client = n_train  # a client may hold (almost) everything
    elif d.partition == "shards" and d.shard_size:
        per_client = d.shards_per_client * d.shard_size
    else:
        per_client = -(-n_train // d.clients)
    chunk = min(config.chunk_clients, config.sampled_per_round)
    schedule = float(chunk) * config.epochs * (per_client + config.batch_size) * SCHEDULE_BYTES
    dense = macs_and_params(config.with_(alpha=None))[1]
    model = dense * 4.0 * (MODEL_COPIES * chunk + 4)
    state = CLIENT_BYTES + (dense * 2.0 if config.privacy.recall else 0.0)  # recall: each client's update, fp16
    updates = float(config.sampled_per_round) * dense * 4.0 * UPDATE_COPIES
    return {"schedule": schedule, "model": model, "clients": float(d.clients) * state, "updates": updates}


def check_evaluation_memory(config, what: str = "this configuration", memory: Optional[int] = None) -> None:
    """FedevoError when one evaluation of `config` would need more memory than is available (naming the limit)."""
    memory = available_memory() if memory is None else memory
    need = evaluation_memory(config)
    total = sum(need.values())
    if total <= memory:
        return
    if need["updates"] >= max(need["schedule"], need["model"], need["clients"]):
        fix = (f"participation={config.participation:g} or clients={config.data.clients} "
               f"({config.sampled_per_round} clients a round, each one's dense update held until the round's mean)")
    elif need["clients"] >= max(need["schedule"], need["model"]):
        fix = f"clients={config.data.clients}"
    elif need["schedule"] >= need["model"]:
        per_epoch = need["schedule"] / config.epochs
        limit = max(0, int((memory - need["model"]) // per_epoch))
        fix = f"epochs={config.epochs} (at most {limit} fit with batch_size={config.batch_size})"
    else:
        fix = "the model (layers/units/channels) or chunk_clients"
    raise FedevoError(f"{what} would need about {_gib(total)} of memory per evaluation (batch schedule "
                      f"{_gib(need['schedule'])}, model copies {_gib(need['model'])}, per-client state "
                      f"{_gib(need['clients'])}, the round's updates {_gib(need['updates'])}), more than the "
                      f"{_gib(memory)} available; lower {fix}")


def _gib(n: float) -> str:
    g = n / GIB
    return f"{g:,.1f} GiB" if g >= 0.1 else f"{g:.2g} GiB"


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe_dir(d: Path) -> Optional[str]:
    """Why a file cannot be created in the existing directory `d` (None: it can); leaves nothing behind."""
    if not d.is_dir():
        return f"{d} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as e:
        return f"{d} is not writable ({e.strerror or errno.errorcode.get(e.errno, e)})"
    return None


def _out(path: Path, flag: Optional[str]) -> str:
    """An output path as a message names it: `flag` and the path, or (no flag) the `out` argument's."""
    return f"{flag} {path}" if flag else arg("out", path)


def check_new_or_empty_dir(path: Path | str, flag: Optional[str] = None) -> Path:
    """An output folder the user named: new or empty (nothing in it is ever overwritten), and writable. `flag`: what
    the message calls it (None: the `out` argument, --out or out=)."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FedevoError(f"{_out(path, flag)} already exists and is not an empty directory; choose another "
                          "(nothing was overwritten)")
    check_writable_dir(path, flag)
    return path


def check_writable_dir(path: Path | str, flag: Optional[str] = None) -> None:
    """`path` is (or can be created as) a directory where files can be written."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FedevoError(f"{_out(path, flag)} exists and is not a directory")
    base = _existing_ancestor(path)
    why = _probe_dir(base)
    if why:
        raise FedevoError(f"{_out(path, flag)}: cannot write there: {why}")


def check_writable_file(path: Path | str, flag: Optional[str] = None) -> None:
    """`path` can be written (created, or replaced by a rename in its directory)."""
    path = Path(path)
    if path.is_dir():
        raise FedevoError(f"{_out(path, flag)} is a directory; give a file name (e.g. {path / 'front.html'})")
    base = _existing_ancestor(path.parent)
    why = _probe_dir(base)
    if why:
        raise FedevoError(f"{_out(path, flag)}: cannot write there: {why}")


def _bound_values(gene) -> list[tuple[object, str]]:
    """(value, how a message names it) of each bound of a gene: low and high, or each choice."""
    if gene.type == "choice":
        return [(c, "") for c in gene.choices]
    if gene.type == "int":
        return [(math.ceil(gene.low), "low"), (math.floor(gene.high), "high")]
    return [(gene.low, "low"), (gene.high, "high")]


def check_problem_memory(problem, *, rounds: Optional[int] = None, memory: Optional[int] = None) -> None:
    """A search samples every gene up to its bounds: refuse a problem whose largest individual (each gene at the
    bound that needs more memory, the others at their defaults) cannot be evaluated in the available memory. The
    message names only the genes that change the need (units, layers, epochs...; not lr or sigma), each with the
    bound it was taken at."""
    memory = available_memory() if memory is None else memory
    worst: dict = {}
    which: dict = {}
    for g in problem.genes:
        needs = []
        for v, bound in _bound_values(g):
            try:
                needs.append((sum(evaluation_memory(problem.sim_config({g.name: v}, rounds=rounds)).values()), v,
                              bound))
            except FedevoError:
                continue  # an invalid bound: load-time validation names it
        if len({n for n, _, _ in needs}) > 1:  # a gene whose every bound needs the same sizes nothing
            _, v, bound = max(needs, key=lambda t: t[0])
            worst[g.name], which[g.name] = v, bound
    show = lambda k: f"{k}={worst[k]!r}" + (f" ({which[k]})" if which[k] else "")  # noqa: E731
    try:
        config = problem.sim_config(worst, rounds=rounds)
    except FedevoError:  # that combination is not a valid configuration: check the genes one by one
        for name, v in worst.items():
            check_evaluation_memory(problem.sim_config({name: v}, rounds=rounds),
                                    f"problem {problem.name!r} with {show(name)}", memory)
        return
    what = (f"problem {problem.name!r} at its largest genes ({', '.join(map(show, worst))})" if worst
            else f"problem {problem.name!r} (at any genes: none changes the memory it needs)")
    check_evaluation_memory(config, what, memory)


WORKER_BYTES = 256 * 1024**2  # resident memory of one idle Ray worker process with torch imported (at least)


def check_workers(workers: Optional[int], memory: Optional[int] = None) -> None:
    """workers: >= 0, and no more local worker processes than the available memory can hold."""
    if workers is None:
        return
    if workers < 0:
        raise FedevoError(f"{arg('workers')} must be >= 0 (0 = serial, in-process), got {workers}")
    memory = available_memory() if memory is None else memory
    limit = max(1, memory // WORKER_BYTES)
    if workers > limit:
        raise FedevoError(f"{arg('workers', workers)} is too many: each worker is a process with torch loaded "
                          f"(≥ {WORKER_BYTES // 1024**2} MiB), and this machine's {memory / GIB:.1f} GiB of "
                          f"available memory allows {arg('workers', limit)} at most")


def check_task_resources(*, cpus_per_task: float, gpus_per_task: float, workers: Optional[int],
                         ray_address: Optional[str], verb: str = "evaluates") -> None:
    """A search's and a retrain's Ray options alike: cpus_per_task > 0, gpus_per_task >= 0 (NaN fails both), and
    not both workers 0 (in this process: `verb` says what it does there) and ray_address (on a cluster)."""
    if not cpus_per_task > 0:
        raise FedevoError(f"{arg('cpus_per_task')} must be > 0, got {cpus_per_task}")
    if not gpus_per_task >= 0:
        raise FedevoError(f"{arg('gpus_per_task')} must be >= 0, got {gpus_per_task}")
    if workers == 0 and ray_address:  # which one was meant? (0 used to lose to a reachability check)
        raise FedevoError(f"{arg('workers', 0)} {verb} in this process, {arg('ray_address')} on a Ray cluster: "
                          "give one")


def check_eval_timeout(seconds: Optional[float], key: Optional[str] = None) -> Optional[float]:
    """The eval_timeout argument (key None: --eval-timeout / eval_timeout=) or a problem file's `eval_timeout`: a
    positive finite number of seconds, or None (no limit)."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (math.isfinite(seconds)
                                                                                  and seconds > 0):
        raise FedevoError(f"{key or arg('eval_timeout')} must be a positive number of seconds, "
                          f"got {seconds!r}")
    return float(seconds)


def check_model_parameters(n: int, what: str, memory: Optional[int] = None) -> None:
    """FedevoError (one line) when a model of `n` parameters cannot be trained even by one client at a time in the
    available memory (MODEL_COPIES fp32 copies a client, four more for the global model): a user model is sized
    by its parameters before it is built (models/user_module.py builds it on torch's meta device)."""
    memory = available_memory() if memory is None else memory
    need = 4.0 * n * (MODEL_COPIES + 4)
    if need > memory:
        raise FedevoError(f"{what} builds {n:,} parameters: training it needs at least {_gib(need)} of memory, "
                          f"more than the {_gib(memory)} available")
