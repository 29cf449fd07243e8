"""A search whose problem cannot make its ε finite (no privacy mechanism, none a gene can pick; the paper's ε under
central trust): the ε leaves a default objective list with one note, and is refused where the file names it."""

from __future__ import annotations

import json

import pytest

from fedevo.finite_eps import never_finite
from fedevo.problem import Problem
from tests.helpers import cli

from . import search_fakes
from .search_helpers import read_csv
from .test_search_run import run_fake

PLAIN = """name = "plain"
dataset = "digits"
model = "mlp"
{top}
[data]
clients = 4
[train]
rounds = 1
epochs = 1
[privacy]
{privacy}
[genes]
units = {{ type = "int", low = 16, high = 64, default = 32 }}
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
{genes}
"""


PRIVACY = "clip = 1.0"  # for a gene that picks a mechanism (update needs its clip)


def plain(tmp_path, top="", privacy='mechanism = "none"', genes="", name="plain.toml"):
    p = tmp_path / name
    p.write_text(PLAIN.format(top=top, privacy=privacy, genes=genes))
    return p


def search_cli(problem, out, *more):
    return cli("search", "--problem", problem, "--pop", "4", "--gen", "2", "--seed", "1", "--workers", "0", "--quiet",
               "--out", out, *more)


def test_a_search_without_privacy_leaves_eps_out_with_one_note(tmp_path):
    r = search_cli(plain(tmp_path), tmp_path / "R")
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if "note:" in line]
    assert notes == ["fedevo: note: problem 'plain': mechanism 'none' gives no privacy: ε = ∞ in every evaluation, "
                     "so the search leaves eps out of its objectives (searches error, comm)"], r.stderr
    meta = json.loads((tmp_path / "R" / "run.json").read_text())
    assert meta["objectives"] == ["error", "comm"] and "eps" in meta["objectives_left_out"]
    assert list(read_csv(tmp_path / "R" / "hypervolume.csv")[0]) == [
        "generation", "evaluations", "front_size", "hypervolume", "lo_error", "lo_comm", "scale_error", "scale_comm"]
    r = cli("resume", tmp_path / "R", "--gen", "3", "--workers", "0", "--quiet")  # the recorded objectives go on
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    assert json.loads((tmp_path / "R" / "run.json").read_text())["objectives"] == ["error", "comm"]


@pytest.mark.parametrize("top, says", [
    ('objectives = ["error", "comm", "eps"]',
     "fedevo: error: problem 'plain': objectives 'eps': mechanism 'none' gives no privacy: ε = ∞ in every evaluation; "
     "remove it from objectives, or set [privacy] mechanism to one that gives privacy, or make it a gene"),
    ("[constraints]\neps = 8",
     "fedevo: error: problem 'plain': [constraints] eps: mechanism 'none' gives no privacy: ε = ∞ in every "
     "evaluation, so no evaluation could meet it; remove the bound, or set [privacy] mechanism to one that gives "
     "privacy, or make it a gene"),
])
def test_eps_named_or_bound_on_a_problem_without_privacy_is_one_line(tmp_path, top, says):
    text = plain(tmp_path).read_text()
    text = text.replace("[data]", top + "\n[data]") if top.startswith("objectives") else text + top + "\n"
    (tmp_path / "p.toml").write_text(text)
    r = search_cli(tmp_path / "p.toml", tmp_path / "R")
    assert r.returncode == 2 and r.stderr == says + "\n", r.stderr
    assert not (tmp_path / "R").exists()


def test_the_papers_eps_under_central_trust_is_one_line(tmp_path):
    p = tmp_path / "central.toml"
    p.write_text(PLAIN.format(top='eps_objective = "eps_paper"', genes="",
                              privacy='mechanism = "update"\ntrust = "central"\nsigma = 1.0\nclip = 1.0'))
    r = search_cli(p, tmp_path / "R")
    assert r.returncode == 2, r.stderr
    assert r.stderr == ("fedevo: error: problem 'plain': eps_objective 'eps_paper': eps_paper (the paper's closed "
                        "form, for local trust) is undefined under trust 'central': NaN in every evaluation; use trust "
                        "= \"local\", or eps_objective = \"eps\"\n"), r.stderr


@pytest.mark.parametrize("genes, never", [
    ("", {"eps", "eps_paper"}),
    ('preset = { type = "choice", choices = ["fedavg"], default = "fedavg" }', {"eps", "eps_paper"}),
    ('preset = { type = "choice", choices = ["fedavg", "dp-fedavg"], default = "fedavg" }\n'
     'sigma = { type = "real", low = 0.5, high = 2.0, default = 1.0 }', set()),
    ('mechanism = { type = "choice", choices = ["none", "update"], default = "none" }\n'
     'sigma = { type = "real", low = 0.5, high = 2.0, default = 1.0 }', set()),
])
def test_which_problems_cannot_make_eps_finite(tmp_path, genes, never):
    prob = Problem.from_file(plain(tmp_path, genes=genes, privacy=PRIVACY if "sigma" in genes else 'mechanism = "none"'))
    assert set(never_finite(prob)) == never


def test_a_mechanism_gene_keeps_eps(tmp_path):
    genes = ('mechanism = { type = "choice", choices = ["none", "update"], default = "none" }\n'
             'sigma = { type = "real", low = 0.5, high = 2.0, default = 1.0 }')
    r = search_cli(plain(tmp_path, genes=genes, privacy="clip = 1.0"), tmp_path / "R")
    assert r.returncode == 0 and "note:" not in r.stderr, r.stderr
    assert json.loads((tmp_path / "R" / "run.json").read_text())["objectives"] == ["error", "comm", "eps"]


def test_another_evaluator_reports_its_own_eps(tmp_path):
    """Only fedevo's simulator is known to give ε = ∞ here: an evaluator of the caller's keeps the objectives."""
    run_fake(tmp_path / "R", problem=str(plain(tmp_path)), pop=4, gen=1, evaluator=search_fakes.fake_evaluate)
    assert json.loads((tmp_path / "R" / "run.json").read_text())["objectives"] == ["error", "comm", "eps"]
