"""The FedAvg loop: sample clients, lose some uploads, train the rest in chunks, privatise uploads, aggregate,
SET prune/regrow, evaluate."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
import torch

from .. import hardware
from ..config import SimConfig
from ..data.datasets import Dataset
from ..data.partition import Partition, chunk_order
from ..errors import DivergedError, FedevoError
from ..models.sparse import erdos_renyi_masks, omega as count_omega, prune_regrow
from ..privacy.central import ClipUpload
from ..privacy.privatizer import Privatizer, RoundPrivatizer
from . import stacked, stacked_cnn, stacked_settings
from .aggregate import weighted_mean
from .device import train_groups
from .engine import flat_deltas, train_chunks
from .finite import all_finite


@dataclass
class RoundsOutcome:
    params: list[torch.Tensor]
    masks: dict
    omega: int
    comm: float  # mean upload cost per round per client slot (Ω·C when every upload is full)
    accuracy_curve: list = field(default_factory=list)  # (round, mean client acc, global acc)
    arrivals: np.ndarray = None  # per client: rounds whose upload reached the server
    loop: Optional["LoopState"] = None  # where the loop stopped (continue it with run_rounds(..., resume=loop))


@dataclass
class LoopState:
    """What the round loop carries from one round to the next (with the generator, the model's buffers and the
    privatizer's own state, which live in their objects): after `done` rounds."""
    done: int
    params: list
    masks: dict
    omega: int
    comm_total: float
    curve: list
    arrivals: np.ndarray
    selected: np.ndarray


def compute_dtype(precision: str, device: str = "cpu") -> torch.dtype:
    """'auto': bf16 only where the CPU has native bf16 arithmetic, else fp32; fp32 on CUDA (`fedevo.hardware`).
    The round loop takes it from the evaluation's resolved `hardware.Engine`."""
    return hardware.precision(precision, device).dtype


def client_accuracies(model, params, data: Dataset, part: Partition) -> tuple[np.ndarray, float]:
    """Accuracy of the global model on each client's test split, and on the whole test set."""
    parts = []
    with torch.no_grad():
        for xb, yb in zip(data.x_test.split(2048), data.y_test.split(2048)):
            logits = model.logits(params, xb)
            if not all_finite(logits):  # argmax of NaN would be a class: an accuracy that is none
                raise DivergedError("the model's output is not finite (NaN or inf) on the test set")
            parts.append(logits.argmax(1) == yb)
    correct = torch.cat(parts).numpy()
    per_client = np.array([correct[ix].mean() if len(ix) else np.nan for ix in part.test])
    return per_client, float(correct.mean())


def flat_active(model, masks: dict) -> torch.Tensor:
    return torch.cat([masks[i].reshape(-1) if i in masks else torch.ones(int(np.prod(s)))
                      for i, s in enumerate(model.shapes)])


@dataclass
class RoundWork:
    """What a round hands to local training (`round_program` yields it): the arrived clients in chunks (their
    rows of the training set in `local_data`) with each chunk's seed, the global model, the communication so far.
    The caller answers with (the aggregate or None, the communication so far after the uploads)."""
    round: int
    chunks: list
    local_data: list
    seeds: list
    params: list
    masks: dict
    omega: int
    arrived: np.ndarray
    by: np.ndarray
    comm_total: float
    rounds_left: Optional[int] = None  # this round and those the loop runs after it (until its `until`)


def run_rounds(cfg: SimConfig, model, data: Dataset, part: Partition, *, gen: torch.Generator,
               privatizer: Optional[Privatizer] = None, engine: Optional[hardware.Engine] = None,
               eval_every: int = 0, on_round: Optional[Callable[[int], None]] = None,
               device: Optional[torch.device] = None, until: Optional[int] = None,
               resume: Optional[LoopState] = None) -> RoundsOutcome:
    """privatizer: everything private in a round (fedevo/privacy/privatizer.py: per-step hooks, upload transform,
    secure aggregation, client selection, server transform); None: plain FedAvg. The mechanism that built it
    keeps its state for its report. engine: the device and compute precision resolved when the evaluation was
    prepared (`hardware.resolve`; None: resolved here from `cfg`): CUDA takes the device path (fl/device.py), the
    CPU the CPU engine. device: a device that forces the device path (a CPU device here: tests compare the two).
    Local training's results come back to the CPU either way.
    until: stop after round `until` of the planned cfg.rounds (None: all); resume: the `loop` of an outcome that
    stopped early, with the generator and privatizer as that run left them: the loop continues exactly where it
    stopped (the rounds it runs are those an uninterrupted run would have run)."""
    pv = privatizer if privatizer is not None else RoundPrivatizer()
    if engine is None:
        engine = hardware.resolve(cfg.precision, cfg.device)
    if device is None and engine.device.type != "cpu":
        device = engine.device
    prog = round_program(cfg, model, data, part, gen=gen, privatizer=pv, engine=engine, eval_every=eval_every,
                         on_round=on_round, device=device, until=until, resume=resume)
    x_train = data.x_train if device is None else data.x_train.to(device)  # once: each group gathers its batches there
    try:
        work = next(prog)
        while True:
            work = prog.send(local_round(work, cfg, model, x_train, data.y_train, part.sizes, pv, device))
    except StopIteration as stop:
        return stop.value


def stacked_member(work: RoundWork, cfg: SimConfig, model, pv, device) -> "stacked.Member":
    """The stacked trainer's Member for `work`'s round of local training on `device` (alone or in a batched
    generation: fl/population.py): its clients, global model and masks, settings, per-step hook, rounds left
    (a CNN's: stacked_cnn.CNNMember)."""
    if getattr(model, "kind", "") == "cnn":
        return stacked_cnn.CNNMember(model=model, params=work.params, masks=work.masks, lr=cfg.lr,
                                     chunks=work.local_data, seeds=work.seeds, epochs=cfg.epochs,
                                     batch_size=cfg.batch_size, tf32=stacked_settings.tf32_enabled(cfg.tf32),
                                     hook=stacked.member_hook(pv, work.chunks, work.seeds, device))
    return stacked.Member(dims=model.dims, params=work.params, masks=work.masks, lr=cfg.lr, chunks=work.local_data,
                          seeds=work.seeds, epochs=cfg.epochs, batch_size=cfg.batch_size,
                          hook=stacked.member_hook(pv, work.chunks, work.seeds, device),
                          rounds_left=work.rounds_left, **stacked_settings.settings_of(cfg))


def local_round(work: RoundWork, cfg: SimConfig, model, x_train, y_train, sizes, pv,
                device: Optional[torch.device]) -> tuple[Optional[torch.Tensor], float]:
    """A round's local training and its uploads' aggregation: the CPU engine (device None) or the device path
    (fl/device.py; an MLP through fl/stacked.py, its per-step hook too where `stacked.applies`); (aggregate or
    None, comm so far)."""
    params, masks, chunks, seeds = work.params, work.masks, work.chunks, work.seeds
    if device is not None and stacked_settings.enabled() and stacked.applies(model, pv, model.compute_dtype):
        (flat,) = stacked.train_members([stacked_member(work, cfg, model, pv, device)], x_train, y_train,
                                        device=device)
        if not uploads_on_device(pv):
            flat = flat.cpu()
        return aggregate_uploads(work, stacked.split(flat, chunks), pv, sizes)
    if device is not None:  # chunks grouped on the device; their results come back to the CPU
        trained = (flat_deltas(local, params) for local in train_groups(
            model, params, masks, x_train, y_train, work.local_data, epochs=cfg.epochs,
            batch_size=cfg.batch_size, lr=cfg.lr, seeds=seeds, device=device, group_hook_for=pv.for_group))
    else:  # each chunk's flat update comes from its own worker thread
        trained = train_chunks(model, params, masks, x_train, y_train, work.local_data, epochs=cfg.epochs,
                               batch_size=cfg.batch_size, lr=cfg.lr, seeds=seeds, hook_for=pv.for_chunk,
                               deltas=True)
    return aggregate_uploads(work, trained, pv, sizes)


def uploads_on_device(pv) -> bool:
    """Whether a privatizer's uploads can be transformed and aggregated from the training device: no transform or
    clipping alone (central and distributed trust), a secure aggregator that takes device updates (it copies only
    the active coordinates to the CPU), no server-side filter. The others run their CPU code on CPU copies."""
    transform = getattr(pv, "transform", None)
    return ((not pv.secure or getattr(pv.secagg, "device_uploads", False))
            and getattr(pv, "controller", None) is None
            and (transform is None or type(transform) is ClipUpload))


def aggregate_uploads(work: RoundWork, trained, pv, sizes, *,
                      mean=weighted_mean) -> tuple[Optional[torch.Tensor], float]:
    """Each chunk's flat updates (`trained`, in chunk order, on any device) through the upload transform into the
    secure aggregator or the weighted mean (`mean`, aggregate.weighted_mean's signature); (the aggregate, on the
    updates' device, or None; comm so far)."""
    comm_total, arrived, t = work.comm_total, work.arrived, work.round - 1
    deltas_all, weights = [], []
    for chunk, flat in zip(work.chunks, trained):
        if not all_finite(flat):
            raise DivergedError(f"non-finite local update in round {t + 1}")
        flat, cost = pv.upload(flat, chunk, work.omega)
        if pv.secure:  # masked, quantised uploads; their cost is the protocol's (below)
            pv.add_secure(flat, chunk)
            continue
        comm_total += float(cost.sum())
        deltas_all.append(flat)
        weights.append(np.ones(len(chunk)) if pv.uniform_weights else sizes[chunk])
    agg = None
    keep = pv.select(arrived)  # bool mask over `arrived` (None: all)
    comm_total += pv.metadata_words(arrived)
    if pv.secure:
        agg, words = pv.finish_secure(None if keep is None else arrived[keep])
        comm_total += words
    elif deltas_all:
        ups, w = torch.cat(deltas_all), np.concatenate(weights)
        if keep is not None:  # the adaptive filter's buffer (a mask over `arrived`; the uploads are in `by` order)
            keep = keep[np.searchsorted(arrived, work.by)]
            ups, w = ups[torch.as_tensor(keep, device=ups.device)], w[keep]
        if len(w):  # nothing kept: the model stays, as when nothing arrived
            agg = mean(ups, torch.as_tensor(w, dtype=torch.float32, device=ups.device))
    return agg, comm_total


def round_program(cfg: SimConfig, model, data: Dataset, part: Partition, *, gen: torch.Generator,
                  privatizer: Privatizer, engine: hardware.Engine, eval_every: int = 0,
                  on_round: Optional[Callable[[int], None]] = None, device: Optional[torch.device] = None,
                  until: Optional[int] = None, resume: Optional[LoopState] = None):
    """The round loop of `run_rounds` as a generator: it yields each round's `RoundWork` and takes back (the
    aggregate or None, the communication so far); it returns the RoundsOutcome. `run_rounds` answers with
    `local_round`; the population path (fl/population.py) answers several programs from one batched training."""
    pv = privatizer
    K, p = cfg.data.clients, cfg.sampled_per_round
    until = cfg.rounds if until is None else until
    if resume is None:
        params = model.init(gen)
        masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, cfg.alpha, gen)
        for i, m in masks.items():
            params[i].mul_(m)
        omega = count_omega(model.shapes, masks)
        pv.start(flat_active(model, masks))
        st = LoopState(done=0, params=params, masks=masks, omega=omega, comm_total=0.0, curve=[],
                       arrivals=np.zeros(K, dtype=np.int64), selected=np.zeros(K, dtype=np.int64))
    else:
        st = resume
    params, masks, omega = st.params, st.masks, st.omega
    sizes = part.sizes
    dtype = engine.precision.dtype if getattr(model, "supports_bf16", False) else torch.float32
    model.compute_dtype = dtype
    if device is not None:
        if pv.for_chunk is not None and pv.for_group is None:
            hook = getattr(pv, "step_hook", pv)  # RoundPrivatizer: name the hook itself
            raise FedevoError(f"the per-step transform {type(hook).__name__} has no device path "
                              f"(for_group); set device = \"cpu\"")
    comm_total, curve = st.comm_total, st.curve
    arrivals = st.arrivals
    r = cfg.privacy.max_participations
    selected = st.selected  # rounds each client was sampled in (lost uploads included)
    for t in range(st.done, until):
        order = torch.randperm(K, generator=gen).numpy()
        if r is not None:  # ULDP-FED: a client joins at most r rounds
            order = order[selected[order] < r]
        sampled = order[:p]
        selected[sampled] += 1
        lost = (torch.rand(len(sampled), generator=gen) < cfg.upload_loss).numpy()
        if not pv.secure:  # a lost upload still cost its bytes (SignDS: its h indices + sign, not Ω)
            comm_total += float(lost.sum()) * pv.lost_cost(omega)
        arrived = np.sort(sampled[~lost])
        arrivals[arrived] += 1
        active = flat_active(model, masks)  # SET regrowth moves the active coordinates
        by = chunk_order(arrived, sizes, scheme=cfg.data.partition)  # natural clients by size (data/partition.py)
        chunks = [by[s:s + cfg.chunk_clients] for s in range(0, len(by), cfg.chunk_clients)]
        seeds = torch.randint(0, 2 ** 62, (len(chunks),), generator=gen).tolist()
        pv.begin_round(t + 1, sampled=sampled, arrived=arrived, active=active, model=model, params=params,
                       chunk_of_seed=dict(zip(seeds, chunks)))
        work = RoundWork(round=t + 1, chunks=chunks, local_data=[[part.train[k] for k in c] for c in chunks],
                         seeds=seeds, params=params, masks=masks, omega=omega, arrived=arrived, by=by,
                         comm_total=comm_total, rounds_left=until - t)
        agg, comm_total = yield work
        if agg is not None and agg.device.type != "cpu":
            agg = agg.cpu()  # the server's side runs on the CPU
        if agg is not None:
            agg = pv.server(agg, active)
        if agg is not None:
            if not all_finite(agg):
                raise DivergedError(f"non-finite update in round {t + 1}")
            offset, agg_list = 0, []
            for i, s in enumerate(model.shapes):
                n = int(np.prod(s))
                a = agg[offset:offset + n].view(s)
                offset += n
                params[i].add_(a * masks[i] if i in masks else a)
                agg_list.append(a)
            prune_regrow(params, masks, agg_list, cfg.xi, gen)
        pv.end_round(agg, params)
        if eval_every and ((t + 1) % eval_every == 0 or t + 1 == cfg.rounds):
            per_client, glob = client_accuracies(model, params, data, part)
            curve.append((t + 1, float(np.nanmean(per_client)), glob))
        if on_round is not None:
            on_round(t + 1)
    st.done, st.comm_total = max(st.done, until), comm_total
    return RoundsOutcome(params=params, masks=masks, omega=omega, comm=comm_total / (st.done * K),
                         accuracy_curve=list(curve), arrivals=arrivals, loop=st)
