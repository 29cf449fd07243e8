"""Helpers shared by the test modules."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedevo.cli import main


def run_cli(argv, capsys) -> tuple:
    """Run `fedevo ARGV` in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def cli(*args, **env_extra) -> subprocess.CompletedProcess:
    """`fedevo ARGS` run in this process through the CLI's entry (fedevo.cli.main(argv)), answered as
    tests.searching.search_helpers.run_cli's subprocess answers it: returncode, stdout and stderr (text), the working
    directory the repository root, ENV_EXTRA set in the environment for the call (a PYTHONPATH also put first on
    sys.path). Without a new Python importing torch, pymoo and the rest (2-3 s of CPU each), for a test of what a
    command does and says; one of what a fresh process does (a signal, kill -9, a crash in native code, the program's
    own exit, Ray workers, the installed command) keeps the subprocess.

    What a command may leave in the process is put back afterwards, so that the next test (or command) finds it as a
    fresh process would: the environment, the working directory, sys.path, sys.argv (`fedevo ARGS` during the call:
    run.json's command), sys.stdout / sys.stderr, the SIGINT and SIGTERM handlers, the warning filters, the root and
    `ray` loggers' handlers, torch's default dtype, grad mode, deterministic mode and threads, numpy's floating-point
    error handling; and what the command imported of the user's own code (a `python:FILE.py` model, evaluator,
    objective or optimiser and the modules beside it) is forgotten with fedevo's per-process caches of it, so that a
    file edited between two commands is read again; what this process imported of it before the call is out of
    sight during the call, as in a new process, and back afterwards."""
    import contextlib
    import io
    import logging
    import signal
    import warnings

    import numpy as np
    import torch

    from fedevo.models import user as user_model
    from fedevo.models import user_module
    from fedevo.objectives import registry as objectives
    from fedevo import plugins
    from fedevo.searching import evaluator as evaluators
    from fedevo.searching.optimizers import user as user_optimizers

    argv = [str(a) for a in args]
    env, cwd, path, sys_argv = dict(os.environ), os.getcwd(), list(sys.path), sys.argv
    streams = sys.stdout, sys.stderr
    handlers = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)}
    filters = list(warnings.filters)
    loggers = {name: list(logging.getLogger(name).handlers) for name in ("", "ray")}
    torch_state = (torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_num_threads(),
                   torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    floating = np.geterr()
    modules = set(sys.modules)
    caches = [(d, dict(d)) for d in (plugins._IMPORTED_SHA, plugins._IMPORTED_STAT, plugins._SIBLINGS,
                                      plugins._SIBLING_FILES, plugins._SIBLING_MODULE, plugins._USER_MODULE,
                                      plugins._RUN_AGAIN, user_optimizers._LOADED, evaluators._LOADED,
                                      objectives._REGISTRY)]
    # the user's code this process imported before (a test's own search): out of sight during the call, as in a
    # new process, which imports the files as they are now (fedevo refuses to run a file changed since its import)
    stashed = {n: m for n, m in list(sys.modules.items()) if _users_module(m)}
    for n in stashed:
        del sys.modules[n]
    for d in (plugins._IMPORTED_SHA, plugins._IMPORTED_STAT, plugins._SIBLINGS, plugins._SIBLING_FILES,
              plugins._SIBLING_MODULE, plugins._USER_MODULE, plugins._RUN_AGAIN, user_optimizers._LOADED,
              evaluators._LOADED):  # (a problem's evaluator: imported once per process, 089f843)
        d.clear()
    for f in (user_module.load_factory, user_module._template, user_model.macs_and_params):
        f.cache_clear()
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="", write_through=True)
    code = 0
    try:
        os.environ.update({k: str(v) for k, v in env_extra.items()})
        if "PYTHONPATH" in env_extra:  # as a new Python's: first on the import path
            sys.path[0:0] = [p for p in str(env_extra["PYTHONPATH"]).split(os.pathsep) if p]
        os.chdir(REPO)
        sys.argv = ["fedevo", *argv]  # what run.json records as the command
        sys.stdout, sys.stderr = out, err
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=err)
        text = [f.buffer.getvalue().decode("utf-8") for f in (out, err)]
    finally:
        sys.stdout, sys.stderr = streams
        sys.argv = sys_argv
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:] = path
        for n, h in handlers.items():
            if signal.getsignal(n) is not h and h is not None:
                signal.signal(n, h)
        if warnings.filters != filters:
            warnings.filters[:] = filters
            warnings._filters_mutated()
        for name, hs in loggers.items():
            logging.getLogger(name).handlers[:] = hs
        dtype, grad, threads, det, det_warn = torch_state
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()) \
                != (det, det_warn):
            torch.use_deterministic_algorithms(det, warn_only=det_warn)
        np.seterr(**floating)
        users = [n for n in set(sys.modules) - modules if _users_module(sys.modules.get(n))]
        for n in users:
            del sys.modules[n]
        for d, before in caches:
            if d != before:
                d.clear()
                d.update(before)
        sys.modules.update(stashed)
        if users or stashed:
            for f in (user_module.load_factory, user_module._template, user_model.macs_and_params):
                f.cache_clear()
        for f in (out, err):
            with contextlib.suppress(Exception):
                f.detach()
    return subprocess.CompletedProcess(["fedevo", *argv], code, text[0], text[1])


def _users_module(mod) -> bool:
    """A module of the user's own code: a `python:FILE.py` (fedevo's private name) or one imported from beside it
    (a file outside this Python's installation and this repository)."""
    from fedevo.plugins import USER_MODULE_PREFIX

    name = getattr(mod, "__name__", "") or ""
    if name.startswith(USER_MODULE_PREFIX):
        return True
    f = getattr(mod, "__file__", None)
    if not f:
        return False
    f = os.path.realpath(f)
    roots = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, str(REPO))}
    return not any(f == r or f.startswith(r + os.sep) for r in roots)


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


REPO = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args, timeout: int = 300) -> subprocess.CompletedProcess:
    """benchmarks/SCRIPT run with ARGS by this Python, this checkout's fedevo first on its path: its exit code,
    stdout and stderr (text)."""
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
