"""examples/ as a newcomer uses it (examples/README.md): make_clients.py writes the natural-client dataset it
promises, digits_clients.toml searches it through the command line, and so does own_training.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import cli, read_csv
from tests.searching.search_helpers import REPO, env

EXAMPLES = REPO / "examples"


def make_clients(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "make_clients.py"), *map(str, args)], cwd=REPO,
                          env=env(), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def digits_dir(tmp_path_factory):
    """A copy of the example as a newcomer lays it out: problem file, models.py and data/ in one folder."""
    d = tmp_path_factory.mktemp("digits_clients")
    shutil.copy(EXAMPLES / "digits_clients.toml", d)
    shutil.copy(EXAMPLES / "models.py", d)
    r = make_clients("--out", d / "data" / "digits_clients.npz")
    assert r.returncode == 0, r.stderr
    return d


def test_make_clients_writes_long_tailed_natural_clients(digits_dir):
    path = digits_dir / "data" / "digits_clients.npz"
    with np.load(path) as f:
        x, y, ids = f["x"], f["y"], f["client_id"]
    assert x.shape == (1797, 1, 8, 8) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    assert y.shape == ids.shape == (1797,) and y.dtype == ids.dtype == np.int64
    assert set(np.unique(y)) == set(range(10))
    sizes = np.sort(np.unique(ids, return_counts=True)[1])[::-1]
    assert len(sizes) == 50                                   # the default --clients
    assert sizes[0] >= 10 * np.median(sizes)                  # a few big clients ...
    assert (sizes <= 10).sum() >= 10 and sizes[-1] >= 3       # ... many with a handful of rows, none empty


def test_make_clients_is_seeded_and_idempotent(digits_dir, tmp_path):
    path = digits_dir / "data" / "digits_clients.npz"
    before = path.read_bytes()
    r = make_clients("--out", path)
    assert r.returncode == 0 and "up to date" in r.stdout
    assert path.read_bytes() == before                        # an up-to-date file is not rewritten
    other = make_clients("--out", tmp_path / "other.npz", "--seed", "1", "--clients", "20")
    assert other.returncode == 0, other.stderr
    with np.load(path) as a, np.load(tmp_path / "other.npz") as b:
        assert len(np.unique(b["client_id"])) == 20
        assert not np.array_equal(np.sort(a["client_id"]), np.sort(b["client_id"]))
    bad = make_clients("--out", tmp_path / "bad.npz", "--clients", "1000")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and not (tmp_path / "bad.npz").exists()


def test_digits_clients_model_is_lowered(digits_dir):
    """The example's user MLP trains on the built-in kernels (docs/models.md), at every `hidden` gene value."""
    import fedevo
    from fedevo.models import build_model
    from fedevo.models.lowering import LoweredMLP

    problem = fedevo.Problem.from_file(digits_dir / "digits_clients.toml")
    assert problem.data_source.clients == 50
    for hidden in (16, 128):
        cfg = problem.sim_config(problem.resolve({"hidden": hidden}))
        assert isinstance(build_model(cfg.arch, (1, 8, 8), 10), LoweredMLP)


def _search(problem, out, *extra):
    r = cli("search", "--problem", problem, "--pop", 4, "--gen", 1, "--workers", 0, "--quiet", "--out", out, *extra)
    assert r.returncode == 0, r.stderr
    front = read_csv(out / "front.csv")
    assert front and all(row["status"] == "ok" for row in front)
    return front


def test_digits_clients_search(digits_dir, tmp_path):
    front = _search(digits_dir / "digits_clients.toml", tmp_path / "run", "--rounds", 1)
    assert {"hidden", "lr", "sigma"} <= set(front[0])
    # then, as the README goes on: the Pareto set, and the knee retrained (fewer rounds here)
    r = cli("front", tmp_path / "run")
    assert r.returncode == 0 and "knee" in r.stdout, r.stderr
    r = cli("retrain", tmp_path / "run", "--pick", "knee", "--rounds", 2, "--quiet")
    assert r.returncode == 0 and (tmp_path / "run" / "retrain" / "report.md").exists(), r.stderr


def test_readme_python_block_runs(digits_dir, tmp_path, monkeypatch, capsys):
    """examples/README.md's Python block, from a folder laid out as the repository's root (smaller: pop 4, one
    generation, 2 retraining rounds)."""
    import re

    (block,) = re.findall(r"```python\n(.*?)```", (EXAMPLES / "README.md").read_text(), flags=re.S)
    small = block.replace("pop=8, gen=2", "pop=4, gen=1").replace("rounds=50", "rounds=2")
    assert small.count("pop=4, gen=1") == 1 and small.count("rounds=2") == 1
    (tmp_path / "examples").symlink_to(digits_dir)
    monkeypatch.chdir(tmp_path)
    exec(compile(small, "examples/README.md", "exec"), {"__name__": "examples_readme"})
    lines = capsys.readouterr().out.split("\n")
    assert 0 <= float(lines[0]) <= 1 and len(lines[1].split()) == 5
    assert (tmp_path / "runs" / "digits-clients-py" / "retrain" / "report.md").exists()


def test_own_training_search(tmp_path):
    front = _search(EXAMPLES / "own_training.toml", tmp_path / "run", "--rounds", 2)
    assert {"lr", "noise_multiplier"} <= set(front[0])


def test_fedevo_examples_writes_the_examples_and_never_overwrites(tmp_path, capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(["examples", str(tmp_path / "ex")], capsys)
    assert code == 0, err
    # its README's commands name examples/: 'they run from TMP' was wrong for another folder name
    assert out.rstrip().endswith(f"(its commands name the folder examples/: run them from {tmp_path.resolve()} with "
                                 "ex/ in its place)"), out
    code, out, err = run_cli(["examples", str(tmp_path / "examples")], capsys)
    assert code == 0 and out.rstrip().endswith(f"(its commands run from {tmp_path.resolve()})"), (out, err)
    written = sorted(p.name for p in (tmp_path / "ex").iterdir())
    assert written == sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".md", ".py", ".toml"))
    assert all((tmp_path / "ex" / n).read_bytes() == (EXAMPLES / n).read_bytes() for n in written if n != "README.md")
    # the README's links into the source's docs/ lead nowhere beside the copy: they name where the page is instead
    readme = (tmp_path / "ex" / "README.md").read_text()
    assert "](../" not in readme and "](../" in (EXAMPLES / "README.md").read_text()
    assert "[docs/api.md](../../docs/api.md)" in (EXAMPLES / "README.md").read_text()
    assert "docs/api.md in fedevo's source" in readme
    assert "docs/search.md#your-own-optimiser in fedevo's source" in readme
    (tmp_path / "ex" / "models.py").write_text("# mine\n")
    code, out, err = run_cli(["examples", str(tmp_path / "ex")], capsys)
    assert code == 2 and "nothing was written" in err and err.count("\n") == 1
    assert (tmp_path / "ex" / "models.py").read_text() == "# mine\n"


def test_own_optimiser_example_search(tmp_path):
    """examples/README.md's section 4: pymoo's SMS-EMOA from examples/optimizers.py searches digits_mlp."""
    front = _search("digits_mlp", tmp_path / "run", "--rounds", 1, "--optimizer",
                    f"python:{EXAMPLES / 'optimizers.py'}:SMSEMOA")
    assert len(front) >= 1
    import json

    assert json.loads((tmp_path / "run" / "run.json").read_text())["algorithm"]["name"] == "pymoo SMSEMOA"
