"""README and `--help` agree (issue 14): every option the README gives a command exists (and every option of the
pages its command reference and GPU search lines moved to: docs/search.md, docs/engine.md), and the README's
commands after a search work when several runs match its glob."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
MOVED = ("docs/search.md", "docs/engine.md")  # the README's full command reference and GPU search lines


def readme_commands(text: str = README) -> list[str]:
    """Every `fedevo CMD ...` of the README (or another page): code-block lines (indented lines continue them) and
    inline code."""
    cmds = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].rstrip()
            if line.startswith(" ") and cmds:
                cmds[-1] += " " + line.strip()
            elif "fedevo " in line:
                cmds += [m.group(0) for m in re.finditer(r"\bfedevo [a-z]+.*?(?=&&|$)", line)]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    for span in re.findall(r"`([^`]+)`", prose):  # inline code may wrap across lines
        m = re.search(r"\bfedevo [a-z]+.*", " ".join(span.split()))
        if m:
            cmds.append(m.group(0))
    return cmds


def command_options() -> dict[str, set[str]]:
    import typer.main

    from fedevo.cli import app

    group = typer.main.get_command(app)
    return {name: {o for p in cmd.params for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]}
            for name, cmd in group.commands.items()}  # secondary: a flag's --no-... form


def test_every_option_the_readme_names_exists():
    options = command_options()
    cmds = readme_commands()
    assert len(cmds) >= 10 and any("--download" in c for c in cmds)
    moved = {page: readme_commands((REPO / page).read_text(encoding="utf-8")) for page in MOVED}
    assert any("--batch-size-per-gpu" in c for c in moved["docs/search.md"]), "the full command reference moved?"
    bad = []
    for c in cmds + [c for page_cmds in moved.values() for c in page_cmds]:
        name = c.split()[1]
        if name not in options:
            bad.append((c, f"no command {name!r}"))
            continue
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", c):
            if opt not in options[name] and opt != "--help":
                bad.append((c, opt))
    assert not bad, bad


def test_quick_start_commands_work_with_several_runs(tmp_path):
    """The README's `run=$(...)` + `fedevo front "$run"` lines, run by bash in a folder holding two runs."""
    from fedevo.searching import Runtime, SearchSettings, search
    from tests.searching import search_fakes

    block = next(b for b in re.findall(r"```bash\n(.*?)```", README, flags=re.S) if "fedevo front" in b)
    lines = [ln for ln in block.splitlines() if ln.startswith("run=") or ln.startswith("fedevo front")]
    assert len(lines) == 2, lines
    for n, stamp in enumerate(("20260101-000000", "20260102-000000")):
        search(SearchSettings(problem="digits_mlp", pop=6, gen=1, seed=n), tmp_path / "runs" / f"digits_mlp-{stamp}",
               Runtime(workers=0), evaluator=search_fakes.fake_evaluate)
    bash = shutil.which("bash") or pytest.skip("no bash")
    script = (f'fedevo() {{ "{sys.executable}" -c "from fedevo.cli import main; main()" "$@"; }}\n'
              + "\n".join(lines) + '\necho "RUN=$run"\n')
    r = subprocess.run([bash, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    assert "Pareto set of digits_mlp" in r.stdout
    assert r.stdout.strip().endswith("RUN=runs/digits_mlp-20260102-000000/")  # the newest


def test_fedevo_help_gives_each_command_its_first_paragraph_as_one_line(monkeypatch, capsys):
    """`fedevo --help` listed a command's docstring with its own line breaks ('Copy the examples ... out of the
    installed' / 'package, so that ...'), half-empty lines in a narrow terminal; at a width that fits them, each
    command's first paragraph is one line now."""
    import inspect

    from fedevo.cli import main
    from fedevo.cli.app import app  # the Typer object (fedevo.cli's `app` reads as the module to test_references)

    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    lines = [" ".join(ln.strip(" │").split()) for ln in capsys.readouterr().out.splitlines()]
    for info in app.registered_commands:
        first = " ".join(inspect.cleandoc(info.callback.__doc__).split("\n\n")[0].split())
        name = info.name or info.callback.__name__
        assert f"{name} {first}" in lines, (name, [ln for ln in lines if ln.startswith(name)])


def test_fedevo_version(capsys):
    """`fedevo --version` (docs/search.md) prints the installed version; it was 'No such option: --version'."""
    import fedevo
    from fedevo.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"fedevo {fedevo.__version__}\n"


def test_search_md_names_every_option_of_every_command():
    """docs/search.md's "Every command and option" (which the README sends a reader to for exactly that) names each
    option `fedevo CMD --help` lists; `fedevo evaluate`'s --seed, --data-dir, --download, --quiet and --eval-timeout
    were in --help only."""
    import typer.main

    from fedevo.cli import app

    text = (REPO / "docs" / "search.md").read_text(encoding="utf-8")
    section = text.split("## Every command and option", 1)[1].split("\n## ", 1)[0]
    section = re.sub(r"--\[no-\]([a-z-]+)", r"--\1 --no-\1", section)
    documented: dict[str, set[str]] = {}
    for cmd in readme_commands(section):
        documented.setdefault(cmd.split()[1], set()).update(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", cmd))
    commands = typer.main.get_command(app).commands
    assert set(documented) == set(commands), set(commands) ^ set(documented)
    missing = []
    for name, cmd in commands.items():
        for p in cmd.params:
            forms = [o for o in [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])] if o.startswith("--")]
            if forms and "--help" not in forms and not documented.get(name, set()) & set(forms):
                missing.append((name, forms[0]))
    assert not missing, missing


def test_the_pages_give_gen_its_default_with_only_a_time_budget_or_patience():
    """README.md and docs/search.md gave `--gen`'s default as "enough for --budget, else 4"; then as 1000 with only
    --time-budget or --patience. A --gen not given no longer ends a search another budget bounds
    (budgets.gen_derived): the pages say so, and 4 (DEFAULT_GEN) where no budget is given."""
    from fedevo.searching.budgets import DEFAULT_GEN, OPEN_GEN, default_gen, gen_derived

    assert default_gen(None, 12, None, 3.0, None) == default_gen(None, 12, None, None, 5) == OPEN_GEN
    assert default_gen(None, 12, None, None, None) == DEFAULT_GEN and default_gen(None, 12, 30, 3.0, None) == 3
    assert gen_derived(None, 30, None, None) and gen_derived(None, None, 3.0, None) and gen_derived(None, None, None, 5)
    assert not gen_derived(None, None, None, None) and not gen_derived(4, 30, None, None)
    search_md = (REPO / "docs" / "search.md").read_text(encoding="utf-8")
    for page, said in [(README, f"`--gen` batches (when given; else {DEFAULT_GEN} unless another budget is given, "
                                "which then ends the search alone)"),
                       (search_md, f"`--gen` batches (when given; without `--gen`, {DEFAULT_GEN} batches unless "
                                   "another budget is given — then that budget ends the search, with no batch cap")]:
        assert said in " ".join(page.split()), said
