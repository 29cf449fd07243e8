"""The bundled datasets by name, and their training-set sizes: torch-free, so that a problem file is checked
(dataset name, shards against samples, memory estimate) without loading any data."""

from __future__ import annotations

# training samples of each bundled dataset (fedevo.data.datasets loads them)
N_TRAIN = {"digits": 1437, "fashion": 60000, "mnist": 60000, "cifar10": 50000, "synthetic": 600}
DATASETS = tuple(N_TRAIN)

__all__ = ["DATASETS", "N_TRAIN"]
