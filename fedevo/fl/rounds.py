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
from .aggregate import weighted_mean
from .device import train_groups
from .engine import flat_deltas, train_chunks


@dataclass
class RoundsOutcome:
    params: list[torch.Tensor]
    masks: dict
    omega: int
    comm: float  # mean upload cost per round per client slot (Ω·C when every upload is full)
    accuracy_curve: list = field(default_factory=list)  # (round, mean client acc, global acc)
    step_hook: object = None
    upload: object = None
    arrivals: np.ndarray = None  # per client: rounds whose upload reached the server
    secagg: object = None  # the SecureAggregator, when aggregation = 'secagg'
    controller: object = None  # the AdaptiveController, when mechanism = 'adaptive'


def compute_dtype(precision: str, device: str = "cpu") -> torch.dtype:
    """'auto': bf16 only where the CPU has native bf16 arithmetic, else fp32; fp32 on CUDA (`fedevo.hardware`)."""
    return hardware.precision(precision, device).dtype


def client_accuracies(model, params, data: Dataset, part: Partition) -> tuple[np.ndarray, float]:
    """Accuracy of the global model on each client's test split, and on the whole test set."""
    with torch.no_grad():
        correct = torch.cat([model.logits(params, xb).argmax(1) == yb
                             for xb, yb in zip(data.x_test.split(2048), data.y_test.split(2048))]).numpy()
    per_client = np.array([correct[ix].mean() if len(ix) else np.nan for ix in part.test])
    return per_client, float(correct.mean())


def flat_active(model, masks: dict) -> torch.Tensor:
    return torch.cat([masks[i].reshape(-1) if i in masks else torch.ones(int(np.prod(s)))
                      for i, s in enumerate(model.shapes)])


def run_rounds(cfg: SimConfig, model, data: Dataset, part: Partition, *, gen: torch.Generator,
               step_hook=None, upload_factory: Optional[Callable] = None, eval_every: int = 0,
               on_round: Optional[Callable[[int], None]] = None, secagg=None, controller=None,
               server_transform: Optional[Callable] = None, uniform_weights: bool = False,
               device: Optional[torch.device] = None) -> RoundsOutcome:
    """secagg: a `fedevo.secagg.aggregator.SecureAggregator` replacing the plain weighted mean; controller: a
    server-side round controller (`fedevo.privacy.adaptive.AdaptiveController`) that picks which arrived
    uploads to aggregate; server_transform(aggregate, active): the server's own step on the mean update (central
    DP's noise); uniform_weights: every arrived update counts 1 instead of its sample count. All None/False: the
    plain FedAvg path, unchanged. device: where the device path (fl/device.py) trains; None: `cfg.device`
    (`hardware.device`: CUDA takes the device path, the CPU the CPU engine); a CPU device given here takes the
    device path on the CPU (tests compare the two). Local training's results come back to the CPU either way."""
    if device is None:
        resolved = hardware.device(cfg.device)
        device = resolved if resolved.type != "cpu" else None
    K, p = cfg.data.clients, cfg.sampled_per_round
    params = model.init(gen)
    masks = erdos_renyi_masks(model.shapes, model.fc_weight_ids, cfg.alpha, gen)
    for i, m in masks.items():
        params[i].mul_(m)
    omega = count_omega(model.shapes, masks)
    upload = upload_factory(flat_active(model, masks)) if upload_factory else None
    sizes = part.sizes
    dev_type = device.type if device is not None else "cpu"
    dtype = compute_dtype(cfg.precision, dev_type) if getattr(model, "supports_bf16", False) else torch.float32
    model.compute_dtype = dtype
    x_train = data.x_train  # each chunk gathers and casts its own samples (engine.train_clients)
    group_hook_for = None
    if device is not None:
        x_train = x_train.to(device)  # once: each group gathers its batches there
        if step_hook is not None:
            group_hook_for = getattr(step_hook, "for_group", None)
            if group_hook_for is None:
                raise FedevoError(f"the per-step transform {type(step_hook).__name__} has no device path "
                                  f"(for_group); set device = \"cpu\"")
    comm_total, curve = 0.0, []
    arrivals = np.zeros(K, dtype=np.int64)
    r = cfg.privacy.max_participations
    selected = np.zeros(K, dtype=np.int64)  # rounds each client was sampled in (lost uploads included)
    for t in range(cfg.rounds):
        order = torch.randperm(K, generator=gen).numpy()
        if r is not None:  # ULDP-FED: a client joins at most r rounds
            order = order[selected[order] < r]
        sampled = order[:p]
        selected[sampled] += 1
        if upload is not None and hasattr(upload, "begin_round"):
            upload.begin_round(t + 1)
        lost = (torch.rand(len(sampled), generator=gen) < cfg.upload_loss).numpy()
        if secagg is None:  # a lost upload still cost its bytes (SignDS: its h indices + sign, not Ω)
            comm_total += float(lost.sum()) * (upload.lost_cost(omega) if hasattr(upload, "lost_cost") else omega)
        arrived = np.sort(sampled[~lost])
        arrivals[arrived] += 1
        if secagg is not None or hasattr(upload, "set_active"):  # SET regrowth moves the active coordinates
            active_now = flat_active(model, masks)
            if hasattr(upload, "set_active"):
                upload.set_active(active_now)
            if secagg is not None:  # key agreement and sharing among all sampled clients, lost ones included
                secagg.begin_round(t + 1, sampled, arrived, active_now)
        deltas_all, weights = [], []
        # natural clients by size (data/partition.py chunk_order); the adaptive filter's mask follows `arrived`
        by = chunk_order(arrived, sizes, scheme=cfg.data.partition) if controller is None else arrived
        chunks = [by[s:s + cfg.chunk_clients] for s in range(0, len(by), cfg.chunk_clients)]
        seeds = torch.randint(0, 2 ** 62, (len(chunks),), generator=gen).tolist()
        if controller is not None:
            controller.begin_round(t + 1, model, params, arrived, dict(zip(seeds, chunks)))
        local_data = [[part.train[k] for k in c] for c in chunks]
        if device is not None:  # chunks grouped on the device; their results come back to the CPU
            trained = (flat_deltas(local, params) for local in train_groups(
                model, params, masks, x_train, data.y_train, local_data, epochs=cfg.epochs,
                batch_size=cfg.batch_size, lr=cfg.lr, seeds=seeds, device=device, group_hook_for=group_hook_for))
        else:  # each chunk's flat update comes from its own worker thread
            trained = train_chunks(model, params, masks, x_train, data.y_train, local_data, epochs=cfg.epochs,
                                   batch_size=cfg.batch_size, lr=cfg.lr, seeds=seeds,
                                   hook_for=step_hook.for_chunk if step_hook is not None else None, deltas=True)
        for chunk, flat in zip(chunks, trained):
            if not torch.isfinite(flat).all():
                raise DivergedError(f"non-finite local update in round {t + 1}")
            if upload is not None:
                flat, cost = upload(flat, chunk, omega)
            else:
                cost = np.full(len(chunk), float(omega))
            if secagg is not None:  # masked, quantised uploads; their cost is the protocol's (below)
                secagg.add(flat, chunk)
                continue
            comm_total += float(cost.sum())
            deltas_all.append(flat)
            weights.append(np.ones(len(chunk)) if uniform_weights else sizes[chunk])
        agg = None
        keep = controller.select(arrived) if controller is not None else None  # bool mask over `arrived`
        if controller is not None:
            comm_total += controller.metadata_words(arrived)
        if secagg is not None:
            agg = secagg.finish(None if keep is None else arrived[keep])
            comm_total += secagg.last_words
        elif deltas_all:
            ups, w = torch.cat(deltas_all), np.concatenate(weights)
            if keep is not None:  # the adaptive filter's buffer
                ups, w = ups[torch.as_tensor(keep)], w[keep]
            if len(w):  # nothing kept: the model stays, as when nothing arrived
                agg = weighted_mean(ups, torch.as_tensor(w, dtype=torch.float32))
        if agg is not None and server_transform is not None:
            agg = server_transform(agg, flat_active(model, masks))
        if agg is not None:
            if not torch.isfinite(agg).all():
                raise DivergedError(f"non-finite update in round {t + 1}")
            offset, agg_list = 0, []
            for i, s in enumerate(model.shapes):
                n = int(np.prod(s))
                a = agg[offset:offset + n].view(s)
                offset += n
                params[i].add_(a * masks[i] if i in masks else a)
                agg_list.append(a)
            prune_regrow(params, masks, agg_list, cfg.xi, gen)
        if step_hook is not None:
            step_hook.end_round()
        if upload is not None:
            upload.end_round(agg)
        if controller is not None:
            controller.after_aggregate(params)
        if eval_every and ((t + 1) % eval_every == 0 or t + 1 == cfg.rounds):
            per_client, glob = client_accuracies(model, params, data, part)
            curve.append((t + 1, float(np.nanmean(per_client)), glob))
        if on_round is not None:
            on_round(t + 1)
    return RoundsOutcome(params=params, masks=masks, omega=omega, comm=comm_total / (cfg.rounds * K),
                         accuracy_curve=curve, step_hook=step_hook, upload=upload, arrivals=arrivals,
                         secagg=secagg, controller=controller)
