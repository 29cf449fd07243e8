"""Data: datasets as tensors (bundled by name, or the user's own: sources.py), and their partition over clients."""

from __future__ import annotations


def load_data(dc):
    """The Dataset a DataConfig names: the user's data (`dc.source`) or a bundled dataset by name."""
    if dc.source is not None:
        from .sources import load_user

        return load_user(dc.source)
    from .datasets import load_dataset

    return load_dataset(dc.dataset, dc.data_dir, dc.download)


def load_and_partition(dc, *, seed: int):
    """(Dataset, Partition) of a DataConfig for one evaluation's seed."""
    from .partition import split_dataset

    data = load_data(dc)
    part = split_dataset(data, scheme=dc.partition, clients=dc.clients, seed=seed,
                         shards_per_client=dc.shards_per_client, shard_size=dc.shard_size,
                         dirichlet_alpha=dc.dirichlet_alpha, test_fraction=dc.test_fraction)
    return data, part
