"""The docs' code blocks that a user pastes, where no other test runs them: docs/models.md's factory and problem
file, docs/problems.md's evaluator and objective examples, docs/engine.md's opt-in keys; every shell block names a
run directory that one command takes (no glob that matches several runs); docs/retrain-example.md and its .csv are
one report. (docs/api.md: tests/test_api_docs.py; docs/data.md: tests/data/test_docs_data.py; examples/README.md:
tests/test_examples.py; README.md: tests/cli/test_readme_cli.py.)"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import fedevo
from fedevo import _toml

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md")) + [REPO / "README.md", REPO / "examples" / "README.md",
                                     REPO / "experiments" / "README.md"]


def fenced(page: Path) -> list[tuple[str, str]]:
    """Every fenced block of a page: (its language, possibly "", its text)."""
    out, lang, body = [], None, []
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            if lang is None:
                lang, body = line[3:].strip(), []
            else:
                out.append((lang, "\n".join(body) + "\n"))
                lang = None
        elif lang is not None:
            body.append(line)
    return out


def blocks(page: Path, lang: str) -> list[str]:
    return [text for la, text in fenced(page) if la == lang]


GENE = '\n[genes]\nlr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }\n'


def test_models_md_factory_and_problem_file_evaluate(tmp_path):
    (factory,) = blocks(DOCS / "models.md", "python")
    problem_file = blocks(DOCS / "models.md", "toml")[1]
    (tmp_path / "models.py").write_text(factory)
    (tmp_path / "mine.toml").write_text(problem_file)
    problem = fedevo.Problem.from_file(tmp_path / "mine.toml")
    r = fedevo.evaluate(problem, {"hidden": 32}, rounds=1)
    assert r.status == "ok" and 0 <= r.error <= 1


def test_problems_md_evaluator_example_is_the_examples_file(tmp_path):
    """The page's own_training problem runs beside examples/own_training.py, and is that example's file."""
    text = blocks(DOCS / "problems.md", "toml")[0]
    example = _toml.loads((REPO / "examples" / "own_training.toml").read_text())
    example.pop("description")
    assert _toml.loads(text) == example
    shutil.copy(REPO / "examples" / "own_training.py", tmp_path)
    (tmp_path / "own_training.toml").write_text(text)
    r = fedevo.evaluate(fedevo.Problem.from_file(tmp_path / "own_training.toml"), {}, rounds=2)
    assert r.status == "ok", r.message


def test_problems_md_objective_table_loads(tmp_path):
    text = blocks(DOCS / "problems.md", "toml")[1]
    (tmp_path / "my_objectives.py").write_text("def latency(result):\n    return result.metrics.get('latency')\n")
    (tmp_path / "p.toml").write_text('dataset = "digits"\nmodel = "mlp"\n' + text + GENE)
    problem = fedevo.Problem.from_file(tmp_path / "p.toml")
    assert list(problem.objectives) == ["error", "comm", "eps", "latency"]


def test_engine_md_opt_in_keys_load(tmp_path):
    (text,) = blocks(DOCS / "engine.md", "toml")
    (tmp_path / "p.toml").write_text('dataset = "digits"\nmodel = "mlp"\n' + text + GENE)
    cfg = fedevo.Problem.from_file(tmp_path / "p.toml").sim_config()
    assert (cfg.batch_schedule, cfg.tf32, cfg.torch_compile) == ("device", True, True)


def test_shell_blocks_give_a_command_one_run_directory():
    """`fedevo audit runs/digits_mlp-*/` takes every digits_mlp run there is, and a second one is 'unexpected extra
    argument': a block names the newest with `run=$(ls -td ... | head -n 1)` instead."""
    bad = [(page.name, line) for page in PAGES for lang, block in fenced(page) if lang in ("bash", "sh", "")
           for line in block.splitlines()
           if re.match(r"\s*fedevo\s", line) and re.search(r"\s\S*\*\S*", line.split("#")[0])]
    assert not bad, bad



def test_retrain_example_md_and_csv_are_one_report():
    """docs/retrain-example.md says its numbers are those of report.csv: the committed .csv beside it is that file."""
    md = (DOCS / "retrain-example.md").read_text()
    first = md.split("| Solution | picked by |", 1)[1].split("\n\n", 1)[0]  # the retrained numbers' table
    table = [[c.strip() for c in line.split("|")[1:-1]] for line in first.splitlines()[2:]]
    with open(DOCS / "retrain-example.csv", newline="") as f:
        report = list(csv.DictReader(f))
    assert table and [(r["solution"], r["label"], r["id"] or "–", r["accuracy"], r["comm"], r["eps"])
                      for r in report] == [(t[0], t[1], t[2], t[3], t[7], t[9]) for t in table]


def test_retrain_example_eps_are_todays_accountant():
    """README.md says docs/retrain-example.md gives the numbers its commands give. Its ε (central trust, digits_mlp's
    deployment) are the accountant's of each pick's σ, at the 150 rounds retrained and the search's 10: after the
    finer PLD for small ε they were 3-7 % above what the same commands print (0.0522 for 0.0490)."""
    from fedevo.privacy.accounting import eps_central

    problem = fedevo.Problem.from_file("digits_mlp").sim_config()
    with open(DOCS / "retrain-example.csv", newline="") as f:
        picks = [r for r in csv.DictReader(f) if r["sigma"]]
    assert len(picks) == 3
    for r in picks:
        for column, rounds in (("eps", int(r["rounds"])), ("search_eps", int(r["search_rounds"]))):
            eps = eps_central(noise_multiplier=float(r["sigma"]), population=problem.population,
                              cohort=problem.cohort, rounds=rounds, delta=problem.privacy.delta)
            assert abs(float(r[column]) - eps) <= 0.01 * eps, (r["solution"], column, r[column], eps)


def heading_anchors(page: Path) -> set[str]:
    """The #anchors GitHub gives a page's headings (outside fenced blocks): lower case, punctuation but - and _
    dropped, spaces to -, a repeated heading numbered -1, -2, ..."""
    out, seen, fence = set(), {}, False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_relative_links_and_anchors_resolve():
    """Every relative link of README.md and docs/*.md (and examples', experiments', benchmarks' READMEs) names a
    file that exists and, with #anchor, a heading of that page: the README's detail moved to docs pages, and a
    link to a moved or renamed section must not dangle."""
    bad = []
    for page in PAGES + [REPO / "benchmarks" / "README.md"]:
        prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            if not dest.exists():
                bad.append((page.name, target, "no such file"))
            elif anchor and dest.suffix == ".md" and anchor not in heading_anchors(dest):
                bad.append((page.name, target, "no such heading"))
    assert not bad, bad


def test_layout_md_names_every_module():
    """docs/layout.md says where each part lives: every module of the package is named there by its file name."""
    text = (DOCS / "layout.md").read_text(encoding="utf-8")
    package = Path(fedevo.__file__).parent
    modules = [p for p in package.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")
               and "__pycache__" not in p.parts and "examples" not in p.relative_to(package).parts]
    missing = sorted(str(p.relative_to(package)) for p in modules if p.name not in text)
    assert len(modules) > 100 and not missing, missing


def test_benchmark_runs_are_not_ignored():
    """A benchmark's searches (benchmarks/results/NAME/runs/) are its evidence: the summaries' numbers come from
    them. The root's 'runs/' (fedevo search's default output) once ignored them too, so two benchmarks' runs/
    were never committed though their summaries said they were; their checkpoints stay ignored (the report reads
    the CSVs)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        r = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO)
        assert r.returncode in (0, 1), r
        return r.returncode == 0

    assert not ignored("benchmarks/results/optimizers-x/runs/gp-s0/evaluations.csv")
    assert ignored("benchmarks/results/optimizers-x/runs/gp-s0/checkpoints/gen_0001.pkl")
    assert ignored("runs/digits_mlp-20261128-093021/evaluations.csv")


def test_readme_trust_table_is_the_committed_result():
    """README.md's table of digits_mlp under each trust model is a copy of experiments/results/trust_models/: every
    row's error (mean ± std) and ε, as rounded there, are the committed results.json's (regenerating the result
    without the README, or the README without the result, fails here)."""
    readme = (REPO / "README.md").read_text()
    committed = {json.dumps(r["params"], sort_keys=True): r
                 for r in json.loads((REPO / "experiments" / "results" / "trust_models" / "results.json").read_text())}
    rows = re.findall(r"^\| `(\{.*?\})`[^|]* \| ([0-9.]+) ± ([0-9.]+) \| ([0-9.]+|∞) \|$", readme, flags=re.M)
    assert len(rows) >= 5
    for params, mean, std, eps in rows:
        r = committed[json.dumps(json.loads(params), sort_keys=True)]
        assert (f"{r['error_mean']:.3f}", f"{r['error_std']:.3f}") == (mean, std), params
        if eps == "∞":
            assert r["eps"] is None, params
        else:
            shown = len(eps.split(".")[1]) if "." in eps else 0
            assert round(r["eps"], shown) == float(eps), (params, r["eps"], eps)


def test_privacy_md_audit_table_is_the_committed_result():
    """docs/privacy.md's table of audits is experiments/results/audit/README.md's, row for row as the script wrote
    it (verdicts included: they are the code's, not applied by hand)."""
    made = (REPO / "experiments" / "results" / "audit" / "README.md").read_text()
    rows = [ln for ln in made.splitlines() if ln.startswith("| ") and "digits_mlp" in ln]
    assert len(rows) >= 10
    page = (DOCS / "privacy.md").read_text().splitlines()
    assert [ln for ln in rows if ln not in page] == []
