"""The command line is a thin layer over the Python API (docs/api.md): every option of a command is a parameter of
its API function (bar display-only ones), and each command calls that function."""

from __future__ import annotations

import inspect

import pytest
import typer.main

import fedevo
from fedevo import api
from fedevo.cli import main
from fedevo.cli.app import app

# command -> (API function, CLI parameter -> API parameter where the names differ, display-only CLI parameters)
PAIRS = {
    "evaluate": (api.evaluate, {}, {"as_json", "quiet"}),
    "search": (api.search, {}, {"quiet"}),
    "resume": (api.resume, {"run_dir": "run"}, {"quiet"}),
    "plot": (api.plot, {"run_dirs": "run"}, set()),
    "retrain": (api.retrain, {"run_dir": "run"}, {"quiet"}),
    "audit": (api.audit, {"run_dir": "run"}, {"as_json", "quiet"}),
}


def _command(name):
    group = typer.main.get_command(app)
    return group.commands[name]


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_every_option_is_an_api_parameter(name):
    fn, renamed, display = PAIRS[name]
    cli_params = {p.name for p in _command(name).params} - display
    api_params = set(inspect.signature(fn).parameters)
    missing = sorted(renamed.get(p, p) for p in cli_params if renamed.get(p, p) not in api_params)
    assert not missing, f"`fedevo {name}` options without an API parameter in fedevo.{fn.__name__}: {missing}"
    assert getattr(fedevo, fn.__name__) is fn  # exported as the public name


class Called(Exception):
    pass


@pytest.mark.parametrize("argv, fn", [
    (["evaluate", "--problem", "digits_mlp", "--quiet"], "evaluate"),
    (["search", "--quiet", "--pop", "4", "--gen", "1"], "search"),
    (["resume", "RUN", "--quiet"], "resume"),
    (["plot", "RUN"], "plot"),
    (["retrain", "RUN", "--quiet"], "retrain"),
    (["audit", "RUN", "--pick", "knee", "--quiet"], "audit"),
])
def test_each_command_calls_its_api_function(monkeypatch, argv, fn):
    seen = {}

    def fake(*args, **kwargs):
        seen.update(args=args, kwargs=kwargs)
        raise Called
    monkeypatch.setattr(api, fn, fake)
    with pytest.raises(Called):
        main(argv)
    assert seen


def test_a_run_object_is_frozen(tmp_path):
    """`run.path = 123` was accepted and broke the next read (the 2026-11-27 audit)."""
    import dataclasses

    from fedevo.api import Run

    run = Run(tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.path = 123
    assert run == Run(tmp_path) and hash(run) == hash(Run(tmp_path))


@pytest.mark.parametrize("call, argv, python, cli", [
    (lambda out: fedevo.search("digits_mlp", workers=-1, out=out), ["search", "--workers", "-1"],
     "workers= must be >= 0", "--workers must be >= 0"),
    (lambda out: fedevo.search("digits_mlp", pop=4, gen=0, workers=0, out=out), ["search", "--pop", "4", "--gen", "0"],
     "gen= must be >= 1", "--gen must be >= 1"),
    (lambda out: fedevo.search("digits_mlp", pop=4, gen=1, workers=0, eval_timeout=-1.0, out=out),
     ["search", "--pop", "4", "--gen", "1", "--workers", "0", "--eval-timeout", "-1"],
     "eval_timeout= must be a positive number of seconds", "--eval-timeout must be a positive number of seconds"),
    (lambda out: fedevo.evaluate("digits_mlp", seed=2**32), ["evaluate", "--seed", str(2**32)],
     "seed= must be in 0..4294967295", "--seed must be in 0..4294967295"),
])
def test_a_message_names_the_argument_as_its_caller_spells_it(tmp_path, capsys, call, argv, python, cli):
    """fedevo.search(workers=-1) is told of `workers=`, `fedevo search --workers -1` of `--workers`: one check, its
    argument named the caller's way (fedevo.errors.arg)."""
    from tests.cli.test_bad_input import bad

    with pytest.raises(fedevo.FedevoError, match="^" + python):
        call(tmp_path / "py")
    extra = ["--out", tmp_path / "cli"] if argv[0] == "search" else []
    assert bad(capsys, argv + extra, "^fedevo: error: " + cli)
    assert not (tmp_path / "py").exists() and not (tmp_path / "cli").exists()
