"""Checkpoints: the optimiser's state after each batch (checkpoints/gen-NNNN.pkl; NSGA-III's: the pymoo algorithm
object), with a SHA-256 of the payload so that a torn or altered file is refused with one line."""

from __future__ import annotations

import contextlib
import hashlib
import pickle
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

from ..errors import FedevoError
from .log import atomic_write

CKPT_MAGIC = b"FEDEVO-SEARCH-CHECKPOINT 1\n"


def dumps(obj: Any) -> bytes:
    """A checkpoint's payload: cloudpickle, which pickles what pickle does the same way and a local function (a
    pymoo operator's decorated comparator, as SMS-EMOA's) by value; plain pickle loads it."""
    import cloudpickle

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


KEEP_BYTES = 64 * 2 ** 20  # a run's checkpoints in all, beyond which the oldest go (keep_within)
KEEP_NEWEST = 3  # checkpoints never deleted: the newest, and two to resume from should it be damaged


class Kept:
    """A run's checkpoints as the process writing them knows them ([path, bytes], oldest first): listed the first
    time keep_within must look at them, then kept up to date by it, so that it does not list and stat the folder
    after every batch (a run of 2,000 batches of one whose checkpoints hold a growing front looked at 800 files a
    batch). Only for the process that holds the run (nobody else writes its checkpoints meanwhile)."""

    def __init__(self) -> None:
        self.files: Optional[deque] = None
        self.total = 0


_KEPT: dict[Path, Kept] = {}  # checkpoints folder -> its Kept, while the process holding its run runs it (keeping)


@contextlib.contextmanager
def keeping(run_dir: Path) -> Iterator[Kept]:
    """While the search of `run_dir` runs in this process (holding the run): its checkpoints as it knows them (Kept),
    which save_checkpoint keeps up to date."""
    folder = Path(run_dir) / "checkpoints"
    kept = _KEPT[folder] = Kept()
    try:
        yield kept
    finally:
        if _KEPT.get(folder) is kept:
            del _KEPT[folder]


def save_checkpoint(run_dir: Path, state: Mapping[str, Any], kept: Optional[Kept] = None) -> Path:
    """Write checkpoint gen-NNNN.pkl of `state` (atomically) and keep the folder within KEEP_BYTES; `kept`: the folder
    as this process knows it (by default the one `keeping` holds for the run, if any)."""
    payload = dumps(dict(state))
    data = CKPT_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    path = run_dir / "checkpoints" / f"gen-{state['generation']:04d}.pkl"
    path.parent.mkdir(exist_ok=True)
    atomic_write(path, data)
    keep_within(path.parent, newest=(int(state["generation"]), len(data)),
                kept=kept if kept is not None else _KEPT.get(path.parent))
    return path


def keep_within(folder: Path, limit: int = 0, *, newest: Optional[tuple[int, int]] = None,
                kept: Optional[Kept] = None) -> list[Path]:
    """Delete the oldest checkpoints of `folder` while they take more than `limit` bytes in all (KEEP_BYTES by
    default), never the newest KEEP_NEWEST; the deleted paths. Checkpoints once held every batch's seconds and
    hypervolume, so a run of thousands of small batches (batches of one) took disk with the square of its batches
    (2,000 batches of one: 133 MB); a front's or an optimiser's state can still grow. A resume needs only the newest;
    the earlier ones name the ids of a damaged log (without them, it is refused without ids: integrity.check_log).
    `kept`: the folder as the search's process knows it (Kept): listed once, then kept up to date. Without it
    (another writer), `newest`: (generation, bytes) of the checkpoint just written: the folder holds at most
    generation + 1 checkpoints, so while that many of its size are within the limit it is not listed (a guess that
    holds while no earlier checkpoint is larger than the newest)."""
    import os

    limit = limit or KEEP_BYTES
    if kept is not None:  # the search's own process: the folder listed once, then known exactly (checkpoints of a
        # run resumed after an upgrade, or a front that shrank, may be larger than the newest: no guess by its size)
        if kept.files is not None and newest is not None:
            return _keep_known(folder, limit, newest, kept)
        return _keep_listed(folder, limit, kept)
    if newest is not None and (newest[0] + 1) * newest[1] <= limit:
        return []
    gens = [int(n[4:-4]) for n in os.listdir(folder)
            if n.startswith("gen-") and n.endswith(".pkl") and n[4:-4].isdigit()]
    try:  # (as above: no earlier checkpoint taken to be larger than the newest)
        if not gens or len(gens) * (folder / f"gen-{max(gens):04d}.pkl").stat().st_size <= limit:
            return []
    except OSError:
        pass
    return _keep_listed(folder, limit, Kept())  # listed for this call alone


def _keep_listed(folder: Path, limit: int, kept: Kept) -> list[Path]:
    """keep_within, the folder listed (and `kept` filled)."""
    kept.files, kept.total = deque(), 0
    for p in _in_order(folder):
        try:
            size = p.stat().st_size
        except OSError:
            continue
        kept.files.append([p, size])
        kept.total += size
    return _drop_oldest(limit, kept)


def _keep_known(folder: Path, limit: int, newest: tuple[int, int], kept: Kept) -> list[Path]:
    """keep_within from what `kept` knows and the checkpoint just written (`newest`: generation, bytes)."""
    path = folder / f"gen-{newest[0]:04d}.pkl"
    if kept.files and kept.files[-1][0] == path:  # the same generation written again (a stop found after it)
        kept.total -= kept.files.pop()[1]
    kept.files.append([path, newest[1]])
    kept.total += newest[1]
    return _drop_oldest(limit, kept)


def _drop_oldest(limit: int, kept: Kept) -> list[Path]:
    gone = []
    while kept.total > limit and len(kept.files) > KEEP_NEWEST:
        p, size = kept.files.popleft()
        kept.total -= size
        try:
            p.unlink()
        except OSError:  # gone already, or not ours to delete: no longer counted either way
            continue
        gone.append(p)
    return gone


def load_checkpoint(path: Path) -> dict[str, Any]:
    hint = ("; delete it to resume from the previous generation's checkpoint" if path.name != "gen-0000.pkl"
            else "; delete it to restart the search from its seed")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise FedevoError(f"cannot read checkpoint {path}: {e.strerror}") from None
    if not data.startswith(CKPT_MAGIC):
        raise FedevoError(f"corrupt checkpoint {path}: not a fedevo search checkpoint{hint}")
    digest, _, payload = data[len(CKPT_MAGIC):].partition(b"\n")
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        raise FedevoError(f"corrupt checkpoint {path}: checksum mismatch{hint}")
    try:
        state = pickle.loads(payload)
    except Exception as e:  # noqa: BLE001 - unpickling can raise almost anything
        raise FedevoError(f"corrupt checkpoint {path}: cannot unpickle ({type(e).__name__}: {e}){hint}") from None
    if not isinstance(state, dict) or "algorithm" not in state or "generation" not in state:
        raise FedevoError(f"corrupt checkpoint {path}: unexpected content{hint}")
    return state


def _generation(path: Path) -> int:
    """The generation a checkpoint file is of (gen-NNNN.pkl: at least 4 digits, more past 9999); -1 for a name
    that holds none."""
    digits = path.stem[len("gen-"):]
    return int(digits) if digits.isdigit() else -1


def _in_order(folder: Path) -> list[Path]:
    """The checkpoint files of `folder`, oldest first: by generation (gen-10000.pkl sorts before gen-9999.pkl by
    name)."""
    return sorted((p for p in folder.glob("gen-*.pkl") if _generation(p) >= 0), key=_generation)


def latest_checkpoint(run_dir: Path) -> Optional[Path]:
    files = _in_order(run_dir / "checkpoints")
    return files[-1] if files else None


def earlier_checkpoints(path: Path) -> Iterator[dict[str, Any]]:
    """The states of the checkpoints before checkpoint `path`, newest first, read as they are asked for; an
    unreadable one is an empty state (nothing of it known)."""
    for p in reversed(_in_order(path.parent)):
        if _generation(p) < _generation(path):
            try:
                yield load_checkpoint(p)
            except FedevoError:
                yield {}


__all__ = ["CKPT_MAGIC", "KEEP_BYTES", "KEEP_NEWEST", "Kept", "dumps", "keeping", "earlier_checkpoints", "keep_within",
           "latest_checkpoint", "load_checkpoint", "save_checkpoint"]
