"""A problem made from a dict (docs/api.md) names its files relative to the folder it was made in: the run
directory records them absolute, so every later command reads the same files from any folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import fedevo
from tests.helpers import REPO


def _project(folder, seed):
    folder.mkdir()
    rng = np.random.default_rng(seed)
    n = 240
    np.savez(folder / "mine.npz", x=rng.normal(size=(n, 8)).astype(np.float32), y=rng.integers(0, 3, n),
             client_id=np.repeat(np.arange(4), n // 4))
    shutil.copy(REPO / "examples" / "models.py", folder / "models.py")


DOC = {"name": "mine", "model": "python:models.py:make_mlp", "model_args": {"hidden": 8, "depth": 1},
       "data": {"source": "npz", "path": "mine.npz", "partition": "natural"},
       "train": {"rounds": 1, "epochs": 1, "batch_size": 16},
       "privacy": {"mechanism": "none"},
       "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}}}


def test_a_dict_problems_files_are_recorded_absolute_and_read_from_any_folder(tmp_path, monkeypatch):
    project, other = tmp_path / "project", tmp_path / "other"
    _project(project, 0)
    _project(other, 1)  # the same names, other data
    monkeypatch.chdir(project)
    run = fedevo.search(DOC, out=str(project / "run"), pop=4, gen=1, seed=0, workers=0, progress=False)
    text = json.loads((project / "run" / "run.json").read_text())["problem"]["text"]
    assert str(project / "mine.npz") in text and f"python:{project / 'models.py'}:make_mlp" in text
    monkeypatch.chdir(other)
    data = fedevo.open_run(run.path).data
    assert data.problem.data_source.spec.path == str(project / "mine.npz")
    assert len(data.front) >= 1


@pytest.mark.parametrize("key", ["path", "test_path"])
def test_anchored_makes_only_relative_names_absolute(tmp_path, key):
    from fedevo.problem import anchored

    doc = {"data": {key: "a/b.npz"}, "model": "python:m.py:f", "evaluator": "pkg.mod:fn",
           "objective": {"lat": {"read": "python:o.py:g", "worst": 1.0}}}
    got = anchored(doc, tmp_path)
    assert got["data"][key] == str(tmp_path / "a" / "b.npz")
    assert got["model"] == f"python:{tmp_path / 'm.py'}:f" and got["evaluator"] == "pkg.mod:fn"
    assert got["objective"]["lat"] == {"read": f"python:{tmp_path / 'o.py'}:g", "worst": 1.0}
    assert anchored({"data": {key: "/abs/x.npz"}}, tmp_path)["data"][key] == "/abs/x.npz"
    assert doc["data"][key] == "a/b.npz"  # the caller's dict unchanged


def test_a_runs_readers_need_none_of_its_files_and_run_none_of_its_code(tmp_path, monkeypatch, capsys):
    """front, plot, open_run read the run directory alone: the data's facts (classes, test rows: the knee's bar)
    come from run.json, the model is not imported. The project moved away, they still answer, the same; resume
    and retrain, which need the files, say which is gone."""
    from tests.helpers import run_cli as cli

    project = tmp_path / "project"
    _project(project, 0)
    (project / "models.py").write_text((project / "models.py").read_text() + "\nprint('MODELS IMPORTED')\n")
    monkeypatch.chdir(project)
    run = fedevo.search(DOC, out=str(tmp_path / "run"), pop=4, gen=1, seed=0, workers=0, progress=False)
    d = fedevo.open_run(run.path).data
    # (as text: a row without privacy holds eps_paper NaN, which no NaN equals)
    before = repr((d.num_classes, d.n_test, d.knee_bar, fedevo.open_run(run.path).pick("lowest-error:2")))
    assert "data_facts" in json.loads((run.path / "run.json").read_text())
    capsys.readouterr()
    project.rename(tmp_path / "moved")
    monkeypatch.chdir(tmp_path)
    d = fedevo.open_run(run.path).data
    assert repr((d.num_classes, d.n_test, d.knee_bar, fedevo.open_run(run.path).pick("lowest-error:2"))) == before
    for argv in (["front", str(run.path), "--json"], ["plot", str(run.path)]):
        code, out, err = cli(argv, capsys)
        assert code == 0 and "MODELS IMPORTED" not in out + err, (argv, err)
    for argv in (["retrain", str(run.path), "--pick", "lowest-error:1", "--rounds", "1", "--workers", "0"],
                 ["resume", str(run.path), "--budget", "8", "--workers", "0", "--quiet"]):
        code, out, err = cli(argv, capsys)
        assert code == 2 and "mine.npz" in err and ("is gone" in err or "does not exist" in err), (argv, err)
