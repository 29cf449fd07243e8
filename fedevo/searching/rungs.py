"""The rung scheduler of a multi-fidelity search: one generation's offspring trained rung by rung.

Rung 0 trains every offspring for r_0 rounds (``until=r_0``); after each rung the promotion rule
(:func:`fedevo.searching.fidelity.promote`) picks ⌈n/η⌉ of its n individuals, which **continue** from the
training state the rung returned (``resume_from=state``) up to the next rung's rounds; the last rung trains to
the full T. A rung's rounds are the same for every individual, r_k = ⌊f_k·T_max + ½⌋ of the most rounds any plans
(a ``rounds`` gene's highest; `equal_rung_rounds`): an individual planning fewer trains its own T at the first rung
that reaches it, is then at full fidelity (``fidelity`` 1 at that ``rung``) and leaves the ladder; the others are
ranked at equal rounds. (Runs made before trained each individual its own fraction of its T: 2 rounds of 5 were
ranked against 17 of 50; run.json's ``fidelity.same_rounds`` tells them apart.) Every rung evaluation is its own row of evaluations.csv (same id, ``rung`` k, ``fidelity`` f_k,
``rounds_trained`` r_k; the ε and error measured at r_k, never the full-T ones).

States: a rung below the last returns the training state (bytes: model, masks, optimiser, privacy state, ledger,
recall store). It is written atomically to ``states/id-NNNN-rRRR.pt`` (RRR: the rounds it holds), behind a header
line recording whose state it is (id, rounds) and the SHA-256 of the state's bytes, *before* the row that says the
rung is done; before a state is continued the header is checked, so a corrupted, truncated or swapped state file
is refused with one line naming it (a run whose log predates the hash chain may hold states without the header:
those are continued unchecked), and removed once the individual's next rung is logged, or once it is not
promoted; whatever is left of a generation goes when its checkpoint is written. So after a kill at any point,
``fedevo resume`` finds the rows of the rungs already done, recomputes the same promotions from them (the rule
is a pure function of the rows) and continues each promoted individual from its state file: the same final
front as an uninterrupted run. On Ray, the state travels with the task and its result (a cluster shares no
filesystem with the driver); only the driver writes the files.
"""

from __future__ import annotations

import contextlib
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import FedevoError, arg
from ..result import EvaluationResult
from . import evaluator as evaluators
from .containment import sizing_output
from .fidelity import PROMOTION, promote, rung_rounds
from .log import EvalLog, atomic_write
from .runner import Task
from .settings import eval_seed

STATES = "states"
# run.json's fidelity.rung_rounds (with same_rounds: true; a run made before recorded "floor(f * T + 1/2) of the
# planned T", each individual's own T)
RUNG_ROUNDS = ("min(floor(f * T_max + 1/2), T): every individual the same rounds at a rung (T_max: --rounds, else "
               "the rounds gene's highest value, else the problem's T); one planning fewer stops at its own T, at "
               "full fidelity")
STATE_MAGIC = b"FEDEVO-TRAINING-STATE 1 "  # then "id I rounds R sha256 HEX\n" and the state's bytes


def state_bytes(state: bytes, ident: int, rounds: int) -> bytes:
    """What a state file holds: the header line (whose state, its SHA-256) and the state."""
    return STATE_MAGIC + f"id {ident} rounds {rounds} sha256 {hashlib.sha256(state).hexdigest()}\n".encode() + state


def read_state(path: Path, ident: int, rounds: int, *, legacy: bool = False) -> bytes:
    """The state a state file holds, checked against its header (and its header against `ident` and `rounds`);
    FedevoError naming the file otherwise. legacy: a file without the header (an earlier version's) is taken as
    it is."""
    data = Path(path).read_bytes()
    if not data.startswith(STATE_MAGIC):
        if legacy:
            return data
        why = "not a fedevo training state"
    else:
        head, _, state = data[len(STATE_MAGIC):].partition(b"\n")
        want = f"id {ident} rounds {rounds} sha256 {hashlib.sha256(state).hexdigest()}".encode()
        if head == want:
            return state
        why = "checksum mismatch" if head.rpartition(b" ")[0] == want.rpartition(b" ")[0] else \
            f"it holds {head.rpartition(b' sha256')[0].decode(errors='replace')!s}, not id {ident} rounds {rounds}"
    raise FedevoError(f"{path} is corrupt ({why}): it is not the training state fedevo saved for individual {ident} "
                      f"after {rounds} rounds; the run cannot continue it exactly: restore the file from a copy "
                      "and resume again")


def check_continues(evaluator, ladder: Optional[Sequence[float]], key: str = "") -> None:
    """A multi-fidelity search needs an evaluator that continues training (`continues = True`, `planned`). `key`:
    where the ladder was set (by default the `fidelity` argument as its caller spells it; the problem file's key)."""
    if ladder is not None and len(ladder) > 1 and not getattr(evaluator, "continues", False):
        try:
            name = evaluators.evaluator_spec(evaluator)
        except FedevoError:
            name = repr(evaluator)
        way = f"leave {arg('fidelity')} out" if not key else "remove the problem file's fidelity"
        raise FedevoError(f"{key or arg('fidelity')}: the evaluator {name} cannot continue "
                          "a training from a lower rung (it offers no `continues`/`planned`: docs/api.md); use "
                          f"fedevo's simulator, or {way}")


def most_rounds(problem, rounds: Optional[int]) -> int:
    """T_max, the most rounds an individual of the search plans: --rounds, else the highest value of a `rounds`
    gene, else the problem's T. Every rung's rounds are its fraction of it (`equal_rung_rounds`)."""
    if rounds is not None:
        return int(rounds)
    gene = next((g for g in problem.genes if g.name == "rounds"), None)
    if gene is None:
        return total_rounds(problem, {}, None)
    return int(max(gene.choices) if gene.type == "choice" else gene.high)


def equal_rung_rounds(ladder: Sequence[float], most: int, total: int) -> tuple[int, ...]:
    """One individual's rounds at each rung it trains to when every rung trains the same rounds for all (ASHA's
    rule: one resource per rung): ⌊f_k·T_max + ½⌋ (`most`: T_max), up to the first rung that reaches its own T
    (`total`), which trains its T and is its last: an individual planning 5 of T_max = 50 rounds under 1/3,1 trains 5
    rounds at rung 0 and is then at full fidelity; one planning 50 trains 17 rounds at rung 0, compared there with
    the others' 17 (or fewer: their full T)."""
    out: list[int] = []
    for r in rung_rounds(ladder, most):
        out.append(min(r, total))
        if r >= total:
            break
    return tuple(out)


def total_rounds(problem, params: Mapping[str, Any], rounds: Optional[int]) -> int:
    """The planned T of an individual: --rounds, else what its configuration trains for."""
    if rounds is not None:
        return int(rounds)
    try:
        return int(problem.sim_config(params).rounds)
    except FedevoError:  # genes that build no configuration: the evaluation fails fast, at any rounds
        return int(problem.sim_config(None).rounds)


def check_ladder(problem, ladder: Optional[Sequence[float]], rounds: Optional[int], key: str = "") -> None:
    """Refuse a ladder whose rungs give fewer than one round or repeat a round count at T_max (`most_rounds`): every
    rung trains its fraction of it (an individual planning fewer rounds stops at its own T, at full fidelity)."""
    if ladder is None or len(ladder) <= 1:
        return
    rung_rounds(ladder, most_rounds(problem, rounds), key)


def state_path(run_dir: Path, ident: int, rounds: int) -> Path:
    return Path(run_dir) / STATES / f"id-{ident:04d}-r{rounds:04d}.pt"


def remove_states(run_dir: Path, ids: Sequence[int] = ()) -> None:
    """Remove the state files of these individuals (all when `ids` is empty) and leftovers of killed writes."""
    d = Path(run_dir) / STATES
    if not d.is_dir():
        return
    wanted = set(ids)

    def ident(name: str) -> Optional[int]:
        parts = name.split("-")
        return int(parts[1]) if len(parts) == 3 and parts[0] == "id" and parts[1].isdigit() else None

    for p in d.iterdir():
        if (p.name.startswith(".") and p.name.endswith(".tmp")) or not wanted or ident(p.name) in wanted:
            with contextlib.suppress(OSError):
                p.unlink()


class RungScheduler:
    """Evaluates one generation rung by rung (see the module doc); ``evaluate`` is the search's batch
    evaluator (returns one result per individual: what NSGA-III's tell() gets)."""

    def __init__(self, *, run_dir: Path, problem, ladder: Sequence[float], rounds: Optional[int], evaluator,
                 eps_key: str, log: EvalLog, seed: int, objectives=None, equal_rounds: bool = True):
        from ..objectives import as_set

        self.run_dir, self.problem, self.ladder = Path(run_dir), problem, tuple(ladder)
        # every rung the same rounds for all (run.json's fidelity.same_rounds); False: a run made before, whose
        # rungs were each individual's own fraction of its T (with a rounds gene: 2 of 5 against 17 of 50)
        self.most = most_rounds(problem, rounds) if equal_rounds else None
        self.rounds, self.evaluator, self.eps_key, self.log, self.seed = rounds, evaluator, eps_key, log, seed
        self.objectives = as_set(objectives, eps_key)
        (self.run_dir / STATES).mkdir(exist_ok=True)
        for p in (self.run_dir / STATES).glob(".*.tmp"):  # a state write killed before its rename
            with contextlib.suppress(OSError):
                p.unlink()

    # ------------------------------------------------------------------ per individual
    def rung_rounds(self, params: Mapping[str, Any]) -> tuple[int, ...]:
        """The individual's rounds at each rung it trains to; the last is its full T."""
        total = total_rounds(self.problem, params, self.rounds)
        if self.most is None:
            return rung_rounds(self.ladder, total)
        return equal_rung_rounds(self.ladder, self.most, total)

    def planned(self, params: Mapping[str, Any]) -> dict[str, float]:
        """What the evaluator knows at the full T before training (ε, comm); {} when it cannot say."""
        fn = getattr(self.evaluator, "planned", None)
        if fn is None:
            return {}
        try:
            out = fn(self.problem, dict(params), total_rounds(self.problem, params, self.rounds))
        except Exception:  # noqa: BLE001 - genes that build no configuration: ranked on the rung's values
            return {}
        return {k: float(v) for k, v in (out or {}).items() if v is not None}

    def tell_result(self, row: Mapping[str, Any], planned: Mapping[str, float]) -> dict[str, Any]:
        """What NSGA-III gets for an individual left at a lower rung: the objectives it was ranked on (its row, with
        the values known at the full T)."""
        return {**row, **{k: planned[k] for k in self.objectives.names if k in planned and k != "error"}}

    # ------------------------------------------------------------------ a generation
    def evaluate(self, g: int, first_id: int, params_list: Sequence[Mapping[str, Any]], by_key, runner,
                 on_row: Callable[[dict[str, Any]], None], counters, tick) -> list[dict[str, Any]]:
        n = len(params_list)
        ids = [first_id + i for i in range(n)]
        params = {first_id + i: p for i, p in enumerate(params_list)}
        rounds = {i: self.rung_rounds(params[i]) for i in ids}
        planned: dict[int, dict[str, float]] = {}
        out: dict[int, dict[str, Any]] = {}
        current = ids
        for k, f in enumerate(self.ladder):
            todo = []
            with sizing_output(self.run_dir, f"generation {g}, rung {k}: its models sized, before they are evaluated"):
                costs = {i: evaluators.cost(self.evaluator, self.problem, params[i],
                                            rounds[i][k] - (rounds[i][k - 1] if k else 0)) for i in current}
            for i in current:
                rr = rounds[i]
                prev = rr[k - 1] if k else 0
                full = k == len(rr) - 1  # its last rung: its full T (below the ladder's last where it plans fewer)
                t = Task(i, g, i - first_id, params[i], eval_seed(self.seed, i), costs[i],
                         rung=k, fidelity=1.0 if full else f, until=None if full else rr[k])
                row = by_key.get((i, k))
                if row is None:
                    todo.append(t if k == 0 else replace(t, state=self._load_state(i, prev)))
                elif self.log.matches(row, t):
                    counters["reused"] += 1
                else:
                    raise FedevoError(f"{self.log.path}: the rung-{k} row of individual {i} does not match the "
                                      "resumed search (different genes or seed); the run directory is inconsistent")

            def on_done(t: Task, result: EvaluationResult, k=k) -> None:
                state = getattr(result, "state", None)
                if t.until is not None and result.status == "ok" and state is not None:
                    atomic_write(state_path(self.run_dir, t.id, t.until),  # before the row that says done
                                 state_bytes(state, t.id, t.until))
                row = self.log.append(t, result)
                by_key[(t.id, k)] = row
                if k:  # its continuation is logged: the lower rung's state is no longer needed
                    with contextlib.suppress(OSError):
                        state_path(self.run_dir, t.id, rounds[t.id][k - 1]).unlink()
                on_row(row)

            runner.run(todo, on_done, tick=tick)
            for i in current:
                if k == len(rounds[i]) - 1:  # at full fidelity: done
                    out[i] = by_key[(i, k)]
            current = [i for i in current if i not in out]
            if not current:
                break
            rung_rows = [by_key[(i, k)] for i in current]  # all at the rung's rounds: ranked against each other
            for i in current:
                if i not in planned:
                    planned[i] = self.planned(params[i])
            promoted = set(promote(rung_rows, planned, self.objectives, PROMOTION["eta"], PROMOTION["margin"],
                                   constraints=self.problem.constraints))
            for r in rung_rows:
                if r["id"] not in promoted:
                    out[r["id"]] = self.tell_result(r, planned.get(r["id"], {}))
                    with contextlib.suppress(OSError):
                        state_path(self.run_dir, r["id"], rounds[r["id"]][k]).unlink()
            current = sorted(promoted)
            if not current:
                break
        return [out[i] for i in ids]

    def _load_state(self, ident: int, rounds: int) -> bytes:
        p = state_path(self.run_dir, ident, rounds)
        try:
            return read_state(p, ident, rounds, legacy=not self.log.chained)  # checked before it is continued
        except FileNotFoundError:
            raise FedevoError(f"{p} is missing: individual {ident} was promoted after {rounds} rounds but its training "
                              "state is gone (did the evaluator return no `state`, or was the file removed?); the "
                              "run cannot continue it exactly") from None


__all__ = ["RUNG_ROUNDS", "RungScheduler", "STATES", "check_continues", "check_ladder", "equal_rung_rounds", "most_rounds",
           "read_state", "remove_states", "state_bytes", "state_path", "total_rounds"]
