"""The bundled datasets by name, their training-set sizes, and the --data-dir check: torch-free, so that a problem
file is checked (dataset name, shards against samples, memory estimate) without loading any data."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import DataNotFoundError, arg

# training samples of each bundled dataset (fedevo.data.datasets loads them)
N_TRAIN = {"digits": 1437, "fashion": 60000, "mnist": 60000, "cifar10": 50000, "synthetic": 600}
DATASETS = tuple(N_TRAIN)
# test examples each bundled dataset's error is measured on (the knee's margin over chance: fedevo.picking)
N_TEST = {"digits": 360, "fashion": 10000, "mnist": 10000, "cifar10": 10000, "synthetic": 200}
# (input shape, classes) of each bundled dataset as fedevo.data.datasets loads it: the model's size (and so the
# communication a configuration will cost) is known without loading the data
SHAPES = {"digits": ((1, 8, 8), 10), "fashion": ((1, 28, 28), 10), "mnist": ((1, 28, 28), 10),
          "cifar10": ((3, 32, 32), 10), "synthetic": ((1, 8, 8), 10)}
# training samples each client of a Dirichlet partition holds at least (fedevo.data.partition.dirichlet redraws
# until every client has them, else tops up the nearest draw): clients × this above the training samples can never
# be met
DIRICHLET_MIN_SAMPLES = 2



def check_data_dir(data_dir: Optional[str], download: bool = False) -> None:
    """A data directory given (for any dataset, even one that does not read it) must exist, unless download
    will create it: a mistyped path is an error, not silently ignored."""
    if data_dir is not None and not download and not Path(data_dir).is_dir():
        why = "is not a directory" if Path(data_dir).exists() else "does not exist"
        raise DataNotFoundError(f"{arg('data_dir', repr(str(data_dir)))} {why} (add {arg('download', True)}, of "
                                "fedevo search or evaluate, to fetch a dataset into a new one)")


__all__ = ["DATASETS", "N_TEST", "N_TRAIN", "SHAPES", "check_data_dir"]
