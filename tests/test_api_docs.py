"""docs/api.md's examples run as written (each block in a fresh directory, in order), and the names it lists are
exactly fedevo's public names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import fedevo

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_page_has_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("n", range(len(BLOCKS)))
def test_example_runs(n, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(BLOCKS[n], f"docs/api.md block {n + 1}", "exec"), {"__name__": f"api_doc_{n}"})
    assert capsys.readouterr().out.strip(), "every example prints what it shows"


def test_public_names_are_the_documented_ones():
    table = DOC.read_text().split("## The public names", 1)[1].split("\n## ", 1)[0]
    documented = {m.group(1) for m in re.finditer(r"^\| `fedevo\.(\w+)", table, flags=re.M)}
    public = set(fedevo.__all__) - {"__version__"}
    assert documented == public
    for name in public:
        assert getattr(fedevo, name) is not None
