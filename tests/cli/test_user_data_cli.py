"""The user's data from the command line: `fedevo evaluate` / `fedevo search` on an .npz problem give objectives;
bad data is one `fedevo: error:` line naming the problem, exit 2, and nothing written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from tests.cli.test_bad_input import bad
from tests.data.user_data import SIZES, problem, rows, write_npz, write_parquet
from tests.helpers import run_cli as run

NATURAL = 'source = "npz"\npath = "d.npz"\npartition = "natural"'


@pytest.fixture
def npz_problem(tmp_path):
    write_npz(tmp_path / "d.npz")
    return problem(tmp_path / "user.toml", NATURAL)


def test_evaluate_npz_natural_gives_objectives(npz_problem, capsys):
    code, out, err = run(["evaluate", "--problem", str(npz_problem), "--json", "--seed", "1", "--quiet"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["status"] == "ok" and 0 <= d["error"] <= 1 and d["comm"] > 0 and d["omega"] > 0


def test_search_npz_natural_writes_a_front(npz_problem, tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = run(["search", "--problem", str(npz_problem), "--pop", "4", "--gen", "1", "--workers", "0",
                        "--quiet", "--out", str(out)], capsys)
    assert code == 0, err
    with open(out / "evaluations.csv") as f:
        evals = list(csv.DictReader(f))
    assert len(evals) == 4 and all(r["status"] == "ok" for r in evals)
    assert all(0 <= float(r["error"]) <= 1 for r in evals)
    assert (out / "front.csv").read_text().count("\n") >= 2


def _bad_search(capsys, tmp_path, prob, expect):
    out = tmp_path / "never"
    bad(capsys, ["search", "--problem", prob, "--pop", "4", "--gen", "1", "--workers", "0", "--quiet", "--out", out],
        expect, watch=out)
    assert not out.exists()


def test_missing_data_file(tmp_path, capsys):
    prob = problem(tmp_path / "p.toml", NATURAL)
    _bad_search(capsys, tmp_path, prob, r"problem 'p': \[data\] path: .*d\.npz does not exist")


def test_missing_test_file(tmp_path, capsys):
    write_npz(tmp_path / "d.npz")
    prob = problem(tmp_path / "p.toml", NATURAL + '\ntest_path = "t.npz"')
    _bad_search(capsys, tmp_path, prob, r"\[data\] test_path: .*t\.npz does not exist")


@pytest.mark.parametrize("key, value, expect", [
    ("x", "pixels", r"no array 'pixels' for the features x; it has 'x', 'y', 'client_id'"),
    ("y", "label", r"no array 'label' for the labels y"),
    ("client_id", "user", r"no array 'user' for the client ids"),
])
def test_missing_array(tmp_path, capsys, key, value, expect):
    write_npz(tmp_path / "d.npz")
    prob = problem(tmp_path / "p.toml", NATURAL + f'\n{key} = "{value}"')
    _bad_search(capsys, tmp_path, prob, r"problem 'p': .*d\.npz: " + expect)


def test_missing_parquet_column(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    write_parquet(tmp_path / "d.parquet")
    prob = problem(tmp_path / "p.toml", 'source = "parquet"\npath = "d.parquet"\nx = ["f0", "f9"]\ny = "label"\n'
                   'client_id = "user"\npartition = "natural"')
    _bad_search(capsys, tmp_path, prob, r"no column 'f9' for the features x; it has 'f0', .*'label', 'user'")


@pytest.mark.parametrize("labels, expect", [
    (lambda y: y + 0.5, r"labels must be integer classes; row 0 has 0?\.5|labels must be integer classes; row 0"),
    (lambda y: np.array([f"c{v}" for v in y]), r"labels must be integer classes, got dtype <U\d+ \(map the class"),
    (lambda y: y - 1, r"labels must be classes 0\.\.K-1, found -1"),
])
def test_non_integer_labels(tmp_path, capsys, labels, expect):
    _, y, _ = rows()
    write_npz(tmp_path / "d.npz", y=labels(y))
    _bad_search(capsys, tmp_path, problem(tmp_path / "p.toml", NATURAL), r"problem 'p': .*" + expect)


def test_client_id_column_with_one_client(tmp_path, capsys):
    x, _, ids = rows()
    write_npz(tmp_path / "d.npz", client_id=np.zeros(len(ids), dtype=np.int64))
    _bad_search(capsys, tmp_path, problem(tmp_path / "p.toml", NATURAL),
                r"problem 'p': .*d\.npz: client id 'client_id' has only one client \(0\)")


def test_evaluate_bad_data_is_one_line_too(tmp_path, capsys):
    write_npz(tmp_path / "d.npz", client_id=None)
    prob = problem(tmp_path / "p.toml", NATURAL)
    bad(capsys, ["evaluate", "--problem", prob, "--quiet"], r"problem 'p': .*no array 'client_id' for the client ids")


@pytest.mark.parametrize("data, expect", [
    ('source = "csv"\npath = "d.npz"', r"source 'csv' is not one of npz, parquet, hf"),
    ('source = "npz"', r"source = 'npz' needs a path"),
    ('source = "npz"\npath = "d.npz"\nholdout = 1.5', r"holdout must be a fraction in \(0, 1\)"),
    ('source = "npz"\npath = "d.npz"\npartition = "natural"\nclients = 3',
     r"the data has 5 clients \(distinct client ids\), clients = 3 differs"),
    ('source = "npz"\npath = "d.npz"\nwings = 2', r"\[data\] wings: unknown key"),
])
def test_bad_data_keys(tmp_path, capsys, data, expect):
    write_npz(tmp_path / "d.npz")
    bad(capsys, ["evaluate", "--problem", problem(tmp_path / "p.toml", data), "--quiet"], expect)


def test_dataset_and_source_together(tmp_path, capsys):
    write_npz(tmp_path / "d.npz")
    p = problem(tmp_path / "p.toml", NATURAL)
    p.write_text('dataset = "digits"\n' + p.read_text())
    bad(capsys, ["evaluate", "--problem", p, "--quiet"], r"give either dataset = \.\.\. .* or a \[data\] source")


def test_natural_without_ids_for_a_bundled_dataset(capsys):
    bad(capsys, ["evaluate", "--params", '{"partition": "natural"}', "--quiet"], r"needs data with client ids")


def test_cnn_on_feature_vectors(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    write_parquet(tmp_path / "d.parquet")
    p = problem(tmp_path / "p.toml", 'source = "parquet"\npath = "d.parquet"\nx = ["f0", "f1"]\ny = "label"')
    p.write_text(p.read_text().replace('model = "mlp"', 'model = "cnn"').replace("layers = 1\nunits = 16\n", ""))
    bad(capsys, ["evaluate", "--problem", p, "--quiet"], r"model 'cnn' needs image features \(C, H, W\)")


def test_sizes_fixture_has_a_client_smaller_than_the_batch():
    assert min(SIZES.values()) < 16 < max(SIZES.values())


def test_relative_data_path_survives_a_retrain_from_elsewhere(tmp_path, monkeypatch, capsys):
    """run.json records the problem file's absolute path, so its relative [data] path resolves from any cwd."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "other").mkdir()
    write_npz(tmp_path / "proj" / "d.npz")
    problem(tmp_path / "proj" / "user.toml", NATURAL)
    monkeypatch.chdir(tmp_path / "proj")
    code, _, err = run(["search", "--problem", "user.toml", "--pop", "4", "--gen", "1", "--workers", "0", "--quiet",
                        "--out", "run"], capsys)
    assert code == 0, err
    monkeypatch.chdir(tmp_path / "other")
    code, _, err = run(["retrain", str(tmp_path / "proj" / "run"), "--pick", "1", "--workers", "0", "--rounds", "1",
                        "--quiet", "--out", "rt"], capsys)
    assert code == 0, err
    assert (tmp_path / "other" / "rt" / "results.json").is_file()


def test_audit_of_a_natural_problem(tmp_path, capsys):
    """The audit re-sizes the canary deployment's clients: the natural partition's client count is checked where
    the problem's settings are resolved, not in every DataConfig."""
    write_npz(tmp_path / "d.npz")
    p = problem(tmp_path / "p.toml", NATURAL, train="")
    p.write_text(p.read_text().replace("[genes]", '[privacy]\nmechanism = "update"\nsigma = 1.0\nclip = 1.0\n[genes]'))
    code, _, err = run(["audit", "--problem", str(p), "--canaries", "20", "--out", str(tmp_path / "aud")], capsys)
    assert code == 0, err
    assert (tmp_path / "aud" / "audit.json").is_file()
