"""Your own optimiser (`--optimizer python:FILE.py:Class`, `module:Class`, or the class itself from Python): it runs a
search, is recorded in run.json and fingerprinted, resumes exactly, and a faulty one is one line, never a
traceback or a candidate outside the search space evaluated."""

from __future__ import annotations

import json
import shutil

import pytest

import fedevo
from fedevo.errors import FedevoError
from fedevo.searching import optimizers
from fedevo.searching.run import SearchRun

import subprocess

from tests.helpers import cli

from .search_helpers import FAKE, cli_cmd, env, read_csv, run_cli, toy_problem_file, without
from . import user_optimizers

MOD = "tests.searching.user_optimizers"
OWN_FILE = """
from fedevo.searching.optimizers import Optimizer


class Grid(Optimizer):
    name = "grid"

    def ask(self, n):
        import numpy as np

        rng = np.random.default_rng([self.seed, self.batch])
        X = rng.uniform(self.space.xl, self.space.xu, size=(n, self.space.n_var))
        print("asked", n)  # stdout is fedevo's: this goes to stderr
        return self.space.decode_batch(self.space.repair(X))

    def tell(self, params, F, G=None):
        self.batch += 1

    def state(self):
        return {"batch": self.batch}

    def restore(self, state):
        self.batch = state["batch"]
"""


def _search(tmp_path, optimizer, out="R", **kw):
    kw = {"pop": 3, "gen": 2, "workers": 0, "evaluator": FAKE, "page": False, "seed": 4, **kw}
    return fedevo.search(str(toy_problem_file(tmp_path)), optimizer=optimizer, out=tmp_path / out, **kw)


def test_a_file_optimiser_from_the_cli_runs_is_recorded_and_guards_its_resume(tmp_path):
    (tmp_path / "mine.py").write_text(OWN_FILE)
    prob = toy_problem_file(tmp_path)
    out = tmp_path / "R"
    r = subprocess.run(cli_cmd("search", "--problem", prob, "--optimizer", "python:mine.py:Grid", "--pop", 3, "--gen",
                               2, "--workers", 0, "--evaluator", FAKE, "--out", out, "-q"),
                       cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=240)  # the file: from here
    assert r.returncode == 0, r.stderr
    assert "asked 3" in r.stderr and "asked" not in r.stdout
    assert " Grid " in r.stdout and " s per proposal" in r.stdout and "mine.py" not in r.stdout  # its class's name
    meta = json.loads((out / "run.json").read_text())
    spec = f"python:{(tmp_path / 'mine.py').resolve()}:Grid"
    assert meta["settings"]["optimizer"] == spec
    assert any(i["role"] == "--optimizer" for i in meta["inputs"])
    assert len(read_csv(out / "evaluations.csv")) == 6
    (tmp_path / "mine.py").rename(tmp_path / "away.py")
    r = cli("front", out)  # a reader: the optimiser's file is not imported (nor needed)
    assert r.returncode == 0 and "Pareto" in r.stdout, r.stderr
    (tmp_path / "mine.py").write_text(OWN_FILE.replace("class Grid", "class Grid(:"))  # a syntax error even
    r = cli("resume", out, "--budget", 9, "-q")  # refused as changed, before the new text is imported
    assert r.returncode == 2 and "mine.py (--optimizer) changed since run" in r.stderr, r.stderr


def test_a_changed_optimiser_file_is_named_as_the_caller_spells_the_argument(tmp_path, monkeypatch):
    """run.json records the role as "--optimizer"; a Python caller's message says `optimizer=` (the CLI's: the test
    above)."""
    (tmp_path / "mine.py").write_text(OWN_FILE)
    monkeypatch.chdir(tmp_path)
    run = _search(tmp_path, "python:mine.py:Grid")
    assert any(i["role"] == "--optimizer" for i in json.loads((run.path / "run.json").read_text())["inputs"])
    (tmp_path / "mine.py").write_text(OWN_FILE + "\n# changed\n")
    with pytest.raises(FedevoError, match=r"mine\.py \(optimizer=\) changed since run .* was made"):
        fedevo.resume(run.path, gen=3, workers=0, page=False)


@pytest.mark.parametrize("role, python, cli", [
    ("--optimizer", "optimizer=", "--optimizer"), ("imported by --evaluator", "imported by evaluator=",
                                                   "imported by --evaluator"),
    ("evaluator", "evaluator", "evaluator"), ("[data] path", "[data] path", "[data] path")])
def test_input_roles_as_the_caller_spells_them(role, python, cli):
    from fedevo.errors import command_line
    from fedevo.searching.inputs import role_text

    assert role_text(role) == python
    with command_line():
        assert role_text(role) == cli


def test_a_module_class_resumes_exactly(tmp_path):
    whole = _search(tmp_path, user_optimizers.Halton, out="W", gen=3)
    assert json.loads((whole.path / "run.json").read_text())["settings"]["optimizer"] == f"{MOD}:Halton"
    part = _search(tmp_path, f"{MOD}:Halton", out="P", gen=2)
    fedevo.resume(part.path, gen=3, workers=0, page=False)
    drop = ("wall_s", "chain")
    assert [without([r], *drop) for r in read_csv(part.path / "evaluations.csv")] == \
        [without([r], *drop) for r in read_csv(whole.path / "evaluations.csv")]


def test_any_optuna_sampler_through_optuna_optimizer(tmp_path):
    run = _search(tmp_path, user_optimizers.Qmc)
    assert len(read_csv(run.path / "evaluations.csv")) == 6


def test_any_pymoo_algorithm_through_pymoo_optimizer_resumes_exactly(tmp_path):
    """SMS-EMOA: its state is the pymoo algorithm (checkpointed); a resumed run asks what the whole one asked."""
    whole = _search(tmp_path, user_optimizers.SmsEmoa, out="W", pop=4, gen=3)
    part = _search(tmp_path, user_optimizers.SmsEmoa, out="P", pop=4, gen=2)
    fedevo.resume(part.path, gen=3, workers=0, page=False)
    drop = ("wall_s", "chain")
    rows = [without([r], *drop) for r in read_csv(part.path / "evaluations.csv")]
    assert len(rows) == 12 and rows == [without([r], *drop) for r in read_csv(whole.path / "evaluations.csv")]
    assert json.loads((whole.path / "run.json").read_text())["algorithm"]["name"] == "pymoo SMSEMOA"


def test_a_subclass_of_nsga3_takes_reference_directions_and_readers_need_not_load_it(tmp_path):
    run = _search(tmp_path, f"{MOD}:MyNsga3", pop=6, gen=2, partitions=2)
    settings = json.loads((run.path / "run.json").read_text())["settings"]
    assert settings["optimizer"] == f"{MOD}:MyNsga3" and settings["partitions"] == 2
    r = run_cli("front", run.path)  # a fresh process: the class is not loaded, the recorded partitions stand
    assert r.returncode == 0 and "Pareto" in r.stdout, r.stderr


def test_a_registered_class_goes_by_its_name(tmp_path, monkeypatch):
    from fedevo.searching.optimizers import registry

    monkeypatch.setitem(registry._REGISTRY, "halton", user_optimizers.Halton)
    run = _search(tmp_path, user_optimizers.Halton)
    assert json.loads((run.path / "run.json").read_text())["settings"]["optimizer"] == "halton"


def test_a_class_run_json_cannot_name_is_refused(tmp_path):
    class Local(user_optimizers.Halton):
        pass

    with pytest.raises(FedevoError, match="run.json cannot name it for a resume"):
        _search(tmp_path, Local)
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("spec, message", [
    (f"{MOD}:Missing", "has no class 'Missing'"),
    ("tests.searching.search_fakes:fake_evaluate", "not a class derived from fedevo.searching.optimizers.Optimizer"),
    (f"{MOD}:NoTell", "NoTell does not implement restore, state, tell"),
    (f"{MOD}:NoAlgorithm", "NoAlgorithm does not implement algorithm"),
    ("python:nowhere.py:X", "optimizer file"),
    ("cmaes", "optimizer=: unknown optimiser 'cmaes'"),
])
def test_what_cannot_be_an_optimiser_is_one_line_before_the_run_directory(tmp_path, spec, message):
    with pytest.raises(FedevoError, match=message):
        _search(tmp_path, spec)
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("mode, message", [
    ("raise", r"ask\(\) raised ValueError: no idea what to ask"),
    ("exit", r"called sys.exit\(3\) in ask\(\)"),
    ("many", r"ask\(3\) returned 6 candidates, more than the 3 asked"),
    ("unknown", r"candidate 0 has unknown genes colour \(the genes: layers, "),
    ("lacks", "candidate 0 lacks lr"),
    ("range", r"lr = 7.0 is outside \[0.01, 0.3\]"),
    ("int", "layers = 1.5 is not an integer"),
    ("choice", r"similarity = 'cubic' is not one of \['sign', 'cosine'\]"),
    ("nan", "lr = nan is not a finite number"),
    ("type", "returned ndarray, not a list of candidates"),
    ("state", "state\\(\\) returned what cannot be checkpointed"),
])
def test_a_faulty_optimiser_stops_the_search_with_one_line_and_nothing_wrong_evaluated(tmp_path, monkeypatch, mode,
                                                                                         message):
    monkeypatch.setattr(user_optimizers.Broken, "mode", mode)
    with pytest.raises(FedevoError, match=f"optimizer '{MOD}:Broken': .*{message}"):
        _search(tmp_path, user_optimizers.Broken)
    log = tmp_path / "R" / "evaluations.csv"
    assert not log.exists() or read_csv(log) == []


def test_user_optimisers_are_not_listed_as_built_in():
    optimizers.get(f"{MOD}:Halton")
    assert set(optimizers.names()) == {"nsga3", "random", "gp", "tpe"}


# --------------------------------------------------------------------------- what the first review found
STATE_OBJECT = OWN_FILE.replace("class Grid(Optimizer):", '''class Counter:
    def __init__(self, n):
        self.n = n


class Grid(Optimizer):''').replace('return {"batch": self.batch}', 'return {"batch": Counter(self.batch)}') \
    .replace('self.batch = state["batch"]', 'self.batch = state["batch"].n')


def test_readers_never_unpickle_the_optimisers_state(tmp_path, monkeypatch):
    """A 'module:Class' optimiser whose state holds an object of its module: fedevo front, where the module cannot
    be imported, read the checkpoint whole and said 'corrupt checkpoint ... delete it'."""
    (tmp_path / "stateful_opt.py").write_text(STATE_OBJECT)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = _search(tmp_path, "stateful_opt:Grid")
    r = run_cli("front", run.path)  # a process without tmp_path on its path
    assert r.returncode == 0 and "Pareto" in r.stdout, r.stderr
    fedevo.resume(run.path, gen=3, workers=0, page=False)  # where it can be imported, the state comes back
    assert len(read_csv(run.path / "evaluations.csv")) == 9


def test_a_state_that_misses_what_ask_depends_on_is_named(tmp_path):
    run = _search(tmp_path, f"{MOD}:Forgetful", gen=2)
    (run.path / "checkpoints" / "gen-0002.pkl").unlink()  # as a kill between the log's rows and the checkpoint
    with pytest.raises(FedevoError, match=r"asked other genes for individual 3 after the resume than before .*"
                                          r"its state\(\) and restore\(\) miss something its ask\(\) depends on"):
        fedevo.resume(run.path, workers=0, page=False)


WARNED = "fedevo: warning: optimizer "


def test_a_state_that_misses_what_ask_depends_on_is_said_while_the_search_runs(tmp_path, capsys):
    """No row logged past the checkpoint to meet on a resume (a run that ended, resumed with a larger budget): the
    search itself asks a copy restored from its first checkpoint for its second batch, and says when it differs."""
    run = _search(tmp_path, f"{MOD}:Forgetful", gen=3)
    err = capsys.readouterr().err
    assert err.count(WARNED) == 1, err
    line = next(x for x in err.splitlines() if x.startswith(WARNED))
    assert line == (WARNED + "'Forgetful': restored from its checkpoint of batch 1, it asks other candidates for "
                    "batch 2 than it did running on (its state() and restore() miss something its ask() depends on): "
                    "a resume of this run will not continue it as it goes on (docs/search.md#your-own-optimiser)")
    assert len(read_csv(run.path / "evaluations.csv")) == 9  # said, not refused
    _search(tmp_path, f"{MOD}:Halton", out="H", gen=3)  # one whose state is whole: nothing said
    _search(tmp_path, "random", out="B", gen=3)  # a built-in: not asked twice
    assert WARNED not in capsys.readouterr().err


def test_a_restored_copys_ask_that_raises_is_said_as_such(tmp_path, capsys):
    """The copy restored without fault and its ask() raised: the line said 'restoring it ... failed'."""
    user_optimizers.AskFailsRestored.restores = 0  # (the search's own object is the first restored here)
    _search(tmp_path, f"{MOD}:AskFailsRestored", gen=3)
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith(WARNED))
    assert line == (WARNED + "'AskFailsRestored': restored from its checkpoint of batch 1, its ask() for batch 2 "
                    f"raised (optimizer '{MOD}:AskFailsRestored': ask() raised RuntimeError: no connection): a "
                    "resume of this run will not continue it as it goes on (docs/search.md#your-own-optimiser)")


def test_the_restored_copys_draws_leave_the_search_alone(tmp_path, monkeypatch, capsys):
    """The copy asked for the check draws from numpy's global generator too (and reseeds it): put back, the
    search's own later asks are those of a search without the check."""
    checked = _search(tmp_path, f"{MOD}:GlobalDraws", out="C", gen=3)
    assert WARNED in capsys.readouterr().err  # its state() leaves the generator out: the copy asks otherwise
    monkeypatch.setattr(SearchRun, "_check_restored", lambda *a: None)
    plain = _search(tmp_path, f"{MOD}:GlobalDraws", out="P", gen=3)
    genes = lambda run: [(r["lr"], r["sigma"]) for r in read_csv(run.path / "evaluations.csv")]  # noqa: E731
    assert len(set(genes(checked))) == 9 and genes(checked) == genes(plain)


@pytest.mark.parametrize("name, message", [
    ("RaisesInInit", r"__init__\(\) raised RuntimeError: cannot start"),
    ("BadPop", "BadPop.default_pop is 'twelve'; it must be None"),
])
def test_a_faulty_class_outside_ask_and_tell_is_one_line(tmp_path, name, message):
    with pytest.raises(FedevoError, match=message):
        _search(tmp_path, f"{MOD}:{name}", pop=None)


def test_what_describe_prints_goes_to_stderr(tmp_path, capfd):
    _search(tmp_path, f"{MOD}:Loud")
    out, err = capfd.readouterr()
    assert "describing" in err and "describing" not in out


def test_a_class_fedevo_loaded_from_a_file_is_recorded_by_its_file(tmp_path):
    (tmp_path / "mine.py").write_text(OWN_FILE)
    cls = optimizers.get(f"python:{tmp_path / 'mine.py'}:Grid")
    run = _search(tmp_path, cls)
    assert json.loads((run.path / "run.json").read_text())["settings"]["optimizer"] == \
        f"python:{(tmp_path / 'mine.py').resolve()}:Grid"


def test_a_file_changed_since_this_process_imported_it_is_refused(tmp_path):
    (tmp_path / "mine.py").write_text(OWN_FILE)
    spec = f"python:{tmp_path / 'mine.py'}:Grid"
    _search(tmp_path, spec, out="A")
    (tmp_path / "mine.py").write_text(OWN_FILE.replace("uniform", "uniform "))
    with pytest.raises(FedevoError, match="changed since this process imported it: the search would run the old code"):
        _search(tmp_path, spec, out="B")
    assert not (tmp_path / "B").exists()


@pytest.mark.parametrize("value", [32.0, True, "32"])
def test_a_choice_is_the_choice_itself(value):
    from fedevo.searching.optimizers.user import check_candidates

    class Gene:
        name, type, choices = "width", "choice", (16, 32)

    class Space:
        names, genes = ("width",), (Gene,)

    assert check_candidates([{"width": 32}], Space, 1, "s") == [{"width": 32}]
    with pytest.raises(FedevoError, match="is not one of"):
        check_candidates([{"width": value}], Space, 1, "s")


def test_a_warm_start_reaches_a_pymoo_optimisers_initial_population(tmp_path):
    """--init-from with your PymooOptimizer: self.sampling puts the earlier front first (warm_start_size: a batch)."""
    earlier = _search(tmp_path, "random", out="E", pop=4, gen=2)
    genes = ("layers", "units", "similarity", "partition", "lr", "sigma")
    front = {tuple(r[k] for k in genes) for r in read_csv(earlier.path / "front.csv")}
    run = _search(tmp_path, user_optimizers.SmsEmoa, out="W", pop=4, gen=1, init_from=earlier.path)
    n = min(4, len(front))
    first = [tuple(r[k] for k in genes) for r in read_csv(run.path / "evaluations.csv")[:n]]
    assert n >= 2 and len(set(first)) == n and set(first) <= front


def test_the_copys_draws_from_cudas_generators_are_put_back_too(monkeypatch):
    """Where CUDA is initialised in the search's process (a GPU-trained surrogate), its generators come back as
    well (faked here: what is saved before is set after)."""
    import torch

    from fedevo.searching.optimizers.user import global_rngs_kept

    states, set_to = [["cuda state"]], []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: states[-1])
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", set_to.append)
    with global_rngs_kept():
        states.append(["drawn"])
    assert set_to == [["cuda state"]]


def test_a_module_reloaded_that_the_optimiser_file_imports_through_another_is_what_a_new_search_asks_with(
        tmp_path, monkeypatch):
    """The optimiser file takes `where` from a module beside it, which takes F from another; the notebook edits F's
    module and reloads it. The first module, still in sys.modules, kept the old F (review17 F3, here for an
    optimiser): the new search asked at the old place while its run.json recorded the new F. It runs again now,
    in place, when the optimiser file is imported anew."""
    import hashlib
    import importlib
    import os
    import sys

    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    amod, bmod = f"opta_{tag}", f"optb_{tag}"
    (tmp_path / f"{bmod}.py").write_text("F = 0.0\n")
    (tmp_path / f"{amod}.py").write_text(f"from {bmod} import F\n\n\n"
                                         "def where(lo, hi):\n    return lo + F * (hi - lo)\n")
    (tmp_path / "mine.py").write_text(OWN_FILE.replace("from fedevo.searching.optimizers import Optimizer",
                                                       f"from fedevo.searching.optimizers import Optimizer\n"
                                                       f"from {amod} import where")
                                      .replace("X = rng.uniform(self.space.xl, self.space.xu, size=(n, "
                                               "self.space.n_var))",
                                               "X = np.tile(where(self.space.xl, self.space.xu), (n, 1))"))
    spec = f"python:{tmp_path / 'mine.py'}:Grid"
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert {r["layers"] for r in _search(tmp_path, spec, out="A", gen=1).evaluations} == {1}
        (tmp_path / f"{bmod}.py").write_text("F = 1.0\n")
        importlib.reload(sys.modules[bmod])
        run = _search(tmp_path, spec, out="B", gen=1)
        assert {r["layers"] for r in run.evaluations} == {4}
        (entry,) = [e for e in json.loads((tmp_path / "B" / "run.json").read_text())["inputs"]
                    if e["path"].endswith(f"{bmod}.py")]
        assert entry["sha256"] == hashlib.sha256(b"F = 1.0\n").hexdigest()
    finally:
        for name in (amod, bmod):
            sys.modules.pop(name, None)


def test_a_module_named_optimizer_reloaded_is_what_asks(tmp_path, monkeypatch):
    """review18 F1b: an optimiser named 'module:Class' was kept per process (its contained class) across
    importlib.reload(module): the search after the reload asked with the old class while run.json recorded the
    module's new text (and a resume in a new process would ask with the new one)."""
    import importlib
    import sys

    name = f"myopt_{abs(hash(str(tmp_path)))}"
    text = ("from fedevo.searching.optimizers.random_sampling import RandomOptimizer\n\n\n"
            "class Mine(RandomOptimizer):\n    name = 'mine'\n    TAG = {tag}\n\n"
            "    def ask(self, n):\n        out = super().ask(n)\n        for p in out:\n"
            "            p['layers'] = self.TAG\n        return out\n")
    (tmp_path / f"{name}.py").write_text(text.format(tag=1))
    monkeypatch.syspath_prepend(str(tmp_path))
    kw = dict(budget=2, seed=0, workers=0, page=False, progress=False, optimizer=f"{name}:Mine", evaluator=FAKE)
    try:
        fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "A", **kw)
        (tmp_path / f"{name}.py").write_text(text.format(tag=2) + "# edited\n")
        importlib.reload(sys.modules[name])
        fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "B", **kw)
        assert [r["layers"] for r in read_csv(tmp_path / "A" / "evaluations.csv")] == ["1", "1"]
        assert [r["layers"] for r in read_csv(tmp_path / "B" / "evaluations.csv")] == ["2", "2"]
    finally:
        sys.modules.pop(name, None)
