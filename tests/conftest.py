import os
import signal

import fedevo  # noqa: F401  (sets the OpenMP wait policy before torch loads)
import pytest

# device = "auto" trains on the CPU in the tests, on a machine with a GPU too (subprocesses and Ray workers inherit
# it): the suite's numbers are the CPU engine's. The `cuda` tests ask for the GPU explicitly.
os.environ.setdefault("FEDEVO_DEVICE", "cpu")

# A suite started in the background by a non-interactive shell (`pytest &`, nohup, some CI runners) inherits SIGINT
# ignored, and so would every command a test starts: the tests of Ctrl-C would see nothing happen. Ctrl-C is the
# default again here (Python's own handler; a command the tests start gets the default disposition on exec).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (setup.cfg's addopts): a worker per core, at most 4 — each imports torch, and some tests start a
    local Ray or a Chromium of their own."""
    return max(1, min(4, os.cpu_count() or 1))


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.cuda` tests are skipped, not failed, where torch sees no GPU."""
    marked = [it for it in items if it.get_closest_marker("cuda") is not None]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
    for it in marked:
        it.add_marker(skip)


@pytest.fixture
def tiny_problem(tmp_path):
    """A problem file on synthetic data that trains in well under a second."""
    from fedevo.problem import load_problem

    path = tmp_path / "tiny.toml"
    path.write_text("""
name = "tiny"
dataset = "synthetic"
model = "mlp"
[data]
partition = "iid"
clients = 6
[train]
rounds = 3
epochs = 1
batch_size = 16
upload_loss = 0.0
[privacy]
mechanism = "none"
clip = 1.0
[genes]
layers = { type = "int", low = 1, high = 2, default = 1 }
units = { type = "int", low = 8, high = 32, default = 16 }
lr = { type = "real", low = 0.01, high = 0.5, default = 0.2 }
participation = { type = "real", low = 0.1, high = 1.0, default = 1.0 }
alpha = { type = "real", low = 1, high = 8, default = 4 }
xi = { type = "real", low = 0.0, high = 0.5, default = 0.2 }
""")
    return load_problem(str(path))
