"""User code that misbehaves in ways a plain exception does not (the 2026-11-27 containment audit): exceptions that
are not Exceptions, os._exit, changes to the process's global state (the working directory, the streams, warnings,
torch's defaults) and output at import time. Each ends as that evaluation's result, never as the search's end or
as a change to the next evaluation's numbers."""

from __future__ import annotations

import pytest

import fedevo
from tests.helpers import read_csv
from tests.searching.search_helpers import user_model_problem
from tests.searching.test_containment import own_problem


class _Mine(BaseException):
    """A user's own BaseException subclass."""


def _raises_base(problem, params, *, seed, rounds=None, data_dir=None):
    if params["x"] > 0.5:
        raise {"generator": GeneratorExit("closed"), "mine": _Mine("my own")}[problem.fixed["mode"]]
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)


def _fails_above_half(tmp_path, mode, evaluator, message):
    """A search of 8 evaluations in which `evaluator` misbehaves where x > 0.5: exactly those rows failed, each with
    `message`, and the search went on."""
    out = tmp_path / "R"
    fedevo.search(str(own_problem(tmp_path, mode)), pop=4, gen=2, workers=0, out=out, page=False,
                  evaluator=evaluator)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(float(r["x"]) > 0.5 and r["message"] == message for r in failed)
    assert all(r["status"] == "ok" for r in rows if float(r["x"]) <= 0.5)


@pytest.mark.parametrize("mode, message", [("generator", "GeneratorExit raised by the evaluation's code: closed"),
                                           ("mine", "_Mine raised by the evaluation's code: my own")])
def test_a_base_exception_fails_its_evaluation_only(tmp_path, mode, message):
    """GeneratorExit or a BaseException subclass of the user's ended the search with a traceback (exit 1)."""
    _fails_above_half(tmp_path, mode, _raises_base, message)


OBJECTIVE = """objectives = ["error", "comm", "lat"]
[objective.lat]
read = "python:obj.py:lat"
worst = 1e4
"""


@pytest.mark.parametrize("body, note", [
    ("sys.exit(4)", "objective lat: UserExit: sys.exit(4) called by the evaluation's code"),
    ("raise KeyboardInterrupt", "objective lat: UserExit: KeyboardInterrupt raised by the evaluation's code"),
])
def test_a_user_objective_that_exits_fails_its_value_only(tmp_path, capfd, body, note):
    """A user objective's read is user code as an evaluator is: sys.exit(4) in it ended the search with exit code 4
    and no message, a raised KeyboardInterrupt stopped it as Ctrl-C does."""
    (tmp_path / "obj.py").write_text(f"import sys\n\ndef lat(result):\n    print('read on stderr', file=sys.stderr)\n"
                                     f"    if result.error > 0.45:\n        {body}\n    return 3 * result.error\n")
    out = tmp_path / "R"
    fedevo.search(str(own_problem(tmp_path, "ok", extra=OBJECTIVE)), pop=4, gen=2, workers=0, out=out, page=False)
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8 and {r["status"] for r in rows} == {"ok"}
    hit = [r for r in rows if float(r["error"]) > 0.45]
    assert hit and all(r["lat"] == "" and r["message"].startswith(note) for r in hit)
    assert all(float(r["lat"]) == pytest.approx(3 * float(r["error"])) for r in rows if float(r["error"]) <= 0.45)
    assert (out / "user.log").read_text().count("read on stderr") == 8  # its stderr too, as an evaluator's


@pytest.fixture
def restored():
    """The process state these tests' user code changes, put back after the test whatever happened (without
    the fix under test, it would spoil the tests after it)."""
    import os
    import signal
    import sys
    import warnings

    import numpy as np
    import torch

    saved = (os.getcwd(), sys.stdout, sys.stderr, list(warnings.filters), np.geterr(), torch.get_default_dtype(),
             torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), torch.is_grad_enabled(),
             signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    yield
    cwd, sys.stdout, sys.stderr, filters, err, dtype, deterministic, threads, grad, sigint, sigterm = saved
    signal.signal(signal.SIGINT, sigint)
    signal.signal(signal.SIGTERM, sigterm)
    os.chdir(cwd)
    warnings.filters[:] = filters
    warnings._filters_mutated()
    np.seterr(**err)
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)
    torch.set_grad_enabled(grad)


def _simulator_then_mischief(problem, params, *, seed, rounds=None, data_dir=None, **kwargs):
    """fedevo's simulator, after which the user's code changes what the process shares."""
    import os
    import sys
    import warnings

    import numpy as np
    import torch

    result = fedevo.evaluate(problem, params, seed=seed, rounds=rounds, data_dir=data_dir)
    if _simulator_then_mischief.on:
        torch.set_default_dtype(torch.float64)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
        np.seterr(all="raise")
        warnings.simplefilter("error")
        sys.stderr = None
        os.chdir(os.path.dirname(os.getcwd()))
    return result


def test_what_user_code_changes_in_the_process_does_not_change_the_next_evaluation(tmp_path, monkeypatch,
                                                                                   restored):
    """Same seed, same evaluations, whatever the previous evaluation's code did to the process: after
    torch.set_default_dtype(torch.float64) every later simulator evaluation was 'diverged' (non-finite local
    update); after os.chdir the search crashed writing its relative run directory (FileNotFoundError: 'R/user.log');
    after sys.stderr = None its progress lines were gone."""
    monkeypatch.chdir(tmp_path)
    runs = {}
    for on in (False, True):
        _simulator_then_mischief.on = on
        out = f"R{int(on)}"  # relative: written where the search started
        runs[on] = fedevo.search("digits_mlp", pop=4, gen=2, rounds=1, seed=3, workers=0, out=out, page=False,
                                 evaluator=_simulator_then_mischief)
        assert (tmp_path / out / "evaluations.csv").is_file()
    assert [(r.status, r["error"], r["comm"], r["eps"]) for r in runs[True].evaluations] == \
        [(r.status, r["error"], r["comm"], r["eps"]) for r in runs[False].evaluations]
    assert {r.status for r in runs[True].evaluations} == {"ok"}


def test_call_user_puts_back_what_the_code_changed(tmp_path, monkeypatch, restored):
    """Also the SIGINT and SIGTERM handlers: an evaluator that set them to SIG_IGN left a search that Ctrl-C no
    longer stopped."""
    import os
    import signal
    import sys
    import warnings

    import numpy as np
    import torch

    from fedevo.usercode import call_user

    monkeypatch.chdir(tmp_path)
    def state():
        return (os.getcwd(), sys.stdout, sys.stderr, list(warnings.filters), np.geterr(), torch.get_default_dtype(),
                torch.are_deterministic_algorithms_enabled(), torch.get_num_threads(), torch.is_grad_enabled(),
                signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))

    before = state()

    def mischief():
        os.chdir("/")
        sys.stdout = sys.stderr = None
        warnings.simplefilter("error")
        np.seterr(all="raise")
        torch.set_default_dtype(torch.float64)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
        torch.set_grad_enabled(False)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        return "done"

    assert call_user(mischief) == "done"
    assert state() == before



OS_EXIT = """
import multiprocessing, os

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    child = multiprocessing.get_context("fork").Process(target=os._exit, args=(7,))  # a fork of it exits for real
    child.start()
    child.join(60)
    assert child.exitcode == 7
    if params["x"] > 0.5:
        os._exit(0)
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)
"""


def test_os_exit_in_process_fails_its_evaluation_only(tmp_path):
    """os._exit(0) in an in-process evaluation ended the search process with exit code 0 and no message, its run
    half written: a failure that looked like success (a subprocess here: without the fix it would end pytest's).
    A process the user's code forks still exits for real."""
    from tests.searching.test_containment import run_cli_sub

    (tmp_path / "ev.py").write_text(OS_EXIT)
    problem = tmp_path / "exits.toml"
    problem.write_text('name = "exits"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    out = tmp_path / "R"
    r = run_cli_sub("search", "--problem", problem, "--pop", 4, "--gen", 2, "--workers", 0, "--out", out)
    assert r.returncode == 0 and "search finished: 2/2 generations, 8 evaluations" in r.stdout, r.stderr
    rows = read_csv(out / "evaluations.csv")
    assert len(rows) == 8
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(float(r["x"]) > 0.5 for r in failed)
    assert {r["message"] for r in failed} == {"os._exit(0) called by the evaluation's code (it ends that "
                                             "evaluation, not the search)"}
    assert all(r["status"] == "ok" for r in rows if float(r["x"]) <= 0.5)


LOUD_FILE = """
import os
print("printed at import")
os.write(1, b"written to fd 1 at import\\n")
{exit}

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)
"""


def _loud_problem(tmp_path, exit: str = "") -> str:
    (tmp_path / "loud.py").write_text(LOUD_FILE.format(exit=exit))
    problem = tmp_path / "loud.toml"
    problem.write_text('name = "loud"\nevaluator = "python:loud.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    return str(problem)


def test_what_a_users_file_prints_at_import_goes_to_stderr(tmp_path, capfd):
    """A user's file imported when the problem loads printed into the search's stdout (its results)."""
    from tests.helpers import run_cli

    code, out, err = run_cli(["search", "--problem", _loud_problem(tmp_path), "--pop", 4, "--gen", 1, "--workers", 0,
                              "--out", tmp_path / "R"], capfd)
    assert code == 0, err
    assert "at import" not in out and out.startswith("search finished")
    assert "printed at import" in err and "written to fd 1 at import" in err


@pytest.mark.parametrize("exit, says", [("import sys; sys.exit(5)", "called sys.exit(5) while it was imported"),
                                        ("raise KeyboardInterrupt", "raised KeyboardInterrupt while it was imported")])
def test_a_users_file_that_exits_at_import_is_one_line(tmp_path, capfd, exit, says):
    """sys.exit(5) in a user's file at import ended `fedevo search` with exit code 5 and no message."""
    from tests.helpers import run_cli

    code, out, err = run_cli(["search", "--problem", _loud_problem(tmp_path, exit), "--pop", 4, "--gen", 1,
                              "--out", tmp_path / "R"], capfd)
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == (f"fedevo: error: problem 'loud': evaluator file "
                                            f"'{tmp_path / 'loud.py'}' {says}")
    assert not (tmp_path / "R").exists()


def _search_with_model(tmp_path, capfd, factory: str):
    """`fedevo search` in-process (4 evaluations of 1 round on digits) of the model factory `factory` of
    search_helpers.USER_MODELS, into tmp_path/R: (exit code, stdout, stderr)."""
    from tests.helpers import run_cli

    problem = user_model_problem(tmp_path, factory, dataset="digits")
    return run_cli(["search", "--problem", problem, "--pop", 4, "--gen", 1, "--workers", 0, "--out", tmp_path / "R"],
                   capfd)


def test_a_factorys_output_below_python_never_reaches_the_searchs_stdout(tmp_path, capfd):
    """A model factory's os.write(1, ...) at the load-time probe (and the sizing after the search) went into the
    search's stdout; in an evaluation it goes to RUN/user.log."""
    code, out, err = _search_with_model(tmp_path, capfd, "chatty")
    assert code == 0, err
    assert "factory wrote" not in out and out.startswith("search finished")
    assert "factory wrote to fd 1" in err and "factory wrote to fd 1" in (tmp_path / "R" / "user.log").read_text()


def test_what_a_models_forward_prints_never_reaches_the_searchs_stdout(tmp_path, capfd):
    """The memory check's multiply-add count ran the module's forward with stdout left as it was: what it printed
    came before the search's table."""
    code, out, err = _search_with_model(tmp_path, capfd, "loud")
    assert code == 0, err
    assert "forward printed" not in out and "forward wrote" not in out and out.startswith("search finished"), out
    assert "forward printed" in err and "forward wrote to fd 1" in err


def _to_stderr(problem, params, *, seed, rounds=None, data_dir=None):
    import sys

    print(f"to stderr from {seed}", file=sys.stderr)
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)


def test_what_an_evaluator_prints_to_stderr_goes_to_user_log(tmp_path, capfd):
    """In-process, an evaluator's sys.stderr went to the terminal, in the middle of the progress lines (on Ray into
    Ray's worker logs, removed with its session)."""
    out = tmp_path / "R"
    run = fedevo.search(str(own_problem(tmp_path, "ok")), pop=4, gen=1, workers=0, out=out, page=False,
                        evaluator=_to_stderr)
    assert "to stderr" not in capfd.readouterr().err
    log = (out / "user.log").read_text()
    assert all(f"to stderr from {r['seed']}" in log for r in run.evaluations)


LEAVES_A_THREAD = """
import threading, time

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    threading.Thread(target=time.sleep, args=(1e9,), name="users-sleeper").start()  # not a daemon
    return (0.2 + 0.5 * params["x"], 1.0 + params["x"], 1.0)
"""


def test_a_thread_user_code_leaves_running_does_not_hold_the_command(tmp_path):
    """`fedevo search` printed its results and then never ended: Python's exit waits for every thread that is not
    a daemon, and the evaluator had started one that sleeps. (A pool's threads, which Python's exit ends, are
    waited for: test_batched_search's kill -9 test resumes with fedevo's accountant pool running.)"""
    import subprocess

    from tests.searching.search_helpers import cli_cmd, env

    (tmp_path / "ev.py").write_text(LEAVES_A_THREAD)
    problem = tmp_path / "threads.toml"
    problem.write_text('name = "threads"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                       'x = { type = "real", low = 0.0, high = 1.0, default = 0.5 }\n')
    # the command as cli_cmd runs it, its exit's wait for such threads (fedevo.usercode.EXIT_GRACE_S, 10 s) set to 1 s:
    # the test waited out the full 10 s
    cmd = cli_cmd("search", "--problem", problem, "--pop", 4, "--gen", 1, "--workers", 0, "--out", tmp_path / "R")
    cmd[2] = "import fedevo.usercode as u; u.EXIT_GRACE_S = 1.0; " + cmd[2]
    r = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and r.stdout.startswith("search finished"), r.stderr
    assert r.stderr.splitlines()[-1] == ("fedevo: 4 threads that user code left running (users-sleeper, "
                                         "users-sleeper, users-sleeper, ...) still held the process 1 s after its "
                                         "work; not waiting for them")
    assert len(read_csv(tmp_path / "R" / "evaluations.csv")) == 4


def test_a_search_stopped_in_a_quiet_evaluation_leaves_no_empty_user_log(tmp_path):
    """Ctrl-C during an evaluation that printed nothing left an empty RUN/user.log (the log's header is removed
    when nothing came, the file was not)."""
    from tests.searching.test_containment import ctrl_c

    with pytest.raises(KeyboardInterrupt):
        fedevo.search(str(own_problem(tmp_path, "ok")), pop=4, gen=1, workers=0, out=tmp_path / "R", page=False,
                      evaluator=ctrl_c)
    assert (tmp_path / "R" / "evaluations.csv").is_file()
    assert not (tmp_path / "R" / "user.log").exists()


def _builds_a_bad_result(problem, params, *, seed, rounds=None, data_dir=None):
    import math

    from fedevo.result import EvaluationResult

    error = {"abc": "abc", "text": "0.3", "ok": 0.3}[problem.fixed["mode"]] if params["x"] > 0.5 else 0.3
    return EvaluationResult(error=error, comm=1.0, eps=1.0, eps_paper=math.nan, accuracy_global=0.7, omega=1)


@pytest.mark.parametrize("mode, message", [("abc", "TypeError: the evaluation's error must be a number, got 'abc'"),
                                           ("text", "TypeError: the evaluation's error must be a number, got '0.3'")])
def test_an_evaluation_result_the_user_built_is_held_to_numbers(tmp_path, mode, message):
    """An EvaluationResult built by the user's code with error='abc' crashed the search writing its row
    (ValueError: could not convert string to float); error='0.3' was logged as 0.3."""
    _fails_above_half(tmp_path, mode, _builds_a_bad_result, message)
