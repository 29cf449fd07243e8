"""Split a dataset over K clients: IID, label shards (McMahan et al.), Dirichlet(a), or natural (the data's own
client ids: a group-by).

Each client also gets a test split "drawn the same way": IID splits the test set; shards and Dirichlet give each
client test samples that follow its own train label histogram, so per-client accuracy (seed 004 eq. 5) measures
the task that client actually has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import FedevoError
from .catalog import DIRICHLET_MIN_SAMPLES


@dataclass(frozen=True)
class Partition:
    train: tuple[np.ndarray, ...]  # per-client indices into the train set
    test: tuple[np.ndarray, ...]  # per-client indices into the test set

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(t) for t in self.train])


def iid(labels: np.ndarray, *, clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    if len(labels) < clients:
        raise FedevoError(f"{len(labels)} samples cannot be split over {clients} clients")
    return [np.sort(p) for p in np.array_split(rng.permutation(len(labels)), clients)]


def shards(labels: np.ndarray, *, clients: int, per_client: int, shard_size: int | None,
           rng: np.random.Generator) -> list[np.ndarray]:
    """Sort by label, cut into shards of `shard_size`, give each client `per_client` distinct shards.

    With K·s ≤ number of shards, shards are dealt without replacement (McMahan et al.); with more (seed 000:
    1000 users drawing 2 of 200 shards of 300) each client draws distinct shards and shards are shared.
    """
    n = len(labels)
    size = shard_size or n // (clients * per_client)
    if size < 1:
        raise FedevoError(f"{n} samples are too few for {clients} clients × {per_client} shards")
    n_shards = n // size
    if n_shards < per_client:
        raise FedevoError(f"only {n_shards} shards of {size}; each client needs {per_client}")
    order = np.lexsort((rng.random(n), labels))  # sort by label, random among equal labels
    cut = order[: n_shards * size].reshape(n_shards, size)
    if clients * per_client <= n_shards:
        ids = rng.permutation(n_shards)[: clients * per_client].reshape(clients, per_client)
    else:
        ids = np.stack([rng.choice(n_shards, per_client, replace=False) for _ in range(clients)])
    return [np.sort(cut[row].ravel()) for row in ids]


def dirichlet(labels: np.ndarray, *, clients: int, alpha: float, rng: np.random.Generator,
              min_size: int = DIRICHLET_MIN_SAMPLES, tries: int = 100) -> list[np.ndarray]:
    """Each class's samples split over the clients in proportions drawn from Dirichlet(alpha), drawn again (up to
    `tries` times) until every client holds `min_size` samples. Where no draw does (clients near the samples / 2),
    the draw that missed by the fewest samples is topped up: `_topped_up`. A draw is checked on its counts alone;
    only the one kept is cut into clients (the same draws, and so the same partitions, as cutting every draw)."""
    n = len(labels)
    if n < clients * min_size:
        raise FedevoError(f"Dirichlet partition: {clients} clients need at least {min_size} samples each, more than "
                          f"the {n} samples")
    classes = np.unique(labels)
    best: tuple[int, list] | None = None
    for _ in range(tries):
        draw = []  # per class: its samples in a random order, the proportions, the cuts between clients
        for c in classes:
            idx = rng.permutation(np.flatnonzero(labels == c))
            props = rng.dirichlet(np.full(clients, alpha))
            cuts = (np.cumsum(props)[:-1] * len(idx)).astype(int)
            draw.append((idx, props, cuts))
        sizes = sum(_counts(idx, cuts) for idx, _, cuts in draw)
        short = int(np.maximum(min_size - sizes, 0).sum())
        if not short:
            return _clients(draw, clients)
        if best is None or short < best[0]:
            best = (short, draw)
    return _topped_up(best[1], clients, min_size, rng)


def _counts(idx: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Each client's samples of one class (np.split(idx, cuts)'s pieces' lengths)."""
    return np.diff(np.minimum(cuts, len(idx)), prepend=0, append=len(idx)).clip(min=0)


def _owners(idx: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """The client of each of `idx`'s samples under the cuts."""
    return np.repeat(np.arange(len(cuts) + 1), _counts(idx, cuts))


def _clients(draw: list, clients: int, owners: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Each client's samples (sorted) of a draw; `owners`: each class's samples' clients (default: its cuts')."""
    owners = owners if owners is not None else [_owners(idx, cuts) for idx, _, cuts in draw]
    idx = np.concatenate([d[0] for d in draw])  # every sample once: 0..n-1
    owner = np.concatenate(owners)
    key = owner.astype(np.int64) * len(idx) + idx  # by client, then by sample: one sort of integers
    key.sort()
    return np.split(key % len(idx), np.cumsum(np.bincount(owner, minlength=clients))[:-1])


def _topped_up(draw: list, clients: int, min_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The draw with every client below `min_size` given samples, one at a time, by the largest client (the lowest
    id among equals): of the class the draw meant most of for the receiving client (its proportion × the class's
    samples) among those the giver holds, a sample of them chosen at random. The Dirichlet proportions are kept
    but for the few samples moved (the receivers' and the largest clients')."""
    owners = [_owners(idx, cuts) for idx, _, cuts in draw]
    counts = np.stack([np.bincount(o, minlength=clients) for o in owners])  # classes × clients
    meant = np.stack([props * len(idx) for idx, props, _ in draw])  # classes × clients
    sizes = counts.sum(axis=0)
    for k in np.flatnonzero(sizes < min_size):
        while sizes[k] < min_size:
            giver = int(np.argmax(sizes))
            c = int(np.argmax(np.where(counts[:, giver] > 0, meant[:, k], -1.0)))
            owners[c][rng.choice(np.flatnonzero(owners[c] == giver))] = k
            counts[c, giver] -= 1
            counts[c, k] += 1
            sizes[giver] -= 1
            sizes[k] += 1
    return _clients(draw, clients, owners)


def matched_test(train_labels: list[np.ndarray], test_labels: np.ndarray, *, per_client: int,
                 num_classes: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Per client, `per_client` test samples following that client's train label histogram over the classes the
    test split holds (a split may lack some: a client that trains on none of its classes gets no test samples, and
    the error objectives leave it out)."""
    by_class = [np.flatnonzero(test_labels == c) for c in range(num_classes)]
    held = np.array([len(b) > 0 for b in by_class], dtype=float)
    out = []
    for tl in train_labels:
        hist = np.bincount(tl, minlength=num_classes).astype(float) * held
        if not hist.sum():
            out.append(np.empty(0, dtype=np.int64))
            continue
        counts = rng.multinomial(per_client, hist / hist.sum())
        picks = [rng.choice(by_class[c], n, replace=n > len(by_class[c])) for c, n in enumerate(counts) if n]
        out.append(np.sort(np.concatenate(picks)))
    return out


def natural(train_clients: np.ndarray, test_clients: np.ndarray, *, clients: int) -> Partition:
    """Each distinct client id one client: its train rows and its test rows (a stable group-by; rows keep their
    file order). `train_clients` / `test_clients`: each row's client index in 0..clients-1."""
    def group(ix: np.ndarray) -> tuple[np.ndarray, ...]:
        order = np.argsort(ix, kind="stable")
        cuts = np.cumsum(np.bincount(ix, minlength=clients))[:-1]
        return tuple(np.split(order, cuts))
    return Partition(group(np.asarray(train_clients)), group(np.asarray(test_clients)))


def chunk_order(arrived: np.ndarray, sizes: np.ndarray, *, scheme: str) -> np.ndarray:
    """The order in which a round's arrived clients are cut into chunks. Natural clients (unequal sizes) go largest
    first: a chunk then holds clients of similar sizes (the engine runs a chunk as long as its largest client) and
    the longest chunks start first on the chunk threads. Other partitions keep the id order (their fronts stay)."""
    if scheme != "natural":
        return arrived
    return arrived[np.argsort(-np.asarray(sizes)[arrived], kind="stable")]


def split_dataset(data, *, scheme: str, clients: int, seed: int, shards_per_client: int = 2,
                  shard_size: int | None = None, dirichlet_alpha: float = 0.5, test_fraction: float = 1.0) -> Partition:
    """A Dataset's partition: `natural` by its client ids, the others by `partition`."""
    if scheme == "natural":
        if data.train_clients is None or data.test_clients is None:
            raise FedevoError("partition = \"natural\" needs data with client ids ([data] client_id)")
        return natural(data.train_clients, data.test_clients, clients=clients)
    return partition(data.y_train.numpy(), data.y_test.numpy(), scheme=scheme, clients=clients,
                     num_classes=data.num_classes, seed=seed, shards_per_client=shards_per_client,
                     shard_size=shard_size, dirichlet_alpha=dirichlet_alpha, test_fraction=test_fraction)


def partition(train_labels: np.ndarray, test_labels: np.ndarray, *, scheme: str, clients: int,
              num_classes: int, seed: int, shards_per_client: int = 2, shard_size: int | None = None,
              dirichlet_alpha: float = 0.5, test_fraction: float = 1.0) -> Partition:
    rng = np.random.default_rng(seed)
    if scheme == "iid":
        train = iid(train_labels, clients=clients, rng=rng)
    elif scheme == "shards":
        train = shards(train_labels, clients=clients, per_client=shards_per_client, shard_size=shard_size, rng=rng)
    elif scheme == "dirichlet":
        train = dirichlet(train_labels, clients=clients, alpha=dirichlet_alpha, rng=rng)
    else:
        raise FedevoError(f"unknown partition {scheme!r}")
    n_test = max(int(len(test_labels) * test_fraction), clients)
    if scheme == "iid":
        pool = rng.permutation(len(test_labels))[:n_test]
        test = [np.sort(p) for p in np.array_split(pool, clients)]
    else:
        test = matched_test([train_labels[t] for t in train], test_labels, per_client=max(n_test // clients, 1),
                            num_classes=num_classes, rng=rng)
    return Partition(tuple(train), tuple(test))
