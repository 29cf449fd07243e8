"""A run records the data and code files it ran with (issue 35): run.json's `inputs` holds their SHA-256, and
`fedevo resume` refuses with one line naming the file when one changed or is gone between a kill and the resume."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.searching.inputs import check_inputs, digest, fingerprint
from fedevo.searching.rundata import read_run_json

from tests.data.user_data import write_npz
from tests.helpers import cli

from .search_helpers import read_csv, unchain, without

EVALUATOR = "from tests.searching.search_fakes import fake_evaluate as evaluate  # the user's evaluator\n"
MODEL = """from torch import nn

from inputs_test_layers import block

def make(input_shape, num_classes, hidden=8):
    return nn.Sequential(nn.Flatten(), block(64, hidden), nn.Linear(hidden, num_classes))
"""
SIBLING = """from torch import nn  # a module beside m.py that it imports (a name no other test's sys.modules holds)

def block(a, b):
    return nn.Sequential(nn.Linear(a, b), nn.ReLU())
"""

PROBLEM = """model = "python:m.py:make"
[data]
source = "npz"
path = "d.npz"
partition = "natural"
[train]
rounds = 2
epochs = 1
batch_size = 16
participation = 1.0
[genes]
lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }
hidden = { type = "int", low = 4, high = 16, default = 8 }
"""


def shuffle_labels(f, seed: int) -> None:
    """The .npz's labels shuffled in place: the same shapes, another task."""
    with np.load(f) as z:
        arrays = dict(z)
    arrays["y"] = np.random.default_rng(seed).permutation(arrays["y"])
    np.savez(f, **arrays)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished search on the user's .npz data (own model file, own evaluator file), and the same search killed
    during its last generation (its newest checkpoint gone: resume has work to do)."""
    tmp = tmp_path_factory.mktemp("inputs")
    write_npz(tmp / "d.npz")
    (tmp / "ev.py").write_text(EVALUATOR)
    (tmp / "m.py").write_text(MODEL)
    (tmp / "inputs_test_layers.py").write_text(SIBLING)
    prob = tmp / "user.toml"
    prob.write_text(PROBLEM)
    run = fedevo.search(str(prob), pop=4, gen=2, seed=2, workers=0, out=tmp / "done", page=False,
                        evaluator=f"python:{tmp / 'ev.py'}:evaluate")
    return tmp, run.path


def killed(made, name):
    tmp, done = made
    d = tmp / name
    shutil.copytree(done, d)
    (d / "checkpoints" / "gen-0002.pkl").unlink()
    return d


def test_run_json_records_every_data_and_code_file(made):
    tmp, done = made
    meta, prob, settings = read_run_json(done)
    recorded = {(e["role"], e["path"]): e["sha256"] for e in meta["inputs"]}
    assert recorded == {("[data] path", str((tmp / "d.npz").resolve())): digest(tmp / "d.npz")[0],
                        ("model", str((tmp / "m.py").resolve())): digest(tmp / "m.py")[0],
                        ("imported by model", str((tmp / "inputs_test_layers.py").resolve())):
                            digest(tmp / "inputs_test_layers.py")[0],
                        ("--evaluator", str((tmp / "ev.py").resolve())): digest(tmp / "ev.py")[0]}
    assert fingerprint(prob, settings) == meta["inputs"]
    check_inputs(meta, done)  # unchanged: nothing to say


def test_an_unchanged_run_resumes_as_if_never_stopped(made):
    tmp, done = made
    d = killed(made, "same")
    fedevo.resume(d, workers=0, page=False)
    assert without(read_csv(d / "evaluations.csv"), "wall_s", "chain") == \
        without(read_csv(done / "evaluations.csv"), "wall_s", "chain")


@pytest.mark.parametrize("which", ["d.npz", "m.py", "ev.py", "inputs_test_layers.py"])
def test_a_changed_data_or_code_file_is_refused_by_resume(made, which):
    """A module beside the model file that it imports (inputs_test_layers.py) is the model's code too."""
    tmp, _ = made
    d = killed(made, f"changed-{which}")
    f = tmp / which
    before, rows = f.read_bytes(), (d / "evaluations.csv").read_bytes()
    try:
        if which == "d.npz":  # the labels shuffled: the same shapes, another task
            shuffle_labels(f, 0)
        else:
            f.write_text(f.read_text() + "# edited\n")
        r = cli("resume", d, "--workers", "0", "--quiet")
    finally:
        f.write_bytes(before)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"fedevo: error: {f.resolve()} (")
    assert "changed since run" in r.stderr and "Traceback" not in r.stderr
    assert ("(imported by model) changed" in r.stderr) == (which == "inputs_test_layers.py")
    assert (d / "evaluations.csv").read_bytes() == rows  # nothing evaluated


def test_a_file_gone_is_refused(made, tmp_path):
    tmp, done = made
    meta = json.loads((done / "run.json").read_text())
    gone = dict(meta, inputs=[dict(meta["inputs"][0], path=str(tmp_path / "nothing.npz"))])
    with pytest.raises(FedevoError, match=r"nothing.npz \(\[data\] path\), which run .* was made with, is gone"):
        check_inputs(gone, done)


def test_a_run_made_before_the_record_still_resumes(made):
    """No `inputs` in run.json (and so no hash chain): resumed unchecked, as before."""
    d = killed(made, "old")
    unchain(d)
    meta = json.loads((d / "run.json").read_text())
    del meta["inputs"]
    (d / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
    fedevo.resume(d, workers=0, page=False)
    assert len(read_csv(d / "evaluations.csv")) == 8


@pytest.mark.parametrize("which", ["d.npz", "m.py"])
def test_a_changed_data_or_code_file_is_refused_by_retrain(made, which, tmp_path):
    """`fedevo retrain` read the run's data and model files as they are now: another data set retrained the picks
    on another task than the one searched, with no word. It now refuses as resume does."""
    tmp, done = made
    d = tmp_path / "run"
    shutil.copytree(done, d)
    f = tmp / which
    before = f.read_bytes()
    try:
        if which == "d.npz":
            shuffle_labels(f, 1)
        else:
            f.write_text(f.read_text() + "# edited\n")
        r = cli("retrain", d, "--pick", "knee", "--rounds", "1", "--workers", "0")
    finally:
        f.write_bytes(before)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"fedevo: error: {f.resolve()} (")
    assert "retrained on another task" in r.stderr and "nothing was trained" in r.stderr
    assert not (d / "retrain").exists()


def test_a_changed_data_file_is_refused_by_audit(made, tmp_path):
    from fedevo.auditing.targets import from_run

    tmp, done = made
    f = tmp / "d.npz"
    before = f.read_bytes()
    try:
        shuffle_labels(f, 2)
        with pytest.raises(FedevoError, match=r"its picks would be audited on another task .*nothing was audited"):
            from_run(done, "0")
    finally:
        f.write_bytes(before)


def test_an_audited_id_pick_is_named_once(tmp_path_factory):
    from fedevo.auditing.targets import from_run
    from tests.viz.fedevo_runs import central_run

    run = central_run(tmp_path_factory)
    (t,) = from_run(run, "0")
    assert t.label == "id 0"  # it read "id 0 (id 0)"
    (k,) = from_run(run, "knee")
    assert k.label.startswith("id ") and k.label.endswith("(knee)")
