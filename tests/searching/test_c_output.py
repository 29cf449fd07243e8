"""Output user code writes through C's stdio (a ``printf``, here libc's through ctypes) reaches the run's user.log
under the evaluation that wrote it: when fd 1 is a file or a pipe C's stdout is fully buffered, and nothing
flushed it before fd 1 was put back (the text then reached fedevo's stdout at exit, died with a killed child, or
came back with a *later* Ray task). Each case runs in a fresh process with stdout a pipe and PYTHONUNBUFFERED
removed from its environment (as a user's shell has it). Also: a batch under a time limit captures fd 1 as one
evaluation does, and the temporary files for it are not left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from .search_helpers import REPO, user_model_problem

EVALUATOR = '''
import ctypes
libc = ctypes.CDLL(None)

def evaluate(problem, params, *, seed, rounds=None, data_dir=None):
    libc.printf(b"C printf from seed %d\\n", ctypes.c_int(seed))
    return {"error": 0.2 + 0.5 * params["x"], "comm": 1.0 + params["x"], "eps": None}
'''

PROBLEM = '''name = "own"
evaluator = "python:ev.py:evaluate"
{extra}
[genes]
x = {{ type = "real", low = 0.0, high = 1.0, default = 0.5 }}
'''


def _run(tmp_path, script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)


def _problem(tmp_path, extra: str = "") -> str:
    (tmp_path / "ev.py").write_text(EVALUATOR)
    (tmp_path / "own.toml").write_text(PROBLEM.format(extra=extra))
    return str(tmp_path / "own.toml")


@pytest.mark.parametrize("extra, workers", [("", 0), ("eval_timeout = 300", 0), ("", 2)],
                         ids=["in-process", "time-limit", "ray"])
def test_a_c_printf_of_each_evaluation_lands_in_its_user_log_entry(tmp_path, extra, workers):
    """On Ray (2 workers, 3 evaluations) each worker's last printf stayed in its C buffer, or came back with the
    worker's next task."""
    _problem(tmp_path, extra)
    r = _run(tmp_path, "import fedevo\n"
                       f"fedevo.search('own.toml', pop=3, gen=1, workers={workers}, seed=3, out='R', page=False)\n")
    assert r.returncode == 0, r.stderr
    assert "C printf" not in r.stdout + r.stderr
    import csv

    rows = list(csv.DictReader(open(tmp_path / "R" / "evaluations.csv")))
    log = (tmp_path / "R" / "user.log").read_text()
    assert len(rows) == 3
    for row in rows:
        entry = f"--- evaluation {row['id']} (generation 1, seed {row['seed']}) ---\nC printf from seed {row['seed']}\n"
        assert entry in log, log


def test_a_ray_tasks_c_printf_comes_back_with_that_task(tmp_path):
    """As a Ray worker runs its tasks (`_ray_task`, one process, fd 1 not a terminal): each task returns its own
    printf, not the one before's."""
    _problem(tmp_path)
    r = _run(tmp_path, "from fedevo.problem import load_problem\n"
                       "from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem\n"
                       "from fedevo.searching.runner import _ray_task\n"
                       "p = load_problem('own.toml'); ev = for_problem(DEFAULT_EVALUATOR, p)\n"
                       "for seed in (1, 2, 3):\n"
                       "    kind, value, out = _ray_task(p, ev, {'x': 0.3}, seed, {}, 1)\n"
                       "    print('task', seed, repr(out), flush=True)\n")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [f"task {s} 'C printf from seed {s}\\n'" for s in (1, 2, 3)], r.stdout


def test_a_batch_under_a_time_limit_captures_its_output_below_python(tmp_path, capfd):
    """run_batch in its child process: fd 1 went to fedevo's stderr; now to the batch's first evaluation's output,
    as one evaluation's (runner.run_one) and as docs/api.md says."""
    from fedevo.problem import load_problem
    from fedevo.searching.batched import run_batch
    from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem

    problem = load_problem(str(user_model_problem(tmp_path, "loud")))
    capfd.readouterr()
    got = run_batch(for_problem(DEFAULT_EVALUATOR, problem), problem, [({"lr": 0.1}, 1), ({"lr": 0.2}, 2)], {},
                    timeout=300)
    assert [g[1].status for g in got] == ["ok", "ok"], got
    assert got[0][2].count("forward wrote to fd 1\n") >= 3, got[0][2]  # its sizing's too (it went to stderr)
    seen = capfd.readouterr()
    assert "forward wrote" not in seen.out + seen.err


def test_fd1_captured_leaves_no_file_while_it_runs(tmp_path, monkeypatch):
    """A force-cancelled Ray task (or SIGKILL) never reaches the block's end: the file is unlinked at once and read
    back through its descriptor."""
    from fedevo.searching.containment import fd1_captured

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with fd1_captured() as below:
        os.write(1, b"below python\n")
        assert list(tmp_path.iterdir()) == []
    assert below.text == "below python\n"
    assert list(tmp_path.iterdir()) == []


def test_the_fallback_paths_give_the_blocks_exception_no_misleading_context(tmp_path, monkeypatch):
    """No temporary folder (or a file that cannot be opened): the block runs all the same, and an exception it
    raises is its own, not 'During handling of PermissionError'."""
    from fedevo.searching.containment import fd1_captured, fd1_to

    def no_temp(*a, **k):
        raise PermissionError(13, "Permission denied")
    with pytest.raises(ValueError) as e:
        with fd1_to(tmp_path / "missing" / "f"):
            raise ValueError("the block's")
    assert e.value.__context__ is None
    monkeypatch.setattr(tempfile, "mkstemp", no_temp)
    with pytest.raises(ValueError) as e:
        with fd1_captured():
            raise ValueError("the block's")
    assert e.value.__context__ is None


WIDTH_GENE = 'width = { type = "int", low = 4, high = 64, default = 8 }'


def _sized_problem(tmp_path):
    from fedevo.problem import load_problem

    return load_problem(str(user_model_problem(tmp_path, "chatty", gene=WIDTH_GENE)))


def test_a_model_sized_inside_an_evaluation_writes_where_the_evaluation_does(tmp_path, capfd):
    """A width no process sized before is sized inside the evaluation (as on a Ray worker, or in a time limit's child
    process): what the factory printed then, from Python and below it, went to stderr (`stdout_to_stderr`: meant for
    sizing outside an evaluation), the rest of the evaluation's output to its user.log entry."""
    from fedevo.searching.evaluator import DEFAULT_EVALUATOR, for_problem
    from fedevo.searching.runner import _ray_task

    problem = _sized_problem(tmp_path)
    capfd.readouterr()
    kind, value, out = _ray_task(problem, for_problem(DEFAULT_EVALUATOR, problem), {"width": 13}, 1, {}, 1)
    assert kind == "ok" and value.status == "ok", value
    err = capfd.readouterr().err
    assert "width=13" not in err, err
    built = out.count("factory printed width=13\n")
    assert built >= 2 and out.count("factory wrote to fd 1 width=13\n") == built, out  # sized, and built to train


def test_fedevo_evaluate_sends_a_user_models_output_below_python_to_stderr(tmp_path, capfd):
    """fedevo.evaluate (in this process) sent what the model printed from Python to stderr, as documented, but what
    it wrote to fd 1 to stdout: now both to stderr."""
    import fedevo

    problem = _sized_problem(tmp_path)
    capfd.readouterr()
    assert fedevo.evaluate(problem, {"width": 11}).status == "ok"
    got = capfd.readouterr()
    assert "width=11" not in got.out, got.out
    assert got.err.count("factory wrote to fd 1 width=11\n") >= 2, got.err
    assert got.err.count("factory printed width=11\n") >= 2, got.err


def test_what_a_model_prints_while_the_search_sizes_it_goes_to_user_log(tmp_path, capfd):
    """Before a batch is evaluated the search sizes each candidate's model in its own process (its cost: the longest
    start first); what the factory printed then, from Python and below it, reached the terminal through stderr,
    between the progress display's lines, while everything it printed in evaluations went to user.log."""
    import fedevo

    problem = user_model_problem(tmp_path, "chatty", gene=WIDTH_GENE)
    capfd.readouterr()
    fedevo.search(str(problem), out=tmp_path / "R", workers=0, seed=3, optimizer="random", pop=3, budget=3,
                  rounds=1, page=False, progress=False)
    got = capfd.readouterr()
    import re

    # the problem's load builds the default and each bound of the gene (documented: to stderr); nothing else
    assert set(re.findall(r"width=(\d+)", got.err)) <= {"4", "8", "64"} and "factory" not in got.out, got.err
    log = (tmp_path / "R" / "user.log").read_text()
    assert "--- generation 1: its models sized, before they are evaluated ---" in log, log[:2000]
    sized = log.split("--- generation 1: its models sized, before they are evaluated ---\n")[1].split("---")[0]
    assert "factory printed width=" in sized and "factory wrote to fd 1 width=" in sized, sized
