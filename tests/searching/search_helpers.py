"""Helpers shared by the tests of fedevo.searching (module name kept unique across the test tree)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import read_csv  # noqa: F401  (shared; the search tests import it from here)

REPO = Path(__file__).resolve().parents[2]
FAKE = "tests.searching.search_fakes:fake_evaluate"

TOY_SETTINGS = """dataset = "digits"
model = "mlp"
[data]
clients = 4
[train]
rounds = 1
epochs = 1
[privacy]
mechanism = "update"
clip = 1.0
"""  # (what the toy problem fixes; its genes below: other toys of tests take these settings with genes of theirs)

TOY_TOML = """
name = "toy"
""" + TOY_SETTINGS + """[genes]
layers = { type = "int", low = 1, high = 4, default = 1 }
units = { type = "int", low = 16, high = 256, default = 32, log = true }
similarity = { type = "choice", choices = ["sign", "cosine"], default = "sign" }
partition = { type = "choice", choices = ["iid", "shards", "dirichlet"], default = "iid" }
lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }
sigma = { type = "real", low = 0.05, high = 2.0, default = 0.3, log = true }
"""


def toy_problem_file(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "toy.toml"
    p.write_text(TOY_TOML + extra)
    return p


# the two places a user model's code runs, each writing from Python and below it (fd 1): its factory (`chatty`,
# whose `width` a gene may set) and its forward pass (`loud`)
USER_MODELS = """
import math, os
import torch.nn as nn

def chatty(input_shape, num_classes, width=8):
    print(f"factory printed width={width}")
    os.write(1, f"factory wrote to fd 1 width={width}\\n".encode())
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), width), nn.ReLU(),
                         nn.Linear(width, num_classes))

class Loud(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        print("forward printed")
        os.write(1, b"forward wrote to fd 1\\n")
        return self.fc(x.flatten(1))

def loud(input_shape, num_classes):
    return Loud(math.prod(input_shape), num_classes)
"""
LR_GENE = 'lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }'


def user_model_problem(tmp_path: Path, factory: str, *, dataset: str = "synthetic", gene: str = LR_GENE) -> Path:
    """tmp_path/um.toml: 4 clients of `dataset`, 1 round of 1 epoch, the model `factory` of USER_MODELS (written to
    tmp_path/models.py), one gene."""
    (tmp_path / "models.py").write_text(USER_MODELS)
    problem = tmp_path / "um.toml"
    problem.write_text(f'name = "um"\ndataset = "{dataset}"\nmodel = "python:models.py:{factory}"\n[data]\n'
                       'clients = 4\n[train]\nrounds = 1\nepochs = 1\nbatch_size = 16\ndevice = "cpu"\n'
                       f'[genes]\n{gene}\n')
    return problem


def env(**extra) -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e.update({k: str(v) for k, v in extra.items()})
    return e


def cli_cmd(*args) -> list[str]:
    return [sys.executable, "-c", "from fedevo.cli import main; main()", *map(str, args)]


def run_cli(*args, timeout=240, **env_extra) -> subprocess.CompletedProcess:
    return subprocess.run(cli_cmd(*args), cwd=REPO, env=env(**env_extra), capture_output=True, text=True,
                          timeout=timeout)




def objectives(row: dict, eps_key: str = "eps") -> tuple:
    def v(s):
        x = math.inf if s in ("", None) else float(s)
        return math.inf if math.isnan(x) else x
    return v(row["error"]), v(row["comm"]), v(row[eps_key])


def dominates(a, b) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


def without(rows, *cols):
    return [{k: v for k, v in r.items() if k not in cols} for r in rows]


def unchain(run_dir: Path) -> None:
    """Make a run's evaluations.csv what a version before the hash chain wrote (its last column dropped)."""
    import csv
    import io

    p = Path(run_dir) / "evaluations.csv"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(r[:-1] for r in csv.reader(io.StringIO(p.read_text())))
    assert p.read_text().splitlines()[0].endswith(",chain")
    p.write_text(buf.getvalue())


def by_id(rows):
    return sorted(rows, key=lambda r: int(r["id"]))
